package watchload

// This file is the model of kube-apiserver's own requests to etcd, the
// ones it sends for itself rather than for a client: for each resource the
// count polls and the watch cache's consistency checks (resourceChores, on
// the schedules below), and PodSecurity's informer of every pod
// (ownInformer).

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/kubestore/etcdkit/internal/clockwait"
)

// What kube-apiserver sends etcd on its own for each resource, besides
// serving clients.
const (
	// CountPollPeriod is how often kube-apiserver reads each resource's
	// object count for API priority and fairness and its metrics
	// (--etcd-count-metric-poll-period, 1 minute;
	// k8s.io/apiserver/pkg/registry/generic/registry/store.go
	// startObservingCount, which waits between 1 and 2.2 periods after
	// each poll: resourceCountPollPeriodJitter 1.2, sliding).
	CountPollPeriod = time.Minute
	// countPollJitter is resourceCountPollPeriodJitter.
	countPollJitter = 1.2
	// ConsistencyCheckPeriod is how often the watch cache's consistency
	// checker compares a cached resource with etcd: between 1 and 1.5
	// periods after the cache starts and after each check
	// (DetectCacheInconsistency, on by default since 1.34;
	// k8s.io/apiserver/pkg/storage/cacher/consistency/checker.go
	// CheckPeriod, jitter 0.5, sliding).
	ConsistencyCheckPeriod = 5 * time.Minute
	// consistencyCheckJitter is the checker's jitter.
	consistencyCheckJitter = 0.5
	// consistencyCheckPageSize is the checker's page size for its LIST
	// from etcd (checker.go checkerListPageSize).
	consistencyCheckPageSize = 10000
)

// resourceChores is what kube-apiserver does to etcd on its own for one
// resource while the load runs, each on its schedule, timed by clk:
//
//   - count polling: with the watch cache, the size estimator's object
//     count (SizeBasedListCostEstimate, on by default since 1.34): etcd's
//     current revision (one key, limit 1) and a wait until the cache has
//     seen it, with progress requests (cacher.go getKeys,
//     etcd3/stats.go Stats); without, a count of the prefix
//     (etcd3/store.go Stats: "Range prefix count_only").
//   - with the watch cache, the consistency checker: the cache's items at
//     its revision against a LIST from etcd at exactly that revision in
//     pages of 10,000 (consistency/checker.go CalculateDigests), a digest
//     of each item's key and mod_revision compared.
//
// kube-apiserver polls the count once when a resource's storage starts,
// long before a load: the model's first poll comes a period after the
// load's start, and its first check 5 to 7.5 minutes after its cache
// started, so a run shorter than a minute sees neither. kube-apiserver
// polls the count of every resource it serves, some sixty; the model only
// those of its load.
type resourceChores struct {
	prefix string
	stream *Stream     // the resource's client
	cache  *watchCache // nil: not cached
	clock  clock.Clock
	rand   func() float64
	logf   func(string, ...any)

	countPolls, checks, checkMismatches, checkErrors atomic.Int64
}

// run runs the chores until ctx ends.
func (c *resourceChores) run(ctx context.Context) {
	done := make(chan struct{})
	if c.cache != nil {
		go func() {
			defer close(done)
			for clockwait.Sleep(ctx, c.clock, jittered(ConsistencyCheckPeriod, consistencyCheckJitter, c.rand)) {
				c.check(ctx)
			}
		}()
	} else {
		close(done)
	}
	for clockwait.Sleep(ctx, c.clock, jittered(CountPollPeriod, countPollJitter, c.rand)) {
		c.pollCount(ctx)
	}
	<-done
}

// jittered is d plus up to jitter times d (k8s.io/apimachinery wait.Jitter).
func jittered(d time.Duration, jitter float64, rnd func() float64) time.Duration {
	return d + time.Duration(jitter*rnd()*float64(d))
}

// pollCount reads the resource's object count as the registry's store
// does every CountPollPeriod.
func (c *resourceChores) pollCount(ctx context.Context) {
	c.countPolls.Add(1)
	if c.cache != nil {
		if rev, err := c.cache.currentRevision(ctx); err == nil {
			c.cache.waitFresh(ctx, rev)
		}
		return
	}
	_, _ = c.stream.Client.Get(c.stream.Context(ctx), c.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
}

// check compares the cache with etcd at the cache's revision, as the
// consistency checker does; a mismatch is logged and counted (upstream
// marks the cache inconsistent, a metric and a log line).
func (c *resourceChores) check(ctx context.Context) {
	if !c.cache.waitReady(ctx) {
		return
	}
	c.checks.Add(1)
	snap := c.cache.snapshot()
	want := fnv.New64()
	for _, kv := range snap.kvs {
		fmt.Fprintf(want, "%s/%d/", kv.Key, kv.ModRevision)
	}
	p := listPager{pageSize: consistencyCheckPageSize, pageFn: c.cache.etcd.getList}
	res := p.list(ctx, listOptions{resourceVersion: strconv.FormatInt(snap.revision, 10)})
	if res.attempt.Err != nil {
		if ctx.Err() == nil {
			c.checkErrors.Add(1)
			c.logf("consistency check of %s at revision %d: %v", c.prefix, snap.revision, res.attempt.Err)
		}
		return
	}
	got := fnv.New64()
	for _, kv := range res.items {
		fmt.Fprintf(got, "%s/%d/", kv.Key, kv.ModRevision)
	}
	if got.Sum64() != want.Sum64() {
		c.checkMismatches.Add(1)
		c.logf("consistency check of %s at revision %d failed: the cache holds %d items, etcd %d", c.prefix, snap.revision, len(snap.kvs), len(res.items))
	}
}

// newResourceChores returns the chores of resource prefix on stream,
// with its watch cache or nil; rnd nil uses math/rand/v2.
func newResourceChores(prefix string, stream *Stream, wc *watchCache, clk clock.Clock, rnd func() float64, logf func(string, ...any)) *resourceChores {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	return &resourceChores{prefix: prefix, stream: stream, cache: wc, clock: clk, rand: rnd, logf: logf}
}

// runChores starts the chores of each of o.WatchResources (without
// repeats), on the resource's stream of topo, with its watch cache if
// caches has one, and returns them; they run until ctx ends.
func runChores(ctx context.Context, o Options, topo *Topology, caches map[string]*watchCache, logf func(string, ...any)) []*resourceChores {
	var out []*resourceChores
	seen := map[string]bool{}
	for _, r := range o.WatchResources {
		if seen[r] {
			continue
		}
		seen[r] = true
		c := newResourceChores(ResourcePrefix(o.Prefix, r), resourceStream(topo, o.WatchResources, r), caches[r], o.Clock, nil, logf)
		out = append(out, c)
		go c.run(ctx)
	}
	return out
}

// ownInformer is an informer kube-apiserver runs on its own, through its
// loopback client, for an admission plugin: the PodSecurity plugin's
// informer of every pod (k8s.io/kubernetes/plugin/pkg/admission/security/
// podsecurity/admission.go SetExternalKubeInformerFactory: the pod lister
// registers the pods informer of kube-apiserver's shared informer
// factory, which kube-apiserver starts with itself). With the watch cache
// off its LIST and WATCH reach etcd like any client's: the initial events
// of a watch-list (client-go's WatchListClient, on by default since 1.35)
// read at the latest revision, with one unpaginated RangeStream of the
// prefix when the EtcdRangeStream gate is on (1.37), else with Range
// pages of WatcherSyncPageSize (1.35, 1.36) (etcd3/watcher.go sync,
// store.go shouldStream; store.syncInitialEvents), then one watch from
// the next revision with prev_kv; after a compaction it lists again.
// With the watch cache on, the cache serves it and etcd sees nothing of
// it, so the model runs it only in ProfileInformer. Its events are read and
// counted, not validated: it is load on etcd, not a measured client.
type ownInformer struct {
	prefix  string
	stream  *Stream
	streams *rangeStreamSupport // nil: EtcdRangeStream off
	clock   clock.WithTicker

	lists, events atomic.Int64
	// watching is closed once the informer has listed and asked etcd for
	// its first watch.
	watching     chan struct{}
	watchingOnce sync.Once
}

// startOwnInformer starts kube-apiserver's own informer of the pods
// under prefix (PodSecurity's) on stream, until ctx ends, and returns it;
// rangeStream is the EtcdRangeStream gate (Options.RangeStream).
func startOwnInformer(ctx context.Context, prefix string, stream *Stream, clk clock.WithTicker, rangeStream bool) *ownInformer {
	if clk == nil {
		clk = clock.RealClock{}
	}
	in := &ownInformer{prefix: ResourcePrefix(prefix, ResourcePods), stream: stream, clock: clk, watching: make(chan struct{})}
	if rangeStream {
		in.streams = newRangeStreamSupport(clk)
	}
	go in.run(ctx)
	return in
}

// waitWatching waits until the informer has listed and started its
// watch, at most timeout (real time) or until ctx ends, and reports
// whether it had. kube-apiserver serves no request before its informers
// have synced (its readyz check informer-sync), so a run seeds only after
// this.
func (in *ownInformer) waitWatching(ctx context.Context, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-in.watching:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// run lists and watches until ctx ends, listing again one second after a
// list fails or the watch ends (client-go's reflector backoff, its first
// step).
func (in *ownInformer) run(ctx context.Context) {
	st := &store{stream: in.stream, client: in.stream.Client, prefix: in.prefix, streams: in.streams}
	for ctx.Err() == nil {
		if l := st.syncInitialEvents(ctx, ""); l.attempt.Err == nil {
			in.lists.Add(1)
			in.watch(ctx, l.attempt.Revision+1)
		}
		clockwait.Sleep(ctx, in.clock, time.Second)
	}
}

// watch watches from revision from until the watch fails or ctx ends.
func (in *ownInformer) watch(ctx context.Context, from int64) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := in.stream.Client.Watch(in.stream.Context(wctx), in.prefix,
		clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV())
	in.watchingOnce.Do(func() { close(in.watching) })
	for resp := range wch {
		in.events.Add(int64(len(resp.Events)))
		if resp.Err() != nil {
			return
		}
	}
}
