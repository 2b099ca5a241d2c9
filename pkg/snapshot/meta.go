package snapshot

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

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
	ConsistentIndex uint64 `json:"consistentIndex"`
	// Term is the raft term of that entry; HasTerm is false before etcd 3.5.
	Term uint64 `json:"term"`
	// HasTerm says whether meta holds a term (etcd 3.5+).
	HasTerm bool `json:"hasTerm"`
	// ConfState is the raft membership as the bucket holds it, JSON with
	// decimal member IDs (etcd 3.5+), or "".
	ConfState string `json:"confState,omitempty"`
	// Voters and Learners are ConfState's member IDs in hex, as etcdctl
	// prints member IDs; empty when ConfState is absent or not JSON.
	Voters   []string `json:"voters,omitempty"`
	Learners []string `json:"learners,omitempty"`
	// StorageVersion is the schema version "X.Y.0" written by etcd 3.6+, or "".
	StorageVersion string `json:"storageVersion,omitempty"`
	// FinishedCompactRevision is the main revision of the last completed
	// compaction, 0 if none.
	FinishedCompactRevision int64 `json:"finishedCompactRevision"`
	// ScheduledCompactRevision is the main revision of the last compaction
	// started; above FinishedCompactRevision it means a compaction was
	// interrupted and etcd redoes it on start (server/storage/mvcc/kvstore.go
	// restore).
	ScheduledCompactRevision int64 `json:"scheduledCompactRevision"`
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

// DecodeMeta decodes the entries of etcd's meta bucket, given as a lookup
// function. Malformed values (a consistent_index or term that is not 8
// bytes, a compact revision that is not a 17-byte revision) are errors
// naming the key; unknown keys are ignored.
func DecodeMeta(get func(key []byte) []byte) (Meta, error) {
	var m Meta
	u64 := func(key []byte) (uint64, bool, error) {
		v := get(key)
		if v == nil {
			return 0, false, nil
		}
		if len(v) != 8 {
			return 0, false, fmt.Errorf("meta %s is %d bytes, want 8", key, len(v))
		}
		return binary.BigEndian.Uint64(v), true, nil
	}
	rev := func(key []byte) (int64, error) {
		v := get(key)
		if v == nil {
			return 0, nil
		}
		r, err := revision.DecodeRevision(v)
		if err != nil {
			return 0, fmt.Errorf("meta %s: %w", key, err)
		}
		return r.Main, nil
	}
	var err error
	if m.ConsistentIndex, _, err = u64(metaConsistentIndex); err != nil {
		return m, err
	}
	if m.Term, m.HasTerm, err = u64(metaTerm); err != nil {
		return m, err
	}
	m.ConfState = string(get(metaConfState))
	if m.ConfState != "" {
		var cs struct {
			Voters   []uint64 `json:"voters"`
			Learners []uint64 `json:"learners"`
		}
		if json.Unmarshal([]byte(m.ConfState), &cs) == nil {
			for _, id := range cs.Voters {
				m.Voters = append(m.Voters, strconv.FormatUint(id, 16))
			}
			for _, id := range cs.Learners {
				m.Learners = append(m.Learners, strconv.FormatUint(id, 16))
			}
		}
	}
	m.StorageVersion = string(get(metaStorageVersion))
	if m.FinishedCompactRevision, err = rev(metaFinishedCompact); err != nil {
		return m, err
	}
	m.ScheduledCompactRevision, err = rev(metaScheduledCompact)
	return m, err
}

// Meta reads the meta bucket; see DecodeMeta for the errors, which wrap
// ErrCorrupt and name the file.
func (db *DB) Meta() (Meta, error) {
	var m Meta
	err := db.guard("read the meta bucket", func() error {
		vals := map[string][]byte{}
		if err := db.forEach(bucketMeta, func(k, v []byte) error {
			vals[string(k)] = append([]byte(nil), v...)
			return nil
		}); err != nil {
			return err
		}
		var err error
		m, err = DecodeMeta(func(k []byte) []byte { return vals[string(k)] })
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return nil
	})
	return m, err
}
