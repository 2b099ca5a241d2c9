package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/bits"
	"sort"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// Quota limits of etcd (server/storage/quota.go).
const (
	// DefaultQuotaBytes is etcd's --quota-backend-bytes default, 2 GiB.
	DefaultQuotaBytes int64 = 2 << 30
	// MaxQuotaBytes is the largest quota etcd recommends, 8 GiB; above it
	// etcd warns at start.
	MaxQuotaBytes int64 = 8 << 30
)

// DefaultMaxRequestBytes is etcd's --max-request-bytes default, 1.5 MiB
// (server/embed/config.go DefaultMaxRequestBytes): the largest marshalled
// raft request a member proposes.
const DefaultMaxRequestBytes int64 = 3 << 19

// MaxPutForRequestBytes returns the largest key plus value a Put can carry
// under etcd's --max-request-bytes: etcd marshals the request into an
// InternalRaftRequest (a header with the request ID, and the Put) and
// refuses it with "etcdserver: request is too large" when that is longer
// than maxRequestBytes (server/etcdserver/v3_server.go
// processInternalRaftRequestOnce). The framing is measured on the real
// message, with a request ID of the largest varint and no auth user name
// (an authenticated client's name adds its length and a few bytes); -1
// when not even an empty Put fits.
func MaxPutForRequestBytes(maxRequestBytes int64) int64 {
	if maxRequestBytes <= 0 || requestBytes(0) > maxRequestBytes {
		return -1
	}
	// The framing grows with the varints of the lengths: search for the
	// largest n whose request still fits.
	limit := int(min(maxRequestBytes, math.MaxInt32))
	return int64(sort.Search(limit, func(n int) bool { return requestBytes(int64(n+1)) > maxRequestBytes }))
}

// requestBytes is the marshalled size of the InternalRaftRequest of a Put
// of n key and value bytes (a 1-byte key, the rest value), computed from
// protobuf's wire sizes without allocating the value: the header and the
// key are measured on real messages, the value and the Put field (field
// 4, a one-byte tag) added as length-delimited fields.
func requestBytes(n int64) int64 {
	header := proto.Size(&etcdserverpb.InternalRaftRequest{Header: &etcdserverpb.RequestHeader{ID: math.MaxUint64}})
	put := int64(proto.Size(&etcdserverpb.PutRequest{Key: []byte{'/'}}))
	if n > 1 {
		put += 1 + int64(protowire.SizeBytes(int(n-1))) // field 2, value
	}
	return int64(header) + 1 + int64(protowire.SizeBytes(int(put)))
}

// What etcd charges a request against the quota (server/storage/quota.go
// BackendQuota.Cost).
const (
	// LeaseGrantCostBytes is a LeaseGrant's charge (leaseOverhead): the
	// cheapest request the quota refuses.
	LeaseGrantCostBytes int64 = 64
	// PutOverheadBytes is a Put's charge besides its key and value
	// (kvOverhead).
	PutOverheadBytes int64 = 256
)

// PutCostBytes returns etcd's charge for a Put of keyBytes and valueBytes:
// PutOverheadBytes plus both (server/storage/quota.go costPut). A Txn is
// charged the larger of its branches' sums of Put charges; a DeleteRange,
// a Compaction, a read or a LeaseRevoke costs 0 and is never refused.
func PutCostBytes(keyBytes, valueBytes int64) int64 {
	return PutOverheadBytes + keyBytes + valueBytes
}

// QuotaAdmits reports whether etcd admits a request charged costBytes on a
// backend of dbSizeBytes (bbolt's high-water mark, Space.DBSizeBytes)
// under quotaBytes: only when dbSizeBytes + costBytes < quotaBytes, or
// when costBytes is 0 (server/storage/quota.go BackendQuota.Available).
// A refused request raises the NOSPACE alarm
// (server/etcdserver/api/v3rpc/quota.go quotaAlarmer.check), which stays
// raised until `etcdctl alarm disarm`; the apply path checks the same rule
// again (server/etcdserver/apply/quota.go). So the alarm can be raised
// while the DB size is still below the quota: it takes only a write whose
// charge reaches the gap.
func QuotaAdmits(dbSizeBytes, costBytes, quotaBytes int64) bool {
	return costBytes == 0 || dbSizeBytes+costBytes < quotaBytes
}

// SpaceSchemaVersion versions the JSON of Space.
const SpaceSchemaVersion = 1

// FreeRunBucket counts the runs of contiguous free pages whose length is
// in [MinPages, MaxPages].
type FreeRunBucket struct {
	MinPages int64 `json:"minPages"`
	MaxPages int64 `json:"maxPages"`
	Runs     int64 `json:"runs"`
	Pages    int64 `json:"pages"`
}

// Space is a verdict on a file against etcd's backend quota, with the page
// layout behind it. Sizes are bytes; pages are bbolt pages of PageSize.
type Space struct {
	SchemaVersion int    `json:"schemaVersion"`
	Path          string `json:"path"`
	PageSize      int    `json:"pageSize"`
	// SizeBytes is the file's length; bbolt grows a file in steps
	// (doubling up to 1 GiB, then 1 GiB at a time), so it may exceed
	// DBSizeBytes.
	SizeBytes int64 `json:"sizeBytes"`
	// DBSizeBytes is the high-water mark times the page size: the size
	// etcd's quota checks (Status.DBSizeBytes).
	DBSizeBytes int64 `json:"dbSizeBytes"`
	// InUseBytes and FreeBytes split DBSizeBytes (Status).
	InUseBytes int64 `json:"inUseBytes"`
	FreeBytes  int64 `json:"freeBytes"`
	FreePages  int64 `json:"freePages"`
	// QuotaBytes is the quota the verdict is for; QuotaUsedPercent is
	// DBSizeBytes as a percentage of it.
	QuotaBytes       int64   `json:"quotaBytes"`
	QuotaUsedPercent float64 `json:"quotaUsedPercent"`
	// HeadroomBytes is QuotaBytes - DBSizeBytes (negative above the
	// quota). etcd refuses a write, and raises NOSPACE, when its charge is
	// at least the headroom (QuotaAdmits).
	HeadroomBytes int64 `json:"headroomBytes"`
	// OverQuota is set when even the cheapest charged request, a
	// LeaseGrant (LeaseGrantCostBytes), is refused: every Put, Txn with a
	// Put and LeaseGrant raises NOSPACE. It can be set below the quota.
	OverQuota bool `json:"overQuota"`
	// MaxPutBytes is the largest key plus value a Put can carry without
	// raising NOSPACE: HeadroomBytes - PutOverheadBytes - 1, and -1 when
	// no Put is admitted. A kube-apiserver write larger than it (objects
	// reach 1.5 MiB) raises the alarm.
	MaxPutBytes int64 `json:"maxPutBytes"`
	// MaxRequestBytes is the member's --max-request-bytes the verdict is
	// for, and MaxRequestPutBytes the largest key plus value it lets a
	// Put carry (MaxPutForRequestBytes).
	MaxRequestBytes    int64 `json:"maxRequestBytes"`
	MaxRequestPutBytes int64 `json:"maxRequestPutBytes"`
	// LargestPutBytes is the largest key plus value etcd admits now: the
	// smaller of MaxPutBytes and MaxRequestPutBytes, -1 when no Put is
	// admitted; LargestPutLimit names the limit that decides it, "quota"
	// or "max-request-bytes".
	LargestPutBytes int64  `json:"largestPutBytes"`
	LargestPutLimit string `json:"largestPutLimit"`
	// NoSpaceAlarm is set when the file's alarm bucket holds a NOSPACE
	// alarm: some member refused a write and the alarm is still raised.
	NoSpaceAlarm bool `json:"noSpaceAlarm"`
	// CompactionClearsNoSpace is always false; Why says why, with the
	// source path.
	CompactionClearsNoSpace bool   `json:"compactionClearsNoSpace"`
	Why                     string `json:"why"`
	// CurrentRevision is the revision a compaction now would be at;
	// CompactFreesBytes the entry bytes it would remove (Compaction).
	CurrentRevision   int64 `json:"currentRevision"`
	CompactFreesBytes int64 `json:"compactFreesBytes"`
	// AfterCompactDefragBytes is the DB size a compaction at
	// CurrentRevision and then a defragmentation would leave
	// (CompactionReport.EstimatedDBSizeAfterDefragBytes); AfterClearsQuota
	// says whether etcd would then admit a LeaseGrant again (QuotaAdmits;
	// the alarm must still be disarmed).
	AfterCompactDefragBytes int64 `json:"afterCompactDefragBytes"`
	AfterClearsQuota        bool  `json:"afterClearsQuota"`
	// FreeRuns is the histogram of runs of contiguous free pages, by
	// powers of two; LargestFreeRunPages the longest run. bbolt allocates
	// a node that spans n pages only from a run of n free pages, so a
	// value larger than LargestFreeRunBytes grows the file even with free
	// pages left.
	FreeRuns            []FreeRunBucket `json:"freeRuns"`
	LargestFreeRunPages int64           `json:"largestFreeRunPages"`
	LargestFreeRunBytes int64           `json:"largestFreeRunBytes"`
	// BranchPages, LeafPages and OverflowPages count the reachable pages
	// of every bucket (overflow: the extra pages of nodes larger than a
	// page); LeafFillPercent is the share of the leaf pages' bytes that
	// hold headers, elements, keys and values.
	BranchPages     int64   `json:"branchPages"`
	LeafPages       int64   `json:"leafPages"`
	OverflowPages   int64   `json:"overflowPages"`
	LeafFillPercent float64 `json:"leafFillPercent"`
	// FragmentationPercent is Status's; FragmentationAlert says whether
	// an alert on it (the common rule: above 45 %) is "signal" or "noise"
	// on this file, and FragmentationRule states the rule applied.
	FragmentationPercent float64 `json:"fragmentationPercent"`
	FragmentationAlert   string  `json:"fragmentationAlert"`
	FragmentationRule    string  `json:"fragmentationRule"`
	// SafeQuotaBytes is a quota with room for the live data to double:
	// twice AfterCompactDefragBytes rounded up to a GiB, at least etcd's
	// default and at most MaxQuotaBytes.
	SafeQuotaBytes int64 `json:"safeQuotaBytes"`
}

// whyCompactionAlone explains why a compaction does not clear NOSPACE.
const whyCompactionAlone = "etcd's quota compares the backend's size, the bbolt file's high-water mark (tx.Size), " +
	"with --quota-backend-bytes, not the bytes in use (server/storage/quota.go BackendQuota.Available, " +
	"server/storage/backend/backend.go size); a compaction frees pages inside the file but never shrinks it, " +
	"only a defragmentation does, and the NOSPACE alarm then stays raised until `etcdctl alarm disarm`"

// fragmentationAlertPercent is the threshold common fragmentation alerts
// use (OpenShift's defrag controller: 45 %).
const fragmentationAlertPercent = 45

// FragmentationVerdict says whether an alert on a backend's fragmentation
// (percent of dbSizeBytes not in use) is "signal" or "noise" under
// quotaBytes, and states the rule: an alert on the ratio is signal only
// when defragmenting would change the quota verdict, that is when the
// ratio is high (fragmentationAlertPercent) and the backend holds at least
// half the quota. Otherwise the free pages are reused by later writes and
// a defragmentation (which blocks the member) buys nothing.
func FragmentationVerdict(percent float64, dbSizeBytes, quotaBytes int64) (alert, rule string) {
	half := quotaBytes / 2
	rule = fmt.Sprintf("signal when fragmentation is at least %d%% and the DB size is at least half the quota (%d bytes); otherwise noise",
		fragmentationAlertPercent, half)
	if percent >= fragmentationAlertPercent && dbSizeBytes >= half {
		return "signal", rule
	}
	return "noise", rule
}

// SpaceOptions are the member's limits a Space verdict is for.
type SpaceOptions struct {
	// QuotaBytes is the member's --quota-backend-bytes; 0 means
	// DefaultQuotaBytes.
	QuotaBytes int64
	// MaxRequestBytes is the member's --max-request-bytes; 0 means
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
}

// Space reads the page layout and the alarm bucket of the file and, with
// one Compaction scan at the current revision, gives a verdict against
// o's quota by etcd's rule (QuotaAdmits) and the largest Put o's limits
// admit. p parses keys for the compaction estimate. Errors are those of
// Open's reads and ErrCorrupt for a malformed page tree or alarm entry.
func (db *DB) Space(ctx context.Context, o SpaceOptions, p keyspace.Parser) (*Space, error) {
	quotaBytes := cmp.Or(max(o.QuotaBytes, 0), DefaultQuotaBytes)
	maxRequestBytes := cmp.Or(max(o.MaxRequestBytes, 0), DefaultMaxRequestBytes)
	ps := int64(db.meta.pageSize)
	s := &Space{SchemaVersion: SpaceSchemaVersion, Path: db.path, PageSize: db.meta.pageSize, SizeBytes: db.size,
		DBSizeBytes: int64(db.meta.highWater) * ps, QuotaBytes: quotaBytes, Why: whyCompactionAlone, FreeRuns: []FreeRunBucket{}}
	w := &pageWalk{p: db.pg, seen: newPageSet(db.meta.highWater)}
	if err := db.guard("walk the page tree", func() error { return w.pages(db.meta) }); err != nil {
		return nil, err
	}
	s.BranchPages, s.LeafPages, s.OverflowPages = w.branch, w.leaf, w.overflow
	if w.leafCap > 0 {
		s.LeafFillPercent = 100 * float64(w.leafUsed) / float64(w.leafCap)
	}
	var run int64
	endRun := func() {
		if run == 0 {
			return
		}
		i := bits.Len64(uint64(run)) - 1 // run in [2^i, 2^(i+1))
		for len(s.FreeRuns) <= i {
			n := int64(1) << len(s.FreeRuns)
			s.FreeRuns = append(s.FreeRuns, FreeRunBucket{MinPages: n, MaxPages: 2*n - 1})
		}
		s.FreeRuns[i].Runs++
		s.FreeRuns[i].Pages += run
		s.LargestFreeRunPages = max(s.LargestFreeRunPages, run)
		s.FreePages += run
		run = 0
	}
	for id := uint64(2); id < db.meta.highWater; id++ {
		if w.seen.has(id) {
			endRun()
			continue
		}
		run++
	}
	endRun()
	s.FreeBytes = s.FreePages * ps
	s.InUseBytes = s.DBSizeBytes - s.FreeBytes
	s.LargestFreeRunBytes = s.LargestFreeRunPages * ps
	if s.DBSizeBytes > 0 {
		s.FragmentationPercent = 100 * float64(s.FreeBytes) / float64(s.DBSizeBytes)
	}
	s.QuotaUsedPercent = 100 * float64(s.DBSizeBytes) / float64(quotaBytes)
	s.HeadroomBytes = quotaBytes - s.DBSizeBytes
	s.OverQuota = !QuotaAdmits(s.DBSizeBytes, LeaseGrantCostBytes, quotaBytes)
	s.MaxPutBytes = max(s.HeadroomBytes-PutOverheadBytes-1, -1)
	s.MaxRequestBytes = maxRequestBytes
	s.MaxRequestPutBytes = MaxPutForRequestBytes(maxRequestBytes)
	s.LargestPutBytes, s.LargestPutLimit = s.MaxPutBytes, "quota"
	if s.MaxRequestPutBytes < s.MaxPutBytes {
		s.LargestPutBytes, s.LargestPutLimit = s.MaxRequestPutBytes, "max-request-bytes"
	}
	err := db.guard("read the alarm bucket", func() error {
		return db.forEach(bucketAlarm, func(k, _ []byte) error {
			a, err := DecodeAlarm(k)
			if err != nil {
				return fmt.Errorf("%w: bucket %s: %v", ErrCorrupt, bucketAlarm, err)
			}
			s.NoSpaceAlarm = s.NoSpaceAlarm || a.Alarm == "NOSPACE"
			return nil
		})
	})
	if err != nil {
		return nil, err
	}

	last, err := db.LastRevision(ctx)
	if err != nil {
		return nil, err
	}
	m, err := db.Meta()
	if err != nil {
		return nil, err
	}
	s.CurrentRevision = max(last, m.FinishedCompactRevision, m.ScheduledCompactRevision)
	// A file compacted at its current revision has nothing more to
	// remove: the estimate is then a defragmentation's alone.
	c, err := db.compaction(ctx, s.CurrentRevision, p, s.CurrentRevision == m.FinishedCompactRevision)
	if err != nil {
		return nil, err
	}
	s.CompactFreesBytes = c.Total.RemovedBytes
	s.AfterCompactDefragBytes = c.EstimatedDBSizeAfterDefragBytes
	s.AfterClearsQuota = QuotaAdmits(s.AfterCompactDefragBytes, LeaseGrantCostBytes, quotaBytes)

	s.FragmentationAlert, s.FragmentationRule = FragmentationVerdict(s.FragmentationPercent, s.DBSizeBytes, quotaBytes)
	const gib = 1 << 30
	safe := (2*s.AfterCompactDefragBytes + gib - 1) / gib * gib
	s.SafeQuotaBytes = min(max(safe, DefaultQuotaBytes), MaxQuotaBytes)
	return s, nil
}

// pageWalk visits every reachable page once and counts them by type.
type pageWalk struct {
	p                      *pager
	seen                   pageSet
	branch, leaf, overflow int64
	leafUsed, leafCap      int64
}

// pages marks the meta pages, the synced freelist (if any) and every page
// of every bucket.
func (w *pageWalk) pages(m boltMeta) error {
	w.seen.add(0)
	w.seen.add(1)
	if m.freelist != pgidNoFreelist {
		pg, err := w.p.page(m.freelist)
		if err != nil {
			return err
		}
		w.claim(pg)
	}
	return w.node(m.root, nil, 0)
}

func (w *pageWalk) claim(pg page) bool {
	if !w.seen.add(pg.id) {
		return false
	}
	for id := pg.id + 1; id <= pg.id+uint64(pg.overflow); id++ {
		w.seen.add(id)
	}
	w.overflow += int64(pg.overflow)
	return true
}

func (w *pageWalk) node(id uint64, inline []byte, depth int) error {
	if depth > maxTreeDepth {
		return corruptf("page %d: tree deeper than %d levels", id, maxTreeDepth)
	}
	var pg page
	var err error
	if id == 0 {
		pg, err = inlinePage(inline)
	} else {
		pg, err = w.p.page(id)
	}
	if err != nil {
		return err
	}
	if id != 0 && !w.claim(pg) {
		return nil
	}
	if err := pg.checkCount(); err != nil {
		return err
	}
	switch pg.flags {
	case branchPageFlag:
		w.branch++
		for i := range pg.count {
			_, child, err := pg.branch(i)
			if err != nil {
				return err
			}
			if err := w.node(child, nil, depth+1); err != nil {
				return err
			}
		}
	case leafPageFlag:
		used := int64(pageHeaderSize + pg.count*elemSize)
		for i := range pg.count {
			flags, k, v, err := pg.leaf(i)
			if err != nil {
				return err
			}
			used += int64(len(k) + len(v))
			if flags&bucketLeafFlag != 0 {
				b, err := bucketValue(v)
				if err != nil {
					return err
				}
				if err := w.node(b.root, b.inline, depth+1); err != nil {
					return err
				}
			}
		}
		if id != 0 {
			w.leaf++
			w.leafUsed += used
			w.leafCap += int64(len(pg.buf))
		}
	default:
		return corruptf("page %d: a %s page inside a tree", pg.id, pageType(pg.flags))
	}
	return nil
}

// has reports whether id is in the set.
func (s pageSet) has(id uint64) bool {
	return id/64 < uint64(len(s)) && s[id/64]&(1<<(id%64)) != 0
}
