package watchload

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/revision"
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

// Watch cache history and serving, from k8s.io/apiserver/pkg/storage/cacher.
const (
	// eventFreshDuration is how long the watch cache keeps events for
	// clients that watch again from an older revision
	// (cacher.go DefaultEventFreshDuration: a bookmark period plus 15 s).
	eventFreshDuration = 75 * time.Second
	// historyMinEvents and historyMaxEvents bound the events kept: the
	// cache keeps at least the smallest capacity and at most the largest
	// whatever their age (watch_cache.go defaultLowerBoundCapacity,
	// defaultUpperBoundCapacity).
	historyMinEvents = 100
	historyMaxEvents = 100 * 1024
)

// watchCache is kube-apiserver's watch cache of one resource (the Cacher
// and its watchCache, k8s.io/apiserver/pkg/storage/cacher): a
// ProfileAPIServerCache Reflector fills it from etcd, and it serves its
// clients' LISTs and WATCHes in-process (getList, watch), so that etcd
// sees one list and one watch per resource whatever the number of
// clients, and for each client only what the cache cannot answer:
//
//	client request             etcd sees
//	LIST rv="0"                nothing: the cache's latest state
//	LIST rv="R"                nothing, once the cache has seen R (progress
//	                           requests while it waits; after 3 s "too large
//	                           resource version")
//	LIST rv="" (consistent),   a read of the current revision (one key,
//	WATCH sendInitialEvents    limit 1), progress requests every 100 ms while
//	(WatchListClient)          the cache is behind it, and after 3 s the LIST
//	                           from etcd with the request's own options
//	WATCH from R+1             nothing: the cache's history since R, then its
//	                           events; "too old" (410) when R is older than the
//	                           history it kept
//
// A relist of the cache (its etcd watch compacted or failed for good)
// ends every client's watch, as startCaching does, and empties the
// history; the clients relist from the cache (client-go first watches
// again and is answered 410, "too old resource version", since the new
// history starts after its revision; the model's Reflector relists at
// once after a watch that ended, reason watch-error). What the model leaves out: the cache's
// snapshots for LISTs at an exact older revision (ListFromCacheSnapshot:
// such LISTs are served at the cache's revision here), the per-watcher
// buffers of 100 events and the termination of watchers too slow to take
// them (every served watch has an unbounded queue here), and the pages of
// a LIST served from the cache (one page here; the cache does not reach
// etcd for them either). Bookmarks: every progress notification the cache
// receives is passed on to its clients (upstream sends one when a client
// asks for bookmarks and about once a minute).
type watchCache struct {
	// resource and prefix are the cached resource and its key prefix,
	// ending in "/".
	resource, prefix string
	// refl fills the cache; its Stream is the resource's own etcd client
	// and watch stream.
	refl *Reflector
	// etcd is kube-apiserver's etcd3 store of the resource, for LISTs the
	// cache cannot serve.
	etcd *store
	// requester asks etcd for progress while reads wait for the cache.
	requester *progressRequester
	// timeout bounds a read's wait for the cache (watch_cache.go
	// blockTimeout).
	timeout time.Duration
	// watchList: clients' initial lists are consistent (client-go's
	// WatchListClient: a WATCH with sendInitialEvents at rv="", which the
	// cache serves once it has seen etcd's current revision).
	watchList bool

	rv watermark // the cache's resourceVersion

	mu      sync.Mutex
	ready   chan struct{} // closed while the cache serves
	items   map[string]*mvccpb.KeyValue
	history []cachedBatch
	held    int   // events in history
	oldest  int64 // every event after it is in history
	watches map[*servedWatch]struct{}

	currentReads, waits, fallbacks, tooLarge atomic.Int64
}

// cachedBatch is one watch response's events, as the cache keeps them.
type cachedBatch struct {
	at  time.Time
	rev int64 // the highest revision in it
	evs []*clientv3.Event
}

// newWatchCache makes the watch cache of o.Resource: o is its reflector's
// options (Profile ProfileAPIServerCache; Stream the resource's own), env
// where it records. Run its reflector (Reflector()), and its progress
// requester with runRequester, until the load ends.
func newWatchCache(env *Env, o ReflectorOptions, watchList bool) *watchCache {
	o.Profile = ProfileAPIServerCache
	wc := &watchCache{resource: o.Resource, prefix: o.Prefix, timeout: consistentReadTimeout, watchList: watchList,
		ready: make(chan struct{}), items: map[string]*mvccpb.KeyValue{}, watches: map[*servedWatch]struct{}{}}
	wc.refl = NewReflector(env, o)
	wc.refl.sink, wc.refl.untimed = wc, true
	wc.etcd = &store{stream: o.Stream, client: o.Stream.Client, prefix: o.Prefix, streams: env.rangeStream}
	wc.requester = newProgressRequester(o.Stream, o.Clock)
	return wc
}

// Reflector returns the reflector that fills the cache from etcd.
func (wc *watchCache) Reflector() *Reflector { return wc.refl }

// runRequester runs the cache's progress requester until ctx ends.
func (wc *watchCache) runRequester(ctx context.Context) { wc.requester.Run(ctx) }

// listing is called when the cache's reflector starts a LIST: the cache
// stops serving, ends every served watch and forgets its history
// (cacher.go startCaching, terminateAllWatchers).
func (wc *watchCache) listing() {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	select {
	case <-wc.ready:
		wc.ready = make(chan struct{})
	default:
	}
	for w := range wc.watches {
		w.terminate()
	}
	clear(wc.watches)
	wc.history, wc.held = nil, 0
}

// replaced is called with the items of a LIST the cache's reflector
// completed at revision rev: they become the cache's content and rev its
// resourceVersion, and it serves again (watch_cache.go Replace).
func (wc *watchCache) replaced(kvs []*mvccpb.KeyValue, rev int64) {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	wc.items = make(map[string]*mvccpb.KeyValue, len(kvs))
	for _, kv := range kvs {
		wc.items[string(kv.Key)] = kv
	}
	wc.history, wc.held, wc.oldest = nil, 0, rev
	wc.rv.Store(rev)
	select {
	case <-wc.ready:
	default:
		close(wc.ready)
	}
}

// events is called with each watch response's events, which the
// reflector has applied, and their highest revision: the cache applies
// them, keeps them in its history and hands them to every served watch
// (cacher.go dispatchEvents).
func (wc *watchCache) events(evs []*clientv3.Event, rev int64) {
	if len(evs) == 0 {
		return
	}
	now := time.Now()
	wc.mu.Lock()
	defer wc.mu.Unlock()
	for _, ev := range evs {
		if ev.Type == mvccpb.DELETE {
			delete(wc.items, string(ev.Kv.Key))
		} else {
			wc.items[string(ev.Kv.Key)] = ev.Kv
		}
	}
	wc.history = append(wc.history, cachedBatch{at: now, rev: rev, evs: evs})
	wc.held += len(evs)
	for len(wc.history) > 0 && (wc.held > historyMaxEvents ||
		wc.held-len(wc.history[0].evs) >= historyMinEvents && now.Sub(wc.history[0].at) > eventFreshDuration) {
		wc.oldest = wc.history[0].rev
		wc.held -= len(wc.history[0].evs)
		wc.history = wc.history[1:]
	}
	if rev > wc.rv.Load() {
		wc.rv.Store(rev)
	}
	for w := range wc.watches {
		w.send(evs)
	}
}

// progress is called with each progress notification the reflector
// received: the cache's resourceVersion moves to rev, and every served
// watch gets a bookmark (watch_cache.go UpdateResourceVersion), also when
// rev is the cache's revision already, so that a client that asks for
// progress on the cache's stream hears of it.
func (wc *watchCache) progress(rev int64) {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if rev < wc.rv.Load() {
		return
	}
	wc.rv.Store(rev)
	for w := range wc.watches {
		w.bookmark(rev)
	}
}

// waitReady waits until the cache serves; false if ctx ended first.
func (wc *watchCache) waitReady(ctx context.Context) bool {
	wc.mu.Lock()
	ready := wc.ready
	wc.mu.Unlock()
	select {
	case <-ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// currentRevision reads etcd's current revision as kube-apiserver's
// store does for a consistent read: a get of the resource prefix as one
// key, limit 1, on the resource's client (etcd3/store.go
// GetCurrentResourceVersion, client/v3/kubernetes Client.Get).
func (wc *watchCache) currentRevision(ctx context.Context) (int64, error) {
	wc.currentReads.Add(1)
	st := wc.refl.o.Stream
	resp, err := st.Client.Get(st.Context(ctx), strings.TrimSuffix(wc.prefix, "/"), clientv3.WithLimit(1))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// waitFresh waits until the cache has seen revision rev, for at most the
// cache's timeout, while its progress requester asks etcd for progress
// notifications (watch_cache.go waitUntilFreshLocked); false if the time
// ran out or ctx ended first.
func (wc *watchCache) waitFresh(ctx context.Context, rev int64) bool {
	fresh, cancel := wc.rv.wait(rev)
	defer cancel()
	select {
	case <-fresh:
		return true
	default:
	}
	wc.waits.Add(1)
	wc.requester.Add()
	defer wc.requester.Remove()
	t := time.NewTimer(wc.timeout)
	defer t.Stop()
	select {
	case <-fresh:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// getList serves one page of a client's LIST from the cache, as the
// CacheDelegator and Cacher do (cacher/delegator.go GetList, cacher.go
// GetList, watch_cache.go WaitUntilFreshAndGetList): rv="0" at once, a
// revision once the cache has seen it, rv="" (and, with watchList, the
// first list) once the cache has seen etcd's current revision; a
// consistent read that waited in vain falls back to etcd with the
// request's own options, a LIST at a revision fails with
// errTooLargeRV. The page served from the cache holds every item at the
// cache's revision (answered false: etcd served nothing); continuation
// pages are those of a fallback and go to etcd.
func (wc *watchCache) getList(ctx context.Context, opts listOptions) (listPage, error) {
	if opts.continueFrom != nil {
		return wc.etcd.getList(ctx, opts)
	}
	rv, err := revision.ParseResourceVersion(opts.resourceVersion)
	if err != nil {
		return listPage{}, err
	}
	if !wc.waitReady(ctx) {
		return listPage{}, ctx.Err()
	}
	consistent := opts.resourceVersion == "" || (rv == 0 && wc.watchList)
	if consistent {
		if rv, err = wc.currentRevision(ctx); err != nil {
			return listPage{}, err
		}
	}
	if !wc.waitFresh(ctx, rv) {
		switch {
		case ctx.Err() != nil:
			return listPage{}, ctx.Err()
		case consistent:
			wc.fallbacks.Add(1)
			return wc.etcd.getList(ctx, listOptions{limit: opts.limit})
		}
		wc.tooLarge.Add(1)
		return listPage{}, errTooLargeRV
	}
	return wc.snapshot(), nil
}

// snapshot returns the cache's items in key order at its revision.
func (wc *watchCache) snapshot() listPage {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	page := listPage{kvs: make([]*mvccpb.KeyValue, 0, len(wc.items)), revision: wc.rv.Load()}
	for _, kv := range wc.items {
		page.kvs = append(page.kvs, kv)
	}
	slices.SortFunc(page.kvs, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return page
}

// watch serves a client's WATCH from revision from (its last revision +
// 1) once the cache serves: the history's events from it on, then every
// new one, until ctx ends or the cache relists (the channel then closes);
// from older than the history answers a compaction, 410 "too old resource
// version" (cacher.go Watch, watch_cache.go getAllEventsSinceLocked).
func (wc *watchCache) watch(ctx context.Context, from int64) clientv3.WatchChan {
	out := make(chan clientv3.WatchResponse)
	if !wc.waitReady(ctx) {
		close(out)
		return out
	}
	wc.mu.Lock()
	if from <= wc.oldest {
		oldest := wc.oldest
		wc.mu.Unlock()
		go func() {
			defer close(out)
			select {
			case out <- clientv3.WatchResponse{CompactRevision: oldest + 1, Canceled: true}:
			case <-ctx.Done():
			}
		}()
		return out
	}
	w := newServedWatch(from)
	for _, b := range wc.history {
		if b.rev >= from {
			w.send(b.evs)
		}
	}
	wc.watches[w] = struct{}{}
	wc.mu.Unlock()
	go func() {
		w.run(ctx, out)
		wc.mu.Lock()
		delete(wc.watches, w)
		wc.mu.Unlock()
	}()
	return out
}

// servedWatch is one client's watch on a watchCache: the responses due
// to it, queued without bound, and the goroutine that delivers them.
type servedWatch struct {
	from int64

	mu         sync.Mutex
	cond       *sync.Cond
	queue      []clientv3.WatchResponse
	terminated bool
}

func newServedWatch(from int64) *servedWatch {
	w := &servedWatch{from: from}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// send queues evs' events at or after the watch's start revision.
func (w *servedWatch) send(evs []*clientv3.Event) {
	if evs[0].Kv.ModRevision < w.from {
		i := slices.IndexFunc(evs, func(ev *clientv3.Event) bool { return ev.Kv.ModRevision >= w.from })
		if i < 0 {
			return
		}
		evs = evs[i:]
	}
	last := evs[len(evs)-1].Kv.ModRevision
	w.push(clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: last}, Events: evs})
}

// bookmark queues a progress notification at rev.
func (w *servedWatch) bookmark(rev int64) {
	if rev >= w.from-1 {
		w.push(clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}})
	}
}

func (w *servedWatch) push(resp clientv3.WatchResponse) {
	w.mu.Lock()
	w.queue = append(w.queue, resp)
	w.mu.Unlock()
	w.cond.Signal()
}

// terminate ends the watch without delivering what is queued.
func (w *servedWatch) terminate() {
	w.mu.Lock()
	w.terminated = true
	w.queue = nil
	w.mu.Unlock()
	w.cond.Signal()
}

// run delivers the queue to out until ctx ends or terminate, then closes
// out.
func (w *servedWatch) run(ctx context.Context, out chan<- clientv3.WatchResponse) {
	defer close(out)
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.terminated = true
		w.mu.Unlock()
		w.cond.Signal()
	})
	defer stop()
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.terminated {
			w.cond.Wait()
		}
		if w.terminated {
			w.mu.Unlock()
			return
		}
		resp := w.queue[0]
		w.queue = w.queue[1:]
		w.mu.Unlock()
		select {
		case out <- resp:
		case <-ctx.Done():
			return
		}
	}
}

// cacheClient is the Client of a watch cache's client: its watches are
// served by the cache (watchCache.watch); its LISTs reach the cache
// through Reflector.listPage, never Get.
type cacheClient struct{ wc *watchCache }

var _ Client = cacheClient{}

// Get fails: a client of a watch cache lists through watchCache.getList.
func (c cacheClient) Get(context.Context, string, ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return nil, errors.New("a watch cache's client lists through the cache")
}

// GetStream fails as Get does.
func (c cacheClient) GetStream(context.Context, string, ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	return nil, errors.New("a watch cache's client lists through the cache")
}

// Watch serves the watch from the cache, from the revision opts give.
func (c cacheClient) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	return c.wc.watch(ctx, clientv3.OpGet(key, opts...).Rev())
}

// RequestProgress asks etcd for progress on the cache's stream: the
// cache's progress notification then reaches its clients as a bookmark.
func (c cacheClient) RequestProgress(ctx context.Context) error {
	return c.wc.refl.o.Stream.RequestProgress(ctx)
}

// consistentReader drives consistent LISTs (resourceVersion "", limit
// 500, as a client's pager sends them) at a fixed rate, round robin over
// watch caches, each served as watchCache.getList serves a client's:
// extra readers beside the watchers, for `lwbench run`.
type consistentReader struct {
	caches []*watchCache
	env    *Env

	requests, served, fallbacks, errs atomic.Int64

	mu       sync.Mutex
	wait     histogram
	latency  histogram
	inflight sync.WaitGroup
}

// newConsistentReader returns a reader over caches.
func newConsistentReader(env *Env, caches []*watchCache) *consistentReader {
	return &consistentReader{caches: caches, env: env, wait: newHistogram(), latency: newHistogram()}
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
		wc := c.caches[i%len(c.caches)]
		c.inflight.Add(1)
		go func() {
			defer c.inflight.Done()
			c.read(ctx, wc, due)
		}()
	}
	c.inflight.Wait()
}

func (c *consistentReader) read(ctx context.Context, wc *watchCache, due time.Time) {
	c.requests.Add(1)
	start := time.Now()
	p := listPager{pageSize: DefaultPageSize, pageFn: wc.getList}
	res := p.list(ctx, listOptions{resourceVersion: ""})
	if ctx.Err() != nil {
		return
	}
	if res.attempt.Err != nil {
		c.errs.Add(1)
		return
	}
	if res.attempt.Pages > 0 {
		c.fallbacks.Add(1)
	} else {
		c.served.Add(1)
	}
	c.mu.Lock()
	c.wait.record(time.Since(start))
	c.latency.record(time.Since(due))
	c.mu.Unlock()
}

// Result returns the counts and latencies so far; ProgressRequests counts
// every cache's, whoever waited.
func (c *consistentReader) Result() *report.ConsistentReads {
	c.mu.Lock()
	defer c.mu.Unlock()
	var progress int64
	for _, wc := range c.caches {
		progress += wc.requester.Requests()
	}
	return &report.ConsistentReads{
		Requests: c.requests.Load(), ServedFromCache: c.served.Load(), Fallbacks: c.fallbacks.Load(), Errors: c.errs.Load(),
		ProgressRequests: progress, ReadWait: c.wait.summary(), Latency: c.latency.summary(),
	}
}
