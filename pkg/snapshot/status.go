package snapshot

import (
	"context"
	"sync"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// StatusSchemaVersion versions the JSON of Status.
const StatusSchemaVersion = 1

// Status summarises an etcd database file. JSON field names are a contract
// other tools read.
type Status struct {
	// SchemaVersion is StatusSchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// Path is the file read (a data directory's member/snap/db).
	Path string `json:"path"`
	// SizeBytes is the file size, snapshot trailer included.
	SizeBytes int64 `json:"sizeBytes"`
	// DBSizeBytes is bbolt's high-water mark (pages ever allocated) times
	// the page size: what etcd reports as dbSize in `etcdctl endpoint
	// status` and what `etcdutl snapshot status` prints as total size
	// (tx.Size()). A member's file may be longer: bbolt grows it in steps.
	DBSizeBytes int64 `json:"dbSizeBytes"`
	// InUseBytes is DBSizeBytes minus FreeBytes, as etcd's dbSizeInUse and
	// etcd_mvcc_db_total_size_in_use_in_bytes count it
	// (server/storage/backend/backend.go: tx.Size() - FreePageN*pageSize).
	InUseBytes int64 `json:"inUseBytes"`
	// FreeBytes is the free pages times the page size: what a
	// defragmentation gives back, on top of what a compaction frees.
	FreeBytes int64 `json:"freeBytes"`
	// PageSize is bbolt's page size in bytes, from the meta page.
	PageSize int `json:"pageSize"`
	// FragmentationPercent is FreeBytes as a percentage of DBSizeBytes,
	// i.e. 100·(dbSize − dbSizeInUse)/dbSize, the ratio OpenShift's defrag
	// controller compares with 45 %.
	FragmentationPercent float64 `json:"fragmentationPercent"`
	// StorageVersion is meta's storageVersion, or the detected "3.5" or
	// "3.4-or-older" (Meta.DetectedVersion).
	StorageVersion string `json:"storageVersion"`
	// Revision is the store's current revision as etcd computes it on
	// start: the largest of the last entry's main revision and the finished
	// and scheduled compact revisions (server/storage/mvcc/kvstore.go restore).
	Revision int64 `json:"revision"`
	// LastEntryRevision is the main revision of the key bucket's last entry,
	// what `etcdutl snapshot status` prints as revision.
	LastEntryRevision int64 `json:"lastEntryRevision"`
	// CompactRevision is the finished compact revision; reads below it fail.
	CompactRevision int64 `json:"compactRevision"`
	// ScheduledCompactRevision above CompactRevision means an interrupted
	// compaction, which etcd redoes on start.
	ScheduledCompactRevision int64 `json:"scheduledCompactRevision"`
	// ConsistentIndex is meta's consistent_index: the last applied raft index.
	ConsistentIndex uint64 `json:"consistentIndex"`
	// Term is meta's raft term (etcd 3.5+; 0 before).
	Term uint64 `json:"term"`
	// LiveKeys counts keys whose latest entry is not a tombstone (what
	// etcdutl 3.6+ prints as total keys).
	LiveKeys int64 `json:"liveKeys"`
	// Revisions counts key bucket entries; Tombstones the delete entries.
	Revisions int64 `json:"revisions"`
	// Tombstones counts delete entries.
	Tombstones int64 `json:"tombstones"`
	// Leases counts entries of the lease bucket.
	Leases int64 `json:"leases"`
	// Hash is the CRC-32C `etcdutl snapshot status` prints (in hex in its
	// table, in decimal in its JSON).
	Hash uint32 `json:"hash"`
	// SnapshotTrailer is valid, invalid or absent (VerifyTrailer).
	SnapshotTrailer Trailer `json:"snapshotTrailer"`
	// Check is the bbolt consistency check.
	Check *Check `json:"check"`
}

// Status reads the whole file and summarises it: one parallel scan of the
// key bucket (hashing every entry), the consistency check and the snapshot
// trailer's SHA-256 run concurrently with it. It returns the Usage of the
// same scan too, parsed with p. Errors are those of Open's reads; a failed
// consistency check is reported in Status.Check, not as an error.
func (db *DB) Status(ctx context.Context, p keyspace.Parser) (*Status, *Usage, error) {
	var (
		wg       sync.WaitGroup
		check    *Check
		checkErr error
		trailer  Trailer
		trErr    error
	)
	wg.Add(2)
	go func() { defer wg.Done(); check, checkErr = db.check(ctx) }()
	go func() { defer wg.Done(); trailer, trErr = db.verifyTrailer(ctx) }()
	t, err := db.keyTable(ctx, tableOptions{hash: true})
	wg.Wait()
	if err != nil {
		return nil, nil, err
	}
	if checkErr != nil {
		return nil, nil, checkErr
	}
	if trErr != nil {
		return nil, nil, trErr
	}
	m, err := db.Meta()
	if err != nil {
		return nil, nil, err
	}
	var hash uint32
	if err := db.guard("hash the buckets", func() error {
		var err error
		hash, err = db.etcdutlHash(t.hash)
		return err
	}); err != nil {
		return nil, nil, err
	}
	var leases int64
	if err := db.guard("count leases", func() error {
		return db.forEach(bucketLease, func(_, _ []byte) error { leases++; return nil })
	}); err != nil {
		return nil, nil, err
	}
	u := usageFrom(t, p)
	ps := int64(db.meta.pageSize)
	s := &Status{
		SchemaVersion:            StatusSchemaVersion,
		Path:                     db.path,
		SizeBytes:                db.size,
		DBSizeBytes:              int64(db.meta.highWater) * ps,
		FreeBytes:                check.FreePages * ps,
		PageSize:                 db.meta.pageSize,
		StorageVersion:           m.DetectedVersion(),
		Revision:                 max(t.lastRevision, m.FinishedCompactRevision, m.ScheduledCompactRevision),
		LastEntryRevision:        t.lastRevision,
		CompactRevision:          m.FinishedCompactRevision,
		ScheduledCompactRevision: m.ScheduledCompactRevision,
		ConsistentIndex:          m.ConsistentIndex,
		Term:                     m.Term,
		LiveKeys:                 u.Total.Objects,
		Revisions:                u.Total.Revisions,
		Tombstones:               u.Total.Tombstones,
		Leases:                   leases,
		Hash:                     hash,
		SnapshotTrailer:          trailer,
		Check:                    check,
	}
	s.InUseBytes = s.DBSizeBytes - s.FreeBytes
	if s.DBSizeBytes > 0 {
		s.FragmentationPercent = 100 * float64(s.FreeBytes) / float64(s.DBSizeBytes)
	}
	return s, u, nil
}
