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

	mu        sync.Mutex
	start     time.Time
	end       time.Duration // when Run returned, from start
	ops       [2]probeKind
	successes []time.Duration // completion offsets of successful operations
	scheduled []time.Duration // scheduled offsets of all operations
	errs      map[string]int
}

type probeKind struct {
	count, errors, timeouts int64
	hist                    *hdrhistogram.Histogram
}

// NewProbe returns a probe of key through kv.
func NewProbe(kv ProbeKV, o ProbeOptions) *Probe {
	o = o.defaults()
	p := &Probe{kv: kv, o: o, errs: map[string]int{}}
	for i := range p.ops {
		p.ops[i].hist = hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	}
	return p
}

// Run probes until ctx ends and then waits for the operations in flight.
func (p *Probe) Run(ctx context.Context) {
	p.mu.Lock()
	p.start = time.Now()
	p.mu.Unlock()
	sem := make(chan struct{}, p.o.MaxInFlight)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / p.o.RatePerSecond)
	for i := 0; ; i++ {
		due := p.start.Add(time.Duration(i) * interval)
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
		go func(i int, due time.Time) {
			defer wg.Done()
			defer func() { <-sem }()
			p.do(i%2 == 0, due)
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

func (p *Probe) do(write bool, due time.Time) {
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
	k := &p.ops[0]
	if !write {
		k = &p.ops[1]
	}
	k.count++
	lat := max(done.Sub(due)/time.Microsecond, 1)
	k.hist.RecordValue(min(int64(lat), k.hist.HighestTrackableValue()))
	p.scheduled = append(p.scheduled, due.Sub(p.start))
	if err != nil {
		k.errors++
		if errors.Is(err, context.DeadlineExceeded) {
			k.timeouts++
		}
		if len(p.errs) < 10 {
			p.errs[err.Error()]++
		} else if _, ok := p.errs[err.Error()]; ok {
			p.errs[err.Error()]++
		}
		return
	}
	p.successes = append(p.successes, done.Sub(p.start))
}

// ProbeResult is what a probe saw.
type ProbeResult struct {
	Writes ProbeStats `json:"writes"`
	Reads  ProbeStats `json:"reads"`
	// LongestStallMs is the longest time during which at least one
	// operation was due and none completed successfully.
	LongestStallMs float64 `json:"longestStallMs"`
	// StallStartMs is when that stall began, from the probe's start.
	StallStartMs float64 `json:"stallStartMs"`
	// Errors counts each distinct error message (at most ten messages).
	Errors map[string]int `json:"errors,omitempty"`
}

// ProbeStats summarises one kind of probe operation.
type ProbeStats struct {
	Count    int64          `json:"count"`
	Errors   int64          `json:"errors"`
	Timeouts int64          `json:"timeouts"`
	Latency  report.Latency `json:"latency"`
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
		*dst = ProbeStats{Count: k.count, Errors: k.errors, Timeouts: k.timeouts, Latency: latencyOf(k.hist)}
	}
	end := p.end
	if end == 0 && !p.start.IsZero() {
		end = time.Since(p.start)
	}
	stall, at := longestStall(p.scheduled, p.successes, end)
	res.LongestStallMs, res.StallStartMs = report.Ms(stall), report.Ms(at)
	return res
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

func latencyOf(h *hdrhistogram.Histogram) report.Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return report.Latency{
		Count: h.TotalCount(), P50Ms: ms(h.ValueAtQuantile(50)), P90Ms: ms(h.ValueAtQuantile(90)),
		P99Ms: ms(h.ValueAtQuantile(99)), P999Ms: ms(h.ValueAtQuantile(99.9)), MaxMs: ms(h.Max()),
		MeanMs: h.Mean() / 1000,
	}
}

// String summarises the result on one line.
func (r ProbeResult) String() string {
	return fmt.Sprintf("writes %d (%d errors, %d timeouts, p99 %.1f ms), reads %d (%d errors, p99 %.1f ms), longest stall %.0f ms",
		r.Writes.Count, r.Writes.Errors, r.Writes.Timeouts, r.Writes.Latency.P99Ms,
		r.Reads.Count, r.Reads.Errors, r.Reads.Latency.P99Ms, r.LongestStallMs)
}
