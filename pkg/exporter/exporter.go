package exporter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/live"
)

// The scan kinds, the kind label of the scan metrics.
const (
	KindFull  = "full"
	KindCount = "count"
)

// DefaultStaleIntervals is Options.StaleIntervals' default.
const DefaultStaleIntervals = 3

// Options configure an Exporter.
type Options struct {
	// Parser parses keys (live.UsageOptions.Parser).
	Parser keyspace.Parser
	// Endpoints are the URLs the client reached, asked first for Status
	// (live.ReadStatus); StatusTimeout bounds each member's Status (0:
	// the scan's own bound).
	Endpoints     []string
	StatusTimeout time.Duration
	// Values makes full scans read the values too (a full Range of
	// values): value bytes are exported only then.
	Values bool
	// AllowValueReads and Versions are live.UsageOptions'.
	AllowValueReads bool
	Versions        []string
	// MaxKeysPerRequest is the Range limit of a full scan's pages (0:
	// live.DefaultMaxKeysPerRequest).
	MaxKeysPerRequest int64
	// Interval is the period of full scans, and the bound of each; it
	// must be positive.
	Interval time.Duration
	// CountInterval is the period of count scans between full scans, and
	// the bound of each; 0 disables them.
	CountInterval time.Duration
	// TopNamespaces caps the namespace label to the top N namespaces
	// (OtherNamespace for the rest); 0 keeps every namespace.
	TopNamespaces int
	// QuotaBytes is the quota of a member whose Status reports none
	// (before etcd 3.6), or of every member when QuotaOverride; 0 means
	// snapshot.DefaultQuotaBytes.
	QuotaBytes    int64
	QuotaOverride bool
	// StaleIntervals is how many intervals old the last successful scan
	// of a kind may be before Health reports unhealthy; 0 means
	// DefaultStaleIntervals.
	StaleIntervals int
	// Version is the exporter's version, for etcdinspect_exporter_info.
	Version string
	// Now is the clock and After its timer (Run's waits); nil means
	// time.Now and time.After.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// OnScan, when set, is called after every scan that ended (not one
	// stopped by Run's ctx) with its kind, duration and error, outside
	// the Exporter's lock.
	OnScan func(kind string, took time.Duration, err error)
}

// scanState is what is known of one kind of scan.
type scanState struct {
	scans       int64
	errors      int64
	lastError   string
	lastSuccess time.Time
	// lastDuration is the last scan's, successful or not.
	lastDuration time.Duration
	// lastCost is the last successful scan's; totalCost every scan's.
	lastCost  Cost
	totalCost Cost
}

// Exporter runs periodic scans of a live cluster and serves the last
// successful one's figures as Prometheus metrics (it is a
// prometheus.Collector). A failed scan leaves the figures as they were
// and counts the error. Its methods are safe for concurrent use.
type Exporter struct {
	o Options
	c *costClient

	// scanning serializes Scan: the cost client counts one scan at a
	// time.
	scanning sync.Mutex

	mu     sync.Mutex
	full   *FullResult
	count  *CountResult // nil, or newer than full
	status *live.Status
	kinds  map[string]*scanState
}

// New returns an Exporter reading through c; it scans nothing until Run
// (or Scan).
func New(c live.Client, o Options) *Exporter {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.StaleIntervals <= 0 {
		o.StaleIntervals = DefaultStaleIntervals
	}
	return &Exporter{o: o, c: &costClient{c: c}, kinds: map[string]*scanState{KindFull: {}, KindCount: {}}}
}

// Run scans until ctx ends, then returns nil: a full scan at once and
// every Interval after the start of the previous one, a count scan every
// CountInterval in between. Until a full scan succeeded, none is counted
// and the full scan is retried every CountInterval (when shorter than
// Interval). Scans never overlap; each is bounded by its interval.
func (e *Exporter) Run(ctx context.Context) error {
	nextFull := e.o.Now()
	var nextCount time.Time
	for {
		next, kind := nextFull, KindFull
		if e.o.CountInterval > 0 && !nextCount.IsZero() && nextCount.Before(nextFull) {
			next, kind = nextCount, KindCount
		}
		if d := next.Sub(e.o.Now()); d > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-e.o.After(d):
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		start := e.o.Now()
		e.Scan(ctx, kind)
		if ctx.Err() != nil {
			return nil
		}
		if kind == KindFull {
			nextFull = start.Add(e.o.Interval)
			if e.hasFull() {
				nextCount = e.o.Now().Add(e.o.CountInterval)
			} else if e.o.CountInterval > 0 && e.o.CountInterval < e.o.Interval {
				nextFull = start.Add(e.o.CountInterval)
			}
		} else {
			nextCount = nextCount.Add(e.o.CountInterval)
			if now := e.o.Now(); nextCount.Before(now) {
				nextCount = now.Add(e.o.CountInterval)
			}
		}
	}
}

func (e *Exporter) hasFull() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.full != nil
}

// Scan runs one scan of kind (KindFull or KindCount) bounded by its
// interval (none when that is not positive), records its result or its
// error, and returns the error. Scans run one at a time: a Scan waits for
// the one under way.
func (e *Exporter) Scan(ctx context.Context, kind string) error {
	if kind != KindFull && kind != KindCount {
		return fmt.Errorf("scan kind %q is not %s or %s", kind, KindFull, KindCount)
	}
	e.scanning.Lock()
	defer e.scanning.Unlock()
	bound := e.o.Interval
	if kind == KindCount {
		bound = e.o.CountInterval
	}
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if bound > 0 {
		sctx, cancel = context.WithTimeout(ctx, bound)
	}
	e.mu.Lock()
	k := e.kinds[kind]
	targets := []countTarget(nil)
	if e.full != nil {
		targets = e.full.targets
	}
	hasFull := e.full != nil
	e.mu.Unlock()

	start := e.o.Now()
	e.c.take()
	var (
		full  *FullResult
		count *CountResult
		err   error
	)
	st, err := live.ReadStatus(sctx, e.c, e.o.Endpoints, e.o.StatusTimeout)
	switch {
	case err != nil:
	case kind == KindFull:
		var u *live.Usage
		u, err = live.ReadUsage(sctx, e.c, live.UsageOptions{Parser: e.o.Parser, Values: e.o.Values,
			AllowValueReads: e.o.AllowValueReads, MaxKeysPerRequest: e.o.MaxKeysPerRequest, Versions: e.o.Versions})
		if err == nil {
			full = aggregate(u, e.o.TopNamespaces)
		}
	case !hasFull:
		err = ErrNoFullScan
	default:
		count, err = countScan(sctx, e.c, targets)
	}
	if err != nil && sctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		err = fmt.Errorf("%s scan not done within its interval %s: %w", kind, bound, err)
	}
	cancel()
	cost := e.c.take()
	end := e.o.Now()

	stopped := ctx.Err() != nil && err != nil
	e.record(k, full, count, st, cost, end.Sub(start), end, stopped, err)
	if e.o.OnScan != nil && !stopped {
		e.o.OnScan(kind, end.Sub(start), err)
	}
	return err
}

// record keeps a scan's outcome: its figures when it succeeded, its
// error when it failed, only its cost and duration when it was stopped.
func (e *Exporter) record(k *scanState, full *FullResult, count *CountResult, st *live.Status, cost Cost, took time.Duration,
	end time.Time, stopped bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k.lastDuration = took
	k.totalCost.add(cost)
	if stopped {
		// Stopped, not failed: neither a scan nor an error.
		return
	}
	k.scans++
	if err != nil {
		k.errors++
		k.lastError = err.Error()
		return
	}
	k.lastSuccess, k.lastCost, k.lastError = end, cost, ""
	e.status = st
	if full != nil {
		e.full, e.count = full, nil
	}
	if count != nil {
		e.count = count
	}
}

// Health reports whether the figures are fresh: true while the first
// full scan runs (or has not started), false when no full scan succeeded
// and one failed, or when the last successful full scan is older than
// StaleIntervals Intervals, or the last successful scan of either kind
// older than StaleIntervals CountIntervals (with count scans). reason
// says which, with the last error.
func (e *Exporter) Health() (ok bool, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.o.Now()
	full, count := e.kinds[KindFull], e.kinds[KindCount]
	if full.lastSuccess.IsZero() {
		if full.errors == 0 {
			return true, "the first full scan is running"
		}
		return false, fmt.Sprintf("no successful full scan yet (%d failed): %s", full.errors, full.lastError)
	}
	stale := func(last time.Time, interval time.Duration) bool {
		return now.Sub(last) > time.Duration(e.o.StaleIntervals)*interval
	}
	lastErr := func(k *scanState) string {
		if k.lastError == "" {
			return ""
		}
		return ": last error: " + k.lastError
	}
	if stale(full.lastSuccess, e.o.Interval) {
		return false, fmt.Sprintf("the last successful full scan ended %s ago, more than %d x --interval %s%s",
			now.Sub(full.lastSuccess).Round(time.Millisecond), e.o.StaleIntervals, e.o.Interval, lastErr(full))
	}
	if e.o.CountInterval > 0 {
		last, k := full.lastSuccess, full
		if count.lastSuccess.After(last) {
			last = count.lastSuccess
		}
		if count.errors > 0 {
			k = count
		}
		if stale(last, e.o.CountInterval) {
			return false, fmt.Sprintf("the last successful scan ended %s ago, more than %d x --count-interval %s%s",
				now.Sub(last).Round(time.Millisecond), e.o.StaleIntervals, e.o.CountInterval, lastErr(k))
		}
	}
	return true, fmt.Sprintf("the last successful full scan ended %s ago", now.Sub(full.lastSuccess).Round(time.Millisecond))
}
