package watchload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// WriterOptions shape an open-loop write load.
type WriterOptions struct {
	// Rate is the scheduled writes per second: op i is due at start +
	// i/Rate, whatever happened to earlier ops.
	Rate float64
	// Total is the number of ops scheduled.
	Total int64
	// Workers is the number of concurrent workers (etcd benchmark's
	// --clients); worker i uses connection i mod len(kvs).
	Workers int
	// Timeout bounds one op; 0 means 10 seconds.
	Timeout time.Duration
	// QueueDepth bounds the ops waiting for one worker; 0 means 4096.
	// When every queue is full the dispatcher waits, and the waiting
	// counts in the latency of the ops it delays.
	QueueDepth int
	// ConnMember, if set, is the member each connection (by index into
	// kvs) is pinned to (Topology.ConnMember): write latencies are then
	// also recorded per member.
	ConnMember []int
}

// Writers runs an open-loop write load: a dispatcher hands op i to a
// worker at its due time, and its latency runs from that due time to the
// end of the op, so a stalled member or a saturated client cannot hide the
// ops it delayed (no coordinated omission). Failed and timed-out ops are
// counted in the latency, at the time they failed, and reported beside it.
// Ops with Shard >= 0 go to that worker, in order; the others to any.
type Writers struct {
	env *Env
	kvs []KV
	wl  Workload
	o   WriterOptions

	sent, done, errs, timeouts, conflicts, unsent atomic.Int64
	byKind                                        [4]atomic.Int64

	lastDone []int64 // per worker

	mu      sync.Mutex
	samples map[string]int
}

// NewWriters returns writers of wl on kvs that publish into env, which
// must have been made for at least o.Workers writers.
func NewWriters(env *Env, kvs []KV, wl Workload, o WriterOptions) (*Writers, error) {
	if o.Rate <= 0 || o.Workers < 1 || len(kvs) == 0 {
		return nil, fmt.Errorf("writers: rate %v, workers %d and connections %d must be positive", o.Rate, o.Workers, len(kvs))
	}
	if o.Workers > len(env.timing.inflight.sent) {
		return nil, fmt.Errorf("writers: %d workers, but the environment tracks %d", o.Workers, len(env.timing.inflight.sent))
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = 4096
	}
	w := &Writers{env: env, kvs: kvs, wl: wl, o: o, samples: map[string]int{}, lastDone: make([]int64, o.Workers)}
	if co, ok := wl.(CommitObserver); ok {
		co.ObserveCommits(w.publishStep)
	}
	return w, nil
}

// ShardedWorkload is a Workload whose plan every shard of a divided load
// shares (pkg/shard): each shard plans every op, in the same order and at
// the same due time, and performs those Owns says are its own, so the
// shards together write exactly what one undivided run writes. When Shard
// divides the load (Count above 1) Writers neither send nor count an op
// the workload does not own: WriteStats.Planned counts the owned ops the
// dispatcher reached, so a run cancelled before its schedule's end counts
// only those (the rest of the plan is not walked: Next moves the
// planner's state, and a long schedule would cost its whole length).
type ShardedWorkload interface {
	Workload
	Shard() shard.Shard
	Owns(op Op) bool
}

// anyWorkerWorkload is a Workload none of whose ops must go to a given
// worker (Op.Shard is -1 for every op), as etcd's benchmark put: its
// workers share one queue and get none of their own, which would hold
// QueueDepth ops each (23 MiB for 64 workers) for the collector to scan
// on every cycle and never use.
type anyWorkerWorkload interface {
	Workload
	anyWorker()
}

// CommitObserver is implemented by a Workload whose op may commit more
// than one revision (a pod's graceful deletion: two updates, then the
// delete). NewWriters calls ObserveCommits with a function Do calls for
// each revision but the last it returns, as soon as it has committed, on
// behalf of the worker running the op; the Writers time the watchers'
// events of those revisions from the op's send as they do the op's own.
// The function is safe for concurrent use by different workers.
type CommitObserver interface {
	ObserveCommits(f func(worker int, rev int64))
}

// publishStep records a revision an op of worker committed before its
// last, sent when the op was sent and answered now.
func (w *Writers) publishStep(worker int, rev int64) {
	t := w.env.timing
	if worker < 0 || worker >= len(t.inflight.sent) || rev == 0 {
		return
	}
	if sent := t.inflight.sent[worker].Load(); sent != 0 {
		t.ring.publish(rev, sent-1, t.now())
	}
}

// writerProgress is a live view of the writers.
type writerProgress struct {
	Sent      int64 // ops handed to etcd
	Completed int64 // ops that succeeded
	Errors    int64 // ops that failed
	Timeouts  int64 // of which timeouts
}

// Progress returns the counters so far.
func (w *Writers) Progress() writerProgress {
	return writerProgress{Sent: w.sent.Load(), Completed: w.done.Load(), Errors: w.errs.Load(), Timeouts: w.timeouts.Load()}
}

// Run schedules o.Total ops from now on and returns when all are done or
// ctx ends; ops not sent by then are counted as unsent. Write latencies
// go into the Env's histograms and interval series; the returned stats
// carry the counts.
func (w *Writers) Run(ctx context.Context) report.WriteStats {
	start := w.env.timing.now()
	shared := make(chan Op, w.o.QueueDepth)
	// queues[i] is worker i's own; none for a workload whose ops go to
	// any worker.
	var queues []chan Op
	if _, ok := w.wl.(anyWorkerWorkload); !ok {
		queues = make([]chan Op, w.o.Workers)
		for i := range queues {
			queues[i] = make(chan Op, w.o.QueueDepth)
		}
	}
	guards := make([]*opGuard, w.o.Workers)
	var wg sync.WaitGroup
	for i := range guards {
		var own chan Op // nil: never ready
		if queues != nil {
			own = queues[i]
		}
		guards[i] = &opGuard{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.work(ctx, i, own, shared, guards[i])
		}()
	}
	workersDone := make(chan struct{})
	watchdogDone := make(chan struct{})
	go func() {
		defer close(watchdogDone)
		watchdog(ctx, guards, w.o.Timeout, workersDone)
	}()
	interval := float64(time.Second) / w.o.Rate
	owns := func(Op) bool { return true }
	sw, sharded := w.wl.(ShardedWorkload)
	sharded = sharded && sw.Shard().Count > 1
	if sharded {
		owns = sw.Owns
	}
	var i, planned, handedOps int64
	for i = 0; i < w.o.Total; i++ {
		op := w.wl.Next(i)
		if !owns(op) {
			continue
		}
		planned++
		due := start + int64(float64(i)*interval)
		if d := due - w.env.timing.now(); d > 0 {
			if !clockwait.SleepReal(ctx, time.Duration(d)) {
				break
			}
		}
		op.Scheduled = time.Duration(due)
		q := shared
		if op.Shard >= 0 && queues != nil {
			q = queues[op.Shard%len(queues)]
		}
		handed := false
		select {
		case q <- op:
			handed = true
		case <-ctx.Done():
		}
		if !handed {
			break
		}
		handedOps++
	}
	if !sharded {
		planned = w.o.Total
	}
	w.unsent.Add(planned - handedOps) // never handed to a worker
	close(shared)
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	close(workersDone)
	<-watchdogDone

	st := report.WriteStats{
		Planned: planned, Sent: w.sent.Load(), Completed: w.done.Load(), Errors: w.errs.Load(),
		Timeouts: w.timeouts.Load(), Unsent: w.unsent.Load(), Conflicts: w.conflicts.Load(),
		Creates: w.byKind[OpCreate].Load(), Updates: w.byKind[OpUpdate].Load(),
		Deletes: w.byKind[OpDelete].Load(), Puts: w.byKind[OpPut].Load(),
	}
	w.mu.Lock()
	for s := range w.samples {
		st.ErrorSamples = append(st.ErrorSamples, s)
	}
	if last := slices.Max(w.lastDone); last > start {
		st.ThroughputPerSecond = float64(st.Completed) / time.Duration(last-start).Seconds()
		st.DurationMs = report.Ms(time.Duration(last - start))
	}
	w.mu.Unlock()
	sort.Strings(st.ErrorSamples)
	return st
}

// work runs one worker: its own queue first, shared ops when it is idle.
func (w *Writers) work(ctx context.Context, id int, own, shared <-chan Op, guard *opGuard) {
	kv := w.kvs[id%len(w.kvs)]
	member := int32(-1)
	if w.o.ConnMember != nil {
		member = int32(w.o.ConnMember[id%len(w.kvs)])
	}
	t := w.env.timing
	batch := make([]writeSample, 0, 64)
	flush := func() {
		if len(batch) > 0 {
			t.addWrites(batch)
			batch = batch[:0]
		}
	}
	defer flush()
	for own != nil || shared != nil {
		var op Op
		var ok bool
		select {
		case op, ok = <-own:
			if !ok {
				own = nil
				continue
			}
		case op, ok = <-shared:
			if !ok {
				shared = nil
				continue
			}
		}
		if ctx.Err() != nil {
			w.unsent.Add(1)
			continue
		}
		sent := t.now()
		t.inflight.begin(id, sent)
		w.sent.Add(1)
		octx := guard.begin(time.Now())
		rev, conflict, err := w.wl.Do(octx, id, kv, op)
		guard.end()
		if err != nil && context.Cause(octx) == errOpTimeout {
			err = fmt.Errorf("%w after %v: %v", errOpTimeout, w.o.Timeout, err)
		}
		done := t.now()
		if rev != 0 {
			t.ring.publish(rev, sent, done)
		}
		t.inflight.end(id)
		if conflict {
			w.conflicts.Add(1)
		}
		timedOut := err != nil && isTimeout(err)
		if err != nil {
			w.errs.Add(1)
			if timedOut {
				w.timeouts.Add(1)
			}
			w.mu.Lock()
			if len(w.samples) < 5 {
				w.samples[err.Error()]++
			}
			w.mu.Unlock()
		} else {
			w.done.Add(1)
			w.byKind[op.Kind].Add(1)
		}
		w.lastDone[id] = done // read after the workers have finished
		batch = append(batch, writeSample{scheduled: int64(op.Scheduled), done: done, member: member, failed: err != nil, timeout: timedOut})
		if len(batch) == cap(batch) {
			flush()
		}
	}
}

// errOpTimeout is the cause of an op cancelled by the watchdog.
var errOpTimeout = errors.New("write timed out")

// opGuard bounds one worker's op in flight without a timer per op: the
// worker's context is reused from op to op, and a watchdog shared by all
// workers cancels it (cause errOpTimeout) when the op in flight has run
// longer than the timeout, or when the run ends.
type opGuard struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
	sent   time.Time // zero when idle
}

// begin returns the context for the next op.
func (g *opGuard) begin(now time.Time) context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx == nil || g.ctx.Err() != nil {
		g.ctx, g.cancel = context.WithCancelCause(context.Background())
	}
	g.sent = now
	return g.ctx
}

func (g *opGuard) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sent = time.Time{}
}

// expire cancels the op in flight if it started before deadline (or
// unconditionally when deadline is zero).
func (g *opGuard) expire(deadline time.Time, cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cancel != nil && !g.sent.IsZero() && (deadline.IsZero() || g.sent.Before(deadline)) {
		g.cancel(cause)
		g.ctx = nil
	}
}

// watchdog expires ops older than timeout every timeout/100 (at least
// every millisecond, at most every 100 ms) until done is closed, and every
// op in flight when ctx ends.
func watchdog(ctx context.Context, guards []*opGuard, timeout time.Duration, done <-chan struct{}) {
	period := min(max(timeout/100, time.Millisecond), 100*time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			deadline := time.Now().Add(-timeout)
			for _, g := range guards {
				g.expire(deadline, errOpTimeout)
			}
		case <-ctx.Done():
			for _, g := range guards {
				g.expire(time.Time{}, context.Cause(ctx))
			}
			<-done
			return
		case <-done:
			return
		}
	}
}

// isTimeout reports whether err is a client deadline or etcd's own
// request timeout.
func isTimeout(err error) bool {
	return errors.Is(err, errOpTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrTimeout) ||
		errors.Is(err, rpctypes.ErrGRPCTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost)
}
