package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// MembersSchemaVersion versions the JSON of Members.
const MembersSchemaVersion = 1

// MemberHash is one member's state and hash in Members.
type MemberHash struct {
	Name     string `json:"name"`
	MemberID string `json:"memberID"`
	Endpoint string `json:"endpoint"`
	// Error is why the member did not answer Status or HashKV; the
	// figures it did not give are then 0.
	Error string `json:"error,omitempty"`
	// Version, Revision, RaftIndex, RaftTerm and IsLeader are its
	// Status's (MemberStatus).
	Version   string `json:"version,omitempty"`
	Revision  int64  `json:"revision"`
	RaftIndex uint64 `json:"raftIndex"`
	RaftTerm  uint64 `json:"raftTerm"`
	IsLeader  bool   `json:"isLeader"`
	// RevisionsBehind and IndexBehind are how far it trails the newest
	// member that answered: the highest Revision minus its own, the
	// highest RaftIndex minus its own.
	RevisionsBehind int64  `json:"revisionsBehind"`
	IndexBehind     uint64 `json:"indexBehind"`
	// Hash is its HashKV at Members.CommonRevision (0 when none), and
	// CompactRevision the compact revision that hash left out entries
	// at or below (the HashKV response's).
	Hash            uint32 `json:"hash"`
	CompactRevision int64  `json:"compactRevision"`
	// Agrees is set for the members whose Hash is the majority's.
	Agrees bool `json:"agrees"`
}

// Members compares the members of a running cluster as
// snapshot.CompareMembers compares their files, by the same rules for the
// common revision, the majority and whether the hashes agree; it names no
// member to restore from (a running cluster is not restored from a live
// member: save a snapshot of each and compare the files).
type Members struct {
	SchemaVersion int    `json:"schemaVersion"`
	Source        string `json:"source"`
	// ReadAtRevision and CompactRevision are Status's.
	ReadAtRevision  int64 `json:"readAtRevision"`
	CompactRevision int64 `json:"compactRevision"`
	// CommonRevision is the revision every member was hashed at: the
	// lowest current revision among the members that answered, 0 when
	// it is below the compact revision or none answered.
	CommonRevision int64 `json:"commonRevision"`
	// HashesAgree is set when every member answered and gave one hash at
	// CommonRevision; Majority when more than half of all members gave
	// one hash.
	HashesAgree bool `json:"hashesAgree"`
	Majority    bool `json:"majority"`
	// Members holds every member, sorted by name then ID (Status).
	Members []MemberHash `json:"members"`
}

// ReadMembers reads every member's Status (ReadStatus, each bounded by
// timeout, 0: ctx alone), then asks each member that answered for HashKV
// at the common revision, bounded by ctx alone: HashKV reads every entry
// of the member's key space up to the revision, and costs a member what a
// full read of its db does, and etcd serves it only to the root role. A
// member that does not answer gets its error in MemberHash.Error;
// ReadStatus's errors, a HashKV refused for permission, and ctx's, are
// returned.
func ReadMembers(ctx context.Context, c Client, endpoints []string, timeout time.Duration) (*Members, error) {
	st, err := ReadStatus(ctx, c, endpoints, timeout)
	if err != nil {
		return nil, err
	}
	ms := &Members{SchemaVersion: MembersSchemaVersion, Source: SourceLive, ReadAtRevision: st.ReadAtRevision,
		CompactRevision: st.CompactRevision, Members: []MemberHash{}}
	newestRev, newestIndex, common := int64(0), uint64(0), int64(-1)
	for _, s := range st.Members {
		ms.Members = append(ms.Members, MemberHash{Name: s.Name, MemberID: s.MemberID, Endpoint: s.Endpoint, Error: s.Error,
			Version: s.Version, Revision: s.Revision, RaftIndex: s.RaftIndex, RaftTerm: s.RaftTerm, IsLeader: s.IsLeader})
		if s.Error != "" {
			continue
		}
		newestRev, newestIndex = max(newestRev, s.Revision), max(newestIndex, s.RaftIndex)
		if common < 0 || s.Revision < common {
			common = s.Revision
		}
	}
	if common >= st.CompactRevision && common > 0 {
		ms.CommonRevision = common
	}
	answered := 0
	for i := range ms.Members {
		m := &ms.Members[i]
		if m.Error != "" {
			continue
		}
		m.RevisionsBehind, m.IndexBehind = newestRev-m.Revision, newestIndex-m.RaftIndex
		if ms.CommonRevision == 0 {
			continue
		}
		h, err := c.HashKV(ctx, m.Endpoint, ms.CommonRevision)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, fmt.Errorf("hashkv of %s: %w", m.Endpoint, ctx.Err())
			case errors.Is(err, rpctypes.ErrPermissionDenied):
				return nil, fmt.Errorf("hashkv of %s: %w: etcd serves HashKV only to a user with the root role", m.Endpoint, err)
			}
			m.Error = fmt.Sprintf("hashkv at revision %d: %v", ms.CommonRevision, err)
			continue
		}
		m.Hash, m.CompactRevision = h.Hash, h.CompactRevision
		answered++
	}
	// Group by hash, as snapshot.CompareMembers does; the largest group
	// agrees when it holds more than half of all members.
	count := map[uint32]int{}
	for _, m := range ms.Members {
		if m.Error == "" && ms.CommonRevision > 0 {
			count[m.Hash]++
		}
	}
	var winner uint32
	for _, h := range slices.Sorted(maps.Keys(count)) {
		if count[h] > count[winner] || count[winner] == 0 {
			winner = h
		}
	}
	ms.Majority = 2*count[winner] > len(ms.Members)
	for i := range ms.Members {
		m := &ms.Members[i]
		m.Agrees = ms.Majority && m.Error == "" && m.Hash == winner
	}
	ms.HashesAgree = len(count) == 1 && answered == len(ms.Members)
	return ms, nil
}
