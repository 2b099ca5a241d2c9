package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/coreos/go-semver/semver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// DefaultMaxKeysPerRequest is UsageOptions.MaxKeysPerRequest's default.
const DefaultMaxKeysPerRequest = 1000

// revisionKeyBytes is the size of a key bucket key: the 17-byte revision
// (pkg/revision).
const revisionKeyBytes = 17

// UsageOptions configure Usage.
type UsageOptions struct {
	// Parser parses keys; without prefixes, the prefixes detected among
	// the keys read (keyspace.DetectPrefixes), as offline.
	Parser keyspace.Parser
	// Values reads the values too (a full Range of values, serializable,
	// at the pinned revision) for the value and entry bytes; without it
	// only keys are read.
	Values bool
	// AllowValueReads lets Usage read from servers older than etcd 3.7,
	// whose keys_only Ranges read every value from disk.
	AllowValueReads bool
	// MaxKeysPerRequest is the Range limit of each page; 0 means
	// DefaultMaxKeysPerRequest.
	MaxKeysPerRequest int64
	// Versions are the members' server versions (MemberStatus.Version)
	// Usage checks against AllowValueReads.
	Versions []string
}

// Usage is the key space aggregated per Kubernetes resource and namespace,
// read live: the snapshot.Usage of a snapshot saved at ReadAtRevision as far
// as Ranges can tell it. Of each row, Objects is exact; Revisions is exact
// unless keys were deleted after the compact revision
// (RevisionsLowerBound); LiveValueBytes and LiveEntryBytes are exact and
// set only with Values; HistoryEntryBytes and Tombstones are unknown live
// and left 0 (the command omits them).
type Usage struct {
	snapshot.Usage
	// ReadAtRevision is the revision every Range read at.
	ReadAtRevision int64
	// CompactRevision is the compact revision the revisions kept were
	// counted from (CompactRevision).
	CompactRevision int64
	// Values reports whether values were read.
	Values bool
	// RevisionsLowerBound reports whether a key deleted after
	// CompactRevision may hide revisions from the count: always true,
	// since a deleted key is invisible to a Range; see the package doc.
	RevisionsLowerBound bool
}

// CheckVersions returns ErrValueReads, wrapped with the version, when any
// of versions is older than etcd 3.7 and allow is false. An empty or
// unparsable version counts as old.
func CheckVersions(versions []string, allow bool) error {
	if allow {
		return nil
	}
	for _, v := range versions {
		sv, err := semver.NewVersion(v)
		if err != nil || sv.LessThan(semver.Version{Major: 3, Minor: 7}) {
			return fmt.Errorf("server version %q: %w", v, ErrValueReads)
		}
	}
	return nil
}

// ServerVersions asks each endpoint for its Status, each bounded by
// timeout (0: ctx alone), and returns the server versions, in the order of
// endpoints, or the first error.
func ServerVersions(ctx context.Context, c Client, endpoints []string, timeout time.Duration) ([]string, error) {
	var vs []string
	for _, ep := range endpoints {
		s, err := memberStatus(ctx, c, ep, timeout)
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", ep, err)
		}
		vs = append(vs, s.Version)
	}
	return vs, nil
}

// keyState is what a keys_only Range tells of a key.
type keyState struct {
	version, createRevision int64
}

// ReadUsage reads every key (keys_only, or with values under o.Values) at one
// revision, the header revision of its first Range, page by page of
// o.MaxKeysPerRequest keys, then the keys at the compact revision, and
// aggregates them as snapshot.Usage does. It returns ErrValueReads (see
// CheckVersions) before any Range, and the first Range error, wrapped
// with what it read; an ended ctx ends it with ctx's error and no result.
func ReadUsage(ctx context.Context, c Client, o UsageOptions) (*Usage, error) {
	if err := CheckVersions(o.Versions, o.AllowValueReads); err != nil {
		return nil, err
	}
	now := map[string]keyState{}
	u := &Usage{Values: o.Values, RevisionsLowerBound: true}
	valueBytes, entryBytes := map[string]int64{}, map[string]int64{}
	rev, err := scan(ctx, c, 0, "", !o.Values, o.MaxKeysPerRequest, func(kv *mvccpb.KeyValue) {
		k := string(kv.Key)
		now[k] = keyState{version: kv.Version, createRevision: kv.CreateRevision}
		if o.Values {
			valueBytes[k] = int64(len(kv.Value))
			entryBytes[k] = revisionKeyBytes + int64(proto.Size(kv))
		}
	})
	if err != nil {
		return nil, err
	}
	u.ReadAtRevision = rev
	if u.CompactRevision, err = CompactRevision(ctx, c, rev); err != nil {
		return nil, err
	}
	then := map[string]keyState{}
	if u.CompactRevision > 0 {
		_, err := scan(ctx, c, u.CompactRevision, "", true, o.MaxKeysPerRequest, func(kv *mvccpb.KeyValue) {
			then[string(kv.Key)] = keyState{version: kv.Version, createRevision: kv.CreateRevision}
		})
		if err != nil {
			return nil, err
		}
	}
	p := o.Parser
	if len(p.Prefixes) == 0 {
		p.Prefixes = keyspace.DetectPrefixes(func(yield func(string) bool) {
			for k := range now {
				if !yield(k) {
					return
				}
			}
		})
	}
	u.Prefixes = p.Prefixes
	u.LastRevision = rev
	rows := map[snapshot.UsageRow]int{}
	for _, key := range slices.Sorted(maps.Keys(now)) {
		k := p.Parse(key)
		id := snapshot.UsageRow{Class: k.Class, Prefix: k.Prefix, Group: k.Group, Resource: k.Resource, Path: k.Path, Namespace: k.Namespace}
		ri, ok := rows[id]
		if !ok {
			ri = len(u.Rows)
			rows[id] = ri
			u.Rows = append(u.Rows, id)
		}
		r := &u.Rows[ri]
		r.Objects++
		r.Revisions += revisionsKept(now[key], then[key])
		r.LiveValueBytes += valueBytes[key]
		r.LiveEntryBytes += entryBytes[key]
	}
	for _, r := range u.Rows {
		u.Total.Objects += r.Objects
		u.Total.Revisions += r.Revisions
		u.Total.LiveValueBytes += r.LiveValueBytes
		u.Total.LiveEntryBytes += r.LiveEntryBytes
	}
	return u, nil
}

// revisionsKept is the number of entries the key bucket holds of a live
// key after the compaction at which the key was at (the zero keyState:
// absent): its version now minus its version then, plus the entry kept at
// the compact revision; a key created after it holds its version. A key
// re-created after the compact revision held at least the entry kept and
// its tombstone besides: a lower bound.
func revisionsKept(now, then keyState) int64 {
	switch {
	case then.version == 0:
		return now.version
	case then.createRevision != now.createRevision:
		return now.version + 2
	}
	return now.version - then.version + 1
}

// scan reads every key starting with prefix ("": every key) at rev (0:
// the current revision, pinned by the first page) in pages of limit keys,
// keys only or with values, and returns the revision read at. Pages after
// the first are serializable.
func scan(ctx context.Context, c Client, rev int64, prefix string, keysOnly bool, limit int64, f func(*mvccpb.KeyValue)) (int64, error) {
	if limit <= 0 {
		limit = DefaultMaxKeysPerRequest
	}
	key, span, access := "\x00", clientv3.WithFromKey(), "every key (from \\x00 to the end)"
	if prefix != "" {
		key, span, access = prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), fmt.Sprintf("the prefix %q", prefix)
	}
	for {
		opts := []clientv3.OpOption{span, clientv3.WithLimit(limit)}
		if keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev), clientv3.WithSerializable())
		}
		resp, err := c.Get(ctx, key, opts...)
		if err != nil {
			at := fmt.Sprintf("revision %d", rev)
			if rev == 0 {
				at = "the current revision"
			}
			switch {
			case ctx.Err() != nil:
				err = ctx.Err()
			case errors.Is(err, rpctypes.ErrPermissionDenied):
				err = fmt.Errorf("%w: the user's role needs read access to %s", err, access)
			}
			return 0, fmt.Errorf("range from %q at %s: %w", key, at, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			f(kv)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
