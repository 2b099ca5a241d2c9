package snapshot

import (
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// Status summarises an etcd database file. JSON field names are a contract
// other tools read.
type Status struct {
	Path string `json:"path"`
	// SizeBytes is the file size, snapshot trailer included.
	SizeBytes int64 `json:"sizeBytes"`
	// InUseBytes is the bbolt high-water mark (pages ever allocated times
	// the page size) minus FreeBytes, as etcd's dbSizeInUse and
	// etcd_mvcc_db_total_size_in_use_in_bytes count it
	// (server/storage/backend/backend.go: tx.Size() - FreePageN*pageSize).
	// A member's file may be longer than the high-water mark: bbolt grows
	// it in steps of up to 16 MiB.
	InUseBytes int64 `json:"inUseBytes"`
	// FreeBytes is the free pages times the page size: what a
	// defragmentation gives back.
	FreeBytes int64 `json:"freeBytes"`
	PageSize  int   `json:"pageSize"`
	// FragmentationPercent is FreeBytes as a percentage of SizeBytes.
	FragmentationPercent float64 `json:"fragmentationPercent"`
	// StorageVersion is meta's storageVersion, or the detected "3.5" or
	// "3.4-or-older" (Meta.DetectedVersion).
	StorageVersion string `json:"storageVersion"`
	// Revision is the store's current revision as etcd computes it on
	// start: the largest of the last entry's main revision and the finished
	// and scheduled compact revisions (server/storage/mvcc/kvstore.go restore).
	Revision int64 `json:"revision"`
	// CompactRevision is the finished compact revision; reads below it fail.
	CompactRevision int64 `json:"compactRevision"`
	// ScheduledCompactRevision above CompactRevision means an interrupted
	// compaction.
	ScheduledCompactRevision int64  `json:"scheduledCompactRevision"`
	ConsistentIndex          uint64 `json:"consistentIndex"`
	Term                     uint64 `json:"term"`
	// LiveKeys counts keys whose latest entry is not a tombstone.
	LiveKeys int64 `json:"liveKeys"`
	// Revisions counts key bucket entries; Tombstones the delete entries.
	Revisions  int64 `json:"revisions"`
	Tombstones int64 `json:"tombstones"`
	// Leases counts entries of the lease bucket.
	Leases          int     `json:"leases"`
	SnapshotTrailer Trailer `json:"snapshotTrailer"`
}

// Status scans the file and summarises it. It reads the whole key bucket
// (see Usage) and, when the file may carry a snapshot trailer, the whole
// file once more to verify it.
func (db *DB) Status(ctx context.Context) (*Status, error) {
	u, err := db.Usage(ctx, keyspace.Parser{})
	if err != nil {
		return nil, err
	}
	return db.StatusFrom(u)
}

// StatusFrom summarises the file reusing a Usage already computed from it,
// so that a caller needing both scans once.
func (db *DB) StatusFrom(u *Usage) (*Status, error) {
	m, err := db.Meta()
	if err != nil {
		return nil, err
	}
	s := &Status{
		Path:                     db.path,
		SizeBytes:                db.size,
		StorageVersion:           m.DetectedVersion(),
		Revision:                 max(u.LastRevision, m.FinishedCompactRevision, m.ScheduledCompactRevision),
		CompactRevision:          m.FinishedCompactRevision,
		ScheduledCompactRevision: m.ScheduledCompactRevision,
		ConsistentIndex:          m.ConsistentIndex,
		Term:                     m.Term,
		LiveKeys:                 u.Total.Objects,
		Revisions:                u.Total.Revisions,
		Tombstones:               u.Total.Tombstones,
	}
	ps, err := db.PageStats()
	if err != nil {
		return nil, err
	}
	s.PageSize = ps.PageSize
	s.FreeBytes = ps.FreePages * int64(ps.PageSize)
	s.InUseBytes = (ps.HighWaterPages - ps.FreePages) * int64(ps.PageSize)
	err = db.view("count leases", func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketLease); b != nil {
			s.Leases = b.Stats().KeyN
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.SizeBytes > 0 {
		s.FragmentationPercent = 100 * float64(s.FreeBytes) / float64(s.SizeBytes)
	}
	if s.SnapshotTrailer, err = db.VerifyTrailer(); err != nil {
		return nil, err
	}
	return s, nil
}
