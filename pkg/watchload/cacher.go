package watchload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/pkg/report"
)

// Consistent reads from the watch cache (KEP-2340), from
// k8s.io/apiserver/pkg/storage/cacher.
const (
	// ProgressRequestPeriod is how often a cache that a request waits on
	// asks etcd for a progress notification (progress/watch_progress.go
	// progressRequestPeriod).
	ProgressRequestPeriod = 100 * time.Millisecond
	// consistentReadTimeout is how long a consistent LIST waits for the
	// cache before falling back to etcd (watch_cache.go blockTimeout).
	consistentReadTimeout = 3 * time.Second
)

// progressRequester is kube-apiserver's ConditionalProgressRequester for
// one watch stream: while at least one request waits for the cache to be
// fresh, it asks etcd for a progress notification every
// ProgressRequestPeriod; when nobody waits it sends nothing. Use
// newProgressRequester, Run it in a goroutine, and bracket each wait with
// Add and Remove.
type progressRequester struct {
	stream *Stream
	clock  clock.WithTicker

	mu       sync.Mutex
	cond     *sync.Cond
	waiting  int
	stopped  bool
	requests atomic.Int64
}

// newProgressRequester returns a requester for stream timed by clk (nil:
// the real clock).
func newProgressRequester(stream *Stream, clk clock.WithTicker) *progressRequester {
	if clk == nil {
		clk = clock.RealClock{}
	}
	p := &progressRequester{stream: stream, clock: clk}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Requests returns the number of progress requests sent.
func (p *progressRequester) Requests() int64 { return p.requests.Load() }

// Add registers a waiting request.
func (p *progressRequester) Add() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting++
	p.cond.Signal()
}

// Remove withdraws a waiting request.
func (p *progressRequester) Remove() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting--
}

// Run sends progress requests until ctx ends.
func (p *progressRequester) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		p.mu.Lock()
		p.stopped = true
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	timer := p.clock.NewTimer(ProgressRequestPeriod)
	defer timer.Stop()
	for {
		p.mu.Lock()
		for p.waiting == 0 && !p.stopped {
			p.cond.Wait()
		}
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		select {
		case <-timer.C():
			p.mu.Lock()
			should := p.waiting > 0 && !p.stopped
			p.mu.Unlock()
			if !should {
				timer.Reset(0)
				continue
			}
			timer.Reset(ProgressRequestPeriod)
			// Count the request before sending it: its notification can
			// reach a waiting reader, and the reader's result be read,
			// before RequestProgress returns.
			p.requests.Add(1)
			if p.stream.RequestProgress(ctx) != nil {
				p.requests.Add(-1)
			}
		case <-ctx.Done():
			return
		}
	}
}

// consistentReader drives consistent LISTs (resourceVersion "") served by
// watch caches, as kube-apiserver serves them since KEP-2340: get etcd's
// current revision with a single-key read of the resource prefix
// (etcd3/store.go GetCurrentResourceVersion), wait until the cache has
// seen it while its stream's progressRequester asks for progress
// notifications, serve from the cache, or after consistentReadTimeout fall
// back to a LIST from etcd (cacher/delegator.go GetList).
type consistentReader struct {
	caches     []*Reflector
	requesters map[*Stream]*progressRequester
	env        *Env
	prefix     string // kube-apiserver's --etcd-prefix
	timeout    time.Duration
	pageSize   int64

	requests, served, fallbacks, errs atomic.Int64

	mu       sync.Mutex
	wait     histogram
	latency  histogram
	inflight sync.WaitGroup
}

// newConsistentReader returns a reader over caches (apiserver-cache
// reflectors); requesters maps each cache's stream to its requester.
// Fallback LISTs use pages of pageSize.
func newConsistentReader(env *Env, caches []*Reflector, requesters map[*Stream]*progressRequester, pageSize int64) *consistentReader {
	return &consistentReader{caches: caches, requesters: requesters, env: env, timeout: consistentReadTimeout,
		pageSize: pageSize, wait: newHistogram(), latency: newHistogram()}
}

// Run issues rate requests per second, round robin over the caches, open
// loop, until ctx ends or duration has passed; it returns when the last
// request has finished.
func (c *consistentReader) Run(ctx context.Context, rate float64, duration time.Duration) {
	if rate <= 0 || len(c.caches) == 0 {
		return
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if due.Sub(start) >= duration || !clockwait.SleepReal(ctx, time.Until(due)) {
			break
		}
		cache := c.caches[i%len(c.caches)]
		c.inflight.Add(1)
		go func() {
			defer c.inflight.Done()
			c.read(ctx, cache, due)
		}()
	}
	c.inflight.Wait()
}

func (c *consistentReader) read(ctx context.Context, cache *Reflector, due time.Time) {
	c.requests.Add(1)
	o := cache.Options()
	rctx := o.Stream.Context(ctx)
	resp, err := o.Stream.Client.Get(rctx, o.Prefix[:len(o.Prefix)-1])
	if err != nil {
		c.errs.Add(1)
		return
	}
	rev := resp.Header.Revision
	waitStart := time.Now()
	fresh, cancel := cache.waitRevision(rev)
	defer cancel()
	served := false
	select {
	case <-fresh:
		served = true
	default:
		req := c.requesters[o.Stream]
		if req != nil {
			req.Add()
		}
		t := time.NewTimer(c.timeout)
		select {
		case <-fresh:
			served = true
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if req != nil {
			req.Remove()
		}
	}
	waited := time.Since(waitStart)
	if ctx.Err() != nil {
		return
	}
	if !served {
		c.fallbacks.Add(1)
		if err := c.fallback(rctx, o); err != nil {
			c.errs.Add(1)
			return
		}
	} else {
		c.served.Add(1)
	}
	c.mu.Lock()
	c.wait.record(waited)
	c.latency.record(time.Since(due))
	c.mu.Unlock()
}

// fallback is the delegator's fallback (cacher/delegator.go GetList: the
// cache did not catch up in time, so the LIST goes to etcd with the
// request's own options): the consistent LIST, resourceVersion "" with a
// limit of pageSize, and then its continuations, each served by
// kube-apiserver's etcd3 store (store.getList): a RangeStream (etcd 3.7)
// or Range of one page, the first at the latest revision, the others
// pinned to it.
func (c *consistentReader) fallback(ctx context.Context, o ReflectorOptions) error {
	st := &store{stream: o.Stream, client: o.Stream.Client, prefix: o.Prefix, streams: c.env.rangeStream}
	p := listPager{pageSize: c.pageSize, pageFn: st.getList}
	return p.list(ctx, listOptions{}).attempt.Err
}

// Result returns the counts and latencies so far.
func (c *consistentReader) Result() *report.ConsistentReads {
	c.mu.Lock()
	defer c.mu.Unlock()
	var progress int64
	for _, r := range c.requesters {
		progress += r.Requests()
	}
	return &report.ConsistentReads{
		Requests: c.requests.Load(), ServedFromCache: c.served.Load(), Fallbacks: c.fallbacks.Load(), Errors: c.errs.Load(),
		ProgressRequests: progress, ReadWait: c.wait.summary(), Latency: c.latency.summary(),
	}
}
