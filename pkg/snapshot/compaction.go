package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/revision"
)

// CompactionRow is what a compaction would remove from one resource.
type CompactionRow struct {
	// Class, Prefix, Group, Resource and Path identify the resource (keyspace.Key).
	Class    keyspace.Class `json:"class"`
	Prefix   string         `json:"prefix,omitempty"`
	Group    string         `json:"group"`
	Resource string         `json:"resource,omitempty"`
	Path     string         `json:"path,omitempty"`
	// Revisions counts the entries now.
	Revisions int64 `json:"revisions"`
	// RemovedRevisions counts the entries the compaction deletes,
	// RemovedTombstones the tombstones among them, RemovedBytes their
	// stored bytes (bucket key plus KeyValue).
	RemovedRevisions  int64 `json:"removedRevisions"`
	RemovedTombstones int64 `json:"removedTombstones"`
	RemovedBytes      int64 `json:"removedBytes"`
	// KeysRemoved counts deleted keys that vanish from the key space
	// altogether: every entry of theirs goes.
	KeysRemoved int64 `json:"keysRemoved"`
}

func (r *CompactionRow) add(o *CompactionRow) {
	r.Revisions += o.Revisions
	r.RemovedRevisions += o.RemovedRevisions
	r.RemovedTombstones += o.RemovedTombstones
	r.RemovedBytes += o.RemovedBytes
	r.KeysRemoved += o.KeysRemoved
}

// CompactionReport says what compacting at a revision would remove and
// what a defragmentation afterwards would give back.
type CompactionReport struct {
	// SchemaVersion is CompactionReportSchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// Path is the file read.
	Path string `json:"path"`
	// At is the revision to compact at; CompactRevision and
	// CurrentRevision are the file's.
	At              int64 `json:"at"`
	CompactRevision int64 `json:"compactRevision"`
	CurrentRevision int64 `json:"currentRevision"`
	// Rows, per resource, sorted by RemovedBytes, largest first.
	Rows []CompactionRow `json:"rows"`
	// Total sums the rows.
	Total CompactionRow `json:"total"`
	// DBSizeBytes and InUseBytes are as in Status, now.
	DBSizeBytes int64 `json:"dbSizeBytes"`
	// InUseBytes is DBSizeBytes minus the free pages.
	InUseBytes int64 `json:"inUseBytes"`
	// EstimatedDBSizeAfterDefragBytes is the size a defragmentation after
	// the compaction would leave: every remaining entry of every bucket
	// packed as etcd's defrag writes them (server/storage/backend/
	// backend.go defragdb: bucket FillPercent 0.9, keys in order), with
	// bbolt's node split rule (at least two keys per page) and the branch
	// pages above them.
	EstimatedDBSizeAfterDefragBytes int64 `json:"estimatedDbSizeAfterDefragBytes"`
	// DefragReclaimBytes is DBSizeBytes minus the estimate: what the
	// compaction and a defragmentation give back together.
	DefragReclaimBytes int64 `json:"defragReclaimBytes"`
}

// CompactionReportSchemaVersion versions the JSON of CompactionReport.
const CompactionReportSchemaVersion = 1

// keptAt returns the entry a compaction at rev keeps of a key whose
// entries at or below rev are s.at (server/storage/mvcc/key_index.go
// doCompact): the newest of them, unless it is a tombstone below rev.
// A tombstone at exactly rev is kept (etcd 3.5.16+, 3.4.34+ and 3.6 keep
// it for hashing; older releases deleted it). ok is false when nothing is
// kept.
func keptAt(s *keyStat, rev int64) (entryInfo, bool) {
	if s.at == nil {
		return entryInfo{}, false
	}
	l := s.at.last
	if l.rev.Tombstone && l.rev.Main != rev {
		return entryInfo{}, false
	}
	return l, true
}

// Compaction works out what `etcdctl compact REV` would delete, per
// resource, and estimates the database size a defragmentation afterwards
// would leave. It scans the key bucket twice: once to find each key's
// entries at or below at, once to pack the entries that remain. Errors:
// ErrCompacted when at is not above the compact revision (etcd refuses
// that), ErrFutureRevision above the current revision.
func (db *DB) Compaction(ctx context.Context, at int64, p keyspace.Parser) (*CompactionReport, error) {
	return db.compaction(ctx, at, p, false)
}

// compaction is Compaction; atCompacted allows at to equal the compact
// revision (nothing left to remove: what a defragmentation alone leaves).
func (db *DB) compaction(ctx context.Context, at int64, p keyspace.Parser, atCompacted bool) (*CompactionReport, error) {
	m, err := db.Meta()
	if err != nil {
		return nil, err
	}
	t, err := db.keyTable(ctx, tableOptions{at: at})
	if err != nil {
		return nil, err
	}
	current := max(t.lastRevision, m.FinishedCompactRevision, m.ScheduledCompactRevision)
	switch {
	case at <= 0:
		return nil, fmt.Errorf("%s: compact revision %d must be positive", db.path, at)
	case at < m.FinishedCompactRevision || (at == m.FinishedCompactRevision && !atCompacted):
		return nil, fmt.Errorf("%s: %w: revision %d is not above the compact revision %d", db.path, ErrCompacted, at, m.FinishedCompactRevision)
	case at > current:
		return nil, fmt.Errorf("%s: %w: revision %d is above the current revision %d", db.path, ErrFutureRevision, at, current)
	}
	p = parserFor(p, t)
	rep := &CompactionReport{SchemaVersion: CompactionReportSchemaVersion, Path: db.path, At: at,
		CompactRevision: m.FinishedCompactRevision, CurrentRevision: current, Rows: []CompactionRow{}}
	rows := map[CompactionRow]*CompactionRow{}
	kept := map[string]revision.Revision{}
	for _, key := range slices.Sorted(maps.Keys(t.keys)) {
		s := t.keys[key]
		k := p.Parse(key)
		id := CompactionRow{Class: k.Class, Prefix: k.Prefix, Group: k.Group, Resource: k.Resource, Path: k.Path}
		r := rows[id]
		if r == nil {
			r = &CompactionRow{}
			*r = id
			rows[id] = r
		}
		r.Revisions += s.revisions
		if s.at == nil {
			continue
		}
		removed, removedBytes, removedTombs := s.at.revisions, s.at.bytes, s.at.tombstones
		if l, ok := keptAt(s, at); ok {
			removed--
			removedBytes -= l.bytes
			if l.rev.Tombstone {
				removedTombs--
			}
			kept[key] = l.rev.Revision
		}
		r.RemovedRevisions += removed
		r.RemovedBytes += removedBytes
		r.RemovedTombstones += removedTombs
		if removed == s.revisions {
			r.KeysRemoved++
		}
	}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, *r)
		rep.Total.add(r)
	}
	slices.SortFunc(rep.Rows, func(a, b CompactionRow) int {
		if c := cmp.Compare(b.RemovedBytes, a.RemovedBytes); c != 0 {
			return c
		}
		return compareLabels(a.Class, a.Prefix, a.Group, a.Resource, a.Path, b.Class, b.Prefix, b.Group, b.Resource, b.Path)
	})
	check, err := db.check(ctx)
	if err != nil {
		return nil, err
	}
	ps := int64(db.meta.pageSize)
	rep.DBSizeBytes = int64(db.meta.highWater) * ps
	rep.InUseBytes = rep.DBSizeBytes - check.FreePages*ps
	pages, err := db.defragPages(ctx, at, kept)
	if err != nil {
		return nil, err
	}
	rep.EstimatedDBSizeAfterDefragBytes = pages * ps
	rep.DefragReclaimBytes = rep.DBSizeBytes - rep.EstimatedDBSizeAfterDefragBytes
	return rep, nil
}

func compareLabels(ac keyspace.Class, a1, a2, a3, a4 string, bc keyspace.Class, b1, b2, b3, b4 string) int {
	for _, c := range [][2]string{{string(ac), string(bc)}, {a1, b1}, {a2, b2}, {a3, b3}, {a4, b4}} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// defragFill is the FillPercent etcd's defrag sets on every bucket it
// copies (server/storage/backend/backend.go defragdb).
const defragFill = 0.9

// packer simulates how bbolt lays out elements appended in key order:
// a node takes elements until it has at least two (bbolt's minKeysPerPage)
// and the next would push it past the fill threshold (node.splitIndex);
// each node is written as ceil(size / pageSize) pages.
type packer struct {
	pageSize, threshold int64
	nodeBytes           int64
	nodeKeys            int
	pages               int64
	// nodes and firstKeyBytes feed the branch level above.
	nodes, firstKeyBytes int64
}

func newPacker(pageSize int64) *packer {
	return &packer{pageSize: pageSize, threshold: int64(float64(pageSize) * defragFill)}
}

func (p *packer) add(keyLen, valueLen int) {
	el := int64(elemSize + keyLen + valueLen)
	if p.nodeKeys >= 2 && p.nodeBytes+el > p.threshold {
		p.flush()
	}
	if p.nodeKeys == 0 {
		p.nodeBytes = pageHeaderSize
		p.nodes++
		p.firstKeyBytes += int64(keyLen)
	}
	p.nodeBytes += el
	p.nodeKeys++
}

func (p *packer) flush() {
	if p.nodeKeys > 0 {
		p.pages += (p.nodeBytes + p.pageSize - 1) / p.pageSize
	}
	p.nodeBytes, p.nodeKeys = 0, 0
}

// total returns the leaf pages plus the branch pages above them, packing
// each level's separator keys (of their average length) the same way.
func (p *packer) total() int64 {
	p.flush()
	pages := p.pages
	n, keyBytes := p.nodes, p.firstKeyBytes
	for n > 1 {
		avg := elemSize + keyBytes/n
		perNode := max(2, (p.threshold-pageHeaderSize)/avg)
		nodes := (n + perNode - 1) / perNode
		pages += nodes * ((pageHeaderSize + min(perNode, n)*avg + p.pageSize - 1) / p.pageSize)
		keyBytes = keyBytes * nodes / n
		n = nodes
	}
	return pages
}

// defragPages estimates the pages of the file etcd's defrag would write
// after a compaction at `at` that keeps the entries in kept: two meta
// pages, the root bucket's page, every bucket but key as it is (small ones
// inline in the root page, as bbolt inlines buckets under a quarter page),
// and the key bucket's remaining entries, packed by a second parallel scan.
func (db *DB) defragPages(ctx context.Context, at int64, kept map[string]revision.Revision) (int64, error) {
	ps := int64(db.meta.pageSize)
	total := int64(3)
	err := db.guard("estimate the defragmented size", func() error {
		return db.pg.walk(mustRoot(db), false, newPageSet(db.meta.highWater), func(_ uint32, name, _ []byte) error {
			if string(name) == string(bucketKey) {
				return nil
			}
			pk := newPacker(ps)
			var size int64
			if err := db.forEach(name, func(k, v []byte) error {
				pk.add(len(k), len(v))
				size += int64(elemSize + len(k) + len(v))
				return nil
			}); err != nil {
				return err
			}
			if size+pageHeaderSize >= ps/4 {
				total += pk.total()
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	n := db.workers()
	packers := make([]*packer, n)
	for i := range packers {
		packers[i] = newPacker(ps)
	}
	var remaining atomic.Int64
	err = db.scan(ctx, n, func(w int, e *Entry, k, v []byte) error {
		if e.Key.Main <= at {
			if r, ok := kept[string(e.KV.Key)]; !ok || r != e.Key.Revision {
				return nil
			}
		}
		packers[w].add(len(k), len(v))
		remaining.Add(1)
		return nil
	})
	if err != nil {
		return 0, err
	}
	// The workers' leaves join under one branch level.
	joined := newPacker(ps)
	for _, pk := range packers {
		pk.flush()
		joined.pages += pk.pages
		joined.nodes += pk.nodes
		joined.firstKeyBytes += pk.firstKeyBytes
	}
	if remaining.Load() > 0 {
		total += joined.total()
	}
	return total, nil
}
