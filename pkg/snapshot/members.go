package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// HashKV returns the hash `etcdutl hashkv --rev rev` prints for the file
// (etcd's maintenance HashKV): the CRC-32C of the name "key", then of the
// bucket key and value of every key bucket entry up to rev, leaving out the
// entries at or below the compact revision that a compaction at rev would
// remove and a tombstone at exactly the compact revision
// (server/storage/mvcc/hash.go kvHasher.WriteKeyValue, key_index.go keep).
// rev 0 means the current revision. It also returns the compact revision.
// Errors: ErrCompacted below the compact revision, ErrFutureRevision above
// the current one, and those of the scan.
func (db *DB) HashKV(ctx context.Context, rev int64) (hash uint32, compactRev int64, err error) {
	m, err := db.Meta()
	if err != nil {
		return 0, 0, err
	}
	last, err := db.LastRevision(ctx)
	if err != nil {
		return 0, 0, err
	}
	compactRev = m.FinishedCompactRevision
	current := max(last, compactRev, m.ScheduledCompactRevision)
	switch {
	case rev == 0:
		rev = current
	case rev < compactRev:
		return 0, 0, fmt.Errorf("%s: %w: revision %d is below the compact revision %d", db.path, ErrCompacted, rev, compactRev)
	case rev > current:
		return 0, 0, fmt.Errorf("%s: %w: revision %d is above the current revision %d", db.path, ErrFutureRevision, rev, current)
	}
	// keep: per key, its newest revision at or below rev unless that is a
	// tombstone (keyIndex.keep skips a generation's tombstone).
	newest := map[string]revision.BucketKey{}
	err = db.scan(ctx, 1, func(_ int, e *Entry, _, _ []byte) error {
		if e.Key.Main <= rev {
			newest[string(e.KV.Key)] = e.Key
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	keep := map[revision.Revision]bool{}
	for _, bk := range newest {
		if !bk.Tombstone {
			keep[bk.Revision] = true
		}
	}
	h := crc32.Update(0, castagnoli, bucketKey)
	err = db.scan(ctx, 1, func(_ int, e *Entry, k, v []byte) error {
		r := e.Key
		switch {
		case r.Main > rev:
			return nil
		case r.Main <= compactRev && len(keep) > 0 && !keep[r.Revision]:
			return nil
		case r.Main == compactRev && r.Tombstone:
			return nil
		}
		h = crc32.Update(h, castagnoli, k)
		h = crc32.Update(h, castagnoli, v)
		return nil
	})
	return h, compactRev, err
}

// MemberState is one member's file in a MembersReport.
type MemberState struct {
	Path            string `json:"path"`
	Revision        int64  `json:"revision"`
	CompactRevision int64  `json:"compactRevision"`
	ConsistentIndex uint64 `json:"consistentIndex"`
	Term            uint64 `json:"term"`
	// Hash is HashKV at MembersReport.CommonRevision, 0 when there is
	// none.
	Hash uint32 `json:"hash"`
	// Agrees is set for the members whose Hash is the majority's.
	Agrees bool `json:"agrees"`
}

// DivergentKey is a key whose entries at the first divergent revision
// differ between members: per member (in MembersReport.Members order)
// the entry's revision and value CRC-32C, "-" where it has none.
type DivergentKey struct {
	Key     string   `json:"key"`
	Entries []string `json:"entries"`
}

// MembersReport compares the files of the members of one cluster.
type MembersReport struct {
	SchemaVersion int           `json:"schemaVersion"`
	Members       []MemberState `json:"members"`
	// CommonRevision is the highest revision every member can hash: the
	// lowest current revision, 0 when it is below some member's compact
	// revision (they share no readable revision).
	CommonRevision int64 `json:"commonRevision"`
	// HashesAgree is set when every member's hash at CommonRevision is
	// the same.
	HashesAgree bool `json:"hashesAgree"`
	// FirstDivergentRevision is the first revision above every compact
	// revision whose entries differ between members (0 when none do), and
	// DivergentKeys the keys written there that differ.
	FirstDivergentRevision int64          `json:"firstDivergentRevision"`
	DivergentKeys          []DivergentKey `json:"divergentKeys"`
	// RestoreFrom is the path of the member to restore from and Rule how
	// it was chosen.
	RestoreFrom string `json:"restoreFrom"`
	Rule        string `json:"rule"`
}

// MembersReportSchemaVersion versions the JSON of MembersReport.
const MembersReportSchemaVersion = 1

// restoreRule is how CompareMembers picks the member to restore from.
const restoreRule = "among the members whose hash at the common revision is the most common (ties: the group holding the highest consistent index), " +
	"the one with the highest consistent index (then revision, then path): its data agrees with the majority and it has applied the most of the raft log"

// CompareMembers reads the files of N members of one cluster: their
// revisions, compact revisions, consistent indexes and terms, HashKV at
// the common revision, the first revision where their entries diverge and
// the keys that differ there, and which member to restore from (Rule).
// Errors are those of the reads.
func CompareMembers(ctx context.Context, dbs []*DB) (*MembersReport, error) {
	rep := &MembersReport{SchemaVersion: MembersReportSchemaVersion, Rule: restoreRule, DivergentKeys: []DivergentKey{}}
	maxCompact, common := int64(0), int64(-1)
	for _, db := range dbs {
		m, err := db.Meta()
		if err != nil {
			return nil, err
		}
		last, err := db.LastRevision(ctx)
		if err != nil {
			return nil, err
		}
		st := MemberState{Path: db.path, Revision: max(last, m.FinishedCompactRevision, m.ScheduledCompactRevision),
			CompactRevision: m.FinishedCompactRevision, ConsistentIndex: m.ConsistentIndex, Term: m.Term}
		rep.Members = append(rep.Members, st)
		maxCompact = max(maxCompact, st.CompactRevision)
		if common < 0 || st.Revision < common {
			common = st.Revision
		}
	}
	if common >= maxCompact {
		rep.CommonRevision = common
		for i, db := range dbs {
			h, _, err := db.HashKV(ctx, common)
			if err != nil {
				return nil, err
			}
			rep.Members[i].Hash = h
		}
	}
	// Group by hash; the largest group agrees.
	count := map[uint32]int{}
	best := map[uint32]int{} // hash -> index of its best member
	better := func(a, b MemberState) bool {
		return cmp.Or(cmp.Compare(a.ConsistentIndex, b.ConsistentIndex), cmp.Compare(a.Revision, b.Revision), cmp.Compare(b.Path, a.Path)) > 0
	}
	for i, m := range rep.Members {
		count[m.Hash]++
		if j, ok := best[m.Hash]; !ok || better(m, rep.Members[j]) {
			best[m.Hash] = i
		}
	}
	var winner uint32
	first := true
	for h, n := range count {
		if first || n > count[winner] || (n == count[winner] && better(rep.Members[best[h]], rep.Members[best[winner]])) {
			winner, first = h, false
		}
	}
	for i := range rep.Members {
		rep.Members[i].Agrees = rep.Members[i].Hash == winner
	}
	rep.HashesAgree = len(count) == 1 && rep.CommonRevision > 0
	if len(rep.Members) > 0 {
		rep.RestoreFrom = rep.Members[best[winner]].Path
	}
	if rep.CommonRevision == 0 {
		// No revision to compare at: only the consistent index is left.
		for i := range rep.Members {
			rep.Members[i].Agrees = false
		}
		rep.Rule = "no common revision to hash at (a member's current revision is below another's compact revision): the member with the highest consistent index (then revision, then path)"
	}
	if rep.HashesAgree || rep.CommonRevision == 0 {
		return rep, nil
	}
	return rep, firstDivergence(ctx, dbs, maxCompact, common, rep)
}

// firstDivergence finds the first revision in (from, to] whose entries
// differ between the members, and the keys that differ there.
func firstDivergence(ctx context.Context, dbs []*DB, from, to int64, rep *MembersReport) error {
	// One CRC-32C of the entries of every revision, per member.
	digests := make([]map[int64]uint32, len(dbs))
	for i, db := range dbs {
		d := map[int64]uint32{}
		err := db.scan(ctx, 1, func(_ int, e *Entry, k, v []byte) error {
			if e.Key.Main > from && e.Key.Main <= to {
				d[e.Key.Main] = crc32.Update(crc32.Update(d[e.Key.Main], castagnoli, k), castagnoli, v)
			}
			return nil
		})
		if err != nil {
			return err
		}
		digests[i] = d
	}
	for rev := from + 1; rev <= to; rev++ {
		same := true
		for i := 1; i < len(dbs); i++ {
			a, aok := digests[0][rev]
			b, bok := digests[i][rev]
			if a != b || aok != bok {
				same = false
				break
			}
		}
		if same {
			continue
		}
		rep.FirstDivergentRevision = rev
		break
	}
	if rep.FirstDivergentRevision == 0 {
		return nil
	}
	at := rep.FirstDivergentRevision
	entries := map[string][]string{}
	for i, db := range dbs {
		err := db.scan(ctx, 1, func(_ int, e *Entry, _, _ []byte) error {
			if e.Key.Main != at {
				return nil
			}
			key := string(e.KV.Key)
			if entries[key] == nil {
				entries[key] = slices.Repeat([]string{"-"}, len(dbs))
			}
			what := fmt.Sprintf("%d/%d value crc %08x", e.Key.Main, e.Key.Sub, crc32.Checksum(e.KV.Value, castagnoli))
			if e.Key.Tombstone {
				what = fmt.Sprintf("%d/%d delete", e.Key.Main, e.Key.Sub)
			}
			entries[key][i] = what
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, key := range slices.Sorted(maps.Keys(entries)) {
		e := entries[key]
		if slices.ContainsFunc(e[1:], func(s string) bool { return s != e[0] }) {
			rep.DivergentKeys = append(rep.DivergentKeys, DivergentKey{Key: key, Entries: e})
		}
	}
	return nil
}
