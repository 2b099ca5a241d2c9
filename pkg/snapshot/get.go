package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/revision"
)

// Object is one key read at a revision, and its value decoded as
// kube-apiserver would serve it.
type Object struct {
	// SchemaVersion is ObjectSchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// Path is the file read.
	Path string `json:"path"`
	// Key is the etcd key read.
	Key string `json:"key"`
	// AtRevision is the revision read at; 0 means the latest.
	AtRevision int64 `json:"atRevision"`
	// CurrentRevision and CompactRevision are the file's (see Status).
	CurrentRevision int64 `json:"currentRevision"`
	// CompactRevision is the file's finished compact revision.
	CompactRevision int64 `json:"compactRevision"`
	// The key's entry: mvccpb.KeyValue fields.
	ModRevision int64 `json:"modRevision"`
	// CreateRevision is the revision that created the key.
	CreateRevision int64 `json:"createRevision"`
	// Version counts the key's changes since creation.
	Version int64 `json:"version"`
	// Lease is the ID of the key's lease, 0 for none.
	Lease int64 `json:"lease"`
	// ValueBytes is the length of the stored value.
	ValueBytes int64 `json:"valueBytes"`
	// ResourceVersion is ModRevision as kube-apiserver serves it.
	ResourceVersion string `json:"resourceVersion"`
	// Encoding, APIVersion, Kind and the encryption provider and key name
	// describe the stored value (keyspace.DetectValue).
	Encoding keyspace.Encoding `json:"encoding"`
	// APIVersion is the stored object's apiVersion, when readable.
	APIVersion string `json:"apiVersion"`
	// Kind is the stored object's kind, when readable.
	Kind string `json:"kind"`
	// Encrypted is set for a value encrypted at rest (k8s:enc:...).
	Encrypted bool `json:"encrypted"`
	// EncryptionProvider is aescbc, aesgcm, secretbox or kms.
	EncryptionProvider string `json:"encryptionProvider,omitempty"`
	// EncryptionVersion is the provider's format version, v1 or v2.
	EncryptionVersion string `json:"encryptionVersion,omitempty"`
	// EncryptionKey names the key (or KMS plugin) the value was encrypted with.
	EncryptionKey string `json:"encryptionKey,omitempty"`
	// Redacted is set when Object is a Secret whose data was replaced
	// (keyspace.RedactSecret).
	Redacted bool `json:"redacted"`
	// Secret is set when the key holds a Secret (by its key or kind):
	// its raw value is then withheld unless secrets are shown.
	Secret bool `json:"secret"`
	// DecodeError says why Object is nil for a value that is not
	// encrypted.
	DecodeError string `json:"decodeError,omitempty"`
	// Object is the decoded object with metadata.resourceVersion set, nil
	// when the value is encrypted or could not be decoded.
	Object map[string]any `json:"object,omitempty"`
	// Value is the stored value, withheld from JSON.
	Value []byte `json:"-"`
}

// ObjectSchemaVersion versions the JSON of Object.
const ObjectSchemaVersion = 1

// GetOptions control Get.
type GetOptions struct {
	// Revision reads the key as of this revision; 0 means the latest.
	Revision int64
	// Codec decodes the value (keyspace.Codec.Document, within its
	// limits); nil leaves Object unset and the value undecoded beyond its
	// envelope (keyspace.DetectValue).
	Codec *keyspace.Codec
	// ShowSecrets keeps a Secret's data.
	ShowSecrets bool
	// Parser recognises a Secret by its key (no prefixes: KnownPrefixes).
	Parser keyspace.Parser
}

// Get reads key as of o.Revision: the newest entry of the key at or below
// it, found by scanning the key bucket backwards from the newest entry.
// Errors: ErrCompacted for a revision below the compact revision (the
// message names it), ErrFutureRevision above the current revision, and
// ErrKeyNotFound when the key has no entry at or below the revision or its
// newest one there is a tombstone (the message names the delete revision).
func (db *DB) Get(ctx context.Context, key string, o GetOptions) (*Object, error) {
	m, err := db.Meta()
	if err != nil {
		return nil, err
	}
	last, err := db.LastRevision(ctx)
	if err != nil {
		return nil, err
	}
	current := max(last, m.FinishedCompactRevision, m.ScheduledCompactRevision)
	if err := checkRevision(o.Revision, m.FinishedCompactRevision, current); err != nil {
		return nil, fmt.Errorf("%s: %w", db.path, err)
	}
	kb := []byte(key)
	var found *Entry
	err = db.reverseScan(ctx, func(e *Entry) error {
		if o.Revision > 0 && e.Key.Main > o.Revision {
			return nil
		}
		if !bytes.Equal(e.KV.Key, kb) {
			return nil
		}
		c := *e
		c.KV.Key, c.KV.Value = bytes.Clone(e.KV.Key), bytes.Clone(e.KV.Value)
		found = &c
		return errStop
	})
	if err != nil {
		return nil, err
	}
	at := "latest revision"
	if o.Revision > 0 {
		at = fmt.Sprintf("revision %d", o.Revision)
	}
	if found == nil {
		return nil, fmt.Errorf("%s: %w: %q has no entry at or below the %s", db.path, ErrKeyNotFound, key, at)
	}
	if found.Key.Tombstone {
		return nil, fmt.Errorf("%s: %w: %q was deleted at revision %d (%s)", db.path, ErrKeyNotFound, key, found.Key.Main, at)
	}
	obj := &Object{
		SchemaVersion: ObjectSchemaVersion, Path: db.path, Key: key, AtRevision: o.Revision,
		CurrentRevision: current, CompactRevision: m.FinishedCompactRevision,
		ModRevision: found.Key.Main, CreateRevision: found.KV.CreateRevision, Version: found.KV.Version,
		Lease: found.KV.Lease, ValueBytes: int64(len(found.KV.Value)),
		ResourceVersion: revision.ObjectResourceVersion(found.Key.Main), Value: found.KV.Value,
	}
	pk := o.Parser.Parse(key)
	obj.Secret = pk.Class == keyspace.ClassObject && pk.Group == "" && pk.Resource == "secrets"
	info, _ := keyspace.DetectValue(found.KV.Value)
	obj.Encoding, obj.APIVersion, obj.Kind = info.Encoding, info.APIVersion, info.Kind
	obj.Secret = obj.Secret || obj.Kind == "Secret" && obj.APIVersion == "v1"
	if o.Codec == nil {
		return obj, nil
	}
	doc, info, err := o.Codec.Document(found.KV.Value, found.Key.Main)
	obj.Encoding, obj.APIVersion, obj.Kind = info.Encoding, info.APIVersion, info.Kind
	switch {
	case errors.Is(err, keyspace.ErrEncrypted):
		obj.Encrypted = true
		obj.EncryptionProvider, obj.EncryptionVersion, obj.EncryptionKey = info.Provider, info.ProviderVersion, info.KeyName
	case err != nil:
		obj.DecodeError = err.Error()
	default:
		obj.Object = doc
		if obj.Kind == "Secret" && obj.APIVersion == "v1" {
			obj.Secret = true
		}
		if !o.ShowSecrets {
			obj.Redacted = keyspace.RedactSecret(doc)
		}
	}
	return obj, nil
}

// checkRevision validates a revision to read or compact at against the
// compact and current revisions: reads below the compact revision fail
// with ErrCompacted, above the current one with ErrFutureRevision
// (server/storage/mvcc/kvstore_txn.go rangeKeys). 0 means the latest.
func checkRevision(rev, compact, current int64) error {
	switch {
	case rev < 0:
		return fmt.Errorf("revision %d is negative", rev)
	case revision.Compacted(rev, compact):
		return fmt.Errorf("%w: revision %d is below the compact revision %d", ErrCompacted, rev, compact)
	case rev > current:
		return fmt.Errorf("%w: revision %d is above the current revision %d", ErrFutureRevision, rev, current)
	}
	return nil
}
