package watchload

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/report"
)

// Session is one load against one Target, assembled once: the epoch every
// time is measured from, the maintenance (admin) connection, the writers'
// and the watchers' connections and streams, the history recorder, the
// Env the parts share, the watchers and the writers. The maintenance
// connection and the recorder are the harness's: they reach the members
// as the Target's Harness says, the rest as the load does (Harness). Run, Watch and Put
// are scripts over one Session; each phase is a method, called in this
// order (a script skips the phases it does not need):
//
//	NewSession           the epoch
//	SampleSelf           this process's (and the member's) CPU and memory
//	DialAdmin            the maintenance connection (or writersAsAdmin)
//	ConnectWriters       the writers' connections
//	Seed                 the workload's objects, on the writers' connections
//	StartRecorder        the history, from a revision on
//	NewEnv               the Env, joining writes, events and the history
//	ConnectWatchers      the watchers' connections and streams
//	StartCaches          (apiserver-cache) the watch caches, waiting until each has listed
//	StartWatchers        the reflectors, waiting until each has listed
//	Write                the writers, open loop on their schedule
//	Confirm              wait until the recorder and every watcher reached a revision
//	Validate             stop the watchers, complete each one's validation, stop the recorder
//	(collect.go)         the result, from the Env and the stopped watchers
//	Close                stop what runs and close every connection
//
// An experiment runs several cases on one load instead of the watchers
// and writers above: after StartRecorder, StartCase makes each Case, with
// an Env, watchers and writers of its own (case.go). Child starts a
// further load on the same target and maintenance connection.
//
// A Session is used by one goroutine; the parts it starts run on their
// own until Validate or Close.
type Session struct {
	t     Target // as the load reaches it
	h     Target // as the harness reaches it (Target.harness)
	epoch time.Time
	logf  func(string, ...any)
	self  *selfSampler
	live  *liveState

	admin    *clientv3.Client
	writers  *Topology
	kvs      []KV // the writers' connections as KVs
	recTopo  *Topology
	rec      *Recorder
	env      *Env
	watch    *Topology
	watchers *ReflectorSet
	refls    []*Reflector  // watchers.Reflectors
	caches   *ReflectorSet // the watch caches' reflectors (StartCaches)
	wcs      []*watchCache // the watch caches, in the order of caches

	stopStatus   func()
	stopRecorder context.CancelFunc
	recWG        sync.WaitGroup
	writing      *Writing
	closers      []func()        // connections to close, in the order opened
	abandon      context.Context // ends the collection of an interrupted load (SetAbandon)
}

// NewSession starts a Session on t whose times count from epoch (usually
// time.Now()); logf, which may be nil, receives one line per phase. t must
// have at least one endpoint. Close it when done.
func NewSession(t Target, epoch time.Time, logf func(string, ...any)) *Session {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Session{t: t, h: t.harness(), epoch: epoch, logf: logf, live: &liveState{start: epoch}}
}

// SampleSelf starts sampling this process's CPU and memory (and, for a
// member not embedded, the member's process metrics) until the result is
// collected or the Session closes.
func (s *Session) SampleSelf(ctx context.Context) {
	s.self = startSelfSampler(ctx, s.h.Embedded, s.h.Endpoints[0])
}

// SelfStats stops the sampler SampleSelf started and returns its figures
// (report.SelfStats); it must follow SampleSelf.
func (s *Session) SelfStats(ctx context.Context) report.SelfStats {
	st := s.self.finish(ctx)
	s.self = nil
	return st
}

// reportTarget is the target as the result reports it, before its etcd
// version is known.
func (s *Session) reportTarget() report.Target {
	return report.Target{Embedded: s.t.Embedded, Endpoints: s.t.Endpoints, Managed: s.t.Managed}
}

// ReportStatus calls onStatus (nil: nothing) every interval with a
// live view of the Session, whose phase is phase until the next phase
// begins; watchers is the number of watchers planned. It runs until Close.
func (s *Session) ReportStatus(ctx context.Context, onStatus func(LoadStatus), interval time.Duration, watchers int, phase string) {
	s.live.watchers = watchers
	s.SetPhase(phase)
	s.stopStatus = s.live.report(ctx, onStatus, interval)
}

// SetPhase names what the Session does from now on, for the live view
// and OnPhase.
func (s *Session) SetPhase(phase string) { s.live.setPhase(phase) }

// OnPhase makes every phase the Session enters from now on (SetPhase,
// ReportStatus, Write) call onPhase (nil: nothing) with its name,
// synchronously, before the phase's first request, after the functions
// given before. Call it before the Session's parts start.
func (s *Session) OnPhase(onPhase func(phase string)) {
	if onPhase != nil {
		s.live.onPhase = append(s.live.onPhase, onPhase)
	}
}

// DialAdmin opens the maintenance connection, the harness's (Harness), to
// every member: status, sizes, counts, defragmentation, the final reads
// and the cleanup.
func (s *Session) DialAdmin(ctx context.Context) (*clientv3.Client, error) {
	c, err := s.dial(ctx, s.h.Dial)
	s.admin = c
	return c, err
}

// DialCompactor opens the compactor's connection, to every member. It is
// the load's (Target.Dial), not the harness's: kube-apiserver's compactor
// sends its compare-and-swap transaction and Compact on kube-apiserver's
// own etcd client (k8s.io/apiserver/pkg/storage/etcd3/compact.go
// StartCompactorPerEndpoint), so they are requests of the load.
func (s *Session) DialCompactor(ctx context.Context) (*clientv3.Client, error) {
	return s.dial(ctx, s.t.Dial)
}

// dial opens a connection with dial that outlives ctx, closed by Close.
func (s *Session) dial(ctx context.Context, dial Dialer) (*clientv3.Client, error) {
	c, err := dial(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { c.Close() })
	return c, nil
}

// Child returns a new Session on s's target, with s's epoch, log and
// maintenance connection, for a further load on the same target: its own
// writers' connections, seeding, recorder, watchers and cases. Closing it
// closes what it opened, not s's maintenance connection. Call it after
// DialAdmin.
func (s *Session) Child() *Session {
	return &Session{t: s.t, h: s.h, epoch: s.epoch, logf: s.logf, live: &liveState{start: s.epoch}, admin: s.admin}
}

// writersAsAdmin opens the writers' conns connections (ConnectWriters,
// not pinned) and makes the first the maintenance connection too, for
// loads that open none of their own for it; it returns that connection
// and the first member's etcd version (EtcdVersion).
func (s *Session) writersAsAdmin(ctx context.Context, conns int) (*clientv3.Client, string, error) {
	if _, err := s.ConnectWriters(ctx, conns, false); err != nil {
		return nil, "", err
	}
	s.admin = s.writers.Conns[0]
	version, err := s.EtcdVersion(ctx)
	return s.admin, version, err
}

// EtcdVersion returns the version of the first endpoint's member, asked
// on the maintenance connection (DialAdmin, or the first writer's
// connection for a load that opens none of its own).
func (s *Session) EtcdVersion(ctx context.Context) (string, error) {
	st, err := s.admin.Status(ctx, s.h.Endpoints[0])
	if err != nil {
		return "", fmt.Errorf("status of %s: %w", s.h.Endpoints[0], err)
	}
	return st.Version, nil
}

// connect opens a topology to every endpoint, or, pinned, one endpoint
// per connection (ConnectPinned).
func (s *Session) connect(ctx context.Context, conns, streams int, source string, pinned bool) (*Topology, error) {
	ctx = context.WithoutCancel(ctx) // see Session: connections outlive ctx
	var topo *Topology
	var err error
	if pinned {
		topo, err = ConnectPinned(ctx, s.t.DialEndpoint, s.t.Endpoints, conns, streams, source)
	} else {
		topo, err = Connect(ctx, s.t.Dial, conns, streams, source)
	}
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, topo.Close)
	return topo, nil
}

// ConnectWriters opens the writers' conns connections, pinned to one
// member each when pinned.
func (s *Session) ConnectWriters(ctx context.Context, conns int, pinned bool) (*Topology, error) {
	topo, err := s.connect(ctx, conns, conns, "", pinned)
	if err != nil {
		return nil, err
	}
	s.writers = topo
	s.kvs = make([]KV, len(topo.Conns))
	for i, c := range topo.Conns {
		s.kvs[i] = c
	}
	return topo, nil
}

// Seed creates wl's objects on the writers' connections, workers at a
// time; the error is Seed's, unwrapped.
func (s *Session) Seed(ctx context.Context, wl *KubernetesWorkload, workers int) error {
	_, err := wl.Seed(ctx, s.kvs, workers)
	return err
}

// StartRecorder starts the history recorder of prefixes (NewRecorder;
// fallbackScope is its FallbackScope), on a connection of its own to every
// member, the harness's (Harness), from revision from on, and returns once
// etcd has created its watch (Recorder.Watching), or with the recorder's
// error (from already compacted) or ctx's. It runs until Validate or
// Close.
func (s *Session) StartRecorder(ctx context.Context, prefixes []string, fallbackScope string, from int64) (*Recorder, error) {
	return s.StartRecorderWithin(ctx, prefixes, nil, fallbackScope, from)
}

// StartRecorderWithin is StartRecorder recording only the keys under one
// of within (Recorder.Within; nil: every key under prefixes).
func (s *Session) StartRecorderWithin(ctx context.Context, prefixes, within []string, fallbackScope string, from int64) (*Recorder, error) {
	topo, err := Connect(context.WithoutCancel(ctx), s.h.Dial, 1, 1, "")
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, topo.Close)
	s.recTopo = topo
	s.rec = NewRecorder(topo.Streams[0], prefixes)
	s.rec.FallbackScope = fallbackScope
	s.rec.Within = within
	rctx, stop := context.WithCancel(ctx)
	s.stopRecorder = stop
	s.recWG.Add(1)
	go func() {
		defer s.recWG.Done()
		s.rec.Run(rctx, from)
	}()
	// Return once etcd holds the watch: a compaction right after the
	// return (a test's, a fast compactor's) must not pass a recorder
	// whose watch request is still on its way.
	select {
	case <-s.rec.Watching():
		return s.rec, nil
	case <-s.rec.Stopped():
		if err := s.rec.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("history recorder stopped before its watch was created: %w", context.Cause(ctx))
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// NewEnv makes the Env the Session's parts share, from the Session's
// epoch, joined to its recorder if one started; ringCapacity and writers
// are NewEnv's.
func (s *Session) NewEnv(ringCapacity int64, writers int) *Env {
	s.env = NewEnv(s.epoch, ringCapacity, writers, s.rec)
	return s.env
}

// ConnectWatchers opens the watchers' conns connections and lays streams
// streams over them (Connect; source and pinned as there).
func (s *Session) ConnectWatchers(ctx context.Context, conns, streams int, source string, pinned bool) (*Topology, error) {
	topo, err := s.connect(ctx, conns, streams, source, pinned)
	if err != nil {
		return nil, err
	}
	s.watch = topo
	return topo, nil
}

// StartCaches makes kube-apiserver's watch caches (ProfileAPIServerCache):
// one for each resource of resources that kube-apiserver caches (cached),
// in that order, cache k filled by a reflector with the options opts(k,
// resource) returns (its Stream the resource's own: kube-apiserver gives
// each resource's storage an etcd client of its own). It runs them with
// their progress requesters and waits until every one has listed; an
// error if one has not within timeout or ctx ends. watchList makes the
// clients' first lists consistent (client-go's WatchListClient). The
// caches run until Validate or Close; it returns them by resource.
func (s *Session) StartCaches(ctx context.Context, resources []string, opts func(k int, resource string) ReflectorOptions,
	watchList bool, timeout time.Duration) (map[string]*watchCache, error) {
	byResource := map[string]*watchCache{}
	var refls []*Reflector
	for _, r := range resources {
		if !cached(r) || byResource[r] != nil {
			continue
		}
		wc := newWatchCache(s.env, opts(len(s.wcs), r), watchList)
		byResource[r] = wc
		s.wcs = append(s.wcs, wc)
		refls = append(refls, wc.Reflector())
	}
	s.caches = &ReflectorSet{Reflectors: refls, topo: s.watch}
	err := s.caches.Start(ctx, ctx, 0, timeout)
	for _, wc := range s.wcs {
		go wc.runRequester(s.caches.Context())
	}
	return byResource, err
}

// StartWatchers makes n reflectors on the Session's Env, reflector i with
// the options opts(i, its stream) returns, runs them, at most concurrency
// listing at once (0 or less: all), and waits until every one has listed.
// It returns an error if one has not within timeout or ctx ends; the
// reflectors run until Validate or Close either way.
func (s *Session) StartWatchers(ctx context.Context, n int, opts func(i int, stream *Stream) ReflectorOptions, concurrency int, timeout time.Duration) ([]*Reflector, error) {
	s.watchers = NewReflectorSet(s.env, s.watch, n, opts)
	s.refls = s.watchers.Reflectors
	s.live.setWatchers(s.refls, s.rec)
	return s.refls, s.watchers.Start(ctx, ctx, concurrency, timeout)
}

// Writing is writers at work: a Session's (Session.Write) or any set of
// writers on an Env (StartWriting).
type Writing struct {
	// Writers are the writers.
	Writers *Writers
	// Start is when the writes began, since the Env's epoch.
	Start time.Duration
	stop  context.CancelFunc
	done  chan struct{}
	stats report.WriteStats
}

// StartWriting starts writers of wl on kvs (NewWriters with env and o),
// on their schedule from now, under a context derived from parent. They
// stop when their schedule is done, parent ends or Stop is called.
func StartWriting(parent context.Context, env *Env, kvs []KV, wl Workload, o WriterOptions) (*Writing, error) {
	writers, err := NewWriters(env, kvs, wl, o)
	if err != nil {
		return nil, err
	}
	w := &Writing{Writers: writers, Start: env.Since()}
	w.run(parent)
	return w, nil
}

// run runs the writers under a context derived from parent.
func (w *Writing) run(parent context.Context) {
	ctx, stop := context.WithCancel(parent)
	w.stop, w.done = stop, make(chan struct{})
	go func() {
		defer close(w.done)
		w.stats = w.Writers.Run(ctx)
	}()
}

// Done is closed when the writers have stopped.
func (w *Writing) Done() <-chan struct{} { return w.done }

// Wait waits until the writers have stopped and returns what they did.
func (w *Writing) Wait() report.WriteStats {
	<-w.done
	return w.stats
}

// Stop ends the writes at once and returns what the writers did.
func (w *Writing) Stop() report.WriteStats {
	w.stop()
	return w.Wait()
}

// StopMeasured ends the writes at once (Stop) and returns what the
// writers did with the latency of every write env recorded
// (Env.WriteLatency); zero WriteStats for a nil Writing.
func (w *Writing) StopMeasured(env *Env) report.WriteStats {
	if w == nil {
		return report.WriteStats{}
	}
	ws := w.Stop()
	ws.Latency = env.WriteLatency()
	return ws
}

// Write starts writers of wl on the writers' connections (NewWriters with
// o) from now, on their schedule; the one-second intervals count from now
// and the live view shows phase. They stop when their schedule is done,
// ctx ends or the Session closes.
func (s *Session) Write(ctx context.Context, wl Workload, o WriterOptions, phase string) (*Writing, error) {
	kvs := s.kvs
	if len(kvs) == 0 {
		// A workload that writes through clients of its own (the API's).
		kvs = []KV{nil}
	}
	writers, err := NewWriters(s.env, kvs, wl, o)
	if err != nil {
		return nil, err
	}
	s.live.setWriters(writers, o.Total)
	w := &Writing{Writers: writers, Start: s.env.Since()}
	s.env.SetIntervalOrigin(w.Start)
	s.SetPhase(phase)
	w.run(ctx)
	s.writing = w
	return w, nil
}

// Confirm waits until the recorder's history is complete to revision rev
// (logging if it is not), then, looking every period, until every watch
// cache and every watcher has seen rev (ReflectorSet.WaitSynced: from the
// history, asking etcd for nothing) or timeout passes, the watch caches
// first. It returns the number of watchers and caches that have not.
func (s *Session) Confirm(ctx context.Context, rev int64, period, timeout time.Duration) (unsynced int) {
	if err := s.rec.WaitFor(ctx, rev, period); err != nil && ctx.Err() == nil {
		s.logf("history recorder did not reach revision %d: %v", rev, err)
	}
	if s.caches != nil {
		unsynced += s.caches.WaitSynced(ctx, s.rec, rev, period, timeout)
	}
	return unsynced + s.watchers.WaitSynced(ctx, s.rec, rev, period, timeout)
}

// Validate stops the watchers, then the watch caches, and waits for them,
// waits (up to 30 s) until the history covers every one's last revision,
// completes each one's validation against it, and stops the recorder.
func (s *Session) Validate(ctx context.Context, period time.Duration) {
	s.watchers.Stop()
	refls := s.refls
	if s.caches != nil {
		s.caches.Stop()
		refls = append(append([]*Reflector(nil), refls...), s.caches.Reflectors...)
	}
	finishValidation(ctx, s.rec, refls, 0, period, s.logf)
	s.stopRecorder()
	s.recWG.Wait()
}

// stop ends the live view, the writers, the watchers and the recorder,
// without waiting for them.
func (s *Session) stop() {
	if s.stopStatus != nil {
		s.stopStatus()
		s.stopStatus = nil
	}
	if s.writing != nil {
		s.writing.stop()
	}
	if s.watchers != nil && s.watchers.stop != nil {
		s.watchers.stop()
	}
	if s.caches != nil && s.caches.stop != nil {
		s.caches.stop()
	}
	if s.stopRecorder != nil {
		s.stopRecorder()
	}
}

// Close stops what the Session started, waits for the recorder, and
// closes every connection it opened, the last opened first.
func (s *Session) Close() {
	s.stop()
	s.recWG.Wait()
	if s.self != nil {
		close(s.self.stop)
		<-s.self.done
		s.self = nil
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// finishValidation waits (up to 30 s) until the history covers revision
// floor and every stopped reflector's last revision (lease expiries may
// have moved etcd on after the final revision), then completes each
// reflector's validation.
func finishValidation(ctx context.Context, rec *Recorder, refls []*Reflector, floor int64, period time.Duration, logf func(string, ...any)) {
	last := floor
	for _, r := range refls {
		last = max(last, r.LastRevision())
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := rec.WaitFor(wctx, last, period); err != nil {
		logf("history recorder did not reach revision %d: %v", last, err)
	}
	for _, r := range refls {
		r.Finish()
	}
}

// interruptedAfterWrites is the error a load interrupted during or
// after its writes (AfterWrites) returns beside its result: the
// interruption, wrapped, and how many of the writes planned were done.
func interruptedAfterWrites(load string, interrupted error, ws report.WriteStats) error {
	return fmt.Errorf("%s %w after %d of %d writes: the result holds what was measured until then", load, interrupted, ws.Completed, ws.Planned)
}

// interruptedGrace bounds what an interrupted load still does to hand back
// its result: confirm, validate and collect.
const interruptedGrace = 20 * time.Second

// SetAbandon makes the end of abandon (a second SIGINT; nil: never) end
// the context AfterWrites returns to an interrupted load, so that it gives
// up collecting its result at once (Abandoned). Call it before
// AfterWrites.
func (s *Session) SetAbandon(abandon context.Context) { s.abandon = abandon }

// Abandoned reports whether the load was interrupted and then told to give
// up collecting its result too (SetAbandon).
func (s *Session) Abandoned() bool { return s.abandon != nil && s.abandon.Err() != nil }

// AfterWrites is called once a load's writes have ended. While ctx is live
// it returns ctx and a nil interruption. Once ctx has ended (SIGINT,
// SIGTERM) it returns a context of its own, bounded by 20 s and ended
// early by SetAbandon's context, for the phases that hand back what was
// measured (the Session's connections outlive ctx), and the interruption,
// which the load returns beside its result; cancel releases the context.
func (s *Session) AfterWrites(ctx context.Context) (_ context.Context, interrupted error, cancel context.CancelFunc) {
	if ctx.Err() == nil {
		return ctx, nil, func() {}
	}
	if s.abandon == nil {
		s.logf("interrupted: collecting what was measured so far (at most %s)", interruptedGrace)
	} else {
		s.logf("interrupted: collecting what was measured so far (at most %s; interrupt again to stop at once)", interruptedGrace)
	}
	cctx, cancelGrace := context.WithTimeout(context.WithoutCancel(ctx), interruptedGrace)
	if s.abandon != nil {
		stop := context.AfterFunc(s.abandon, cancelGrace)
		return cctx, ctx.Err(), func() { stop(); cancelGrace() }
	}
	return cctx, ctx.Err(), cancelGrace
}
