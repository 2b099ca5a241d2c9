package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// LeaseRow is one lease and the live keys attached to it.
type LeaseRow struct {
	Lease
	// Keys counts live keys whose latest entry carries this lease.
	Keys int64 `json:"keys"`
	// LiveEntryBytes sums the latest entries of those keys as stored
	// (revision key plus marshalled KeyValue); LiveValueBytes their values.
	LiveEntryBytes int64 `json:"liveEntryBytes"`
	LiveValueBytes int64 `json:"liveValueBytes"`
	// Resources counts those keys per resource ("events.k8s.io" style
	// kubectl names; "(outside prefix)" and the like for other keys).
	Resources map[string]int64 `json:"resources"`
	// Missing is set for a lease that keys reference but the lease
	// bucket does not hold (its TTL is then unknown).
	Missing bool `json:"missing"`
}

// LeaseReport lists every lease with the keys attached to it.
type LeaseReport struct {
	// SchemaVersion is LeaseReportSchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// Path is the file read.
	Path string `json:"path"`
	// Rows are sorted by Keys, most first, then by ID.
	Rows []LeaseRow `json:"rows"`
	// KeysWithLease and KeysWithoutLease count live keys.
	KeysWithLease int64 `json:"keysWithLease"`
	// KeysWithoutLease counts live keys without one.
	KeysWithoutLease int64 `json:"keysWithoutLease"`
}

// LeaseReportSchemaVersion versions the JSON of LeaseReport.
const LeaseReportSchemaVersion = 2

// ResourceLabel names the resource of a parsed key as the tables do:
// kubectl's resource.group for objects, the class in parentheses for
// other keys.
func ResourceLabel(k keyspace.Key) string {
	switch k.Class {
	case keyspace.ClassObject, keyspace.ClassMasterLease, keyspace.ClassRangeAllocation:
		return k.GroupResource()
	case keyspace.ClassCompactRevKey:
		return "(compact_rev_key)"
	case keyspace.ClassUnrecognised:
		return "(unrecognised)"
	}
	return "(outside prefix)"
}

// Leases reads the lease bucket and scans the key bucket once to attach
// every live key to its lease (Kubernetes events hold a lease of one hour,
// shared by the events written within a minute). p parses the keys (no
// prefixes: detect them).
func (db *DB) Leases(ctx context.Context, p keyspace.Parser) (*LeaseReport, error) {
	leases, err := db.leases()
	if err != nil {
		return nil, err
	}
	t, err := db.keyTable(ctx, tableOptions{})
	if err != nil {
		return nil, err
	}
	p = parserFor(p, t)
	rows := map[int64]*LeaseRow{}
	for _, l := range leases {
		rows[l.ID] = &LeaseRow{Lease: l, Resources: map[string]int64{}}
	}
	rep := &LeaseReport{SchemaVersion: LeaseReportSchemaVersion, Path: db.path, Rows: []LeaseRow{}}
	for _, key := range slices.Sorted(maps.Keys(t.keys)) {
		s := t.keys[key]
		if !s.live() {
			continue
		}
		if s.last.lease == 0 {
			rep.KeysWithoutLease++
			continue
		}
		rep.KeysWithLease++
		r := rows[s.last.lease]
		if r == nil {
			id := s.last.lease
			r = &LeaseRow{Lease: Lease{ID: id, IDHex: strconv.FormatInt(id, 16)}, Resources: map[string]int64{}, Missing: true}
			rows[id] = r
		}
		r.Keys++
		r.LiveEntryBytes += s.last.bytes
		r.LiveValueBytes += s.last.valueBytes
		r.Resources[ResourceLabel(p.Parse(key))]++
	}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, *r)
	}
	slices.SortFunc(rep.Rows, func(a, b LeaseRow) int {
		return cmp.Or(cmp.Compare(b.Keys, a.Keys), cmp.Compare(a.ID, b.ID))
	})
	return rep, nil
}

// FormatCounts renders a count per name as "a:3 b:1", largest first, then
// by name.
func FormatCounts(m map[string]int64) string {
	names := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s:%d", n, m[n])
	}
	return strings.Join(parts, " ")
}
