package watchload

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestResourceChores steps a fake clock through kube-apiserver's own
// reads of two resources, one cached: every minute a count poll (for the
// cached one a read of the current revision and a wait for the cache, with
// a progress request since etcd moved on without it; for the other a
// count), every five minutes a consistency check of the cache, which
// passes, then fails once an item the cache holds is not etcd's.
func TestResourceChores(t *testing.T) {
	c, env, prefix := podsFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	stream := NewStream(0, 0, c, "")
	wc := runWatchCache(ctx, &wg, env, ReflectorOptions{Prefix: prefix, Stream: stream}, true)

	clk := clocktesting.NewFakeClock(time.Now())
	var mu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, format)
	}
	zero := func() float64 { return 0 }
	cached := newResourceChores(prefix, stream, wc, clk, zero, logf)
	uncached := newResourceChores("/registry/events/", stream, nil, clk, zero, logf)
	for _, ch := range []*resourceChores{cached, uncached} {
		wg.Add(1)
		go func() { defer wg.Done(); ch.run(ctx) }()
	}
	moved := putKeys(t, c, "/registry/configmaps/", 0, 1) // etcd moves on, the pods cache sees nothing
	step := func(d time.Duration) {
		waitFor(t, "the chores to wait on the clock", func() bool { return clk.Waiters() == 3 })
		clk.Step(d)
	}
	step(CountPollPeriod)
	waitFor(t, "the count polls", func() bool { return cached.countPolls.Load() == 1 && uncached.countPolls.Load() == 1 })
	waitFor(t, "the cache to see etcd's revision", func() bool { return wc.rv.Load() >= moved })
	if n := wc.currentReads.Load(); n != 1 {
		t.Errorf("%d reads of the current revision, want 1", n)
	}
	if wc.requester.Requests() == 0 {
		t.Errorf("no progress request while the count poll waited for the cache")
	}
	for range 4 {
		step(CountPollPeriod)
	}
	waitFor(t, "the first consistency check", func() bool { return cached.checks.Load() == 1 && cached.checkErrors.Load() == 0 })
	if n := cached.checkMismatches.Load(); n != 0 {
		t.Errorf("%d failed checks of a consistent cache, want 0; log %v", n, logs)
	}

	wc.mu.Lock()
	wc.items[prefix+"planted"] = &mvccpb.KeyValue{Key: []byte(prefix + "planted"), ModRevision: 1}
	wc.mu.Unlock()
	for range 5 {
		step(CountPollPeriod)
	}
	waitFor(t, "the second consistency check", func() bool { return cached.checks.Load() == 2 })
	waitFor(t, "the check to fail", func() bool { return cached.checkMismatches.Load() == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], "failed") {
		t.Errorf("log %q, want one line of a failed check", logs)
	}
	if n := uncached.countPolls.Load(); n != 10 {
		t.Errorf("%d count polls of the uncached resource in ten minutes, want 10", n)
	}
}

// TestCacheRelistEndsServedWatches holds a watch cache's own watch back
// across a compaction: the cache relists from etcd, which ends its
// client's watch; the client relists from the cache, without a request to
// etcd, and holds the cache's state at the end.
func TestCacheRelistEndsServedWatches(t *testing.T) {
	c, env, prefix := podsFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	stream := NewStream(0, 0, c, "")
	wc := runWatchCache(ctx, &wg, env, ReflectorOptions{ID: 1, Prefix: prefix, Stream: stream}, false)
	client := NewReflector(env, ReflectorOptions{ID: 0, Resource: ResourcePods, Prefix: prefix, Stream: stream, servedBy: wc,
		Rand: func() float64 { return 0 }})
	wg.Add(1)
	go func() { defer wg.Done(); client.Run(ctx) }()
	<-client.Synced()
	if l := client.Lists()[0]; l.Pages != 0 || l.Objects != 3 {
		t.Fatalf("client's list %+v: want the 3 keys from the cache, no page from etcd", l)
	}
	rev := putKeys(t, c, prefix, 3, 4)
	waitFor(t, "the client to see the put", func() bool { return client.LastRevision() >= rev })

	cache := wc.Reflector()
	cache.Hold()
	if _, err := cache.HeldRevision(ctx); err != nil {
		t.Fatal(err)
	}
	rev = putKeys(t, c, prefix, 4, 6)
	if _, err := c.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	cache.Release()
	waitFor(t, "the cache's relist", func() bool { return len(cache.Lists()) == 2 })
	waitFor(t, "the client's relist", func() bool { return len(client.Lists()) >= 2 })
	waitFor(t, "the client to reach the cache", func() bool { return client.LastRevision() >= rev })
	if l := cache.Lists()[1]; l.Reason != ListAfterCompaction || l.Pages == 0 {
		t.Errorf("cache's relist %+v: want one from etcd after its compacted watch", l)
	}
	for _, l := range client.Lists()[1:] {
		if l.Reason != ListAfterWatchError || l.Pages != 0 || l.Err != nil {
			t.Errorf("client's relist %+v: want one after the ended watch, served by the cache", l)
		}
	}
	if got, want := client.Cache(), cache.Cache(); len(got) != 6 || !maps.Equal(got, want) {
		t.Errorf("client's cache %v, want the cache's %v (6 keys)", got, want)
	}
}

// podsFixture starts an etcd holding 3 keys under /registry/pods/ and
// returns a client, an Env without a recorder and the prefix.
func podsFixture(t *testing.T) (*clientv3.Client, *Env, string) {
	t.Helper()
	c := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	prefix := "/registry/pods/"
	putKeys(t, c, prefix, 0, 3)
	return c, NewEnv(time.Now(), 1024, 1, nil), prefix
}

// runWatchCache makes the pods watch cache with options o, runs its
// reflector under ctx (counted in wg) and, with requester, its progress
// requester, and waits until it has listed.
func runWatchCache(ctx context.Context, wg *sync.WaitGroup, env *Env, o ReflectorOptions, requester bool) *watchCache {
	o.Resource = ResourcePods
	wc := newWatchCache(env, o, false)
	wg.Add(1)
	go func() { defer wg.Done(); wc.Reflector().Run(ctx) }()
	if requester {
		go wc.runRequester(ctx)
	}
	<-wc.Reflector().Synced()
	return wc
}
