package watchload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// waitFor polls cond every 10 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// attempt is the part of a ListAttempt the relist tests compare.
type attempt struct {
	rv           string
	limit        int64
	readRevision int64
	compacted    bool
	fallback     bool
	watchList    bool
}

func attempts(as []ListAttempt) []attempt {
	var out []attempt
	for _, a := range as {
		out = append(out, attempt{a.ResourceVersion, a.Limit, a.ReadRevision, errors.Is(a.Err, rpctypes.ErrCompacted), a.FullListFallback, a.WatchList})
	}
	return out
}

// checkStreamed fails for every successful attempt etcd (3.7, which
// serves RangeStream) did not serve with a stream.
func checkStreamed(t *testing.T, what string, as []ListAttempt) {
	t.Helper()
	for i, a := range as {
		if a.Err == nil && !a.Streamed {
			t.Errorf("%s: attempt %d %+v read with Range; kube-apiserver 1.37 streams every unfiltered list from etcd 3.7", what, i, a)
		}
	}
}

func putKeys(t *testing.T, c *clientv3.Client, prefix string, from, to int) int64 {
	t.Helper()
	var rev int64
	for i := from; i < to; i++ {
		resp, err := c.Put(t.Context(), fmt.Sprintf("%sns/p%03d", prefix, i), "v")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// TestRelistPolicy holds a reflector back across a compaction and checks
// the exact LIST requests of the relist that follows, the pause before it
// (on a fake clock), and that the pause gates it.
//
// An informer whose first list was paginated relists at its last revision
// with a limit, which etcd serves exactly at that revision: 410, then at
// "" (client-go's two-step policy). One whose first list fit in a page
// relists unpaginated, "not older than", which etcd serves at the latest.
// The cacher always lists the latest in pages and restarts after 1 s.
// With WatchList, an informer's watch-list at its last revision is served
// at the latest (the watch cache off): no 410, one request. Every
// successful request is a RangeStream (etcd 3.7).
func TestRelistPolicy(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	tests := []struct {
		name      string
		profile   Profile
		watchList bool
		pageSize  int64
		objects   int
		wantPause func(time.Duration) bool
		// wantFirst is the first list's attempts; nil means one LIST
		// at "0" with the page size.
		wantFirst []attempt
		// want returns the expected attempts given the revision the
		// reflector was held at.
		want func(held int64) []attempt
	}{
		{
			name: "informer, paginated", profile: ProfileInformer, pageSize: 3, objects: 7,
			wantPause: func(d time.Duration) bool { return d == time.Second }, // 800 ms + 0.25 jitter
			want: func(held int64) []attempt {
				return []attempt{{rv: strconv.FormatInt(held, 10), limit: 3, readRevision: held, compacted: true}, {rv: "", limit: 3}}
			},
		},
		{
			name: "informer, one page", profile: ProfileInformer, pageSize: 500, objects: 7,
			wantPause: func(d time.Duration) bool { return d == time.Second },
			want: func(held int64) []attempt {
				return []attempt{{rv: strconv.FormatInt(held, 10), limit: 0}}
			},
		},
		{
			name: "informer, watch-list", profile: ProfileInformer, watchList: true, pageSize: 3, objects: 7,
			wantPause: func(d time.Duration) bool { return d == time.Second },
			wantFirst: []attempt{{rv: "", watchList: true}},
			want: func(held int64) []attempt {
				return []attempt{{rv: strconv.FormatInt(held, 10), watchList: true}}
			},
		},
		{
			name: "apiserver cache", profile: ProfileAPIServerCache, pageSize: 3, objects: 7,
			wantPause: func(d time.Duration) bool { return d == cacherRestartPeriod },
			want: func(held int64) []attempt {
				return []attempt{{rv: strconv.FormatInt(held, 10), limit: 3}}
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("/registry/relist%d/", i)
			listed := putKeys(t, c, prefix, 0, tt.objects)
			clk := clocktesting.NewFakeClock(time.Now())
			env := NewEnv(time.Now(), 1024, 1, nil)
			r := NewReflector(env, ReflectorOptions{
				Profile: tt.profile, Prefix: prefix, Stream: NewStream(0, 0, c, tt.profile.Source()),
				PageSize: tt.pageSize, WatchList: tt.watchList, Clock: clk, Rand: func() float64 { return 0.25 },
			})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); r.Run(ctx) }()
			defer func() { cancel(); <-done }()
			<-r.Synced()

			first := r.Lists()[0]
			wantFirst := tt.wantFirst
			if wantFirst == nil {
				wantFirst = []attempt{{rv: "0", limit: tt.pageSize}}
			}
			checkStreamed(t, "first list", first.Attempts)
			if got := attempts(first.Attempts); fmt.Sprint(got) != fmt.Sprint(wantFirst) || first.Revision != listed || first.Objects != int64(tt.objects) {
				t.Fatalf("first list %+v at revision %d with %d objects; want %+v at %d with %d", got, first.Revision, first.Objects, wantFirst, listed, tt.objects)
			}
			rev := putKeys(t, c, prefix, tt.objects, tt.objects+1)
			waitFor(t, "the event of a put", func() bool { return r.LastRevision() >= rev })

			r.Hold()
			held, err := r.HeldRevision(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			last := putKeys(t, c, prefix, tt.objects+1, tt.objects+4)
			if _, err := c.Compact(t.Context(), last, clientv3.WithCompactPhysical()); err != nil {
				t.Fatal(err)
			}
			r.Release()
			waitFor(t, "the pause before the relist", func() bool { return r.pausing.Load() != 0 })
			pause := time.Duration(r.pausing.Load())
			if !tt.wantPause(pause) {
				t.Fatalf("pause before the relist %v", pause)
			}
			// Short of the pause, nothing happens.
			clk.Step(pause - time.Millisecond)
			time.Sleep(100 * time.Millisecond)
			if n := len(r.Lists()); n != 1 {
				t.Fatalf("%d lists before the pause elapsed, want 1", n)
			}
			clk.Step(time.Millisecond)
			waitFor(t, "the relist", func() bool { return len(r.Lists()) == 2 })

			rl := r.Lists()[1]
			if got, want := attempts(rl.Attempts), tt.want(held); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("relist attempts %+v, want %+v", got, want)
			}
			checkStreamed(t, "relist", rl.Attempts)
			if rl.Reason != ListAfterCompaction || rl.FailedWatchFrom != held+1 || rl.CompactRevision != last || rl.Backoff != pause {
				t.Errorf("relist %+v: want reason compacted after the watch from %d, compact revision %d, backoff %v", rl, held+1, last, pause)
			}
			if rl.Err != nil || rl.Revision < last || rl.Objects != int64(tt.objects+4) {
				t.Errorf("relist served at %d with %d objects (%v); want >= %d with %d", rl.Revision, rl.Objects, rl.Err, last, tt.objects+4)
			}
			if n := len(r.Cache()); n != tt.objects+4 {
				t.Errorf("cache holds %d keys after the relist, want %d", n, tt.objects+4)
			}
		})
	}
}

// compactingClient is the real client, plus one compaction injected after
// a chosen read (Get, or a RangeStream once it has ended), so that the
// next page of a list finds its revision gone.
type compactingClient struct {
	*clientv3.Client
	t       *testing.T
	prefix  string
	compact atomic.Int32 // compact after this many more reads; 0: never
}

func (c *compactingClient) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := c.Client.Get(ctx, key, opts...)
	c.afterRead()
	return resp, err
}

func (c *compactingClient) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	ch, err := c.Client.GetStream(ctx, key, opts...)
	if err != nil {
		c.afterRead()
		return ch, err
	}
	out := make(chan clientv3.RangeStreamResponse)
	go func() {
		defer close(out)
		var chunks []clientv3.RangeStreamResponse
		for resp := range ch {
			chunks = append(chunks, resp)
		}
		c.afterRead()
		for _, resp := range chunks {
			out <- resp
		}
	}()
	return out, nil
}

func (c *compactingClient) afterRead() {
	if c.compact.Load() > 0 && c.compact.Add(-1) == 0 {
		put, perr := c.Client.Put(context.Background(), c.prefix+"ns/late", "v")
		if perr != nil {
			c.t.Error(perr)
			return
		}
		if _, cerr := c.Client.Compact(context.Background(), put.Header.Revision, clientv3.WithCompactPhysical()); cerr != nil {
			c.t.Error(cerr)
		}
	}
}

// TestPagerFallsBackToFullList compacts between the first and second page
// of the first list: the pager lists once more, unpaginated, at the
// requested resourceVersion ("0", the latest).
func TestPagerFallsBackToFullList(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	prefix := "/registry/pager/"
	putKeys(t, c, prefix, 0, 7)
	cc := &compactingClient{Client: c, t: t, prefix: prefix}
	cc.compact.Store(1)
	env := NewEnv(time.Now(), 1024, 1, nil)
	r := NewReflector(env, ReflectorOptions{Prefix: prefix, Stream: NewStream(0, 0, cc, ""), PageSize: 3})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-r.Synced()
	l := r.Lists()[0]
	want := []attempt{{rv: "0", limit: 3, fallback: true}}
	if got := attempts(l.Attempts); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first list attempts %+v, want %+v", got, want)
	}
	if l.Objects != 8 || l.Pages != 2 || !r.paginatedResult {
		t.Errorf("list got %d objects in %d requests, paginated %v; want the 8 keys after the fallback, in 2 requests, paginated", l.Objects, l.Pages, r.paginatedResult)
	}
}

// TestConsistentReadWaitsForProgress makes etcd's revision move without an
// event for the cache's prefix: a consistent read is then served from the
// cache only once a progress notification, requested by the cache's
// progressRequester, shows the cache is fresh; without the requester it
// falls back to etcd.
func TestConsistentReadWaitsForProgress(t *testing.T) {
	c, env, prefix := podsFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wc := runWatchCache(ctx, &wg, env, ReflectorOptions{Prefix: prefix, Stream: NewStream(0, 0, c, "")}, true)
	putKeys(t, c, "/registry/configmaps/", 0, 1) // etcd moves on, the pods cache sees nothing

	cr := newConsistentReader(env, []*watchCache{wc})
	cr.Run(ctx, 10, 50*time.Millisecond) // one request
	got := cr.Result()
	if got.Requests != 1 || got.ServedFromCache != 1 || got.Fallbacks != 0 || got.ProgressRequests < 1 {
		t.Fatalf("consistent reads %+v: want one served from the cache after a progress request", got)
	}
	if got.ReadWait.MaxMs >= 3000 {
		t.Errorf("read wait %.1f ms, want below the 3 s timeout", got.ReadWait.MaxMs)
	}
	if n := wc.currentReads.Load(); n != 1 {
		t.Errorf("%d reads of the current revision, want 1", n)
	}

	// A stream of its own: wc's requests do not reach it.
	noReq := runWatchCache(ctx, &wg, env, ReflectorOptions{Prefix: prefix, Stream: NewStream(1, 0, c, "")}, false)
	noReq.timeout = 300 * time.Millisecond
	putKeys(t, c, "/registry/configmaps/", 1, 2)
	cr = newConsistentReader(env, []*watchCache{noReq})
	cr.Run(ctx, 10, 50*time.Millisecond)
	if got := cr.Result(); got.Requests != 1 || got.Fallbacks != 1 || got.ServedFromCache != 0 || got.ProgressRequests != 0 {
		t.Errorf("without progress requests: %+v, want one fallback to etcd", got)
	}
}

// failingWatchClient is the real client, except that its first failures
// Watch calls return a watch that etcd cancelled with an error other than
// compaction (as "no leader" would).
type failingWatchClient struct {
	*clientv3.Client
	failures atomic.Int32
	watches  atomic.Int32
}

func (c *failingWatchClient) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	c.watches.Add(1)
	if c.failures.Add(-1) >= 0 {
		ch := make(chan clientv3.WatchResponse, 1)
		ch <- clientv3.WatchResponse{Canceled: true}
		close(ch)
		return ch
	}
	return c.Client.Watch(ctx, key, opts...)
}

// TestWatchErrorPolicy: an informer relists after a watch error (its
// MaxInternalErrorRetryDuration is 0), after client-go's backoff; the
// cacher watches again at once, without a list, for up to 30 s.
func TestWatchErrorPolicy(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	for i, profile := range Profiles {
		t.Run(string(profile), func(t *testing.T) {
			prefix := fmt.Sprintf("/registry/watcherr%d/", i)
			putKeys(t, c, prefix, 0, 3)
			fc := &failingWatchClient{Client: c}
			fc.failures.Store(2)
			clk := clocktesting.NewFakeClock(time.Now())
			env := NewEnv(time.Now(), 1024, 1, nil)
			r := NewReflector(env, ReflectorOptions{Profile: profile, Prefix: prefix, Stream: NewStream(0, 0, fc, profile.Source()),
				Clock: clk, Rand: func() float64 { return 0 }})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); r.Run(ctx) }()
			defer func() { cancel(); <-done }()
			<-r.Synced()
			if profile == ProfileAPIServerCache {
				rev := putKeys(t, c, prefix, 3, 4)
				waitFor(t, "the cache to watch again and see a put", func() bool { return r.LastRevision() >= rev })
				if n := len(r.Lists()); n != 1 || fc.watches.Load() != 3 {
					t.Errorf("%d lists, %d watches: want no relist and a third watch after two failed ones", n, fc.watches.Load())
				}
				return
			}
			waitFor(t, "the backoff after the failed watch", func() bool { return r.pausing.Load() != 0 })
			if d := time.Duration(r.pausing.Load()); d != reflectorBackoffInitial {
				t.Fatalf("pause %v, want %v", d, reflectorBackoffInitial)
			}
			clk.Step(reflectorBackoffInitial)
			waitFor(t, "the relist", func() bool { return len(r.Lists()) == 2 })
			if rl := r.Lists()[1]; rl.Reason != ListAfterWatchError || len(rl.Attempts) != 1 || rl.Attempts[0].ResourceVersion == "" {
				t.Errorf("relist %+v: want one list at the last revision after a watch error", rl)
			}
		})
	}
}

// laggingWatchClient is the real client with every watch response handed
// over lag late, also after the watch was cancelled: responses in flight
// when a connection breaks.
type laggingWatchClient struct {
	*clientv3.Client
	lag      time.Duration
	received atomic.Int64 // the newest event revision taken from etcd
}

func (c *laggingWatchClient) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := c.Client.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision > c.received.Load() {
					c.received.Store(ev.Kv.ModRevision)
				}
			}
			time.Sleep(c.lag)
			out <- resp
		}
	}()
	return out
}

// TestHeldRevision holds a reflector while an event is still on its way:
// HeldRevision counts it, the reflector stays at that revision while held
// however much is written, and a compaction just above it makes the
// watch after Release fail from exactly HeldRevision+1.
func TestHeldRevision(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	prefix := "/registry/held/"
	putKeys(t, c, prefix, 0, 3)
	lc := &laggingWatchClient{Client: c, lag: 500 * time.Millisecond}
	env := NewEnv(time.Now(), 1024, 1, nil)
	r := NewReflector(env, ReflectorOptions{Prefix: prefix, Stream: NewStream(0, 0, lc, ""), Rand: func() float64 { return 0 }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-r.Synced()
	waitFor(t, "the watch", func() bool { return r.State().Phase == PhaseWatch })

	rev := putKeys(t, c, prefix, 3, 4)
	waitFor(t, "etcd's event", func() bool { return lc.received.Load() >= rev })
	if got := r.LastRevision(); got >= rev {
		t.Fatalf("the reflector saw revision %d before the lag elapsed", got)
	}
	r.Hold()
	held, err := r.HeldRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if held != rev {
		t.Fatalf("HeldRevision %d, want %d: the event in flight when the watch stopped counts", held, rev)
	}
	last := putKeys(t, c, prefix, 4, 8)
	time.Sleep(100 * time.Millisecond)
	if st := r.State(); st.Phase != PhaseHeld || st.LastRevision != held {
		t.Fatalf("held reflector: %v; want phase %s at revision %d", st, PhaseHeld, held)
	}
	if _, err := c.Compact(ctx, held+2, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	r.Release()
	waitFor(t, "the relist", func() bool { return len(r.Lists()) == 2 })
	rl := r.Lists()[1]
	if rl.Reason != ListAfterCompaction || rl.FailedWatchFrom != held+1 || rl.CompactRevision != held+2 || rl.Revision < last {
		t.Errorf("relist %+v; want one after the watch from %d failed at compact revision %d, served at >= %d", rl, held+1, held+2, last)
	}
}
