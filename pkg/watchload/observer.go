package watchload

import (
	"sync"
	"time"

	"github.com/kubestore/etcdkit/pkg/report"
)

// Observer is the Env's side of a watcher that is not a Reflector: a real
// client-go informer behind kube-apiserver (pkg/kubeload), whose events
// arrive as Kubernetes objects rather than etcd responses. It checks what
// the watcher delivers against the Env's recorded history, as a
// Reflector's own checks do (every guarantee of Violations), and times
// each event from the response of the write that caused it.
//
// A watcher reports, in the order it saw them: StartWatch when it begins
// a watch (after a LIST, or after the initial events of a WatchList
// stream), Event for every event of that watch, Progress for every
// bookmark, and UnparsedResourceVersion instead of any of them when the
// resourceVersion is not a revision. An Observer is safe for concurrent
// use, but a watcher's calls must come in its own order (one goroutine at
// a time).
type Observer struct {
	mu  sync.Mutex
	val *validator
	lat *watchTiming
}

// NewObserver returns an Observer for watcher id (its number in
// Violations) of the keys under prefix (e.g. "/registry/pods/"), which the
// Env's Recorder must record for the history checks to apply.
func (e *Env) NewObserver(id int, prefix string) *Observer {
	return &Observer{val: newValidator(id, e.Recorder, prefix, e.Violations), lat: newWatchTiming(e.timing, -1)}
}

// Now is the Env's clock: the offset from its epoch, in nanoseconds, that
// Event takes as the arrival time.
func (e *Env) Now() int64 { return e.timing.now() }

// StartWatch begins a watch that delivers every event from revision from
// on (a LIST at resourceVersion r, then a WATCH from r: from is r+1).
func (o *Observer) StartWatch(from int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.val.drain()
	o.val.startSession(from)
}

// Event checks ev, one event of the current watch, against the history
// and times it; at is its arrival on Env.Now's clock. Each call is a
// response of its own to the checks (a revision split over two calls is
// an atomic violation): kube-apiserver writes one object per revision.
func (o *Observer) Event(ev WatchEvent, at int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.val.drain()
	o.val.events([]WatchEvent{ev})
	o.lat.event(ev.Revision, at)
	o.lat.retry()
}

// UnparsedResourceVersion counts, as a violation of kind
// ViolationUnparsedResourceVersion, an event, bookmark or WATCH request
// of the watcher whose resourceVersion is not a revision: the event can be
// neither checked nor timed, the bookmark or watch start not checked. key
// is the object's etcd key ("" if none); err says what carried the
// resourceVersion and why it does not parse.
func (o *Observer) UnparsedResourceVersion(key string, err error) {
	o.val.add(ViolationUnparsedResourceVersion, 0, key, err.Error())
}

// HoldBack tells the Observer that its watcher is being held back across
// a compaction: every event it reports from now on, for the rest of the
// run, is timed apart from those of the watchers never held back
// (report.DeliveryStats.HeldBack), since those of the hold may arrive
// late by up to its length. Call it before the watcher stops; calls after
// the first do nothing. It may be called from any goroutine.
func (o *Observer) HoldBack() { o.lat.holdBack() }

// Progress checks a bookmark at revision rev: every event up to rev must
// have been delivered.
func (o *Observer) Progress(rev int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.val.drain()
	o.val.progress(rev)
}

// Finish flushes the timings and completes the checks; call it once the
// watcher has stopped and the Recorder has recorded up to the watcher's
// last revision (Recorder.WaitFor). It returns the number of events the
// history did not cover, which were not checked.
func (o *Observer) Finish() (unverified int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lat.finish()
	o.val.finish()
	return o.val.unverified
}

// CompareCache reports, as cache violations of this watcher, every key
// whose presence or mod_revision differs between the watcher's cache and
// etcd's state at revision rev (both maps: key to mod_revision), in key
// order.
func (o *Observer) CompareCache(rev int64, cache, state map[string]int64) {
	compareCache(o.val.viol, o.val.watcher, rev, cache, state)
}

// Collect fills writes' latency and d's delivery figures from what the
// Env timed (d.Events must hold the number of events the watchers
// received; d may be nil): the latencies of the watchers never held back,
// or not yet, and d.HeldBack those of the held ones from their hold on
// (Observer.HoldBack, Reflector.Hold), nil if none was. It returns the
// one-second intervals from the interval origin: what Run reports, for a
// load assembled outside Run.
func (e *Env) Collect(writes *report.WriteStats, d *report.DeliveryStats) []report.Interval {
	iv := collectTimings(e, writes, d)
	if d != nil {
		d.EventsPerSecond = e.timing.eventsPerSecond(d.Events)
	}
	return iv
}

// Epoch is the zero of every offset the Session reports.
func (s *Session) Epoch() time.Time { return s.epoch }

// ScenarioOf is the scenario a result reports for options o (after
// Defaults).
func ScenarioOf(o Options) report.Scenario { return scenario(o) }
