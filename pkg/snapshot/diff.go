package snapshot

import (
	"bytes"
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// DiffRow counts the object-level changes of one resource between two
// files.
type DiffRow struct {
	// Class, Prefix, Group, Resource and Path identify the resource (keyspace.Key).
	Class    keyspace.Class `json:"class"`
	Prefix   string         `json:"prefix,omitempty"`
	Group    string         `json:"group"`
	Resource string         `json:"resource,omitempty"`
	Path     string         `json:"path,omitempty"`
	// Added counts keys live only in the second file, Deleted keys live
	// only in the first, Modified keys live in both whose latest entries
	// differ (revision, version or value), Unchanged the rest.
	Added     int64 `json:"added"`
	Modified  int64 `json:"modified"`
	Deleted   int64 `json:"deleted"`
	Unchanged int64 `json:"unchanged"`
	// LiveEntryBytesBefore and LiveEntryBytesAfter sum the live entries
	// in each file as stored (revision key plus marshalled KeyValue);
	// LiveValueBytesBefore and LiveValueBytesAfter their values.
	LiveEntryBytesBefore int64 `json:"liveEntryBytesBefore"`
	LiveEntryBytesAfter  int64 `json:"liveEntryBytesAfter"`
	LiveValueBytesBefore int64 `json:"liveValueBytesBefore"`
	LiveValueBytesAfter  int64 `json:"liveValueBytesAfter"`
}

func (r *DiffRow) add(o *DiffRow) {
	r.Added += o.Added
	r.Modified += o.Modified
	r.Deleted += o.Deleted
	r.Unchanged += o.Unchanged
	r.LiveEntryBytesBefore += o.LiveEntryBytesBefore
	r.LiveEntryBytesAfter += o.LiveEntryBytesAfter
	r.LiveValueBytesBefore += o.LiveValueBytesBefore
	r.LiveValueBytesAfter += o.LiveValueBytesAfter
}

// DiffSide describes one of the two files.
type DiffSide struct {
	// Path is the file read.
	Path string `json:"path"`
	// Revision is the file's current revision (see Status).
	Revision int64 `json:"revision"`
	// CompactRevision is the file's finished compact revision.
	CompactRevision int64 `json:"compactRevision"`
	// LiveKeys counts the file's live keys.
	LiveKeys int64 `json:"liveKeys"`
}

// DiffChange is one changed key.
type DiffChange struct {
	// Key is the etcd key.
	Key string `json:"key"`
	// Change is "added", "modified" or "deleted".
	Change string `json:"change"`
	// ModRevisionBefore and ModRevisionAfter are the key's latest
	// revisions in each file, 0 where it is not live.
	ModRevisionBefore int64 `json:"modRevisionBefore"`
	ModRevisionAfter  int64 `json:"modRevisionAfter"`
}

// DiffReport compares the live keys of two files.
type DiffReport struct {
	// SchemaVersion is DiffReportSchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// From is the first file (before).
	From DiffSide `json:"from"`
	// To is the second file (after).
	To DiffSide `json:"to"`
	// RevisionsBetween is To.Revision - From.Revision: the transactions
	// committed between the two files when they come from one cluster
	// (negative when the second file is older).
	RevisionsBetween int64 `json:"revisionsBetween"`
	// DifferentClusters is set when the files are of different clusters
	// (their members buckets share no member ID; see
	// MembersReport.Clusters): RevisionsBetween then means nothing.
	DifferentClusters bool `json:"differentClusters"`
	// Rows per resource with a change, sorted by the number of changes,
	// most first.
	Rows []DiffRow `json:"rows"`
	// Total sums every resource, unchanged ones included.
	Total DiffRow `json:"total"`
	// Changes lists every changed key, sorted by key.
	Changes []DiffChange `json:"changes"`
}

// DiffReportSchemaVersion versions the JSON of DiffReport.
const DiffReportSchemaVersion = 3

// Diff compares the live keys of db (before) and other (after), each read
// with one parallel scan. Two keys with the same latest revision, create
// revision and version are unchanged when their values are equal too
// (compared byte for byte, so files of different clusters compare
// correctly). p parses keys (no prefixes: those detected in either file).
func (db *DB) Diff(ctx context.Context, other *DB, p keyspace.Parser) (*DiffReport, error) {
	side := func(d *DB) (*keyTable, DiffSide, error) {
		m, err := d.Meta()
		if err != nil {
			return nil, DiffSide{}, err
		}
		t, err := d.keyTable(ctx, tableOptions{})
		if err != nil {
			return nil, DiffSide{}, err
		}
		s := DiffSide{Path: d.path, Revision: max(t.lastRevision, m.FinishedCompactRevision, m.ScheduledCompactRevision),
			CompactRevision: m.FinishedCompactRevision}
		for _, ks := range t.keys {
			if ks.live() {
				s.LiveKeys++
			}
		}
		return t, s, nil
	}
	ta, from, err := side(db)
	if err != nil {
		return nil, err
	}
	tb, to, err := side(other)
	if err != nil {
		return nil, err
	}
	if len(p.Prefixes) == 0 {
		all := &keyTable{keys: maps.Clone(ta.keys)}
		maps.Copy(all.keys, tb.keys)
		p = parserFor(p, all)
	}
	clusters, err := clustersOf(db, other)
	if err != nil {
		return nil, err
	}
	rep := &DiffReport{SchemaVersion: DiffReportSchemaVersion, From: from, To: to, DifferentClusters: clusters > 1,
		RevisionsBetween: to.Revision - from.Revision, Rows: []DiffRow{}, Changes: []DiffChange{}}
	rows := map[DiffRow]*DiffRow{}
	keys := map[string]bool{}
	for k, s := range ta.keys {
		if s.live() {
			keys[k] = true
		}
	}
	for k, s := range tb.keys {
		if s.live() {
			keys[k] = true
		}
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		k := p.Parse(key)
		id := DiffRow{Class: k.Class, Prefix: k.Prefix, Group: k.Group, Resource: k.Resource, Path: k.Path}
		r := rows[id]
		if r == nil {
			r = &DiffRow{}
			*r = id
			rows[id] = r
		}
		a, b := ta.keys[key], tb.keys[key]
		aLive, bLive := a != nil && a.live(), b != nil && b.live()
		ch := DiffChange{Key: key}
		if aLive {
			r.LiveEntryBytesBefore += a.last.bytes
			r.LiveValueBytesBefore += a.last.valueBytes
			ch.ModRevisionBefore = a.last.rev.Main
		}
		if bLive {
			r.LiveEntryBytesAfter += b.last.bytes
			r.LiveValueBytesAfter += b.last.valueBytes
			ch.ModRevisionAfter = b.last.rev.Main
		}
		switch {
		case !aLive:
			r.Added++
			ch.Change = "added"
		case !bLive:
			r.Deleted++
			ch.Change = "deleted"
		default:
			same, err := sameEntry(db, other, a.last, b.last)
			if err != nil {
				return nil, err
			}
			if same {
				r.Unchanged++
				continue
			}
			r.Modified++
			ch.Change = "modified"
		}
		rep.Changes = append(rep.Changes, ch)
	}
	for _, r := range rows {
		rep.Total.add(r)
		if r.Added+r.Modified+r.Deleted > 0 {
			rep.Rows = append(rep.Rows, *r)
		}
	}
	slices.SortFunc(rep.Rows, func(a, b DiffRow) int {
		if c := cmp.Compare(b.Added+b.Modified+b.Deleted, a.Added+a.Modified+a.Deleted); c != 0 {
			return c
		}
		return compareLabels(a.Class, a.Prefix, a.Group, a.Resource, a.Path, b.Class, b.Prefix, b.Group, b.Resource, b.Path)
	})
	return rep, nil
}

// clustersOf counts the clusters dbs belong to by their members buckets
// (assignClusters).
func clustersOf(dbs ...*DB) (int, error) {
	ms := make([]MemberState, len(dbs))
	for i, db := range dbs {
		ci, err := db.ClusterInfo()
		if err != nil {
			return 0, err
		}
		for _, m := range ci.Members {
			ms[i].MemberIDs = append(ms[i].MemberIDs, m.ID)
		}
		ms[i].RemovedMemberIDs = ci.RemovedMembers
	}
	return assignClusters(ms), nil
}

// sameEntry reports whether two latest entries hold the same revision,
// version and value.
func sameEntry(da, db *DB, a, b entryInfo) (bool, error) {
	if a.rev != b.rev || a.createRevision != b.createRevision || a.version != b.version || a.valueBytes != b.valueBytes {
		return false, nil
	}
	ea, _, err := da.entryAt(a.rev.Revision)
	if err != nil {
		return false, err
	}
	eb, _, err := db.entryAt(b.rev.Revision)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ea.KV.Value, eb.KV.Value) && bytes.Equal(ea.KV.Key, eb.KV.Key), nil
}
