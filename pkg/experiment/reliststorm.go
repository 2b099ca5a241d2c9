package experiment

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// RelistStormOptions shape a relist storm. Zero fields take the defaults
// of Common.Quick (quick / full).
type RelistStormOptions struct {
	Common
	// Objects are the pod counts, ascending (100, 1000 / 1000, 10000,
	// 50000); each count is seeded under a prefix of its own.
	Objects []int
	// PageSizes are the informers' LIST page sizes; 0 is unpaginated
	// (500, 10000, 0).
	PageSizes []int64
	// Watchers are the informers of each case (3 / 10), on Connections
	// connections (1 / 2); divided (Common.Shard), each worker runs its
	// block of them (WatcherBlock) on Connections of its own.
	Watchers, Connections int
	// WriteRate is the pod updates per second during each case (50).
	WriteRate float64
	// Hold is how long the informers are held back (1 s / 2 s); the
	// compaction that passes them happens meanwhile.
	Hold time.Duration
	// NoControl skips the control case per object count, in which the
	// informers are held back as long with no compaction.
	NoControl bool
	// Namespaces the pods are spread across (10).
	Namespaces int
	// Seed makes the objects and writes reproducible (1).
	Seed uint64
	// ResyncTimeout bounds a case's wait for every informer to resync
	// (2 minutes).
	ResyncTimeout time.Duration
}

// Defaults fills zero fields.
func (o RelistStormOptions) Defaults() RelistStormOptions {
	o.Common = o.Common.defaults(NameRelistStorm)
	if len(o.Objects) == 0 {
		o.Objects = pick(o.Quick, []int{100, 1000}, []int{1000, 10000, 50000})
	}
	if len(o.PageSizes) == 0 {
		o.PageSizes = []int64{watchload.DefaultPageSize, watchload.CacherPageSize, 0}
	}
	if o.Watchers == 0 {
		o.Watchers = pick(o.Quick, 3, 10)
	}
	if o.Connections == 0 {
		o.Connections = pick(o.Quick, 1, 2)
	}
	if o.WriteRate == 0 {
		o.WriteRate = 50
	}
	if o.Hold == 0 {
		o.Hold = pick(o.Quick, time.Second, 2*time.Second)
	}
	if o.Namespaces == 0 {
		o.Namespaces = 10
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.ResyncTimeout == 0 {
		o.ResyncTimeout = 2 * time.Minute
	}
	return o
}

// Validate reports every invalid field of o, with its field path
// (prefix, probeRate and the experiment's own, e.g. objects[1]), as an error
// wrapping a field.ErrorList. Call it after Defaults.
func (o RelistStormOptions) Validate() error {
	errs := o.Common.validate()
	errs = append(errs, fieldcheck.Ascending(o.Objects, true, field.NewPath("objects"))...)
	for i, p := range o.PageSizes {
		errs = append(errs, fieldcheck.NonNegative(p, field.NewPath("pageSizes").Index(i))...)
	}
	errs = append(errs, fieldcheck.Positive(o.Watchers, field.NewPath("watchers"))...)
	errs = append(errs, fieldcheck.Positive(o.Connections, field.NewPath("connections"))...)
	errs = append(errs, fieldcheck.AtMost(o.Connections, watchload.MaxConnections, "the bound on connections", field.NewPath("connections"))...)
	errs = append(errs, fieldcheck.Rate(o.WriteRate, field.NewPath("writeRate"))...)
	errs = append(errs, fieldcheck.PositiveDuration(o.Hold, field.NewPath("hold"))...)
	if o.Shard.Count > 1 && o.Watchers < o.Shard.Count {
		errs = append(errs, field.Invalid(field.NewPath("watchers"), o.Watchers, fmt.Sprintf("fewer than the %d workers it is divided among: a worker would hold no informer", o.Shard.Count)))
	}
	return errs.ToAggregate()
}

func pick[T any](quick bool, q, full T) T {
	if quick {
		return q
	}
	return full
}

// RelistStormResult is the relist storm's own result.
type RelistStormResult struct {
	Options RelistStormScenario `json:"scenario"` // the options
	// Cases are in the order run: per object count, each page size, then
	// the control.
	Cases []RelistStormCase `json:"cases"`
	// Validation sums every case's watch checks.
	Validation Validation `json:"validation"`
}

// RelistStormScenario echoes the options.
type RelistStormScenario struct {
	Objects            []int   `json:"objects"`            // pod counts
	PageSizes          []int64 `json:"pageSizes"`          // 0: unpaginated
	Watchers           int     `json:"watchers"`           // informers per case
	Connections        int     `json:"connections"`        // their connections
	WriteRatePerSecond float64 `json:"writeRatePerSecond"` // pod updates per second
	HoldMs             float64 `json:"holdMs"`             // how long informers are held back
	Control            bool    `json:"control"`            // control cases run
	Seed               uint64  `json:"seed"`               // seed of objects and writes
}

// RelistStormCase is one object count and page size.
type RelistStormCase struct {
	Objects  int   `json:"objects"`  // pods listed
	PageSize int64 `json:"pageSize"` // 0: unpaginated
	// WatchList is true when the informers (client-go through
	// kube-apiserver, WatchListClient on) loaded their state with a
	// WATCHLIST: PageSize does not apply.
	WatchList bool `json:"watchList,omitempty"`
	// Compacted is false for the control case.
	Compacted bool `json:"compacted"`
	// HeldRevision is the newest revision a held informer had seen
	// (divided: shard 0's is the store's revision once every worker
	// held); CompactRevision the revision compacted to (0 in the control,
	// and in a worker's result other than shard 0's).
	HeldRevision    int64 `json:"heldRevision"`
	CompactRevision int64 `json:"compactRevision"` // revision compacted to; 0 in the control
	// ReleaseAtMs is when the informers were let go, from the epoch.
	ReleaseAtMs float64 `json:"releaseAtMs"`
	Watchers    int     `json:"watchers"` // informers
	// Relists counts LIST phases after the first, over all informers;
	// RelistRequests the LIST requests they made (a 410 then a list at
	// the latest is two); Pages, Objects and Bytes what the successful
	// ones read (key and value bytes from etcd; through kube-apiserver,
	// objects and response bytes).
	Relists        int   `json:"relists"`
	RelistRequests int   `json:"relistRequests"` // LIST requests of the relists
	RelistPages    int64 `json:"relistPages"`    // range requests of the successful ones
	RelistObjects  int64 `json:"relistObjects"`  // objects they read
	RelistBytes    int64 `json:"relistBytes"`    // key and value bytes they read
	// Expired counts LIST requests answered 410 (compacted).
	Expired int `json:"expired"`
	// Resync is, per informer, the time from its release until its cache
	// was current again: the failed watch, client-go's backoff, and the
	// relist (or, without a relist, until it had seen the revision of its
	// release). ListMs is the relists' own duration.
	ResyncP50Ms  float64 `json:"resyncP50Ms"`
	ResyncMaxMs  float64 `json:"resyncMaxMs"`  // slowest informer
	ListP50Ms    float64 `json:"listP50Ms"`    // median relist duration (attempts together)
	ListMaxMs    float64 `json:"listMaxMs"`    // slowest relist
	BackoffP50Ms float64 `json:"backoffP50Ms"` // median pause before a relist
	// ResyncMs, ListMs and BackoffMs are the samples the figures above
	// are nearest-rank quantiles of: per informer in the order of their
	// IDs, per relist in the informers' order; kept so that a divided
	// storm's workers merge into exactly the figures of one process
	// (Merge). Absent in results written before.
	ResyncMs  []float64 `json:"resyncMs,omitempty"`
	ListMs    []float64 `json:"listMs,omitempty"`    // each relist's duration
	BackoffMs []float64 `json:"backoffMs,omitempty"` // each relist's pause before it
	// Probe is the probe from the release until every informer resynced.
	Probe compaction.ProbeWindow `json:"probe"`
	// EtcdRanges and EtcdRangeBytes are, through kube-apiserver with a
	// counting proxy, the LISTs etcd received (Range and RangeStream over
	// a prefix) from the release until every informer resynced and their
	// response bytes: what the relists cost etcd (none when
	// kube-apiserver's watch cache served them).
	EtcdRanges     int64 `json:"etcdRanges,omitempty"`
	EtcdRangeBytes int64 `json:"etcdRangeBytes,omitempty"`
	// Writes are the pod updates during the case.
	Writes     report.WriteStats `json:"writes"`
	Validation Validation        `json:"validation"` // the case's watch checks
}

// RelistStorm runs the relist storm. For each object count it seeds the
// pods, and for each page size (then once more as the control) it starts
// the informers, lets them list and watch while pods are updated, holds
// them all back, compacts past the revision they hold with
// kube-apiserver's algorithm (two ticks of a Compactor: the second
// compacts to the revision the first saw, after the hold), and releases
// them together. Each informer's watch then fails with ErrCompacted and
// it relists as client-go does. In the control nothing is compacted and
// no informer may relist. Every watch is validated against the recorded
// history and every cache against etcd at the end. Divided among workers
// (Common.Shard, Barrier), each runs its block of the informers and
// shard 0 alone seeds, writes, compacts and releases (divide.go); Merge
// combines their results.
func RelistStorm(ctx context.Context, o RelistStormOptions) (*Result, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	epoch := time.Now()
	res := newResult(NameRelistStorm, o.Common, epoch)
	rs := &RelistStormResult{Options: RelistStormScenario{Objects: o.Objects, PageSizes: o.PageSizes, Watchers: o.Watchers,
		Connections: o.Connections, WriteRatePerSecond: o.WriteRate, HoldMs: report.Ms(o.Hold), Control: !o.NoControl, Seed: o.Seed}}
	res.RelistStorm = rs
	return onOneMember(ctx, o.Common, res, epoch, func(s *session) error {
		compactor := compaction.NewCompactor(s.admin)
		compactor.Physical = true
		for _, n := range o.Objects {
			if s.lead() {
				o.Logf("relist storm: seeding %d pods", n)
			} else {
				o.Logf("relist storm: waiting for shard 0 to seed %d pods", n)
			}
			l, err := newLoad(ctx, s, fmt.Sprintf("%s/relist-n%d", o.Prefix, n), n, o.Namespaces, o.Seed)
			if err != nil {
				return err
			}
			pageSizes := o.PageSizes
			if l.clients.watchList() {
				// client-go's informers load their state with a
				// WATCHLIST: no page size applies.
				pageSizes = []int64{-1}
			}
			cases := append([]int64(nil), pageSizes...)
			if !o.NoControl {
				cases = append(cases, -2)
			}
			for _, ps := range cases {
				compact := ps >= -1
				pageSize := ps
				if !compact {
					pageSize = pageSizes[0]
				}
				c, err := relistCase(ctx, s, l, compactor, o, n, pageSize, compact)
				if err != nil {
					l.close()
					return err
				}
				rs.Cases = append(rs.Cases, c)
				rs.Validation = rs.Validation.add(c.Validation)
				res.Cases = append(res.Cases, c.summary())
				o.Logf("relist storm: %d pods, lists %s%s: %d relists, resync p50 %.0f ms, max %.0f ms, probe p99 %.1f ms",
					n, c.Listing(), controlName(compact), c.Relists, c.ResyncP50Ms, c.ResyncMaxMs, c.Probe.P99Ms)
			}
			err = l.end(ctx)
			l.close()
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// PageSizeName is a LIST page size as case names and tables show it: none
// for 0 (unpaginated).
func PageSizeName(ps int64) string {
	if ps == 0 {
		return "none"
	}
	return fmt.Sprint(ps)
}

func controlName(compacted bool) string {
	if compacted {
		return ""
	}
	return " (control, not compacted)"
}

// watchListOn reports whether client-go's informers use WatchListClient
// with gate wl (nil: client-go's default, on).
func watchListOn(wl *bool) bool { return wl == nil || *wl }

// Listing names how the case's informers listed: the page size
// (PageSizeName), or watchlist.
func (c RelistStormCase) Listing() string {
	if c.WatchList {
		return "watchlist"
	}
	return PageSizeName(c.PageSize)
}

func relistCase(ctx context.Context, s *session, l *load, compactor *compaction.Compactor, o RelistStormOptions, n int, pageSize int64, compact bool) (RelistStormCase, error) {
	first, last := WatcherBlock(o.Shard, o.Watchers)
	rc := RelistStormCase{Objects: n, PageSize: max(pageSize, 0), WatchList: pageSize < 0, Compacted: compact, Watchers: last - first}
	label := rc.label()
	phase := time.Now()
	maxWrites := int64(o.WriteRate*(o.ResyncTimeout+o.Hold+time.Minute).Seconds()) + 1
	c, err := l.startCase(ctx, watcherOptions{watchers: last - first, firstID: first, conns: o.Connections, pageSize: pageSize, syncTimeout: o.ResyncTimeout}, maxWrites)
	if err != nil {
		return rc, err
	}
	defer c.Close()
	s.mark(MarkPhase, label+": initial lists", phase, time.Now(), 0)
	if err := s.meet(ctx, label, "listed"); err != nil {
		return rc, err
	}
	// Divided, shard 0 alone writes; every worker's informers see its
	// writes.
	if s.lead() {
		if err := startWrites(ctx, c, o.WriteRate, maxWrites); err != nil {
			return rc, err
		}
	}
	// Let events flow, then hold every informer back and, on the
	// scheduler, compact past them; the control holds them as long
	// without a compaction.
	clockwait.SleepReal(ctx, o.Hold/2)
	counter := l.clients.counter()
	h := &stormHold{s: s, clients: c, compactor: compactor, compact: compact, timeout: o.Hold, holdAt: time.Now(), label: label,
		onRelease: func() { counter.SetPhase(label + ": released") }}
	if compact && !s.lead() {
		// Shard 0 compacts: this worker holds its informers and waits
		// until shard 0 has compacted past them.
		if _, err := h.Hold(ctx); err != nil {
			return rc, err
		}
		h.Release(ctx, 0)
	} else if compact {
		// Ticks at once and Hold/2 later (the hold first): the first notes
		// a revision above heldRev+1, the second compacts to it, and the
		// scheduler releases the informers only then.
		sched, err := compaction.NewScheduler(h, compaction.SchedulerOptions{Interval: o.Hold / 2, Duration: o.Hold, Hold: true})
		if err == nil {
			err = sched.Run(ctx)
		}
		if err == nil && h.release.IsZero() && h.err == nil {
			err = fmt.Errorf("compacted to %d, not past the held revision %d", h.compacted, h.heldRev)
		}
		if err != nil {
			return rc, err
		}
	} else {
		if _, err := h.Hold(ctx); err != nil {
			return rc, err
		}
		clockwait.SleepReal(ctx, o.Hold)
		h.Release(ctx, 0)
	}
	if h.err != nil {
		return rc, h.err
	}
	rc.HeldRevision, rc.CompactRevision = h.heldRev, h.compacted
	release, releaseRev := h.release, h.releaseRev
	s.mark(MarkHold, label+": informers held back", h.holdAt, release, 0)
	rc.ReleaseAtMs = s.offset(release)
	// Wait until every informer has relisted after the release, or has
	// seen the revision of the release (no relist: a control, or a watch
	// kube-apiserver's watch cache resumed).
	informers := c.Informers()
	resync := make([]float64, len(informers))
	deadline := time.Now().Add(o.ResyncTimeout)
	for i, r := range informers {
		for {
			if d, ok := resyncedAfter(r, release, releaseRev, s); ok {
				resync[i] = d
				break
			}
			if time.Now().After(deadline) {
				return rc, fmt.Errorf("%s: watcher %d did not resync within %v (released at revision %d; last revision seen %d)", label, r.ID(), o.ResyncTimeout, releaseRev, r.LastRevision())
			}
			if !compact {
				c.RequestProgress(ctx)
			}
			if !clockwait.SleepReal(ctx, 10*time.Millisecond) {
				return rc, ctx.Err()
			}
		}
	}
	resynced := time.Now()
	if err := s.meet(ctx, label, "resynced"); err != nil {
		return rc, err
	}
	counter.SetPhase(label + ": resynced")
	s.mark(MarkRelease, label+": released until resynced", release, resynced, 0)
	rc.Probe = s.window(release, resynced)
	rc.ResyncMs = resync
	rc.ResyncP50Ms, rc.ResyncMaxMs = percentile(append([]float64(nil), resync...), 0.5), maxOf(resync)
	rc.EtcdRanges, rc.EtcdRangeBytes = counter.ranges(label + ": released")
	ws, v, err := l.finish(ctx, c)
	if err != nil {
		return rc, err
	}
	rc.Writes, rc.Validation = ws, v
	var lists, backoffs []float64
	for _, r := range informers {
		for _, lr := range r.Relists() {
			rc.Relists++
			rc.RelistRequests += relistRequests(lr)
			rc.RelistPages += int64(lr.Pages)
			rc.RelistObjects += lr.Objects
			rc.RelistBytes += lr.Bytes
			rc.Expired += lr.Expired
			lists = append(lists, lr.DurationMs)
			backoffs = append(backoffs, lr.BackoffMs)
		}
	}
	rc.ListMs, rc.BackoffMs = slices.Clone(lists), slices.Clone(backoffs)
	rc.ListP50Ms, rc.ListMaxMs = percentile(lists, 0.5), maxOf(lists)
	rc.BackoffP50Ms = percentile(backoffs, 0.5)
	return rc, nil
}

// stormHold is a relist storm case's compaction.Actor: it holds every
// informer of the case, ticks the experiment's compactor (kube-apiserver's
// algorithm) and releases them. The control case calls Hold and Release
// itself, without a compaction in between.
type stormHold struct {
	s         *session
	clients   watchload.ClientSet
	compactor *compaction.Compactor
	compact   bool          // a compaction follows the hold
	timeout   time.Duration // bounds the wait for the revision to move past the hold
	holdAt    time.Time     // when the informers were held
	onRelease func()        // called just before the release
	label     string        // the case's, naming its barrier points

	heldRev    int64     // the highest revision a held informer resumes after
	compacted  int64     // the last revision compacted to
	release    time.Time // when they were released; zero before
	releaseRev int64     // the store's revision then
	err        error     // why the release failed
}

var _ compaction.Actor = (*stormHold)(nil)

// Hold holds every informer and waits until each has stopped; divided,
// it then meets the other workers once they have held theirs, and shard
// 0 takes the store's revision then as heldRev (no held informer of any
// worker has seen more). Before a compaction, shard 0 also waits until
// the store's revision is heldRev+2, so that the next tick notes a
// revision above heldRev+1.
func (h *stormHold) Hold(ctx context.Context) (int64, error) {
	var err error
	if h.heldRev, err = h.clients.HoldAll(ctx); err != nil {
		return 0, err
	}
	if h.s.divided() {
		if err := h.s.meet(ctx, h.label, "held"); err != nil {
			return 0, err
		}
		if h.s.lead() {
			rev, err := h.s.revision(ctx)
			if err != nil {
				return 0, err
			}
			h.heldRev = max(h.heldRev, rev)
		}
	}
	if h.compact && h.s.lead() {
		if err := waitRevision(ctx, h.s, h.heldRev+2, h.timeout); err != nil {
			return 0, err
		}
	}
	return h.heldRev, nil
}

// Compact ticks the compactor, marking a compaction on the timeline. A
// tick that lost the compare-and-swap on compact_rev_key to another
// compactor (an existing cluster's kube-apiserver, --kubeconfig) only
// noted the revision; it ticks again at once, up to 20 times, so that the
// scheduled compaction still comes.
func (h *stormHold) Compact(ctx context.Context) (compaction.TickResult, error) {
	for i := 0; ; i++ {
		tick, err := h.s.tick(ctx, h.compactor)
		if tick.Compacted != 0 {
			h.compacted = tick.Compacted
		}
		if err != nil || tick.Won || i == 20 {
			return tick, err
		}
		if !clockwait.SleepReal(ctx, 20*time.Millisecond) {
			return tick, ctx.Err()
		}
	}
}

// Release notes the time and the store's revision and releases every
// informer; if the revision cannot be read it releases none and keeps the
// error. Divided, every worker first meets the others (shard 0 arrives
// once it has compacted), so all release together.
func (h *stormHold) Release(ctx context.Context, _ int64) {
	if h.err = h.s.meet(ctx, h.label, "released"); h.err != nil {
		return
	}
	h.release = time.Now()
	if h.releaseRev, h.err = h.s.revision(ctx); h.err != nil {
		return
	}
	if h.onRelease != nil {
		h.onRelease()
	}
	for _, r := range h.clients.Informers() {
		r.Release()
	}
}

// Defragment does nothing: the storm plans no defragmentation.
func (h *stormHold) Defragment(context.Context) error { return nil }

// resyncedAfter returns, once r is current again after its release, the
// time from release to that moment in ms: the end of a relist that began
// after the release, or, if none did, the moment r has seen releaseRev
// (its resumed watch caught up: a control case, or kube-apiserver's watch
// cache serving the watch).
func resyncedAfter(r watchload.Informer, release time.Time, releaseRev int64, s *session) (float64, bool) {
	if rs := r.Relists(); len(rs) > 0 {
		last := rs[len(rs)-1]
		at, duration := relistTimes(last)
		if s.epoch.Add(at).After(release) {
			if !relistListed(last) {
				return 0, false
			}
			return report.Ms(s.epoch.Add(at + duration).Sub(release)), true
		}
	}
	if r.LastRevision() >= releaseRev {
		return report.Ms(time.Since(release)), true
	}
	return 0, false
}

// waitRevision waits until the store's revision reaches rev, or timeout.
func waitRevision(ctx context.Context, s *session, rev int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout + 10*time.Second)
	for {
		cur, err := s.revision(ctx)
		if err != nil {
			return err
		}
		if cur >= rev {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("revision stayed at %d, below %d: are the writes failing?", cur, rev)
		}
		if !clockwait.SleepReal(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// label names the case on the timeline, in its barrier points and in
// the counting proxy's phases: n=OBJECTS ps=PAGESIZE (or watchlist),
// then " control" for the control.
func (c RelistStormCase) label() string {
	label := fmt.Sprintf("n=%d ps=%s", c.Objects, PageSizeName(c.PageSize))
	if c.WatchList {
		label = fmt.Sprintf("n=%d watchlist", c.Objects)
	}
	if !c.Compacted {
		label += " control"
	}
	return label
}

// DividedEtcdRanges sets every relist storm case's EtcdRanges and
// EtcdRangeBytes in res, a storm divided among workers through
// kube-apiservers they shared, from counter, the counting proxy between
// those kube-apiservers and etcd, whose phases the workers' coordinator
// named after each barrier point once every worker had reached it (it
// follows the barrier: SetPhase(point)): the LISTs etcd received from the
// case's release (BarrierPoint(case, "released")) until every worker's
// informers had resynced, as an undivided storm counts them from its
// release until its informers resynced. It does nothing to a result
// without a relist storm.
func DividedEtcdRanges(res *Result, counter kubeload.EtcdCounter) {
	if res.RelistStorm == nil {
		return
	}
	e := etcdCounter{counter}
	for i := range res.RelistStorm.Cases {
		c := &res.RelistStorm.Cases[i]
		c.EtcdRanges, c.EtcdRangeBytes = e.ranges(BarrierPoint(c.label(), "released"))
	}
}

func (c RelistStormCase) summary() CaseSummary {
	name := fmt.Sprintf("objects=%d pageSize=%s", c.Objects, PageSizeName(c.PageSize))
	if c.WatchList {
		name = fmt.Sprintf("objects=%d watchlist", c.Objects)
	}
	if !c.Compacted {
		name += " control"
	}
	cs := CaseSummary{Experiment: NameRelistStorm, Case: name, Relists: int64(c.Relists), RelistObjects: c.RelistObjects,
		RelistBytes: c.RelistBytes, ResyncP50Ms: c.ResyncP50Ms, ResyncMaxMs: c.ResyncMaxMs, ListRestarts: int64(c.Expired),
		BackoffP50Ms: c.BackoffP50Ms, RelistP50Ms: c.ListP50Ms,
		WritesPerSecond: c.Writes.ThroughputPerSecond, WriteP99Ms: c.Writes.Latency.P99Ms, Probe: c.Probe,
		LostEvents: c.Validation.Lost, OtherViolations: c.Validation.Others()}
	if c.Compacted {
		cs.Compactions = 1
	}
	return cs
}
