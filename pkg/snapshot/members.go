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

// MemberWAL is what a member's own WAL says (pkg/wal Report), given to
// CompareMembers for a data directory.
type MemberWAL struct {
	// NodeID and ClusterID are the WAL metadata's, in hex.
	NodeID    string `json:"nodeID"`
	ClusterID string `json:"clusterID"`
	// CommitIndex is the last HardState's commit index: the entries up to
	// it are committed, and etcd applies to its db the ones above the db's
	// consistent index when it starts.
	CommitIndex uint64 `json:"commitIndex"`
}

// MemberInput is one member's file for CompareMembers.
type MemberInput struct {
	// DB is the member's db, open.
	DB *DB
	// WAL is its WAL's state when the input is a data directory, else nil.
	WAL *MemberWAL
}

// MemberState is one member's file in a MembersReport.
type MemberState struct {
	Path            string `json:"path"`
	Revision        int64  `json:"revision"`
	CompactRevision int64  `json:"compactRevision"`
	ConsistentIndex uint64 `json:"consistentIndex"`
	Term            uint64 `json:"term"`
	// MemberIDs are the IDs of the members bucket, and RemovedMemberIDs
	// those of members_removed, in hex (server/storage/schema/membership.go).
	MemberIDs        []string `json:"memberIDs"`
	RemovedMemberIDs []string `json:"removedMemberIDs"`
	// WAL is the member's WAL state for a data directory, nil for a file;
	// ReplayEntries is then how many committed entries etcd applies to the
	// db when it starts (WAL.CommitIndex - ConsistentIndex, 0 when the db
	// is not behind).
	WAL           *MemberWAL `json:"wal,omitempty"`
	ReplayEntries uint64     `json:"replayEntries"`
	// Cluster numbers the cluster the member belongs to, 1 for the first
	// input's (see MembersReport.Clusters).
	Cluster int `json:"cluster"`
	// RevisionsBehind and IndexBehind are how far the member trails the
	// newest input: the highest Revision minus its own, the highest
	// ConsistentIndex minus its own.
	RevisionsBehind int64  `json:"revisionsBehind"`
	IndexBehind     uint64 `json:"indexBehind"`
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
	// Clusters counts the clusters the inputs belong to. Two inputs are of
	// one cluster when their WALs name the same cluster ID, or, when a WAL
	// is missing, when their members buckets share a member ID: etcd
	// derives a member ID from its peer URLs, the --initial-cluster-token
	// and, for a member added later, the time (server/etcdserver/api/
	// membership/member.go computeMemberID), and the cluster ID from the
	// first members' IDs, so a cluster restored with a new token shares no
	// ID with the old one. Above 1, nothing is compared for a restore.
	Clusters int `json:"clusters"`
	// CommonRevision is the highest revision every member can hash: the
	// lowest current revision, 0 when it is below some member's compact
	// revision (they share no readable revision).
	CommonRevision int64 `json:"commonRevision"`
	// HashesAgree is set when every member's hash at CommonRevision is
	// the same.
	HashesAgree bool `json:"hashesAgree"`
	// Majority is set when more than half of the members hold one hash.
	Majority bool `json:"majority"`
	// LastCommonRevision is the last revision at which every member
	// holds the same entries: CommonRevision when the hashes agree, the
	// revision before FirstDivergentRevision when they do not (0 when
	// unknown), and LastCommonHash the hash there when every member gives
	// the same one.
	LastCommonRevision int64  `json:"lastCommonRevision"`
	LastCommonHash     uint32 `json:"lastCommonHash"`
	// FirstDivergentRevision is the first revision above every compact
	// revision whose entries differ between members (0 when none do), and
	// DivergentKeys the keys written there that differ.
	FirstDivergentRevision int64          `json:"firstDivergentRevision"`
	DivergentKeys          []DivergentKey `json:"divergentKeys"`
	// RestoreFrom is the path of the member to restore from, empty when
	// the inputs do not decide it (different clusters, no majority), and
	// Rule how it was chosen or what decides instead.
	RestoreFrom string `json:"restoreFrom"`
	Rule        string `json:"rule"`
}

// MembersReportSchemaVersion versions the JSON of MembersReport.
const MembersReportSchemaVersion = 2

// restoreRule is how CompareMembers picks the member to restore from.
const restoreRule = "among the members holding the majority's hash at the common revision, the one with the highest consistent index " +
	"(then revision, then path): its data agrees with the majority and it has applied the most of the raft log"

// noMajorityRule says what decides when no hash has a majority.
const noMajorityRule = "no hash is held by more than half of the members, so the data cannot say which is right: " +
	"restore from the member that applied the most of the raft log (the highest consistent index, or a data directory's WAL commit index), " +
	"after `etcdinspect verify` passes on its file; the inputs' order never decides"

// differentClustersRule says why nothing is recommended across clusters.
const differentClustersRule = "the inputs belong to different clusters (no shared cluster ID or member ID): " +
	"their revisions and hashes are unrelated, and restoring one cluster's data into another loses the other's"

// CompareMembers reads the files of N members of one cluster: the
// clusters they belong to, their revisions, compact revisions, consistent
// indexes, terms and lag, HashKV at the common revision, the first
// revision where their entries diverge and the keys that differ there, and
// which member to restore from (Rule). Errors are those of the reads.
func CompareMembers(ctx context.Context, in []MemberInput) (*MembersReport, error) {
	rep := &MembersReport{SchemaVersion: MembersReportSchemaVersion, Rule: restoreRule, DivergentKeys: []DivergentKey{}}
	dbs := make([]*DB, len(in))
	maxCompact, common := int64(0), int64(-1)
	for i, mi := range in {
		db := mi.DB
		dbs[i] = db
		ci, err := db.ClusterInfo()
		if err != nil {
			return nil, err
		}
		m := ci.Meta
		last, err := db.LastRevision(ctx)
		if err != nil {
			return nil, err
		}
		st := MemberState{Path: db.path, Revision: max(last, m.FinishedCompactRevision, m.ScheduledCompactRevision),
			CompactRevision: m.FinishedCompactRevision, ConsistentIndex: m.ConsistentIndex, Term: m.Term,
			MemberIDs: []string{}, RemovedMemberIDs: ci.RemovedMembers, WAL: mi.WAL}
		for _, mm := range ci.Members {
			st.MemberIDs = append(st.MemberIDs, mm.ID)
		}
		slices.Sort(st.MemberIDs)
		if mi.WAL != nil && mi.WAL.CommitIndex > st.ConsistentIndex {
			st.ReplayEntries = mi.WAL.CommitIndex - st.ConsistentIndex
		}
		rep.Members = append(rep.Members, st)
		maxCompact = max(maxCompact, st.CompactRevision)
		if common < 0 || st.Revision < common {
			common = st.Revision
		}
	}
	rep.Clusters = assignClusters(rep.Members)
	newestRev, newestIndex := int64(0), uint64(0)
	for _, m := range rep.Members {
		newestRev, newestIndex = max(newestRev, m.Revision), max(newestIndex, m.ConsistentIndex)
	}
	for i := range rep.Members {
		rep.Members[i].RevisionsBehind = newestRev - rep.Members[i].Revision
		rep.Members[i].IndexBehind = newestIndex - rep.Members[i].ConsistentIndex
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
	for _, h := range slices.Sorted(maps.Keys(count)) {
		if count[h] > count[winner] || count[winner] == 0 {
			winner = h
		}
	}
	rep.Majority = 2*count[winner] > len(rep.Members) && rep.CommonRevision > 0 && rep.Clusters == 1
	for i := range rep.Members {
		rep.Members[i].Agrees = rep.Majority && rep.Members[i].Hash == winner
	}
	rep.HashesAgree = len(count) == 1 && rep.CommonRevision > 0
	switch {
	case rep.Clusters > 1:
		rep.Rule = differentClustersRule
	case rep.CommonRevision == 0:
		// No revision to compare at: only the consistent index is left.
		rep.Rule = "no common revision to hash at (a member's current revision is below another's compact revision): " + noMajorityRule
	case !rep.Majority:
		rep.Rule = noMajorityRule
	default:
		rep.RestoreFrom = rep.Members[best[winner]].Path
	}
	if rep.Clusters > 1 || rep.CommonRevision == 0 {
		return rep, nil
	}
	if rep.HashesAgree {
		rep.LastCommonRevision, rep.LastCommonHash = rep.CommonRevision, rep.Members[0].Hash
		return rep, nil
	}
	if err := firstDivergence(ctx, dbs, maxCompact, common, rep); err != nil {
		return nil, err
	}
	return rep, lastCommon(ctx, dbs, maxCompact, rep)
}

// assignClusters numbers the clusters of the members (MemberState.Cluster,
// from 1 in input order) and returns how many there are: two members are
// of one cluster when both WALs name the same cluster ID, or, without two
// WALs, when their members buckets (members and members_removed) share an
// ID. A member without either is put with the first member.
func assignClusters(ms []MemberState) int {
	same := func(a, b MemberState) bool {
		if a.WAL != nil && b.WAL != nil && a.WAL.ClusterID != "" && b.WAL.ClusterID != "" {
			return a.WAL.ClusterID == b.WAL.ClusterID
		}
		ids := func(m MemberState) []string { return append(slices.Clone(m.MemberIDs), m.RemovedMemberIDs...) }
		ai, bi := ids(a), ids(b)
		if len(ai) == 0 || len(bi) == 0 {
			return true // nothing to tell them apart by
		}
		return slices.ContainsFunc(ai, func(id string) bool { return slices.Contains(bi, id) })
	}
	n := 0
	for i := range ms {
		for j := range i {
			if same(ms[i], ms[j]) {
				ms[i].Cluster = ms[j].Cluster
				break
			}
		}
		if ms[i].Cluster == 0 {
			n++
			ms[i].Cluster = n
		}
	}
	return n
}

// lastCommon sets LastCommonRevision to the revision before the first
// divergence (when it is above every compact revision) and LastCommonHash
// to the hash every member gives there.
func lastCommon(ctx context.Context, dbs []*DB, maxCompact int64, rep *MembersReport) error {
	at := rep.FirstDivergentRevision - 1
	if rep.FirstDivergentRevision == 0 || at < maxCompact || at <= 0 {
		return nil
	}
	rep.LastCommonRevision = at
	for i, db := range dbs {
		h, _, err := db.HashKV(ctx, at)
		if err != nil {
			return err
		}
		if i > 0 && h != rep.LastCommonHash {
			rep.LastCommonHash = 0
			return nil
		}
		rep.LastCommonHash = h
	}
	return nil
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
