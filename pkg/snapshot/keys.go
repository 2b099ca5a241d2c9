package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/revision"
)

// KeyInfo describes one live key: where it sits in Kubernetes' key space,
// its latest entry, and what its value is, without decoding the object.
// JSON field names are a contract.
type KeyInfo struct {
	// Key is the etcd key.
	Key string `json:"key"`
	// Class, Group, Resource, Namespace and Name are the key parsed onto Kubernetes' key space (keyspace.Key).
	Class     keyspace.Class `json:"class"`
	Group     string         `json:"group"`
	Resource  string         `json:"resource"`
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	// CreateRevision, ModRevision, Version and Lease are those of the
	// key's latest entry (mvccpb.KeyValue).
	CreateRevision int64 `json:"createRevision"`
	ModRevision    int64 `json:"modRevision"`
	Version        int64 `json:"version"`
	Lease          int64 `json:"lease"`
	// ValueBytes is the length of the stored value: the object as
	// kube-apiserver stores and serves it.
	ValueBytes int64 `json:"valueBytes"`
	// EntryBytes is the latest entry as the file holds it: the 17-byte
	// revision key plus the marshalled mvccpb.KeyValue (key, value,
	// revisions, version, lease), without page overhead.
	EntryBytes int64 `json:"entryBytes"`
	// Encoding, APIVersion and Kind come from keyspace.DetectValue; an
	// encrypted value has Encoding "encrypted" and names its provider and
	// key in EncryptionProvider and EncryptionKey.
	Encoding           keyspace.Encoding `json:"encoding"`
	APIVersion         string            `json:"apiVersion"`
	Kind               string            `json:"kind"`
	EncryptionProvider string            `json:"encryptionProvider,omitempty"`
	EncryptionKey      string            `json:"encryptionKey,omitempty"`
	// ResourceVersion is what kube-apiserver serves as the object's
	// metadata.resourceVersion: ModRevision in decimal.
	ResourceVersion string `json:"resourceVersion"`
	// ValueError is set when the value announces an encoding and breaks it.
	ValueError string `json:"valueError,omitempty"`
}

// KeyFilter selects keys for Keys. The zero value selects every key.
type KeyFilter struct {
	// Prefix keeps keys starting with it (an etcd key prefix, e.g.
	// "/registry/pods/default/").
	Prefix string
	// Resource keeps objects of a resource, named as kubectl does
	// ("pods", "deployments.apps", "crontabs.stable.example.com"), by its
	// stored path ("minions"), or by its plain name.
	Resource string
	// Namespace, with Resource, keeps one namespace.
	Namespace string
}

// Match reports whether the filter's Resource and Namespace select k (the
// Prefix is the caller's to apply to the key itself).
func (f KeyFilter) Match(k keyspace.Key) bool {
	if f.Resource != "" && f.Resource != k.Resource && f.Resource != k.GroupResource() && f.Resource != k.Path {
		return false
	}
	return f.Namespace == "" || f.Namespace == k.Namespace
}

// Keys lists the live keys the filter selects, sorted by key, with the
// latest entry of each and what its value is. It scans the key bucket once
// (in parallel) and then reads each selected key's latest entry. p parses
// keys (no prefixes: detect them).
func (db *DB) Keys(ctx context.Context, p keyspace.Parser, f KeyFilter) ([]KeyInfo, error) {
	var keep func([]byte) bool
	if f.Prefix != "" {
		// Keep the keys that reveal the Kubernetes prefix too, for
		// detection; they are filtered out below.
		pre := []byte(f.Prefix)
		keep = func(k []byte) bool {
			if bytes.HasPrefix(k, pre) {
				return true
			}
			_, ok := keyspace.PrefixCandidate(string(k))
			return ok
		}
	}
	t, err := db.keyTable(ctx, tableOptions{keep: keep})
	if err != nil {
		return nil, err
	}
	p = parserFor(p, t)
	out := []KeyInfo{}
	for _, key := range slices.Sorted(maps.Keys(t.keys)) {
		s := t.keys[key]
		if !s.live() || !strings.HasPrefix(key, f.Prefix) {
			continue
		}
		k := p.Parse(key)
		if !f.Match(k) {
			continue
		}
		e, ok, err := db.entryAt(s.last.rev.Revision)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%s: %w: entry %s of %q vanished", db.path, ErrCorrupt, s.last.rev.Revision, key)
		}
		out = append(out, keyInfo(k, key, &e))
	}
	return out, nil
}

func keyInfo(k keyspace.Key, key string, e *Entry) KeyInfo {
	vi, verr := keyspace.DetectValue(e.KV.Value)
	ki := KeyInfo{
		Key: key, Class: k.Class, Group: k.Group, Resource: k.Resource, Namespace: k.Namespace, Name: k.Name,
		CreateRevision: e.KV.CreateRevision, ModRevision: e.Key.Main, Version: e.KV.Version, Lease: e.KV.Lease,
		ValueBytes: int64(len(e.KV.Value)), EntryBytes: e.Bytes, Encoding: vi.Encoding, APIVersion: vi.APIVersion, Kind: vi.Kind,
		EncryptionProvider: vi.Provider, EncryptionKey: vi.KeyName,
		ResourceVersion: revision.ObjectResourceVersion(e.Key.Main),
	}
	if verr != nil {
		ki.ValueError = verr.Error()
	}
	return ki
}

// HistoryEntry is one stored revision of a key.
type HistoryEntry struct {
	// Main and Sub are the entry's revision, the bucket key.
	Main int64 `json:"main"`
	Sub  int64 `json:"sub"`
	// ModRevision is the revision of the change: the KeyValue's
	// mod_revision for a put, and Main for a tombstone, whose stored
	// KeyValue holds only the key (etcd gives a delete event the
	// tombstone's revision as mod_revision: server/storage/mvcc/watchable_store.go
	// kvsToEvents).
	ModRevision int64 `json:"modRevision"`
	// CreateRevision, Version and Lease are the KeyValue's (0 in a tombstone).
	CreateRevision int64 `json:"createRevision"`
	Version        int64 `json:"version"`
	Lease          int64 `json:"lease"`
	// Tombstone is set for a delete.
	Tombstone bool `json:"tombstone"`
	// ValueBytes is the length of the stored value.
	ValueBytes int64 `json:"valueBytes"`
	// Bytes is the whole entry as stored: bucket key plus KeyValue.
	Bytes int64 `json:"bytes"`
}

// History returns every stored entry of key, oldest first: what a
// compaction has not removed yet. It scans the key bucket once, in
// parallel. A key with no entry gives ErrKeyNotFound.
func (db *DB) History(ctx context.Context, key string) ([]HistoryEntry, error) {
	n := db.workers()
	parts := make([][]HistoryEntry, n)
	kb := []byte(key)
	err := db.scan(ctx, n, func(w int, e *Entry, _, _ []byte) error {
		if !bytes.Equal(e.KV.Key, kb) {
			return nil
		}
		mod := e.KV.ModRevision
		if e.Key.Tombstone {
			mod = e.Key.Main
		}
		parts[w] = append(parts[w], HistoryEntry{Main: e.Key.Main, Sub: e.Key.Sub, ModRevision: mod,
			CreateRevision: e.KV.CreateRevision, Version: e.KV.Version, Lease: e.KV.Lease, Tombstone: e.Key.Tombstone,
			ValueBytes: int64(len(e.KV.Value)), Bytes: e.Bytes})
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := slices.Concat(parts...)
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w: %q has no stored revision", db.path, ErrKeyNotFound, key)
	}
	return out, nil
}
