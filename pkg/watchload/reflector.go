package watchload

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/kubestore/etcdkit/internal/clockwait"
)

// The reasons a LIST phase runs.
const (
	// ListInitial is the first list.
	ListInitial = "initial"
	// ListAfterCompaction follows a watch etcd cancelled because its
	// revision was compacted.
	ListAfterCompaction = "compacted"
	// ListAfterWatchError follows a watch that failed otherwise.
	ListAfterWatchError = "watch-error"
	// ListAfterListError follows a list that failed.
	ListAfterListError = "list-error"
)

// ListRecord is the LIST phase of one ListAndWatch iteration: the initial
// list or a relist, with every request it made.
type ListRecord struct {
	// Reason is ListInitial, ListAfterCompaction, ListAfterWatchError or
	// ListAfterListError.
	Reason string
	// At is when it started, since the Env's epoch.
	At time.Duration
	// Backoff is the pause the reflector took before it.
	Backoff time.Duration
	// FailedWatchFrom and CompactRevision describe the compacted watch
	// that ended the previous iteration (0 otherwise).
	FailedWatchFrom, CompactRevision int64
	// Attempts are the LIST requests, in order: one, or two when the
	// first was answered 410 and the reflector retried at the latest;
	// with WatchList, first the watch-list requests (WatchList set: one,
	// or two after a "too large resource version"), then, if the last
	// failed, the LIST requests of the fallback.
	Attempts []ListAttempt
	// Revision, Pages, Objects and Bytes are those of the successful
	// attempt (Revision 0 if none succeeded).
	Revision int64
	Pages    int   // range requests of the successful attempt
	Objects  int64 // keys it read
	Bytes    int64 // key and value bytes it read
	// Duration covers every attempt.
	Duration time.Duration
	// Err is the last attempt's error, nil on success.
	Err error
}

// ReflectorHooks let a caller observe a reflector or change what it sees.
// They run on the reflector's goroutine and must not block.
type ReflectorHooks struct {
	// OnList, if set, is called after every LIST phase.
	OnList func(ListRecord)
	// OnResponse, if set, sees every watch response before the reflector
	// handles it and may change it: tests plant violations this way.
	OnResponse func(watcher int, resp *clientv3.WatchResponse)
}

// ReflectorOptions configure a Reflector. Zero fields take the profile's
// defaults.
type ReflectorOptions struct {
	// ID names the reflector in results.
	ID int
	// Profile is the client it models; empty means ProfileInformer.
	Profile Profile
	// Resource is the Kubernetes resource, e.g. "pods"; for results.
	Resource string
	// Prefix is the etcd key prefix it lists and watches, ending in "/",
	// e.g. "/registry/pods/".
	Prefix string
	// Stream is the watch stream (and connection) it uses.
	Stream *Stream
	// PageSize overrides the profile's LIST page size.
	PageSize int64
	// Unpaginated makes every LIST one unpaginated request (limit 0), as
	// a client whose pager page size is 0 lists; it overrides PageSize.
	Unpaginated bool
	// WatchList makes the reflector load its state as client-go's
	// WatchListClient does (on by default since client-go 1.35): a WATCH
	// with sendInitialEvents at rewatchResourceVersion instead of a LIST,
	// which kube-apiserver with the watch cache off serves by reading the
	// latest state (store.syncInitialEvents); after a 410 or "too large
	// resource version" it retries at "" at once, and after any other
	// error it falls back to the LIST of the same iteration
	// (tools/cache/reflector.go ListAndWatchWithContext, watchList).
	WatchList bool
	// Clock times backoffs and watch timeouts; nil is the real clock.
	// Latencies always use the real monotonic clock.
	Clock clock.WithTicker
	// Delayer overrides the profile's pause between ListAndWatch
	// iterations.
	Delayer Delayer
	// MinWatchTimeout: every watch ends after a time uniform in [min,
	// 2*min), then the reflector watches again from its last revision; 0
	// means defaultMinWatchTimeout.
	MinWatchTimeout time.Duration
	// Rand returns values in [0, 1) for jitter; nil uses math/rand/v2.
	Rand func() float64
	// WatchOnlyFrom, if positive, skips the LIST: the reflector only
	// watches, from this revision, keeps no cache and does not check
	// prevKV; a compacted watch ends Run. For fan-out benchmarks.
	WatchOnlyFrom int64
	// NoPrevKV and NoProgressNotify drop those watch options (for
	// comparisons with etcd's benchmark tool): prevKV, which both profiles
	// set, and progress notifications, which only watch-only reflectors
	// ask for (see handleWatch).
	NoPrevKV, NoProgressNotify bool
	// Hooks observe the reflector.
	Hooks ReflectorHooks

	// servedBy, if set, is the watch cache that serves the reflector's
	// LISTs and WATCHes in-process, as kube-apiserver serves a client's
	// from its watch cache (watchCache.getList and watch); Stream is then
	// the cache's, for its consistent reads and progress requests.
	servedBy *watchCache
}

// Reflector is one list/watch client of one resource, modelled on the
// client its Profile names (client-go tools/cache/reflector.go): it lists
// through a listPager (pager.go) from kube-apiserver's store (store.go),
// keeps a cache (cache.go), times every event against the Env's writes,
// and validates every watch against etcd's guarantees and the Env's
// recorded history. Its connection is a holdClient (hold.go), which Hold
// and Release break and restore. Use NewReflector, then Run in a
// goroutine; the other methods are safe to call meanwhile.
//
// A worked timeline of ProfileInformer, page size 500, 1,200 pods,
// compaction to C while the watch is held back at revision R < C:
//
//	LIST rv="0" limit=500        -> range limit 500 at latest: page 1 pins revision L
//	     continue                -> range from last key+"\x00" at L: pages 2, 3
//	WATCH from L+1 prevKV progressNotify
//	... held at R, etcd compacts to C > R+1, released ...
//	WATCH from R+1               -> canceled, CompactRevision C (410 Gone)
//	pause: backoff 0.8 s + jitter (then 1.6, 3.2 ... 30 s; reset after 2 min)
//	LIST rv="R" limit=500        -> range at exactly R: ErrCompacted (410 Expired)
//	LIST rv=""  limit=500        -> range at latest, pinned, paginated
//	WATCH from the new list revision + 1
//
// A reflector whose first list fit in one page lists unpaginated with
// rv="R" instead, which etcd serves at the latest ("not older than"), so
// it relists in one request. Watches end after a random 5 to 10 minutes
// and resume from the last revision without a list. Every range above is
// one RangeStream with the same options when etcd serves it and the
// EtcdRangeStream gate is on (Options.RangeStream; rangestream.go); with
// the gate off, a watch-list's RangeStream below is Range pages of
// WatcherSyncPageSize.
//
// With WatchList, the same timeline reads (the watch cache off):
//
//	WATCH rv="" sendInitialEvents -> RangeStream of the prefix at latest: revision L
//	WATCH from L+1 prevKV         (the same request, upstream)
//	... held at R, compacted to C > R+1, released: 410 Gone, pause ...
//	WATCH rv="R" sendInitialEvents -> Range of the prefix key, limit 1 (R <= latest?)
//	                               -> RangeStream at the latest: revision L', no 410
//	WATCH from L'+1
type Reflector struct {
	o       ReflectorOptions
	spec    profileSpec
	env     *Env
	clock   clock.WithTicker
	delay   Delayer
	val     *validator
	wevs    []WatchEvent // the current response's events, for val; reused
	lat     *watchTiming
	rand    func() float64
	conn    *holdClient // the stream's client, which Hold breaks
	storage *store      // kube-apiserver's etcd3 store behind the lists
	cache   *cache
	// sink, if set, is the watch cache this reflector fills: a
	// ProfileAPIServerCache reflector tells it of every list and every
	// watch response it has applied (newWatchCache).
	sink *watchCache
	// untimed: the reflector times no deliveries (a watch cache's: its
	// clients time theirs).
	untimed bool

	lastSync        watermark // lastSyncResourceVersion; 0 before the first list
	unavailable     bool      // isLastSyncResourceVersionUnavailable
	paginatedResult bool

	events, progressNotifies, sessions atomic.Int64
	// pausing is the pause being waited before the next ListAndWatch
	// iteration, in nanoseconds; 0 when not pausing.
	pausing atomic.Int64
	// creation is how long the first watch-only Watch call took to be
	// created, in nanoseconds.
	creation atomic.Int64

	mu        sync.Mutex
	phase     string        // what Run does now: a Phase* constant
	phaseAt   time.Duration // since when, from the Env's epoch
	watchFrom int64         // the current or last watch's start revision
	watchEnd  error         // why the last watch ended
	lists     []ListRecord
	synced    chan struct{}
	syncOnce  sync.Once
	stopped   chan struct{}
}

// NewReflector returns a reflector that records into env.
func NewReflector(env *Env, o ReflectorOptions) *Reflector {
	if o.Profile == "" {
		o.Profile = ProfileInformer
	}
	spec := o.Profile.spec()
	if o.PageSize > 0 {
		spec.pageSize = o.PageSize
	}
	if o.Unpaginated {
		spec.pageSize = 0
	}
	if o.MinWatchTimeout <= 0 {
		o.MinWatchTimeout = defaultMinWatchTimeout
	}
	r := &Reflector{o: o, spec: spec, env: env, clock: o.Clock, delay: o.Delayer, rand: o.Rand,
		synced: make(chan struct{}), stopped: make(chan struct{}), phase: PhaseList,
		cache: newCache(o.ID, o.NoPrevKV, env.Violations)}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.rand == nil {
		r.rand = rand.Float64
	}
	if r.delay == nil {
		r.delay = spec.delayer(r.clock, r.rand)
	}
	r.val = newValidator(o.ID, env.Recorder, o.Prefix, env.Violations)
	member := -1
	var client Client
	if o.Stream != nil {
		member, client = o.Stream.Member, o.Stream.Client
	}
	if o.servedBy != nil {
		client = cacheClient{o.servedBy}
	}
	r.conn = newHoldClient(client, func() { r.setPhase(PhaseHeld) })
	r.storage = &store{stream: o.Stream, client: r.conn, prefix: o.Prefix, streams: env.rangeStream}
	r.lat = newWatchTiming(env.timing, member)
	return r
}

// Run lists and watches until ctx ends, then flushes its measurements and
// returns; Finish completes its validation. Transient failures are
// retried after the profile's pause, as the modelled client does; Run
// never gives up while ctx lives, except a watch-only reflector whose
// watch was compacted.
func (r *Reflector) Run(ctx context.Context) {
	defer close(r.stopped)
	defer r.finish()
	defer r.setPhase(PhaseStopped)
	if r.o.WatchOnlyFrom > 0 {
		r.lastSync.Store(r.o.WatchOnlyFrom - 1)
		r.watch(ctx)
		return
	}
	reason := ListInitial
	var failed *CompactedError
	var pause time.Duration
	for ctx.Err() == nil {
		r.setPhase(PhaseList)
		if r.sink != nil {
			r.sink.listing()
		}
		rec := r.list(ctx, reason, failed, pause)
		if ctx.Err() != nil {
			return
		}
		if rec.Err == nil {
			r.syncOnce.Do(func() { close(r.synced) })
			reason, failed = r.watch(ctx)
		} else {
			reason, failed = ListAfterListError, nil
		}
		if ctx.Err() != nil {
			return
		}
		pause = r.delay.Next()
		r.setPhase(PhasePause)
		r.pausing.Store(int64(pause))
		ok := clockwait.Sleep(ctx, r.clock, pause)
		r.pausing.Store(0)
		if !ok {
			return
		}
	}
}

func (r *Reflector) finish() {
	r.val.drain()
	r.lat.finish()
}

// Finish completes the validation after Run has returned: it checks the
// events still waiting for the recorded history and counts those the
// history does not cover as unverified. Call it once the Env's Recorder
// has recorded up to LastRevision (Recorder.WaitFor); Stats reports the
// unverified count afterwards.
func (r *Reflector) Finish() {
	<-r.stopped
	r.val.finish()
}

// advance raises lastSync to rev (or sets it, after a list) and wakes
// the waits it satisfies.
func (r *Reflector) advance(rev int64, set bool) {
	if set || rev > r.lastSync.Load() {
		r.lastSync.Store(rev)
	}
}

// waitRevision returns a channel closed once the reflector has seen
// revision rev, and a function that withdraws the wait.
func (r *Reflector) waitRevision(rev int64) (<-chan struct{}, func()) {
	return r.lastSync.wait(rev)
}
