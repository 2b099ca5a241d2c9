package live

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/revision"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// KeysOptions configure ReadKeys.
type KeysOptions struct {
	// Parser parses keys; without prefixes, the prefixes detected among
	// the keys read (keyspace.DetectPrefixes), as offline. With
	// Filter.Prefix only the keys under it are read, so a Kubernetes
	// prefix none of them reveals needs the Parser's prefixes.
	Parser keyspace.Parser
	// Filter selects the keys as snapshot.DB.Keys does; its Prefix
	// narrows the Ranges themselves to the prefix.
	Filter snapshot.KeyFilter
	// Values reads the values too (Ranges with values at the pinned
	// revision) for ValueBytes, EntryBytes and the value's encoding and
	// kind; without it those are left zero.
	Values bool
	// AllowValueReads, MaxKeysPerRequest and Versions are UsageOptions'.
	AllowValueReads   bool
	MaxKeysPerRequest int64
	Versions          []string
	// Method, Progress and Partial are UsageOptions'.
	Method   ScanMethod
	Progress *Progress
	Partial  bool
}

// Keys is the live keys read at one revision: the snapshot.DB.Keys of a
// snapshot saved at ReadAtRevision.
type Keys struct {
	// ReadAtRevision is the revision every Range read at.
	ReadAtRevision int64
	// Values reports whether values were read (KeysOptions.Values).
	Values bool
	// Prefixes are the Kubernetes prefixes the keys were parsed with.
	Prefixes []string
	// Keys are the selected keys, sorted by key.
	Keys []snapshot.KeyInfo
	// MemberID is the member (hex) that answered the Ranges.
	MemberID string
	// Partial is set when ctx ended during the reading
	// (KeysOptions.Partial): Keys holds the keys read until then, the
	// first ones in key order.
	Partial bool
}

// ReadKeys reads the keys under o.Filter.Prefix (every key without one)
// with keys_only Ranges, or with values under o.Values, at one revision,
// the header revision of the first Range, page by page of
// o.MaxKeysPerRequest keys, and describes each key the filter selects as
// snapshot.DB.Keys does. It returns ErrValueReads (see CheckVersions)
// before any Range, and the first Range error, wrapped with what it read;
// an ended ctx ends it with ctx's error and no result, or the keys read
// until then under o.Partial.
func ReadKeys(ctx context.Context, c Client, o KeysOptions) (*Keys, error) {
	if err := CheckVersions(o.Versions, o.AllowValueReads); err != nil {
		return nil, err
	}
	kvs := map[string]*mvccpb.KeyValue{}
	res, err := scan(ctx, c, scanRequest{prefix: o.Filter.Prefix, keysOnly: !o.Values, limit: o.MaxKeysPerRequest,
		method: cmp.Or(o.Method, ScanMethodFor(o.Versions)), progress: o.Progress}, func(kv *mvccpb.KeyValue) {
		kvs[string(kv.Key)] = kv
	})
	partial := err != nil && o.Partial && ctx.Err() != nil
	if err != nil && !partial {
		return nil, err
	}
	p := o.Parser
	if len(p.Prefixes) == 0 {
		p.Prefixes = keyspace.DetectPrefixes(func(yield func(string) bool) {
			for k := range kvs {
				if !yield(k) {
					return
				}
			}
		})
	}
	ks := &Keys{ReadAtRevision: res.rev, Values: o.Values, Prefixes: p.Prefixes, Keys: []snapshot.KeyInfo{}, MemberID: res.member(),
		Partial: partial}
	for _, key := range slices.Sorted(maps.Keys(kvs)) {
		if !strings.HasPrefix(key, o.Filter.Prefix) {
			continue
		}
		k := p.Parse(key)
		if !o.Filter.Match(k) {
			continue
		}
		kv := kvs[key]
		ki := snapshot.KeyInfo{Key: key, Class: k.Class, Group: k.Group, Resource: k.Resource, Namespace: k.Namespace, Name: k.Name,
			CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease,
			ResourceVersion: revision.ObjectResourceVersion(kv.ModRevision)}
		if o.Values {
			vi, verr := keyspace.DetectValue(kv.Value)
			ki.ValueBytes, ki.EntryBytes = int64(len(kv.Value)), revisionKeyBytes+int64(proto.Size(kv))
			ki.Encoding, ki.APIVersion, ki.Kind = vi.Encoding, vi.APIVersion, vi.Kind
			ki.EncryptionProvider, ki.EncryptionKey = vi.Provider, vi.KeyName
			if verr != nil {
				ki.ValueError = verr.Error()
			}
		}
		ks.Keys = append(ks.Keys, ki)
	}
	return ks, err
}
