package keyspace

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// ErrNotInScheme is returned by Document for a protobuf value whose kind
// the Codec's scheme does not know (an aggregated API's or
// apiextensions-apiserver's types, or a kind newer than k8s.io/api).
var ErrNotInScheme = errors.New("kind not in etcdinspect's scheme")

// ErrEncrypted is returned by Document for a value encrypted at rest: it
// cannot be decoded without the key.
var ErrEncrypted = errors.New("value is encrypted at rest")

// Document decodes a stored value into the object kube-apiserver would
// serve, as a JSON-shaped map: built-in types with Kubernetes' own scheme
// (protobuf or JSON), custom resources as JSON or CBOR, with apiVersion and
// kind set and metadata.resourceVersion set from modRevision as
// kube-apiserver does on every read (k8s.io/apiserver/pkg/storage/etcd3/
// store.go). It returns the ValueInfo too. Errors: ErrValueLimit for a
// value above MaxValueBytes or nested deeper than MaxNestingDepth
// (CheckValueLimits; it is not decoded), ErrEncrypted for an
// encrypted value (ValueInfo names provider and key), ErrNotInScheme for
// an unknown protobuf kind, and decoding errors for malformed bytes or a
// value that is neither (plain text such as compact_rev_key's).
func (c *Codec) Document(value []byte, modRevision int64) (map[string]any, ValueInfo, error) {
	if err := CheckValueLimits(value); err != nil {
		info, _ := DetectValue(value) // the envelope and top-level fields only
		return nil, info, err
	}
	info, err := DetectValue(value)
	if err != nil {
		return nil, info, err
	}
	rv := revision.ObjectResourceVersion(modRevision)
	switch info.Encoding {
	case EncodingEncrypted:
		return nil, info, fmt.Errorf("%w with provider %s (%s), key %q", ErrEncrypted, info.Provider, info.ProviderVersion, info.KeyName)
	case EncodingProtobuf:
		if !c.scheme.Recognizes(schema.FromAPIVersionAndKind(info.APIVersion, info.Kind)) {
			return nil, info, fmt.Errorf("%w: %s %s", ErrNotInScheme, info.APIVersion, info.Kind)
		}
		obj, err := c.Decode(value, modRevision)
		if err != nil {
			return nil, info, err
		}
		doc, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, info, fmt.Errorf("convert %s: %w", info.Kind, err)
		}
		doc["apiVersion"], doc["kind"] = info.APIVersion, info.Kind
		return doc, info, nil
	case EncodingJSON:
		var doc map[string]any
		if err := json.Unmarshal(value, &doc); err != nil {
			return nil, info, fmt.Errorf("json value: %w", err)
		}
		setResourceVersion(doc, rv)
		return doc, info, nil
	case EncodingCBOR:
		u := &unstructured.Unstructured{}
		s := cbor.NewSerializer(c.scheme, c.scheme)
		if _, _, err := s.Decode(value, nil, u); err != nil {
			return nil, info, fmt.Errorf("cbor value: %w", err)
		}
		info.APIVersion, info.Kind = u.GetAPIVersion(), u.GetKind()
		setResourceVersion(u.Object, rv)
		return u.Object, info, nil
	case EncodingEmpty:
		return nil, info, errors.New("empty value")
	}
	return nil, info, errors.New("value is not a Kubernetes object (neither protobuf, JSON nor CBOR)")
}

func setResourceVersion(doc map[string]any, rv string) {
	md, ok := doc["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		doc["metadata"] = md
	}
	md["resourceVersion"] = rv
}

// lastApplied is the annotation kubectl apply stores the whole applied
// object in, a Secret's data included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Redacted replaces a secret value in output.
const Redacted = "REDACTED"

// RedactSecret replaces the values of a core/v1 Secret's data and
// stringData, and its last-applied-configuration annotation (which holds
// the same data), with Redacted, keeping the keys. It reports whether doc
// is a Secret.
func RedactSecret(doc map[string]any) bool {
	if doc["kind"] != "Secret" || doc["apiVersion"] != "v1" {
		return false
	}
	for _, field := range []string{"data", "stringData"} {
		if m, ok := doc[field].(map[string]any); ok {
			for k := range m {
				m[k] = Redacted
			}
		}
	}
	if md, ok := doc["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			if _, ok := ann[lastApplied]; ok {
				ann[lastApplied] = Redacted
			}
		}
	}
	return true
}
