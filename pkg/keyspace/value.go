package keyspace

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// Encoding is how a value is stored in etcd.
type Encoding string

// The encodings DetectValue recognises.
const (
	// EncodingProtobuf is kube-apiserver's storage encoding for built-in
	// types: "k8s\x00" then a protobuf runtime.Unknown holding apiVersion,
	// kind and the raw object
	// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go).
	EncodingProtobuf Encoding = "protobuf"
	// EncodingJSON is a JSON object: custom resources, and every object
	// written with --storage-media-type=application/json.
	EncodingJSON Encoding = "json"
	// EncodingCBOR is self-described CBOR (tag 55799, 0xd9d9f7), used for
	// custom resources behind the CBORServingAndStorage gate
	// (k8s.io/apimachinery/pkg/runtime/serializer/cbor/cbor.go).
	EncodingCBOR Encoding = "cbor"
	// EncodingEncrypted is a value encrypted at rest:
	// "k8s:enc:<provider>:v<n>:<key name>:" then ciphertext
	// (k8s.io/apiserver/pkg/server/options/encryptionconfig/config.go).
	EncodingEncrypted Encoding = "encrypted"
	// EncodingEmpty is a zero-length value, as in a tombstone or the
	// revision bump etcdutl snapshot restore --bump-revision writes.
	EncodingEmpty Encoding = "empty"
	// EncodingOther is anything else: plain text such as compact_rev_key's
	// decimal revision, or bytes no Kubernetes serializer wrote.
	EncodingOther Encoding = "other"
)

// ProtobufPrefix is the 4-byte magic number that starts every value the
// Kubernetes protobuf serializer writes: "k8s" and a zero byte.
var ProtobufPrefix = []byte{'k', '8', 's', 0}

// EncryptedPrefix starts every value encrypted at rest.
var EncryptedPrefix = []byte("k8s:enc:")

var cborSelfDescribed = []byte{0xd9, 0xd9, 0xf7}

// ValueInfo is what can be learned about a stored value without a compiled
// scheme and without decrypting it.
type ValueInfo struct {
	Encoding Encoding
	// APIVersion and Kind come from the protobuf envelope or the JSON
	// object's top-level fields; empty when the encoding does not carry
	// them in the clear.
	APIVersion string
	Kind       string
	// Provider (aescbc, aesgcm, secretbox, kms) and KeyName are set for an
	// encrypted value; ProviderVersion is "v1" or "v2".
	Provider        string
	ProviderVersion string
	KeyName         string
}

// DetectValue classifies a stored value. It returns an error only when a
// value announces an encoding and then breaks it: a protobuf envelope that
// does not unmarshal, JSON that does not parse, an encryption prefix with
// too few fields. The returned ValueInfo always has Encoding set, even with
// an error.
func DetectValue(v []byte) (ValueInfo, error) {
	switch {
	case len(v) == 0:
		return ValueInfo{Encoding: EncodingEmpty}, nil
	case bytes.HasPrefix(v, ProtobufPrefix):
		info := ValueInfo{Encoding: EncodingProtobuf}
		var u runtime.Unknown
		if err := u.Unmarshal(v[len(ProtobufPrefix):]); err != nil {
			return info, fmt.Errorf("protobuf envelope: %w", err)
		}
		info.APIVersion, info.Kind = u.APIVersion, u.Kind
		return info, nil
	case bytes.HasPrefix(v, EncryptedPrefix):
		return detectEncrypted(v)
	case bytes.HasPrefix(v, cborSelfDescribed):
		return ValueInfo{Encoding: EncodingCBOR}, nil
	}
	trimmed := bytes.TrimLeft(v, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '{' {
		info := ValueInfo{Encoding: EncodingJSON}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(trimmed, &tm); err != nil {
			return info, fmt.Errorf("json value: %w", err)
		}
		info.APIVersion, info.Kind = tm.APIVersion, tm.Kind
		return info, nil
	}
	return ValueInfo{Encoding: EncodingOther}, nil
}

// detectEncrypted parses "k8s:enc:<provider>:<version>:<key name>:".
func detectEncrypted(v []byte) (ValueInfo, error) {
	info := ValueInfo{Encoding: EncodingEncrypted}
	rest := v[len(EncryptedPrefix):]
	var fields [3]string
	for i := range fields {
		j := bytes.IndexByte(rest, ':')
		if j < 0 {
			return info, fmt.Errorf("encrypted value: prefix has %d of 3 fields (provider, version, key name)", i)
		}
		fields[i] = string(rest[:j])
		rest = rest[j+1:]
	}
	info.Provider, info.ProviderVersion, info.KeyName = fields[0], fields[1], fields[2]
	return info, nil
}
