package experiment

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// CompactionSweepOptions shape the compaction interval sweep. Zero fields
// take the defaults of Common.Quick (quick / full).
type CompactionSweepOptions struct {
	Common
	// Intervals are kube-apiserver's --etcd-compaction-interval values to
	// compare; a negative one means no compaction (never, 1s, 4s / never,
	// 2s, 5s, 15s, 30s).
	Intervals []time.Duration
	// Duration is each case's write phase (6 s / 60 s).
	Duration time.Duration
	// Objects is the number of pods seeded (300 / 2000).
	Objects int
	// Watchers are the informers (3 / 10); Flaky of them (1 / 3) lose
	// their watch for Disconnect (2 s / 6 s) every DisconnectEvery (3 s /
	// 12 s), as watches broken by a network blip or an apiserver restart,
	// and resume from their last revision.
	Watchers, Flaky             int
	Disconnect, DisconnectEvery time.Duration // the disconnections: how long, how often
	// WriteRate is the pod writes per second (200 / 500).
	WriteRate float64
	// Physical waits for each compaction to finish deleting; kube-apiserver
	// does not (false).
	Physical bool
	// Namespaces and Seed as for the relist storm (10, 1).
	Namespaces int
	Seed       uint64 // seed of the objects and writes (1)
}

// Defaults fills zero fields.
func (o CompactionSweepOptions) Defaults() CompactionSweepOptions {
	o.Common = o.Common.defaults(NameCompactionSweep)
	if len(o.Intervals) == 0 {
		o.Intervals = pick(o.Quick, []time.Duration{-1, time.Second, 4 * time.Second},
			[]time.Duration{-1, 2 * time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second})
	}
	if o.Duration == 0 {
		o.Duration = pick(o.Quick, 6*time.Second, time.Minute)
	}
	if o.Objects == 0 {
		o.Objects = pick(o.Quick, 300, 2000)
	}
	if o.Watchers == 0 {
		o.Watchers = pick(o.Quick, 3, 10)
	}
	if o.Flaky == 0 {
		o.Flaky = pick(o.Quick, 1, 3)
	}
	if o.Disconnect == 0 {
		o.Disconnect = pick(o.Quick, 2*time.Second, 6*time.Second)
	}
	if o.DisconnectEvery == 0 {
		o.DisconnectEvery = pick(o.Quick, 3*time.Second, 12*time.Second)
	}
	if o.WriteRate == 0 {
		o.WriteRate = pick(o.Quick, 200.0, 500.0)
	}
	if o.Namespaces == 0 {
		o.Namespaces = 10
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// Validate reports every invalid field of o, with its field path
// (prefix, probeRate and the experiment's own, e.g. intervals[0]), as an error
// wrapping a field.ErrorList. Call it after Defaults.
func (o CompactionSweepOptions) Validate() error {
	errs := o.Common.validate()
	errs = append(errs, fieldcheck.PositiveDuration(o.Duration, field.NewPath("duration"))...)
	errs = append(errs, fieldcheck.Positive(o.Objects, field.NewPath("objects"))...)
	errs = append(errs, fieldcheck.Positive(o.Watchers, field.NewPath("watchers"))...)
	if rerrs := fieldcheck.Rate(o.WriteRate, field.NewPath("writeRate")); len(rerrs) > 0 {
		errs = append(errs, rerrs...)
	} else if o.Duration > 0 {
		errs = append(errs, fieldcheck.PlannedWrites(o.WriteRate, o.Duration, watchload.MaxPlannedWrites, field.NewPath("writeRate"))...)
	}
	errs = append(errs, fieldcheck.NonNegative(o.Flaky, field.NewPath("flaky"))...)
	errs = append(errs, fieldcheck.AtMost(o.Flaky, o.Watchers, "the number of watchers", field.NewPath("flaky"))...)
	errs = append(errs, fieldcheck.PositiveDuration(o.Disconnect, field.NewPath("disconnect"))...)
	if o.DisconnectEvery <= o.Disconnect {
		errs = append(errs, field.Invalid(field.NewPath("disconnectEvery"), o.DisconnectEvery.String(), fmt.Sprintf("must be longer than the disconnection (%v)", o.Disconnect)))
	}
	for i, d := range o.Intervals {
		if d == 0 {
			errs = append(errs, field.Invalid(field.NewPath("intervals").Index(i), d.String(), "a compaction interval of 0: use a negative one for never"))
		}
	}
	return errs.ToAggregate()
}

// CompactionSweepResult is the sweep's own result.
type CompactionSweepResult struct {
	Scenario CompactionSweepScenario `json:"scenario"` // the options
	Cases    []CompactionSweepCase   `json:"cases"`    // one per interval, in order
}

// CompactionSweepScenario echoes the options.
type CompactionSweepScenario struct {
	IntervalsMs        []float64 `json:"intervalsMs"`        // negative: never
	DurationMs         float64   `json:"durationMs"`         // write phase per case
	Objects            int       `json:"objects"`            // pods seeded
	Watchers           int       `json:"watchers"`           // informers
	FlakyWatchers      int       `json:"flakyWatchers"`      // of them, disconnected periodically
	DisconnectMs       float64   `json:"disconnectMs"`       // each disconnection
	DisconnectEveryMs  float64   `json:"disconnectEveryMs"`  // period of disconnections
	WriteRatePerSecond float64   `json:"writeRatePerSecond"` // scheduled pod writes per second
	Physical           bool      `json:"physical"`           // compactions waited for deletion
	Seed               uint64    `json:"seed"`               // seed of objects and writes
}

// CompactionSweepCase is one compaction interval on a fresh member.
type CompactionSweepCase struct {
	IntervalMs float64 `json:"intervalMs"` // negative: never compacted
	// Compactions counts compactions; CompactionP50Ms and
	// CompactionMaxMs time the Compact calls (0 through kube-apiserver,
	// whose compactor's calls are its own: its compactions are counted
	// from compact_rev_key).
	Compactions     int     `json:"compactions"`
	CompactionP50Ms float64 `json:"compactionP50Ms"` // median Compact call, ms
	CompactionMaxMs float64 `json:"compactionMaxMs"` // slowest Compact call, ms
	// Disconnections counts the flaky informers' lost watches; Relists the
	// LIST phases they (or any informer) ran after the first, with what
	// they read.
	Disconnections int   `json:"disconnections"`
	Relists        int   `json:"relists"`       // LIST phases after the first, every informer
	RelistObjects  int64 `json:"relistObjects"` // objects they read
	RelistBytes    int64 `json:"relistBytes"`   // key and value bytes they read
	// DB sizes at the start of the writes, their peak, and at the end.
	DBSizeStartBytes     int64                  `json:"dbSizeStartBytes"`
	DBSizePeakBytes      int64                  `json:"dbSizePeakBytes"`      // largest file size sampled
	DBSizeEndBytes       int64                  `json:"dbSizeEndBytes"`       // file size at the end
	DBSizeEndInUseBytes  int64                  `json:"dbSizeEndInUseBytes"`  // in use at the end
	Writes               report.WriteStats      `json:"writes"`               // the pod writes
	Probe                compaction.ProbeWindow `json:"probe"`                // during the writes
	Validation           Validation             `json:"validation"`           // the watch checks
	FinalRevision        int64                  `json:"finalRevision"`        // when the writes ended
	FinalCompactRevision int64                  `json:"finalCompactRevision"` // the last compacted to
}

// CompactionSweep runs the same load once per interval, each on a member
// of its own (Common.NewTarget is called per case): pods seeded, informers
// listing and watching them, pods written at WriteRate for Duration,
// Flaky informers disconnected periodically, and kube-apiserver's
// compactor ticking at the interval (first tick at the start of the
// writes: nothing is compacted until the second). Each case has its own
// timeline, with offsets from the case's start.
func CompactionSweep(ctx context.Context, o CompactionSweepOptions) (*Result, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	epoch := time.Now()
	res := newResult(NameCompactionSweep, o.Common, epoch)
	sc := CompactionSweepScenario{DurationMs: report.Ms(o.Duration), Objects: o.Objects, Watchers: o.Watchers, FlakyWatchers: o.Flaky,
		DisconnectMs: report.Ms(o.Disconnect), DisconnectEveryMs: report.Ms(o.DisconnectEvery), WriteRatePerSecond: o.WriteRate,
		Physical: o.Physical, Seed: o.Seed}
	for _, i := range o.Intervals {
		sc.IntervalsMs = append(sc.IntervalsMs, report.Ms(i))
	}
	cs := &CompactionSweepResult{Scenario: sc}
	res.CompactionSweep = cs
	for _, interval := range o.Intervals {
		name := "interval=" + intervalName(interval)
		o.Logf("compaction sweep: %s", name)
		s, err := openSession(ctx, o.Common, name, time.Now())
		if err != nil {
			return nil, err
		}
		if res.Target.EtcdVersion == "" {
			res.Target = s.target()
		}
		c, err := sweepCase(ctx, s, o, interval)
		if res.APIServer == nil {
			res.APIServer = s.apiServerTarget()
		}
		tl := s.close()
		if err != nil {
			return nil, err
		}
		for _, z := range tl.DBSize {
			c.DBSizePeakBytes = max(c.DBSizePeakBytes, z.Bytes)
		}
		res.Timelines = append(res.Timelines, tl)
		cs.Cases = append(cs.Cases, c)
		res.Cases = append(res.Cases, c.summary())
		o.Logf("compaction sweep: %s: %d compactions, %d relists after %d disconnections, db %d -> %d bytes (peak %d), writes %.0f/s p99 %.1f ms",
			name, c.Compactions, c.Relists, c.Disconnections, c.DBSizeStartBytes, c.DBSizeEndBytes, c.DBSizePeakBytes,
			c.Writes.ThroughputPerSecond, c.Writes.Latency.P99Ms)
	}
	res.finish(epoch)
	return res, nil
}

func intervalName(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.String()
}

func sweepCase(ctx context.Context, s *session, o CompactionSweepOptions, interval time.Duration) (CompactionSweepCase, error) {
	c := CompactionSweepCase{IntervalMs: report.Ms(interval)}
	if interval < 0 {
		c.IntervalMs = -1
	}
	// Through kube-apiserver its own compactor runs at the interval.
	l, err := newLoadCompacting(ctx, s, o.Prefix+"/sweep", o.Objects, o.Namespaces, o.Seed, interval)
	if err != nil {
		return c, err
	}
	defer l.close()
	total := int64(o.WriteRate * o.Duration.Seconds())
	run, err := l.startCase(ctx, watcherOptions{watchers: o.Watchers, conns: 2, pageSize: 500, syncTimeout: time.Minute}, total)
	if err != nil {
		return c, err
	}
	defer run.Close()
	// The size after the seeding's last backend commit (etcd commits every
	// 100 ms).
	clockwait.SleepReal(ctx, 200*time.Millisecond)
	if size, err := s.size(ctx); err == nil {
		c.DBSizeStartBytes = size.Bytes
	}
	startRev, err := s.revision(ctx)
	if err != nil {
		return c, err
	}
	start := time.Now()
	s.mark(MarkPhase, "writes start", start, start, 0)
	if err := startWrites(ctx, run, o.WriteRate, total); err != nil {
		return c, err
	}
	end := start.Add(o.Duration)
	bctx, stopBackground := context.WithDeadline(ctx, end)
	var wg sync.WaitGroup
	var compactErr error
	sc := &sweepCompactor{s: s, c: &c, comp: compaction.NewCompactor(s.admin)}
	sc.comp.Physical = o.Physical
	// kube-apiserver's compactor, through kube-apiserver: count and mark
	// what it announces.
	apiCompactions := l.clients.compactions(bctx, startRev+1, func(rev int64) {
		now := time.Now()
		s.mark(MarkCompaction, fmt.Sprintf("kube-apiserver compacts %d", rev), now, now, rev)
		c.Compactions++
		c.FinalCompactRevision = rev
	})
	switch {
	case apiCompactions != nil:
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-apiCompactions
		}()
	case interval > 0:
		// A tick every interval from now until the writes end, the first
		// at once; the first error ends the case.
		sched, err := compaction.NewScheduler(sc, compaction.SchedulerOptions{Interval: interval, Duration: time.Until(end)})
		if err != nil {
			stopBackground()
			return c, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sched.Run(bctx); err != nil && bctx.Err() == nil {
				compactErr = err
			}
		}()
	}
	if o.Flaky > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			informers := run.Informers()
			flaky := informers[len(informers)-o.Flaky:]
			for next := start.Add(o.DisconnectEvery / 2); ; next = next.Add(o.DisconnectEvery) {
				if !clockwait.SleepReal(bctx, time.Until(next)) {
					return
				}
				held := time.Now()
				for _, r := range flaky {
					r.Hold()
				}
				c.Disconnections += len(flaky)
				clockwait.SleepReal(bctx, o.Disconnect)
				for _, r := range flaky {
					r.Release()
				}
				s.mark(MarkHold, fmt.Sprintf("%d informers disconnected", len(flaky)), held, time.Now(), 0)
				if bctx.Err() != nil {
					return
				}
			}
		}()
	}
	<-bctx.Done()
	wg.Wait()
	stopBackground()
	if compactErr != nil {
		return c, compactErr
	}
	c.Probe = s.window(start, time.Now())
	if c.FinalRevision, err = s.revision(ctx); err != nil {
		return c, err
	}
	ws, v, err := l.finish(ctx, run)
	if err != nil {
		return c, err
	}
	c.Writes, c.Validation = ws, v
	c.CompactionP50Ms, c.CompactionMaxMs = percentile(sc.durations, 0.5), maxOf(sc.durations)
	for _, r := range run.Informers() {
		for _, lr := range r.Relists() {
			c.Relists++
			c.RelistObjects += lr.Objects
			c.RelistBytes += lr.Bytes
		}
	}
	if size, err := s.size(ctx); err == nil {
		c.DBSizeEndBytes, c.DBSizeEndInUseBytes = size.Bytes, size.InUseBytes
	}
	return c, nil
}

func (c CompactionSweepCase) summary() CaseSummary {
	name := "interval=never"
	if c.IntervalMs >= 0 {
		name = "interval=" + (time.Duration(c.IntervalMs * float64(time.Millisecond))).String()
	}
	return CaseSummary{Experiment: NameCompactionSweep, Case: name, Relists: int64(c.Relists), RelistObjects: c.RelistObjects,
		RelistBytes: c.RelistBytes, Compactions: c.Compactions, WritesPerSecond: c.Writes.ThroughputPerSecond,
		WriteP99Ms: c.Writes.Latency.P99Ms, Probe: c.Probe, DBSizeBeforeBytes: c.DBSizeStartBytes, DBSizeAfterBytes: c.DBSizeEndBytes,
		LostEvents: c.Validation.Lost, OtherViolations: c.Validation.Others()}
}

// sweepCompactor is a sweep case's compaction.Actor: it only ticks
// kube-apiserver's compactor, holding and defragmenting nothing, and
// counts the compactions into the case.
type sweepCompactor struct {
	s         *session
	c         *CompactionSweepCase
	comp      *compaction.Compactor
	durations []float64 // each compaction's, ms
}

var _ compaction.Actor = (*sweepCompactor)(nil)

// Hold holds nothing: a sweep plans no hold.
func (a *sweepCompactor) Hold(context.Context) (int64, error) { return 0, nil }

// Compact ticks the compactor, marks the compaction on the timeline and
// counts it; an error ends the case.
func (a *sweepCompactor) Compact(ctx context.Context) (compaction.TickResult, error) {
	tick, err := a.s.tick(ctx, a.comp)
	if err != nil {
		return tick, err
	}
	if tick.Compacted != 0 {
		a.c.Compactions++
		a.c.FinalCompactRevision = tick.Compacted
		a.durations = append(a.durations, report.Ms(tick.Duration))
	}
	return tick, nil
}

// Release releases nothing: nothing was held.
func (a *sweepCompactor) Release(context.Context, int64) {}

// Defragment does nothing: a sweep plans no defragmentation.
func (a *sweepCompactor) Defragment(context.Context) error { return nil }
