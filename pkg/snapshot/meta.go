package snapshot

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// Keys of the meta bucket (server/storage/schema/bucket.go).
var (
	metaConsistentIndex  = []byte("consistent_index")
	metaTerm             = []byte("term")
	metaConfState        = []byte("confState")
	metaStorageVersion   = []byte("storageVersion")
	metaScheduledCompact = []byte("scheduledCompactRev")
	metaFinishedCompact  = []byte("finishedCompactRev")
)

// Meta is the content of etcd's meta bucket.
type Meta struct {
	// ConsistentIndex is the raft index of the last applied entry.
	ConsistentIndex uint64
	// Term is the raft term of that entry; HasTerm is false before etcd 3.5.
	Term    uint64
	HasTerm bool
	// ConfState is the raft membership as JSON (etcd 3.5+), or "".
	ConfState string
	// StorageVersion is the schema version "X.Y.0" written by etcd 3.6+, or "".
	StorageVersion string
	// FinishedCompactRevision is the main revision of the last completed
	// compaction, 0 if none.
	FinishedCompactRevision int64
	// ScheduledCompactRevision is the main revision of the last compaction
	// started; above FinishedCompactRevision it means a compaction was
	// interrupted and etcd redoes it on start (server/storage/mvcc/kvstore.go
	// restore).
	ScheduledCompactRevision int64
}

// DetectedVersion returns the storage version as etcd's
// schema.UnsafeDetectSchemaVersion decides it: storageVersion when present,
// otherwise "3.5" when a term is stored and "3.4-or-older" when not.
func (m Meta) DetectedVersion() string {
	switch {
	case m.StorageVersion != "":
		return m.StorageVersion
	case m.HasTerm:
		return "3.5"
	}
	return "3.4-or-older"
}

// Meta reads the meta bucket. Malformed values (a consistent_index that is
// not 8 bytes, a compact revision that is not a 17-byte revision) are
// errors naming the key.
func (db *DB) Meta() (Meta, error) {
	var m Meta
	err := db.view("read the meta bucket", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMeta)
		u64 := func(key []byte) (uint64, bool, error) {
			v := b.Get(key)
			if v == nil {
				return 0, false, nil
			}
			if len(v) != 8 {
				return 0, false, fmt.Errorf("%s: meta %s is %d bytes, want 8", db.path, key, len(v))
			}
			return binary.BigEndian.Uint64(v), true, nil
		}
		rev := func(key []byte) (int64, error) {
			v := b.Get(key)
			if v == nil {
				return 0, nil
			}
			r, err := revision.DecodeRevision(v)
			if err != nil {
				return 0, fmt.Errorf("%s: meta %s: %w", db.path, key, err)
			}
			return r.Main, nil
		}
		var err error
		if m.ConsistentIndex, _, err = u64(metaConsistentIndex); err != nil {
			return err
		}
		if m.Term, m.HasTerm, err = u64(metaTerm); err != nil {
			return err
		}
		m.ConfState = string(b.Get(metaConfState))
		m.StorageVersion = string(b.Get(metaStorageVersion))
		if m.FinishedCompactRevision, err = rev(metaFinishedCompact); err != nil {
			return err
		}
		m.ScheduledCompactRevision, err = rev(metaScheduledCompact)
		return err
	})
	return m, err
}
