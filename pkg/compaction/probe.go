package compaction

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/quantile"
	"github.com/kubestore/etcdkit/pkg/report"
)

// ProbeKV is what the probe needs from etcd; *clientv3.Client satisfies it.
type ProbeKV interface {
	Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error)
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
}

var _ ProbeKV = (*clientv3.Client)(nil)

// ProbeOptions shape a probe.
type ProbeOptions struct {
	// Key is the one key the probe writes and reads (linearizable reads,
	// as kube-apiserver's quorum GETs).
	Key string
	// RatePerSecond is the scheduled operations per second, writes and
	// reads alternating; 0 means 20.
	RatePerSecond float64
	// Timeout bounds one operation; 0 means 5 seconds. A timed-out
	// operation counts as an error and a timeout, at its timeout.
	Timeout time.Duration
	// MaxInFlight bounds the operations outstanding at once; 0 means 256.
	// When it is reached the next operation waits, and its latency still
	// counts from its scheduled time.
	MaxInFlight int
	// Epoch is the zero of every offset the probe reports (samples,
	// series, stalls, windows); the zero value means the moment Run
	// starts. Experiments pass their own epoch so that the probe's times
	// line up with their compactions and defragmentations.
	Epoch time.Time
	// SeriesInterval is the width of the buckets of ProbeResult.Series; 0
	// means one second.
	SeriesInterval time.Duration
	// MaxSamples bounds the samples kept (24 bytes each); 0 means 1<<20,
	// about 14 hours at 20 operations per second. Operations past it still
	// count in the totals and histograms but not in the series, windows
	// and stalls; ProbeResult.DroppedSamples counts them.
	MaxSamples int
}

func (o ProbeOptions) defaults() ProbeOptions {
	if o.RatePerSecond == 0 {
		o.RatePerSecond = 20
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 256
	}
	if o.SeriesInterval <= 0 {
		o.SeriesInterval = time.Second
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = 1 << 20
	}
	return o
}

// Probe issues small reads and writes on a fixed schedule while an
// experiment runs, to show what compaction and defragmentation do to an
// ordinary client: latency counted from each operation's scheduled time (a
// stalled member cannot hide the operations it delayed), errors and
// timeouts counted beside it and in it, and the longest stall, the longest
// time during which operations were due and none succeeded.
type Probe struct {
	kv ProbeKV
	o  ProbeOptions

	mu      sync.Mutex
	start   time.Time     // the epoch
	end     time.Duration // when Run returned, from the epoch
	ops     [2]probeKind
	samples []ProbeSample // in completion order, at most o.MaxSamples
	dropped int64
	errs    map[string]int
	// inflight holds the due offsets of the operations sent and not yet
	// ended, by operation number.
	inflight map[int]time.Duration
}

// ProbeSample is one probe operation. Offsets run from the probe's epoch.
type ProbeSample struct {
	// At is when the operation was due.
	At time.Duration
	// Latency runs from At to the operation's end, success or failure.
	Latency time.Duration
	// Write is true for a Put, false for a Get.
	Write bool
	// Failed is true when the operation returned an error; Timeout when
	// that error was its deadline.
	Failed, Timeout bool
}

type probeKind struct {
	count, errors, timeouts int64
	hist                    *hdrhistogram.Histogram
}

// NewProbe returns a probe of key through kv.
func NewProbe(kv ProbeKV, o ProbeOptions) *Probe {
	o = o.defaults()
	p := &Probe{kv: kv, o: o, errs: map[string]int{}, inflight: map[int]time.Duration{}}
	for i := range p.ops {
		p.ops[i].hist = hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	}
	return p
}

// Run probes until ctx ends and then waits for the operations in flight.
func (p *Probe) Run(ctx context.Context) {
	p.mu.Lock()
	p.start = p.o.Epoch
	if p.start.IsZero() {
		p.start = time.Now()
	}
	first := time.Now()
	p.mu.Unlock()
	sem := make(chan struct{}, p.o.MaxInFlight)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / p.o.RatePerSecond)
	for i := 0; ; i++ {
		due := first.Add(time.Duration(i) * interval)
		t := time.NewTimer(time.Until(due))
		select {
		case <-ctx.Done():
			t.Stop()
			p.finish(&wg)
			return
		case <-t.C:
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			p.finish(&wg)
			return
		}
		wg.Add(1)
		p.mu.Lock()
		p.inflight[i] = due.Sub(p.start)
		p.mu.Unlock()
		go func(i int, due time.Time) {
			defer wg.Done()
			defer func() { <-sem }()
			p.do(i, due)
		}(i, due)
	}
}

// finish waits for the operations in flight and records the end.
func (p *Probe) finish(wg *sync.WaitGroup) {
	wg.Wait()
	p.mu.Lock()
	p.end = time.Since(p.start)
	p.mu.Unlock()
}

func (p *Probe) do(i int, due time.Time) {
	write := i%2 == 0
	ctx, cancel := context.WithTimeout(context.Background(), p.o.Timeout)
	defer cancel()
	var err error
	if write {
		_, err = p.kv.Put(ctx, p.o.Key, due.UTC().Format(time.RFC3339Nano))
	} else {
		_, err = p.kv.Get(ctx, p.o.Key)
	}
	done := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inflight, i)
	k := &p.ops[0]
	if !write {
		k = &p.ops[1]
	}
	k.count++
	lat := max(done.Sub(due)/time.Microsecond, 1)
	k.hist.RecordValue(min(int64(lat), k.hist.HighestTrackableValue()))
	smp := ProbeSample{At: due.Sub(p.start), Latency: done.Sub(due), Write: write, Failed: err != nil}
	if err != nil {
		k.errors++
		if errors.Is(err, context.DeadlineExceeded) {
			k.timeouts++
			smp.Timeout = true
		}
	}
	if len(p.samples) < p.o.MaxSamples {
		p.samples = append(p.samples, smp)
	} else {
		p.dropped++
	}
	if err != nil {
		if len(p.errs) < 10 {
			p.errs[err.Error()]++
		} else if _, ok := p.errs[err.Error()]; ok {
			p.errs[err.Error()]++
		}
	}
}

// ProbeResult is what a probe saw.
type ProbeResult struct {
	Writes ProbeStats `json:"writes"` // the Puts
	Reads  ProbeStats `json:"reads"`  // the Gets
	// LongestStallMs is the longest time during which at least one
	// operation was due and none completed successfully.
	LongestStallMs float64 `json:"longestStallMs"`
	// StallStartMs is when that stall began, from the probe's start.
	StallStartMs float64 `json:"stallStartMs"`
	// Errors counts each distinct error message (at most ten messages).
	Errors map[string]int `json:"errors,omitempty"`
	// SeriesIntervalMs is the width of each Series bucket.
	SeriesIntervalMs float64 `json:"seriesIntervalMs"`
	// Series buckets the operations by the time they were due, from the
	// epoch, in order; empty buckets are included.
	Series []ProbeInterval `json:"series"`
	// DroppedSamples counts operations past ProbeOptions.MaxSamples, left
	// out of Series and the stall.
	DroppedSamples int64 `json:"droppedSamples,omitempty"`
}

// ProbeInterval is one bucket of the probe's series: the operations due
// in [StartMs, StartMs+SeriesIntervalMs), reads and writes together.
type ProbeInterval struct {
	StartMs  float64 `json:"startMs"`  // bucket start, ms from the epoch
	Ops      int64   `json:"ops"`      // operations due in the bucket
	Errors   int64   `json:"errors"`   // of which failed, timeouts included
	Timeouts int64   `json:"timeouts"` // of which timed out
	P50Ms    float64 `json:"p50Ms"`    // median latency from schedule, ms (0 without operations)
	P99Ms    float64 `json:"p99Ms"`    // 99th percentile, ms
	MaxMs    float64 `json:"maxMs"`    // slowest, ms
}

// ProbeWindow summarises the probe operations due within a time window,
// reads and writes together.
type ProbeWindow struct {
	FromMs   float64 `json:"fromMs"`   // window start, ms from the epoch
	ToMs     float64 `json:"toMs"`     // window end, ms from the epoch
	Ops      int64   `json:"ops"`      // operations due in the window
	Errors   int64   `json:"errors"`   // of which failed, timeouts included
	Timeouts int64   `json:"timeouts"` // of which timed out
	P50Ms    float64 `json:"p50Ms"`    // median latency from schedule, ms
	P99Ms    float64 `json:"p99Ms"`    // 99th percentile, ms
	MaxMs    float64 `json:"maxMs"`    // slowest, ms
	// LongestStallMs is the longest time, starting inside the window,
	// during which operations were due and none succeeded.
	LongestStallMs float64 `json:"longestStallMs"`
}

// ProbeStats summarises one kind of probe operation.
type ProbeStats struct {
	Count    int64          `json:"count"`    // operations sent
	Errors   int64          `json:"errors"`   // operations that failed, timeouts included
	Timeouts int64          `json:"timeouts"` // of which hit their timeout
	Latency  report.Latency `json:"latency"`  // from schedule to end, failures included
}

// Result summarises the probe so far; call it after Run returns for the
// final figures.
func (p *Probe) Result() ProbeResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := ProbeResult{Errors: map[string]int{}}
	for e, n := range p.errs {
		res.Errors[e] = n
	}
	for i, dst := range []*ProbeStats{&res.Writes, &res.Reads} {
		k := p.ops[i]
		*dst = ProbeStats{Count: k.count, Errors: k.errors, Timeouts: k.timeouts, Latency: report.LatencyOf(k.hist)}
	}
	end := p.endLocked()
	scheduled, successes := p.offsetsLocked(0, end+time.Nanosecond)
	stall, at := longestStall(scheduled, successes, end)
	res.LongestStallMs, res.StallStartMs = report.Ms(stall), report.Ms(at)
	res.SeriesIntervalMs = report.Ms(p.o.SeriesInterval)
	res.Series = p.seriesLocked(end)
	res.DroppedSamples = p.dropped
	return res
}

// endLocked returns when Run ended, or now while it runs, from the epoch.
func (p *Probe) endLocked() time.Duration {
	if p.end != 0 || p.start.IsZero() {
		return p.end
	}
	return time.Since(p.start)
}

// offsetsLocked returns the due offsets of the samples due in [from, to)
// and the completion offsets of every successful sample.
func (p *Probe) offsetsLocked(from, to time.Duration) (scheduled, successes []time.Duration) {
	for _, s := range p.samples {
		if s.At >= from && s.At < to {
			scheduled = append(scheduled, s.At)
		}
		if !s.Failed {
			successes = append(successes, s.At+s.Latency)
		}
	}
	return scheduled, successes
}

// Samples returns a copy of the samples kept, in completion order.
func (p *Probe) Samples() []ProbeSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProbeSample(nil), p.samples...)
}

// Epoch returns the zero of the probe's offsets; zero before Run.
func (p *Probe) Epoch() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start
}

// Settle waits until every operation due before `until` (an offset from
// the epoch) has ended, so that a Window up to it counts the operations a
// stall still holds; each ends by its timeout, so Settle waits at most
// about ProbeOptions.Timeout, or until ctx ends.
func (p *Probe) Settle(ctx context.Context, until time.Duration) {
	deadline := time.Now().Add(p.o.Timeout + time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		p.mu.Lock()
		pending := false
		for _, due := range p.inflight {
			if due < until {
				pending = true
				break
			}
		}
		p.mu.Unlock()
		if !pending {
			return
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// Window summarises the operations due in [from, to), offsets from the
// epoch; call Settle(to) first for the operations still in flight to
// count. A stall that starts in the window counts in full, even if it
// lasts beyond to.
func (p *Probe) Window(from, to time.Duration) ProbeWindow {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := ProbeWindow{FromMs: report.Ms(from), ToMs: report.Ms(to)}
	var lats []time.Duration
	for _, s := range p.samples {
		if s.At < from || s.At >= to {
			continue
		}
		w.Ops++
		if s.Failed {
			w.Errors++
		}
		if s.Timeout {
			w.Timeouts++
		}
		lats = append(lats, s.Latency)
	}
	w.P50Ms, w.P99Ms, w.MaxMs = quantiles(lats)
	scheduled, successes := p.offsetsLocked(from, to)
	stall, _ := longestStall(scheduled, successes, p.endLocked())
	w.LongestStallMs = report.Ms(stall)
	return w
}

// seriesLocked buckets the samples by due time up to end.
func (p *Probe) seriesLocked(end time.Duration) []ProbeInterval {
	width := p.o.SeriesInterval
	n := int(end/width) + 1
	if end <= 0 || len(p.samples) == 0 {
		return []ProbeInterval{}
	}
	lats := make([][]time.Duration, n)
	out := make([]ProbeInterval, n)
	for i := range out {
		out[i].StartMs = report.Ms(time.Duration(i) * width)
	}
	for _, s := range p.samples {
		i := int(s.At / width)
		if i < 0 || i >= n {
			continue
		}
		out[i].Ops++
		if s.Failed {
			out[i].Errors++
		}
		if s.Timeout {
			out[i].Timeouts++
		}
		lats[i] = append(lats[i], s.Latency)
	}
	for i := range out {
		out[i].P50Ms, out[i].P99Ms, out[i].MaxMs = quantiles(lats[i])
	}
	return out
}

// quantiles returns the median, 99th percentile and maximum of lats in
// milliseconds (nearest rank), zeros when empty. It sorts lats.
func quantiles(lats []time.Duration) (p50, p99, maxMs float64) {
	if len(lats) == 0 {
		return 0, 0, 0
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	return report.Ms(quantile.NearestRank(lats, 0.5)), report.Ms(quantile.NearestRank(lats, 0.99)), report.Ms(lats[len(lats)-1])
}

// longestStall finds the longest interval that starts when an operation
// was due and ends at the next success, or at end if none followed. Inputs
// are offsets from the probe's start.
func longestStall(scheduled, successes []time.Duration, end time.Duration) (time.Duration, time.Duration) {
	s := append([]time.Duration(nil), scheduled...)
	ok := append([]time.Duration(nil), successes...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	sort.Slice(ok, func(i, j int) bool { return ok[i] < ok[j] })
	var longest, at time.Duration
	j := 0
	for _, due := range s {
		// The first success at or after this due time ends its wait.
		for j < len(ok) && ok[j] < due {
			j++
		}
		until := end
		if j < len(ok) {
			until = ok[j]
		}
		if d := until - due; d > longest {
			longest, at = d, due
		}
	}
	return longest, at
}

// String summarises the result on one line.
func (r ProbeResult) String() string {
	return fmt.Sprintf("writes %d (%d errors, %d timeouts, p99 %.1f ms), reads %d (%d errors, p99 %.1f ms), longest stall %.0f ms",
		r.Writes.Count, r.Writes.Errors, r.Writes.Timeouts, r.Writes.Latency.P99Ms,
		r.Reads.Count, r.Reads.Errors, r.Reads.Latency.P99Ms, r.LongestStallMs)
}
