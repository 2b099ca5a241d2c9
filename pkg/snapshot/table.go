package snapshot

import (
	"context"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// entryInfo is what the aggregations keep of one entry.
type entryInfo struct {
	rev            revision.BucketKey
	bytes          int64 // bucket key + stored value
	valueBytes     int64 // the KeyValue's value field
	createRevision int64
	version        int64
	lease          int64
}

func infoOf(e *Entry) entryInfo {
	return entryInfo{rev: e.Key, bytes: e.Bytes, valueBytes: int64(len(e.KV.Value)),
		createRevision: e.KV.CreateRevision, version: e.KV.Version, lease: e.KV.Lease}
}

// keyStat aggregates every entry of one key.
type keyStat struct {
	revisions  int64
	tombstones int64
	bytes      int64
	last       entryInfo
	// at is set when the scan has a reference revision: the entries at or
	// below it.
	at *atStat
}

// atStat aggregates a key's entries whose main revision is <= the scan's
// reference revision.
type atStat struct {
	revisions  int64
	tombstones int64
	bytes      int64
	last       entryInfo
}

func (s *keyStat) live() bool { return !s.last.rev.Tombstone }

// merge folds in the stats of the same key from a later range.
func (s *keyStat) merge(later *keyStat) {
	s.revisions += later.revisions
	s.tombstones += later.tombstones
	s.bytes += later.bytes
	s.last = later.last
	if later.at != nil {
		if s.at == nil {
			s.at = later.at
		} else {
			s.at.revisions += later.at.revisions
			s.at.tombstones += later.at.tombstones
			s.at.bytes += later.at.bytes
			s.at.last = later.at.last
		}
	}
}

// keyTable is the per-key aggregation of a whole scan. Memory is one
// keyStat (about 150 bytes) plus the key per distinct key, however many
// revisions each has.
type keyTable struct {
	keys map[string]*keyStat
	// lastRevision is the main revision of the newest entry.
	lastRevision int64
	// hash is the CRC-32C of the key bucket's entries, when asked for.
	hash crcPart
}

// tableOptions select the optional parts of a table scan.
type tableOptions struct {
	// at, when positive, makes the scan also aggregate the entries at or
	// below this main revision (keyStat.at).
	at int64
	// hash makes the scan hash every key and value (keyTable.hash).
	hash bool
	// keep, when set, limits the table to the keys it accepts.
	keep func(key []byte) bool
}

// keyTable scans the key bucket with every worker and merges the per-key
// aggregations of their ranges, oldest first.
func (db *DB) keyTable(ctx context.Context, o tableOptions) (*keyTable, error) {
	n := db.workers()
	parts := make([]*keyTable, n)
	for i := range parts {
		parts[i] = &keyTable{keys: map[string]*keyStat{}}
	}
	err := db.scan(ctx, n, func(w int, e *Entry, k, v []byte) error {
		t := parts[w]
		if o.hash {
			t.hash = t.hash.update(k).update(v)
		}
		t.lastRevision = e.Key.Main
		if o.keep != nil && !o.keep(e.KV.Key) {
			return nil
		}
		s := t.keys[string(e.KV.Key)]
		if s == nil {
			s = &keyStat{}
			t.keys[string(e.KV.Key)] = s
		}
		s.revisions++
		s.bytes += e.Bytes
		if e.Key.Tombstone {
			s.tombstones++
		}
		s.last = infoOf(e)
		if o.at > 0 && e.Key.Main <= o.at {
			if s.at == nil {
				s.at = &atStat{}
			}
			s.at.revisions++
			s.at.bytes += e.Bytes
			if e.Key.Tombstone {
				s.at.tombstones++
			}
			s.at.last = s.last
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t := parts[0]
	for _, p := range parts[1:] {
		if p.lastRevision > 0 {
			t.lastRevision = p.lastRevision
		}
		t.hash = t.hash.join(p.hash)
		if len(t.keys) < len(p.keys) {
			// Fold the smaller map into the larger one.
			for k, s := range t.keys {
				if later, ok := p.keys[k]; ok {
					s.merge(later)
					p.keys[k] = s
				} else {
					p.keys[k] = s
				}
			}
			t.keys = p.keys
			continue
		}
		for k, s := range p.keys {
			if earlier, ok := t.keys[k]; ok {
				earlier.merge(s)
			} else {
				t.keys[k] = s
			}
		}
	}
	return t, nil
}
