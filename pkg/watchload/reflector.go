package watchload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"
)

// CompactedError ends a watch that etcd cancelled because its start
// revision had been compacted: what kube-apiserver turns into 410 Gone,
// "too old resource version" (k8s.io/apiserver/pkg/storage/etcd3/
// watcher.go).
type CompactedError struct {
	// From is the revision the watch started from; CompactRevision the
	// compact revision etcd reported.
	From, CompactRevision int64
}

// Error names the watch's start revision and the compact revision.
func (e *CompactedError) Error() string {
	return fmt.Sprintf("watch from revision %d: required revision has been compacted (compact revision %d)", e.From, e.CompactRevision)
}

var (
	errHeld         = errors.New("watch stopped to hold the watcher back")
	errWatchTimeout = errors.New("watch timeout")
	errWatchClosed  = errors.New("watch channel closed")
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

// ListAttempt is one LIST request as client-go's pager makes it, and how
// etcd served it.
type ListAttempt struct {
	// ResourceVersion is the LIST's resourceVersion as the reflector sends
	// it: "0" (any; the first list), "" (most recent: a quorum read) or a
	// revision (not older than it; with a limit, exactly it).
	ResourceVersion string
	// Limit is the page size asked for; 0 means unpaginated.
	Limit int64
	// ReadRevision is the revision the first page read at: 0 for the
	// latest. With the watch cache off, a LIST with a limit and a
	// resourceVersion above 0 reads exactly at it
	// (k8s.io/apiserver/pkg/storage/interfaces.go ValidateListOptions);
	// the cacher's lists always read the latest.
	ReadRevision int64
	// Revision is the revision the list was served at; 0 if it failed.
	Revision int64
	// Pages counts the etcd range requests, including a fallback.
	Pages int
	// Objects counts the keys read.
	Objects int64
	// Bytes counts the key and value bytes read.
	Bytes int64
	// FullListFallback is true when a continuation page had been
	// compacted and the pager fell back to one unpaginated list at the
	// requested resourceVersion (client-go tools/pager/pager.go
	// FullListIfExpired).
	FullListFallback bool
	// Err is the error that ended it, nil on success. ErrCompacted is the
	// 410 Expired of kube-apiserver; ErrFutureRev its "too large resource
	// version".
	Err error
	// Duration is how long it took.
	Duration time.Duration
}

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
	// first was answered 410 and the reflector retried at the latest.
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
	// Clock times backoffs and watch timeouts; nil is the real clock.
	// Latencies always use the real monotonic clock.
	Clock clock.WithTicker
	// Delayer overrides the profile's pause between ListAndWatch
	// iterations.
	Delayer Delayer
	// MinWatchTimeout: every watch ends after a time uniform in [min,
	// 2*min), then the reflector watches again from its last revision; 0
	// means DefaultMinWatchTimeout.
	MinWatchTimeout time.Duration
	// Rand returns values in [0, 1) for jitter; nil uses math/rand/v2.
	Rand func() float64
	// WatchOnlyFrom, if positive, skips the LIST: the reflector only
	// watches, from this revision, keeps no cache and does not check
	// prevKV; a compacted watch ends Run. For fan-out benchmarks.
	WatchOnlyFrom int64
	// NoPrevKV and NoProgressNotify drop those watch options, which both
	// profiles set (for comparisons with etcd's benchmark tool).
	NoPrevKV, NoProgressNotify bool
	// Hooks observe the reflector.
	Hooks ReflectorHooks
}

// Reflector is one list/watch client of one resource, modelled on the
// client its Profile names. It keeps a cache (key -> mod_revision), times
// every event against the Env's writes, and validates every watch against
// etcd's guarantees and the Env's recorded history. Use NewReflector, then
// Run in a goroutine; the other methods are safe to call meanwhile.
type Reflector struct {
	o     ReflectorOptions
	spec  profileSpec
	env   *Env
	clock clock.WithTicker
	delay Delayer
	val   *validator
	lat   *watchTiming
	rand  func() float64

	lastSync        watermark // lastSyncResourceVersion; 0 before the first list
	unavailable     bool      // isLastSyncResourceVersionUnavailable
	paginatedResult bool

	events, progressNotifies, sessions, prevKVMissing atomic.Int64
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
	cache     map[string]*cacheEntry
	lists     []ListRecord
	held      bool
	wasHeld   bool
	// parked is closed once a held reflector waits for Release, its
	// watch stopped (isParked: closed already).
	parked    chan struct{}
	isParked  bool
	holdReq   chan struct{}
	release   chan struct{}
	synced    chan struct{}
	syncOnce  sync.Once
	stopped   chan struct{}
	finishErr error
}

type cacheEntry struct{ rev int64 }

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
		o.MinWatchTimeout = DefaultMinWatchTimeout
	}
	r := &Reflector{o: o, spec: spec, env: env, clock: o.Clock, delay: o.Delayer, rand: o.Rand,
		synced: make(chan struct{}), stopped: make(chan struct{}), cache: map[string]*cacheEntry{}, phase: PhaseList}
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
	if o.Stream != nil {
		member = o.Stream.Member
	}
	r.lat = newWatchTiming(env.timing, member)
	return r
}

// ID returns the reflector's id.
func (r *Reflector) ID() int { return r.o.ID }

// Options returns the options the reflector was made with, defaults
// filled in.
func (r *Reflector) Options() ReflectorOptions { return r.o }

// Synced is closed once the first LIST has succeeded (or, watching only,
// once the watch is created).
func (r *Reflector) Synced() <-chan struct{} { return r.synced }

// Done is closed when Run has returned.
func (r *Reflector) Done() <-chan struct{} { return r.stopped }

// LastRevision returns the reflector's lastSyncResourceVersion: its list
// revision, its last event or its last progress notification.
func (r *Reflector) LastRevision() int64 { return r.lastSync.Load() }

// Lists returns every LIST phase so far, in order.
func (r *Reflector) Lists() []ListRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ListRecord(nil), r.lists...)
}

// ReflectorStats counts what a reflector did.
type ReflectorStats struct {
	Events           int64 // events received
	ProgressNotifies int64 // progress notifications received
	Sessions         int64 // Watch calls
	PrevKVMissing    int64 // updates and deletes without prevKV
	// Lists counts LIST phases, the initial one included.
	Lists int
	// CacheObjects is the cache's size.
	CacheObjects int
	// HeldBack is true if the reflector was ever held back.
	HeldBack bool
	// Unverified counts events the history never covered.
	Unverified int64
}

// Stats returns the reflector's counters.
func (r *Reflector) Stats() ReflectorStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReflectorStats{
		Events: r.events.Load(), ProgressNotifies: r.progressNotifies.Load(), Sessions: r.sessions.Load(),
		PrevKVMissing: r.prevKVMissing.Load(), Lists: len(r.lists), CacheObjects: len(r.cache),
		HeldBack: r.wasHeld, Unverified: r.val.unverified,
	}
}

// The phases of a reflector's Run, as ReflectorState reports them.
const (
	PhaseList    = "list"    // listing (or about to)
	PhaseWatch   = "watch"   // a watch is open
	PhaseHeld    = "held"    // held back, waiting for Release
	PhasePause   = "pause"   // the pause between ListAndWatch iterations
	PhaseStopped = "stopped" // Run has returned
)

// ReflectorState is what a reflector is doing at one moment: for saying
// why one did not make progress.
type ReflectorState struct {
	Phase string        // a Phase* constant
	Since time.Duration // when the phase began, since the Env's epoch
	// WatchFrom is the start revision of the current or last watch (0
	// before the first); WatchEnd why the last one ended (nil while the
	// first is open).
	WatchFrom int64
	WatchEnd  error
	// LastRevision is lastSyncResourceVersion.
	LastRevision int64
	Lists        int   // LIST phases so far
	LastListErr  error // the last LIST phase's error
	Sessions     int64 // Watch calls
	Events       int64 // events received
}

// String is one line: phase, since, revisions, counters and errors.
func (s ReflectorState) String() string {
	out := fmt.Sprintf("%s since %v, last revision %d, %d lists, %d watches (last from %d), %d events",
		s.Phase, s.Since.Round(time.Millisecond), s.LastRevision, s.Lists, s.Sessions, s.WatchFrom, s.Events)
	if s.WatchEnd != nil {
		out += fmt.Sprintf(", last watch ended: %v", s.WatchEnd)
	}
	if s.LastListErr != nil {
		out += fmt.Sprintf(", last list failed: %v", s.LastListErr)
	}
	return out
}

// State returns what the reflector is doing now.
func (r *Reflector) State() ReflectorState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := ReflectorState{Phase: r.phase, Since: r.phaseAt, WatchFrom: r.watchFrom, WatchEnd: r.watchEnd,
		LastRevision: r.lastSync.Load(), Lists: len(r.lists), Sessions: r.sessions.Load(), Events: r.events.Load()}
	if n := len(r.lists); n > 0 {
		st.LastListErr = r.lists[n-1].Err
	}
	return st
}

// setPhase records what Run does from now on.
func (r *Reflector) setPhase(phase string) {
	r.mu.Lock()
	r.phase, r.phaseAt = phase, r.env.Since()
	r.mu.Unlock()
}

// CreationLatency returns how long a watch-only reflector's first watch
// took from the Watch call to etcd's created response; 0 before that.
func (r *Reflector) CreationLatency() time.Duration { return time.Duration(r.creation.Load()) }

// Cache returns a copy of the cache (key -> mod_revision). Call it after
// Run has returned for a consistent view.
func (r *Reflector) Cache() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.cache))
	for k, e := range r.cache {
		out[k] = e.rev
	}
	return out
}

// Hold stops the reflector's watch, as a broken connection would, and
// keeps it from watching again until Release. It returns at once;
// HeldRevision waits until the reflector has stopped.
func (r *Reflector) Hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.held {
		r.held, r.wasHeld = true, true
		r.release, r.parked, r.isParked = make(chan struct{}), make(chan struct{}), false
		if r.holdReq != nil {
			close(r.holdReq)
			r.holdReq = nil
		}
	}
}

// HeldRevision waits until a held reflector has stopped (its watch ended,
// events already on their way included, or the list or pause it was in
// finished) and returns the revision R it will resume after: its next
// watch starts from R+1, which etcd refuses as compacted once the compact
// revision is above R+1. It returns ctx's error if ctx ends
// first, and at once if the reflector is not held or Run has returned.
func (r *Reflector) HeldRevision(ctx context.Context) (int64, error) {
	r.mu.Lock()
	held, parked := r.held, r.parked
	r.mu.Unlock()
	if held {
		select {
		case <-parked:
		case <-r.stopped:
		case <-ctx.Done():
			return r.lastSync.Load(), ctx.Err()
		}
	}
	return r.lastSync.Load(), nil
}

// isHeld reports whether the reflector is held back now.
func (r *Reflector) isHeld() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// Release lets a held reflector watch again from its last revision + 1,
// as client-go does after a watch ends without an error: no relist unless
// that revision has been compacted meanwhile.
func (r *Reflector) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		r.held = false
		close(r.release)
	}
}

// Run lists and watches until ctx ends, then flushes its measurements and
// returns; Finish completes its validation. Transient failures are retried after the profile's pause, as
// the modelled client does; Run never gives up while ctx lives, except a
// watch-only reflector whose watch was compacted.
func (r *Reflector) Run(ctx context.Context) {
	defer close(r.stopped)
	defer r.finish()
	defer r.setPhase(PhaseStopped)
	if r.o.WatchOnlyFrom > 0 {
		r.lastSync.Store(r.o.WatchOnlyFrom - 1)
		r.watchLoop(ctx)
		return
	}
	reason := ListInitial
	var failed *CompactedError
	var pause time.Duration
	for ctx.Err() == nil {
		r.setPhase(PhaseList)
		rec := r.list(ctx, reason, failed, pause)
		if ctx.Err() != nil {
			return
		}
		if rec.Err == nil {
			r.syncOnce.Do(func() { close(r.synced) })
			reason, failed = r.watchLoop(ctx)
		} else {
			reason, failed = ListAfterListError, nil
		}
		if ctx.Err() != nil {
			return
		}
		pause = r.delay.Next()
		r.setPhase(PhasePause)
		r.pausing.Store(int64(pause))
		ok := r.sleep(ctx, pause)
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

func (r *Reflector) sleep(ctx context.Context, d time.Duration) bool {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// relistResourceVersion is client-go's choice of the LIST resourceVersion
// (tools/cache/reflector.go relistResourceVersion).
func (r *Reflector) relistResourceVersion() string {
	switch {
	case r.unavailable:
		return ""
	case r.lastSync.Load() == 0:
		return "0"
	}
	return strconv.FormatInt(r.lastSync.Load(), 10)
}

func isExpired(err error) bool {
	return errors.Is(err, rpctypes.ErrCompacted) || errors.Is(err, rpctypes.ErrGRPCCompacted)
}

func isTooLarge(err error) bool {
	return errors.Is(err, rpctypes.ErrFutureRev) || errors.Is(err, rpctypes.ErrGRPCFutureRev) || errors.Is(err, errTooLargeRV)
}

var errTooLargeRV = errors.New("too large resource version")

// list runs the LIST phase of one ListAndWatch iteration, as
// Reflector.list does: a paginated list at relistResourceVersion, and if
// etcd answers that the revision is compacted (410 Expired) or in the
// future, one immediate retry at "" (the latest).
func (r *Reflector) list(ctx context.Context, reason string, failed *CompactedError, pause time.Duration) ListRecord {
	rec := ListRecord{Reason: reason, At: r.env.Since(), Backoff: pause}
	if failed != nil {
		rec.FailedWatchFrom, rec.CompactRevision = failed.From, failed.CompactRevision
	}
	rv := r.relistResourceVersion()
	att, cache, paginated := r.pagedList(ctx, rv)
	rec.Attempts = append(rec.Attempts, att)
	if att.Err != nil && (isExpired(att.Err) || isTooLarge(att.Err)) && ctx.Err() == nil {
		r.unavailable = true
		att, cache, paginated = r.pagedList(ctx, r.relistResourceVersion())
		rec.Attempts = append(rec.Attempts, att)
	}
	rec.Err = att.Err
	if att.Err == nil {
		if rv == "0" && paginated {
			r.paginatedResult = true
		}
		r.unavailable = false
		rec.Revision, rec.Pages, rec.Objects, rec.Bytes = att.Revision, att.Pages, att.Objects, att.Bytes
		r.mu.Lock()
		r.cache = cache
		r.mu.Unlock()
		r.advance(att.Revision, true)
	}
	rec.Duration = r.env.Since() - rec.At
	r.mu.Lock()
	r.lists = append(r.lists, rec)
	r.mu.Unlock()
	if r.o.Hooks.OnList != nil {
		r.o.Hooks.OnList(rec)
	}
	return rec
}

// pagedList is one pager.List against kube-apiserver's etcd3 store with
// the watch cache off (or the cacher's listerWatcher): the page size the
// reflector picks for rv, the read revision the store derives from rv and
// the limit, pages pinned to the first page's revision and continued from
// the last key + "\x00", and the pager's fall-back to one unpaginated
// list when a continuation page has been compacted.
func (r *Reflector) pagedList(ctx context.Context, rv string) (ListAttempt, map[string]*cacheEntry, bool) {
	start := r.env.Since()
	att := ListAttempt{ResourceVersion: rv, Limit: r.spec.pageSize}
	// Reflector.list: with a resourceVersion other than "" and "0", and
	// neither a forced page size nor an earlier paginated result, the
	// reflector lists unpaginated so that a watch cache could serve it.
	if !r.spec.forcePageSize && !r.paginatedResult && rv != "" && rv != "0" {
		att.Limit = 0
	}
	var minRV int64 // the "not older than" bound
	if !r.spec.listIgnoresRV && rv != "" {
		minRV, _ = strconv.ParseInt(rv, 10, 64)
	}
	if att.Limit > 0 && minRV > 0 {
		att.ReadRevision = minRV // legacy semantics: a limit makes it exact
	}
	end := clientv3.GetPrefixRangeEnd(r.o.Prefix)
	cache := make(map[string]*cacheEntry, len(r.cache))
	add := func(kvs []*mvccpb.KeyValue) {
		for _, kv := range kvs {
			cache[string(kv.Key)] = &cacheEntry{rev: kv.ModRevision}
			att.Objects++
			att.Bytes += int64(len(kv.Key) + len(kv.Value))
		}
	}
	withRev := att.ReadRevision
	key := r.o.Prefix
	ctx = r.o.Stream.Context(ctx)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end)}
		if att.Limit > 0 {
			opts = append(opts, clientv3.WithLimit(att.Limit))
		}
		if withRev > 0 {
			opts = append(opts, clientv3.WithRev(withRev))
		}
		resp, err := r.o.Stream.Client.Get(ctx, key, opts...)
		if err != nil && att.Pages > 0 && isExpired(err) {
			// The pager's last resort: one full list at the requested
			// resourceVersion, which without a limit is "not older than".
			att.FullListFallback = true
			clear(cache)
			att.Objects, att.Bytes = 0, 0
			resp, err = r.o.Stream.Client.Get(ctx, r.o.Prefix, clientv3.WithRange(end))
			if err == nil {
				att.Pages++
				if resp.Header.Revision < minRV {
					err = errTooLargeRV
				} else {
					add(resp.Kvs)
					att.Revision = resp.Header.Revision
				}
			}
			att.Err = err
			att.Duration = r.env.Since() - start
			return att, cache, true
		}
		if err != nil {
			att.Err = err
			att.Duration = r.env.Since() - start
			return att, nil, att.Pages > 1
		}
		att.Pages++
		if withRev == 0 {
			withRev = resp.Header.Revision
			if withRev < minRV {
				att.Err = errTooLargeRV
				att.Duration = r.env.Since() - start
				return att, nil, false
			}
		}
		add(resp.Kvs)
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	att.Revision = withRev
	att.Duration = r.env.Since() - start
	return att, cache, att.Pages > 1
}

// watchLoop watches from the last revision, again and again after watch
// timeouts and holds (and, for the cacher, after other watch errors for
// up to 30 s), until the watch fails: it returns the reason for the next
// list, with the compacted watch if that was the failure.
func (r *Reflector) watchLoop(ctx context.Context) (string, *CompactedError) {
	var firstErr, lastErr time.Time // client-go's retryWithDeadline
	for {
		r.mu.Lock()
		held, release := r.held, r.release
		if held {
			r.phase, r.phaseAt = PhaseHeld, r.env.Since()
			if !r.isParked {
				r.isParked = true
				close(r.parked)
			}
		}
		r.mu.Unlock()
		if held {
			select {
			case <-release:
			case <-ctx.Done():
				return "", nil
			}
		}
		from := r.lastSync.Load() + 1
		timeout := r.o.MinWatchTimeout + time.Duration(r.rand()*float64(r.o.MinWatchTimeout))
		err := r.watchOnce(ctx, from, timeout)
		r.mu.Lock()
		r.watchEnd = err
		r.mu.Unlock()
		var ce *CompactedError
		switch {
		case ctx.Err() != nil:
			return "", nil
		case errors.As(err, &ce):
			if r.o.WatchOnlyFrom > 0 {
				<-ctx.Done()
				return "", nil
			}
			return ListAfterCompaction, ce
		case errors.Is(err, errWatchTimeout), errors.Is(err, errHeld):
			continue
		default:
			if r.o.WatchOnlyFrom > 0 {
				if !r.sleep(ctx, 100*time.Millisecond) {
					return "", nil
				}
				continue
			}
			if retry := r.spec.internalErrorRetry; retry > 0 {
				now := r.clock.Now()
				if now.Sub(lastErr) >= time.Minute { // minResetPeriod
					firstErr = time.Time{}
				}
				if firstErr.IsZero() {
					firstErr = now
				}
				lastErr = now
				if now.Sub(firstErr) <= retry {
					continue
				}
			}
			return ListAfterWatchError, nil
		}
	}
}

// watchOnce runs one watch from revision from.
func (r *Reflector) watchOnce(ctx context.Context, from int64, timeout time.Duration) error {
	r.mu.Lock()
	if r.held {
		r.mu.Unlock()
		return errHeld
	}
	hold := make(chan struct{})
	r.holdReq = hold
	r.phase, r.phaseAt, r.watchFrom = PhaseWatch, r.env.Since(), from
	r.mu.Unlock()
	r.sessions.Add(1)

	wctx, cancel := context.WithCancel(r.o.Stream.Context(ctx))
	defer cancel()
	timer := r.clock.NewTimer(timeout)
	defer timer.Stop()
	var why atomic.Value
	go func() {
		select {
		case <-hold:
			why.Store(errHeld)
			cancel()
		case <-timer.C():
			why.Store(errWatchTimeout)
			cancel()
		case <-wctx.Done():
		}
	}()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(from)}
	if !r.o.NoPrevKV {
		opts = append(opts, clientv3.WithPrevKV())
	}
	if !r.o.NoProgressNotify {
		opts = append(opts, clientv3.WithProgressNotify())
	}
	watchOnly := r.o.WatchOnlyFrom > 0
	if watchOnly {
		opts = append(opts, clientv3.WithCreatedNotify())
	}
	r.val.startSession(from)
	called := r.env.timing.now()
	wch := r.o.Stream.Client.Watch(wctx, r.o.Prefix, opts...)
	for resp := range wch {
		at := r.env.timing.now()
		if r.o.Hooks.OnResponse != nil {
			r.o.Hooks.OnResponse(r.o.ID, &resp)
		}
		if resp.CompactRevision != 0 {
			return &CompactedError{From: from, CompactRevision: resp.CompactRevision}
		}
		if resp.Canceled {
			if err := resp.Err(); err != nil {
				return err
			}
			return errWatchClosed
		}
		if resp.Created {
			r.creation.CompareAndSwap(0, at-called)
			r.syncOnce.Do(func() { close(r.synced) })
			continue
		}
		r.val.drain()
		if resp.IsProgressNotify() {
			r.progressNotifies.Add(1)
			r.val.progress(resp.Header.Revision)
			r.advance(resp.Header.Revision, false)
			continue
		}
		r.val.events(resp.Events)
		last := int64(0)
		if !watchOnly {
			r.mu.Lock()
			for _, ev := range resp.Events {
				r.apply(ev)
			}
			r.mu.Unlock()
		}
		for _, ev := range resp.Events {
			rev := ev.Kv.ModRevision
			r.lat.event(rev, at)
			last = max(last, rev)
		}
		r.lat.retry()
		r.events.Add(int64(len(resp.Events)))
		r.advance(last, false)
	}
	if err, ok := why.Load().(error); ok {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errWatchClosed
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

// apply updates the cache with one event and checks its prevKV and create
// flag against it, as kube-apiserver relies on them. r.mu is held.
func (r *Reflector) apply(ev *clientv3.Event) {
	kv := ev.Kv
	rev := kv.ModRevision
	e, ok := r.cache[string(kv.Key)]
	prev := int64(0)
	if ev.PrevKv != nil {
		prev = ev.PrevKv.ModRevision
	}
	switch ev.Type {
	case mvccpb.PUT:
		switch {
		case ev.IsCreate():
			if ok {
				r.prevKVViolation(rev, kv.Key, fmt.Sprintf("created, but the cache holds mod_revision %d", e.rev))
			}
		case ev.PrevKv == nil && !r.o.NoPrevKV:
			r.prevKVMissing.Add(1)
		case !ok:
			r.prevKVViolation(rev, kv.Key, fmt.Sprintf("update of mod_revision %d, absent from the cache", prev))
		case ev.PrevKv != nil && prev != e.rev:
			r.prevKVViolation(rev, kv.Key, fmt.Sprintf("update of mod_revision %d, cache holds %d", prev, e.rev))
		}
		if ok {
			e.rev = rev
		} else {
			r.cache[string(kv.Key)] = &cacheEntry{rev: rev}
		}
	case mvccpb.DELETE:
		switch {
		case !ok:
			r.prevKVViolation(rev, kv.Key, fmt.Sprintf("delete of mod_revision %d, absent from the cache", prev))
		case ev.PrevKv == nil && !r.o.NoPrevKV:
			r.prevKVMissing.Add(1)
		case ev.PrevKv != nil && prev != e.rev:
			r.prevKVViolation(rev, kv.Key, fmt.Sprintf("delete of mod_revision %d, cache holds %d", prev, e.rev))
		}
		delete(r.cache, string(kv.Key))
	}
}

func (r *Reflector) prevKVViolation(rev int64, key []byte, detail string) {
	r.env.Violations.Add(Violation{Watcher: r.o.ID, Kind: ViolationPrevKV, Revision: rev, Key: string(key), Detail: detail})
}

// rangeBytes returns the protobuf size of a range response, the bytes etcd
// sent for it.
func rangeBytes(resp *clientv3.GetResponse) int64 {
	return int64(proto.Size((*pb.RangeResponse)(resp)))
}
