package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// UsageRow aggregates the key bucket entries of one group of keys. Entry
// bytes are what bbolt stores per entry (Entry.Bytes): the 17-byte bucket
// key plus the marshalled mvccpb.KeyValue (key, value, revisions, version,
// lease), without page overhead. Value bytes are the KeyValue's value
// alone: the object as kube-apiserver stores and serves it.
type UsageRow struct {
	// Class, Prefix, Group, Resource, Path and Namespace identify the row;
	// which of them are set depends on the Dimension (see Usage.By).
	Class     keyspace.Class `json:"class"`
	Prefix    string         `json:"prefix,omitempty"`
	Group     string         `json:"group"`
	Resource  string         `json:"resource,omitempty"`
	Path      string         `json:"path,omitempty"`
	Namespace string         `json:"namespace,omitempty"`
	// Objects counts live keys: their latest entry is not a tombstone.
	Objects int64 `json:"objects"`
	// LiveEntryBytes sums the latest entry of every live key.
	LiveEntryBytes int64 `json:"liveEntryBytes"`
	// LiveValueBytes sums the values of those entries.
	LiveValueBytes int64 `json:"liveValueBytes"`
	// Revisions counts every entry, tombstones included.
	Revisions int64 `json:"revisions"`
	// HistoryEntryBytes sums every other entry: superseded revisions and
	// tombstones, what a compaction may remove.
	HistoryEntryBytes int64 `json:"historyEntryBytes"`
	// Tombstones counts delete entries.
	Tombstones int64 `json:"tombstones"`
}

func (r *UsageRow) add(o *UsageRow) {
	r.Objects += o.Objects
	r.LiveEntryBytes += o.LiveEntryBytes
	r.LiveValueBytes += o.LiveValueBytes
	r.Revisions += o.Revisions
	r.HistoryEntryBytes += o.HistoryEntryBytes
	r.Tombstones += o.Tombstones
}

// addKey counts one key's entries.
func (r *UsageRow) addKey(s *keyStat) {
	r.Revisions += s.revisions
	r.Tombstones += s.tombstones
	if s.live() {
		r.Objects++
		r.LiveEntryBytes += s.last.bytes
		r.LiveValueBytes += s.last.valueBytes
		r.HistoryEntryBytes += s.bytes - s.last.bytes
	} else {
		r.HistoryEntryBytes += s.bytes
	}
}

// Usage is the key bucket aggregated per Kubernetes resource and namespace.
type Usage struct {
	// Prefixes are the Kubernetes prefixes keys were parsed with: the
	// caller's, or those detected in the file (keyspace.DetectPrefixes).
	Prefixes []string
	// Rows holds one row per class, prefix, group, resource, path and
	// namespace, in no particular order; use By for a sorted roll-up.
	Rows []UsageRow
	// Total sums every row. Total.Objects, Revisions and Tombstones equal
	// Status.LiveKeys, Revisions and Tombstones of the same file.
	Total UsageRow
	// LastRevision is the main revision of the last entry.
	LastRevision int64
}

// Dimension is what Usage.By groups rows by.
type Dimension string

// The dimensions of Usage.By.
const (
	// ByResource groups by class, prefix, group, resource and path.
	ByResource Dimension = "resource"
	// ByNamespace groups objects by namespace ("" for cluster-scoped
	// ones) and other keys by class (keyspace.Class.IsObject).
	ByNamespace Dimension = "namespace"
	// ByGroup groups by class and API group.
	ByGroup Dimension = "group"
)

// By rolls the rows up to dim and sorts them by total bytes (live plus
// history), largest first, then by their identifying fields. It panics on an
// unknown Dimension; commands validate the flag first.
func (u *Usage) By(dim Dimension) []UsageRow {
	idx := map[UsageRow]*UsageRow{}
	var out []*UsageRow
	for i := range u.Rows {
		r := &u.Rows[i]
		var id UsageRow
		switch dim {
		case ByResource:
			id = UsageRow{Class: r.Class, Prefix: r.Prefix, Group: r.Group, Resource: r.Resource, Path: r.Path}
		case ByNamespace:
			id = UsageRow{Class: r.Class, Namespace: r.Namespace}
			if r.Class.IsObject() {
				id.Class = keyspace.ClassObject
			}
		case ByGroup:
			id = UsageRow{Class: r.Class, Group: r.Group}
		default:
			panic(fmt.Sprintf("snapshot: unknown usage dimension %q", dim))
		}
		agg, ok := idx[id]
		if !ok {
			agg = new(UsageRow)
			*agg = id
			idx[id] = agg
			out = append(out, agg)
		}
		agg.add(r)
	}
	rows := make([]UsageRow, len(out))
	for i, r := range out {
		rows[i] = *r
	}
	sortRows(rows)
	return rows
}

func sortRows(rows []UsageRow) {
	slices.SortFunc(rows, func(a, b UsageRow) int {
		if c := cmp.Compare(b.LiveEntryBytes+b.HistoryEntryBytes, a.LiveEntryBytes+a.HistoryEntryBytes); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Class, b.Class), cmp.Compare(a.Prefix, b.Prefix), cmp.Compare(a.Group, b.Group),
			cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Namespace, b.Namespace))
	})
}

// parserFor returns p, or, when p names no prefixes, a parser for the
// prefixes detected among the table's keys.
func parserFor(p keyspace.Parser, t *keyTable) keyspace.Parser {
	if len(p.Prefixes) > 0 {
		return p
	}
	return keyspace.Parser{Prefixes: keyspace.DetectPrefixes(func(yield func(string) bool) {
		for k := range t.keys {
			if !yield(k) {
				return
			}
		}
	})}
}

// rowID is the finest usage row a key belongs to.
func rowID(k keyspace.Key) UsageRow {
	return UsageRow{Class: k.Class, Prefix: k.Prefix, Group: k.Group, Resource: k.Resource, Path: k.Path, Namespace: k.Namespace}
}

// Usage scans the key bucket with every worker (Options.Workers), each on
// a contiguous revision range, and aggregates it per Kubernetes key as p
// parses it (p without prefixes: the prefixes detected in the file).
// Memory grows with the number of distinct keys, not with the number of
// revisions or the file size. Errors are those of ForEachRevision.
func (db *DB) Usage(ctx context.Context, p keyspace.Parser) (*Usage, error) {
	t, err := db.keyTable(ctx, tableOptions{})
	if err != nil {
		return nil, err
	}
	return usageFrom(t, p), nil
}

func usageFrom(t *keyTable, p keyspace.Parser) *Usage {
	p = parserFor(p, t)
	u := &Usage{Prefixes: p.Prefixes, LastRevision: t.lastRevision}
	rows := map[UsageRow]int{}
	for _, key := range slices.Sorted(maps.Keys(t.keys)) {
		id := rowID(p.Parse(key))
		ri, ok := rows[id]
		if !ok {
			ri = len(u.Rows)
			rows[id] = ri
			u.Rows = append(u.Rows, id)
		}
		u.Rows[ri].addKey(t.keys[key])
	}
	for i := range u.Rows {
		u.Total.add(&u.Rows[i])
	}
	return u
}

// PrefixesWithoutResources returns the prefixes of u.Prefixes that hold
// keys but no resource directory (keyspace.IsResourcePath): not an etcd
// prefix of Kubernetes' key space, such as /registry/pods, under which
// namespaces would be read as resources. A prefix that holds no key at
// all is not returned.
func (u *Usage) PrefixesWithoutResources() []string {
	keys, resources := map[string]bool{}, map[string]bool{}
	for _, r := range u.Rows {
		if r.Prefix == "" {
			continue
		}
		keys[r.Prefix] = true
		if keyspace.IsResourcePath(r.Path) {
			resources[r.Prefix] = true
		}
	}
	var out []string
	for _, p := range u.Prefixes {
		if keys[p] && !resources[p] {
			out = append(out, p)
		}
	}
	return out
}
