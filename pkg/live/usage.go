package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/coreos/go-semver/semver"
	"go.etcd.io/etcd/api/v3/mvccpb"
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
	// Method is how the keys are asked for; "" means ScanMethodFor
	// Versions.
	Method ScanMethod
	// History is how history entry bytes are counted; "" means
	// HistoryEstimate. HistoryExact needs the Client to be a Watcher too
	// (a *clientv3.Client is).
	History HistoryMethod
	// Progress, when set, counts the work as it goes.
	Progress *Progress
	// Partial asks for what was read when ctx ends during the reading:
	// ReadUsage then returns it, marked Usage.Partial, with ctx's error.
	Partial bool
}

// Usage is the key space aggregated per Kubernetes resource and namespace,
// read live: the snapshot.Usage of a snapshot saved at ReadAtRevision as far
// as Ranges can tell it. Of each row, Objects is exact; Revisions is exact
// unless keys were deleted after the compact revision
// (RevisionsLowerBound); LiveValueBytes and LiveEntryBytes are exact and
// set only with Values. HistoryEntryBytes is counted by History (left 0
// when History is ""); Tombstones, and rows of keys deleted since the
// compact revision, only with HistoryExact, which makes every figure
// exact.
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
	// CompactRevision may hide revisions from the count: true unless
	// HistoryExact, since a deleted key is invisible to a Range; see the
	// package doc.
	RevisionsLowerBound bool
	// History is how HistoryEntryBytes was counted: HistoryExact,
	// HistoryEstimate (with Values), or "" when it was not.
	History HistoryMethod
	// MemberID is the member (hex) that answered the Ranges at
	// ReadAtRevision: the client's only endpoint when it has one.
	MemberID string
	// Partial is set when ctx ended during the reading
	// (UsageOptions.Partial): the rows hold the keys read until then, and
	// PartialPhase names what was being read.
	Partial      bool
	PartialPhase string
	// RevisionsCounted reports whether Revisions (and an estimate of
	// history) were counted: false only in a partial result interrupted
	// before the keys at the compact revision were all read.
	RevisionsCounted bool
}

// ScanMethodFor returns the scan method for servers of versions:
// DefaultScanMethod when every one is etcd 3.7 or later (RangeStream
// needs 3.7), else ScanPages.
func ScanMethodFor(versions []string) ScanMethod {
	if len(versions) > 0 && CheckVersions(versions, false) == nil {
		return DefaultScanMethod
	}
	return ScanPages
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
	version, createRevision, modRevision int64
}

// keyHistory is a key's entries besides its live one that HistoryExact
// counted.
type keyHistory struct {
	revisions, tombstones, bytes int64
}

// ReadUsage reads every key (keys_only, or with values under o.Values) at one
// revision, the header revision of its first Range, page by page of
// o.MaxKeysPerRequest keys (or by o.Method), then the keys at the compact
// revision (with values under HistoryExact, and the history replayed from
// it), and aggregates them as snapshot.Usage does. It returns
// ErrValueReads (see CheckVersions) before any Range, and the first Range
// or watch error, wrapped with what it read; an ended ctx ends it with
// ctx's error and no result, or what was read under o.Partial.
func ReadUsage(ctx context.Context, c Client, o UsageOptions) (*Usage, error) {
	if err := CheckVersions(o.Versions, o.AllowValueReads); err != nil {
		return nil, err
	}
	history := cmp.Or(o.History, HistoryEstimate)
	var w Watcher
	if history == HistoryExact {
		var ok bool
		if w, ok = c.(Watcher); !ok {
			return nil, errors.New("exact history needs a client that can watch")
		}
	}
	method := cmp.Or(o.Method, ScanMethodFor(o.Versions))
	now := map[string]keyState{}
	u := &Usage{Values: o.Values, RevisionsLowerBound: history != HistoryExact}
	valueBytes, entryBytes := map[string]int64{}, map[string]int64{}
	hist := map[string]*keyHistory{}
	histOf := func(key string) *keyHistory {
		h := hist[key]
		if h == nil {
			h = &keyHistory{}
			hist[key] = h
		}
		return h
	}
	// interrupted ends the reading: what was read, marked partial, under
	// o.Partial when ctx ended.
	interrupted := func(phase string, err error) (*Usage, error) {
		if !o.Partial || ctx.Err() == nil {
			return nil, err
		}
		u.Partial, u.PartialPhase = true, phase
		u.History = ""
		return u, err
	}
	res, err := scan(ctx, c, scanRequest{prefix: "", keysOnly: !o.Values, limit: o.MaxKeysPerRequest, method: method, progress: o.Progress},
		func(kv *mvccpb.KeyValue) {
			k := string(kv.Key)
			now[k] = keyState{version: kv.Version, createRevision: kv.CreateRevision, modRevision: kv.ModRevision}
			if o.Values {
				valueBytes[k] = int64(len(kv.Value))
				entryBytes[k] = revisionKeyBytes + int64(proto.Size(kv))
			}
		})
	u.ReadAtRevision, u.MemberID = res.rev, res.member()
	if err != nil {
		phase := "the keys at the current revision"
		if res.rev > 0 {
			phase = fmt.Sprintf("the keys at revision %d", res.rev)
		}
		return interrupted(phase, aggregate(u, o.Parser, now, nil, valueBytes, entryBytes, nil, err))
	}
	rev := res.rev
	if u.CompactRevision, err = CompactRevision(ctx, c, rev); err != nil {
		return interrupted("the compact revision", aggregate(u, o.Parser, now, nil, valueBytes, entryBytes, nil, err))
	}
	then := map[string]keyState{}
	if u.CompactRevision > 0 {
		// Under HistoryExact the entry kept at the compact revision is
		// history unless it is the live one: its bytes are needed.
		_, err := scan(ctx, c, scanRequest{rev: u.CompactRevision, keysOnly: history != HistoryExact, limit: o.MaxKeysPerRequest,
			method: method, progress: o.Progress}, func(kv *mvccpb.KeyValue) {
			k := string(kv.Key)
			then[k] = keyState{version: kv.Version, createRevision: kv.CreateRevision, modRevision: kv.ModRevision}
			if history == HistoryExact && now[k].modRevision != kv.ModRevision {
				h := histOf(k)
				h.revisions++
				h.bytes += revisionKeyBytes + int64(proto.Size(kv))
			}
		})
		if err != nil {
			return interrupted(fmt.Sprintf("the keys at the compact revision %d", u.CompactRevision), aggregate(u, o.Parser, now, nil, valueBytes, entryBytes, nil, err))
		}
	}
	u.RevisionsCounted = true
	if history == HistoryExact {
		err := replay(ctx, w, u.CompactRevision, rev, o.Progress, func(ev *clientv3.Event) {
			k := string(ev.Kv.Key)
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				// A tombstone's bucket key is marked with a 't'; its
				// value is a KeyValue of the key alone
				// (server/storage/mvcc/kvstore_txn.go delete).
				h := histOf(k)
				h.revisions++
				h.tombstones++
				h.bytes += revisionKeyBytes + 1 + int64(proto.Size(&mvccpb.KeyValue{Key: ev.Kv.Key}))
			case now[k].modRevision != ev.Kv.ModRevision:
				h := histOf(k)
				h.revisions++
				h.bytes += revisionKeyBytes + int64(proto.Size(ev.Kv))
			}
		})
		if err != nil {
			return interrupted(fmt.Sprintf("the history from the compact revision %d to %d", u.CompactRevision, rev), aggregate(u, o.Parser, now, then, valueBytes, entryBytes, nil, err))
		}
		u.History = HistoryExact
		return u, aggregate(u, o.Parser, now, then, valueBytes, entryBytes, hist, nil)
	}
	if o.Values {
		u.History = HistoryEstimate
	}
	return u, aggregate(u, o.Parser, now, then, valueBytes, entryBytes, nil, nil)
}

// aggregate fills u's rows and total from the keys read: now at
// ReadAtRevision, then at the compact revision (nil: not read, Revisions
// left 0), the live keys' value and entry bytes, and the history counted
// exactly (nil: estimated from the entry bytes when values were read).
// It returns err, so that a caller may aggregate what a failed read left.
func aggregate(u *Usage, p keyspace.Parser, now, then map[string]keyState, valueBytes, entryBytes map[string]int64,
	hist map[string]*keyHistory, err error) error {
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
	u.LastRevision = u.ReadAtRevision
	u.Rows, u.Total = nil, snapshot.UsageRow{}
	rows := map[snapshot.UsageRow]int{}
	row := func(key string) *snapshot.UsageRow {
		k := p.Parse(key)
		id := snapshot.UsageRow{Class: k.Class, Prefix: k.Prefix, Group: k.Group, Resource: k.Resource, Path: k.Path, Namespace: k.Namespace}
		ri, ok := rows[id]
		if !ok {
			ri = len(u.Rows)
			rows[id] = ri
			u.Rows = append(u.Rows, id)
		}
		return &u.Rows[ri]
	}
	keys := slices.Collect(maps.Keys(now))
	for k := range hist {
		if _, ok := now[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		r := row(key)
		st, live := now[key]
		if live {
			r.Objects++
			r.LiveValueBytes += valueBytes[key]
			r.LiveEntryBytes += entryBytes[key]
		}
		switch {
		case hist != nil:
			h := hist[key]
			if h == nil {
				h = &keyHistory{}
			}
			r.Revisions += h.revisions
			if live {
				r.Revisions++
			}
			r.Tombstones += h.tombstones
			r.HistoryEntryBytes += h.bytes
		case then != nil:
			kept := revisionsKept(st, then[key])
			r.Revisions += kept
			if u.Values {
				r.HistoryEntryBytes += (kept - 1) * entryBytes[key]
			}
		}
	}
	for i := range u.Rows {
		r := u.Rows[i]
		u.Total.Objects += r.Objects
		u.Total.Revisions += r.Revisions
		u.Total.LiveValueBytes += r.LiveValueBytes
		u.Total.LiveEntryBytes += r.LiveEntryBytes
		u.Total.HistoryEntryBytes += r.HistoryEntryBytes
		u.Total.Tombstones += r.Tombstones
	}
	return err
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
