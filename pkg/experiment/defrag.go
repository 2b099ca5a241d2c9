package experiment

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/internal/parallel"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// DefragStallOptions shape the defragmentation experiment. Zero fields
// take the defaults of Common.Quick (quick / full).
type DefragStallOptions struct {
	Common
	// Sizes are the db file sizes to grow the member to, ascending (8 MB,
	// 24 MB / 100 MB, 500 MB, 1 GB; decimal megabytes).
	Sizes []int64
	// ValueSize is the size of each value written (512 / 4096): etcd's
	// compaction deletes 1,000 revisions per batch and sleeps 10 ms
	// between batches, so small values make a compaction long enough to
	// overlap.
	ValueSize int
	// NoOverlap skips the case, at each size, in which the
	// defragmentation starts while a compaction is still deleting.
	NoOverlap bool
	// OverlapDelay is how long after the compaction request the
	// overlapping defragmentation starts (20 ms).
	OverlapDelay time.Duration
	// Concurrency is the parallel puts that grow the member (32).
	Concurrency int
}

// Defaults fills zero fields; the probe runs at 50 operations per second
// unless Common.Probe says otherwise.
func (o DefragStallOptions) Defaults() DefragStallOptions {
	if o.Probe.RatePerSecond == 0 {
		o.Probe.RatePerSecond = 50
	}
	o.Common = o.Common.defaults(NameDefragStall)
	if len(o.Sizes) == 0 {
		o.Sizes = pick(o.Quick, []int64{8e6, 24e6}, []int64{100e6, 500e6, 1000e6})
	}
	if o.ValueSize == 0 {
		o.ValueSize = pick(o.Quick, 512, 4096)
	}
	if o.OverlapDelay == 0 {
		o.OverlapDelay = 20 * time.Millisecond
	}
	if o.Concurrency == 0 {
		o.Concurrency = 32
	}
	return o
}

// Validate reports every invalid field of o, with its field path
// (prefix, probeRate and the experiment's own, e.g. sizes[0]), as an error
// wrapping a field.ErrorList. Call it after Defaults.
func (o DefragStallOptions) Validate() error {
	errs := o.Common.validate()
	for i, s := range o.Sizes {
		if s < 1e6 {
			errs = append(errs, field.Invalid(field.NewPath("sizes").Index(i), s, "must be at least 1 MB"))
		}
	}
	errs = append(errs, fieldcheck.Ascending(o.Sizes, true, field.NewPath("sizes"))...)
	errs = append(errs, fieldcheck.Positive(o.ValueSize, field.NewPath("valueSize"))...)
	errs = append(errs, fieldcheck.Positive(o.Concurrency, field.NewPath("concurrency"))...)
	errs = append(errs, fieldcheck.NonNegativeDuration(o.OverlapDelay, field.NewPath("overlapDelay"))...)
	return errs.ToAggregate()
}

// DefragStallResult is the defragmentation experiment's own result.
type DefragStallResult struct {
	Scenario DefragStallScenario `json:"scenario"` // the options
	// Cases are per size: the defragmentation after the compaction, then
	// (unless disabled) the one overlapping a compaction.
	Cases []DefragStallCase `json:"cases"`
}

// DefragStallScenario echoes the options.
type DefragStallScenario struct {
	SizesBytes     []int64 `json:"sizesBytes"`         // db file sizes grown to
	ValueSizeBytes int     `json:"valueSizeBytes"`     // each value
	Overlap        bool    `json:"overlap"`            // overlapping cases run
	OverlapDelayMs float64 `json:"overlapDelayMs"`     // defrag start after the compaction request
	ProbeRate      float64 `json:"probeRatePerSecond"` // probe operations per second
}

// DefragStallCase is one defragmentation.
type DefragStallCase struct {
	TargetBytes int64 `json:"targetBytes"` // the size grown to
	// Overlapping is true when the defragmentation started while the
	// compaction was still deleting.
	Overlapping bool `json:"overlapping"`
	// Keys and Revisions are the live keys and the revisions written to
	// reach this case; LoadMs how long that took.
	Keys      int64   `json:"keys"`
	Revisions int64   `json:"revisions"` // revisions written to reach the case
	LoadMs    float64 `json:"loadMs"`    // time the writes took, ms
	// CompactRevision and CompactionMs: the physical compaction before the
	// defragmentation (or during it).
	CompactRevision int64   `json:"compactRevision"`
	CompactionMs    float64 `json:"compactionMs"` // the physical compaction, ms
	// OverlapMs is how long compaction and defragmentation ran together.
	OverlapMs float64 `json:"overlapMs"`
	// DefragMs is the defragmentation of every member, one after another
	// (the leader last); with one member, its Defragment call.
	DefragMs float64 `json:"defragMs"`
	// Sizes before and after the defragmentation, summed over the members
	// defragmented.
	BeforeBytes      int64 `json:"beforeBytes"`
	BeforeInUseBytes int64 `json:"beforeInUseBytes"` // in use before, summed over the members
	AfterBytes       int64 `json:"afterBytes"`       // db file size after, summed over the members
	AfterInUseBytes  int64 `json:"afterInUseBytes"`  // in use after, summed over the members
	// Members are the members defragmented, in order: every member of the
	// target, except in the overlapping case, which defragments the first.
	Members []DefragMember `json:"members"`
	// Probe covers the operations due from the start of the
	// defragmentation (or of the overlapping compaction) to its end.
	Probe compaction.ProbeWindow `json:"probe"`
	// APIProbe is the same window of the probe through kube-apiserver
	// (Common.Stack): what a client of the API saw while etcd stalled;
	// nil without kube-apiservers.
	APIProbe *compaction.ProbeWindow `json:"apiProbe,omitempty"`
}

// DefragMember is one member's defragmentation.
type DefragMember struct {
	Endpoint         string  `json:"endpoint"`         // the member's client URL
	DefragMs         float64 `json:"defragMs"`         // its Defragment call
	BeforeBytes      int64   `json:"beforeBytes"`      // db file size before
	BeforeInUseBytes int64   `json:"beforeInUseBytes"` // in use before
	AfterBytes       int64   `json:"afterBytes"`       // db file size after
	AfterInUseBytes  int64   `json:"afterInUseBytes"`  // in use after
}

func memberDefrag(d compaction.DefragResult) DefragMember {
	return DefragMember{Endpoint: d.Endpoint, DefragMs: report.Ms(d.Duration), BeforeBytes: d.Before.Bytes,
		BeforeInUseBytes: d.Before.InUseBytes, AfterBytes: d.After.Bytes, AfterInUseBytes: d.After.InUseBytes}
}

// DefragStall grows the target to each size (new keys, each written twice
// so that half the file is history; the first member's file size counts),
// compacts it physically, and defragments every member, one at a time and
// the leader last, while the probe runs; then, unless NoOverlap, rewrites
// those keys once more, requests a compaction and starts the
// defragmentation of the first member OverlapDelay later, while etcd is
// still deleting.
func DefragStall(ctx context.Context, o DefragStallOptions) (*Result, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	epoch := time.Now()
	res := newResult(NameDefragStall, o.Common, epoch)
	ds := &DefragStallResult{Scenario: DefragStallScenario{SizesBytes: o.Sizes, ValueSizeBytes: o.ValueSize, Overlap: !o.NoOverlap,
		OverlapDelayMs: report.Ms(o.OverlapDelay), ProbeRate: o.Probe.RatePerSecond}}
	res.DefragStall = ds
	return onOneMember(ctx, o.Common, res, epoch, func(s *session) error {
		if s.stacks != nil {
			// kube-apiservers in front of the member, their compactor
			// off, and the probe's twin through them.
			st, stop, err := s.stacks(ctx, s.t, o.Prefix, -1)
			defer stop()
			if err != nil {
				return err
			}
			s.apiServer(st.APIServer)
			if err := s.startAPIProbe(ctx, st); err != nil {
				return err
			}
			defer s.endAPIProbe()
		}
		g := &grower{s: s, prefix: o.Prefix + "/defrag/", valueSize: o.ValueSize, concurrency: o.Concurrency}
		defer g.close()
		for _, target := range o.Sizes {
			c, err := defragCase(ctx, s, g, o, target)
			if err != nil {
				return err
			}
			cases := []DefragStallCase{c}
			if !o.NoOverlap {
				oc, err := overlapCase(ctx, s, g, o, target, c)
				if err != nil {
					return err
				}
				cases = append(cases, oc)
			}
			for _, c := range cases {
				ds.Cases = append(ds.Cases, c)
				res.Cases = append(res.Cases, c.summary())
				o.Logf("defrag stall: %s: defrag %.0f ms, %d -> %d bytes, probe max %.0f ms, stall %.0f ms, %d errors",
					c.name(), c.DefragMs, c.BeforeBytes, c.AfterBytes, c.Probe.MaxMs, c.Probe.LongestStallMs, c.Probe.Errors)
			}
		}
		return nil
	})
}

func (c DefragStallCase) name() string {
	n := fmt.Sprintf("size=%dMB", c.TargetBytes/1e6)
	if c.Overlapping {
		n += " overlapping compaction"
	}
	return n
}

func defragCase(ctx context.Context, s *session, g *grower, o DefragStallOptions, target int64) (DefragStallCase, error) {
	c := DefragStallCase{TargetBytes: target}
	start := time.Now()
	o.Logf("defrag stall: growing the member to %d MB", target/1e6)
	keys, revs, err := g.grow(ctx, target)
	if err != nil {
		return c, err
	}
	c.Keys, c.Revisions, c.LoadMs = keys, revs, report.Ms(time.Since(start))
	s.mark(MarkPhase, fmt.Sprintf("grow to %d MB", target/1e6), start, time.Now(), 0)
	rev, err := s.revision(ctx)
	if err != nil {
		return c, err
	}
	cstart := time.Now()
	if _, err := s.admin.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return c, fmt.Errorf("compact to %d: %w", rev, err)
	}
	cend := time.Now()
	s.mark(MarkCompaction, fmt.Sprintf("compact %d", rev), cstart, cend, rev)
	c.CompactRevision, c.CompactionMs = rev, report.Ms(cend.Sub(cstart))
	clockwait.SleepReal(ctx, 500*time.Millisecond) // a quiet probe baseline before
	// Every member, one at a time, the leader last.
	order, _ := compaction.LeaderLast(ctx, s.admin, s.t.Endpoints, 5*time.Second)
	dstart := time.Now()
	ds, err := compaction.DefragmentAll(ctx, s.admin, order)
	dend := time.Now()
	if err != nil {
		return c, err
	}
	at := dstart
	for _, d := range ds {
		s.mark(MarkDefrag, fmt.Sprintf("defrag %s, %d MB", d.Endpoint, d.Before.Bytes/1e6), at, at.Add(d.Duration), 0)
		at = at.Add(d.Duration)
		c.Members = append(c.Members, memberDefrag(d))
		c.BeforeBytes += d.Before.Bytes
		c.BeforeInUseBytes += d.Before.InUseBytes
		c.AfterBytes += d.After.Bytes
		c.AfterInUseBytes += d.After.InUseBytes
	}
	c.DefragMs = report.Ms(dend.Sub(dstart))
	c.Probe = s.window(dstart, dend)
	c.APIProbe = s.apiWindow(dstart, dend)
	clockwait.SleepReal(ctx, 500*time.Millisecond)
	return c, nil
}

func overlapCase(ctx context.Context, s *session, g *grower, o DefragStallOptions, target int64, clean DefragStallCase) (DefragStallCase, error) {
	c := DefragStallCase{TargetBytes: target, Overlapping: true, Keys: clean.Keys}
	start := time.Now()
	revs, err := g.rewrite(ctx, clean.Keys)
	if err != nil {
		return c, err
	}
	c.Revisions, c.LoadMs = revs, report.Ms(time.Since(start))
	s.mark(MarkPhase, fmt.Sprintf("rewrite %d keys", clean.Keys), start, time.Now(), 0)
	rev, err := s.revision(ctx)
	if err != nil {
		return c, err
	}
	clockwait.SleepReal(ctx, 500*time.Millisecond)
	r, err := compaction.CompactThenDefragment(ctx, s.admin, s.admin, s.t.Endpoints[0], rev, true, o.OverlapDelay)
	if err != nil {
		return c, err
	}
	s.mark(MarkCompaction, fmt.Sprintf("compact %d (overlapping)", rev), r.Compaction.Start, r.Compaction.End, rev)
	s.mark(MarkDefrag, fmt.Sprintf("defrag %d MB during compaction", r.Defrag.Before.Bytes/1e6), r.DefragSpan.Start, r.DefragSpan.End, 0)
	c.CompactRevision, c.CompactionMs, c.OverlapMs = rev, report.Ms(r.Compaction.Duration()), report.Ms(r.Overlap)
	c.DefragMs = report.Ms(r.Defrag.Duration)
	d := r.Defrag
	c.Members = []DefragMember{memberDefrag(d)}
	c.BeforeBytes, c.BeforeInUseBytes, c.AfterBytes, c.AfterInUseBytes = d.Before.Bytes, d.Before.InUseBytes, d.After.Bytes, d.After.InUseBytes
	end := r.DefragSpan.End
	if r.Compaction.End.After(end) {
		end = r.Compaction.End
	}
	c.Probe = s.window(r.Compaction.Start, end)
	c.APIProbe = s.apiWindow(r.Compaction.Start, end)
	clockwait.SleepReal(ctx, 500*time.Millisecond)
	return c, nil
}

func (c DefragStallCase) summary() CaseSummary {
	cs := CaseSummary{Experiment: NameDefragStall, Case: c.name(), Compactions: 1, Defrags: 1, DefragMs: c.DefragMs,
		Probe: c.Probe, DBSizeBeforeBytes: c.BeforeBytes, DBSizeAfterBytes: c.AfterBytes}
	return cs
}

// grower writes keys of one size under a prefix with parallel puts, on
// the writers' connections of a load of its own (a Child of the
// session's).
type grower struct {
	s           *session
	prefix      string
	valueSize   int
	concurrency int
	ws          *watchload.Session // nil until init
	conns       []*clientv3.Client
	next        int64 // the next new key's number
	value       []byte
}

func (g *grower) close() {
	if g.ws != nil {
		g.ws.Close()
	}
}

func (g *grower) init(ctx context.Context) error {
	if g.ws != nil {
		return nil
	}
	g.ws = g.s.ws.Child()
	topo, err := g.ws.ConnectWriters(ctx, 2, false)
	if err != nil {
		return err
	}
	g.conns = topo.Conns
	g.value = make([]byte, g.valueSize)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range g.value {
		g.value[i] = byte('a' + r.IntN(26))
	}
	return nil
}

// put writes keys [from, to) once each.
func (g *grower) put(ctx context.Context, from, to int64, round int) error {
	v := g.value
	v[0] = byte('0' + round%10) // every round changes the value
	value := string(v)
	return parallel.Each(ctx, g.concurrency, int(to-from), func(ctx context.Context, w, i int) error {
		_, err := g.conns[w%len(g.conns)].Put(ctx, fmt.Sprintf("%s%010d", g.prefix, from+int64(i)), value)
		return err
	})
}

// grow writes new keys, each twice, until the file reaches target bytes,
// and returns how many keys and revisions it wrote.
func (g *grower) grow(ctx context.Context, target int64) (keys, revs int64, err error) {
	if err := g.init(ctx); err != nil {
		return 0, 0, err
	}
	for round := 0; round < 1000; round++ {
		size, err := g.s.size(ctx)
		if err != nil {
			return keys, revs, err
		}
		if size.Bytes >= target {
			return keys, revs, nil
		}
		// Each key adds about two values to the file; go a quarter of the
		// way (at least 100 keys) at a time.
		n := max((target-size.Bytes)/int64(2*g.valueSize)/4, 100)
		for pass := range 2 {
			if err := g.put(ctx, g.next, g.next+n, pass); err != nil {
				return keys, revs, fmt.Errorf("grow to %d bytes: %w", target, err)
			}
		}
		g.next += n
		keys += n
		revs += 2 * n
		clockwait.SleepReal(ctx, 150*time.Millisecond) // let the backend commit before the next size
	}
	return keys, revs, fmt.Errorf("the member did not reach %d bytes", target)
}

// rewrite writes the last n keys once more.
func (g *grower) rewrite(ctx context.Context, n int64) (int64, error) {
	if err := g.put(ctx, g.next-n, g.next, 3); err != nil {
		return 0, fmt.Errorf("rewrite %d keys: %w", n, err)
	}
	return n, nil
}
