package watchload

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/kubestore/etcdkit/pkg/report"
)

// histogram records latencies in microseconds, from 1 µs to 1 hour (HDR
// histogram: constant memory, values exact to 10^-digits relative).
type histogram struct{ h *hdrhistogram.Histogram }

// newHistogram returns a histogram with 3 significant digits (0.1%,
// about 190 KB), for totals.
func newHistogram() histogram { return newHistogramDigits(3) }

// newHistogramDigits returns a histogram with the given significant
// digits; per-interval histograms use 2 (1%, about 26 KB).
func newHistogramDigits(digits int) histogram {
	return histogram{h: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), digits)}
}

// record adds one latency; values outside the range are clamped to it.
func (h histogram) record(d time.Duration) {
	us := max(int64(d/time.Microsecond), 1)
	us = min(us, h.h.HighestTrackableValue())
	h.h.RecordValue(us) // cannot fail inside the range
}

func (h histogram) count() int64 { return h.h.TotalCount() }

func (h histogram) summary() report.Latency { return report.LatencyOf(h.h) }

// summaryKept is summary with the histogram itself kept in the result
// (report.LatencyWithHDR) when keep is set: a worker's totals, which
// report.MergeRuns merges bucket by bucket. An encoding that fails
// leaves the HDR out, which the merge then refuses (report.ErrNoHDR).
func (h histogram) summaryKept(keep bool) report.Latency {
	if !keep {
		return h.summary()
	}
	l, err := report.LatencyWithHDR(h.h)
	if err != nil {
		return h.summary()
	}
	return l
}

// commitLog is a ring of the writers' completed writes indexed by
// revision: slot rev mod len holds the write's send and response times.
// Writers publish after the response; watchers look an event's revision
// up. A slot is a seqlock: the revision is written last and read first and
// again last, so a reader never mixes two writes.
type commitLog struct {
	mask  int64
	slots []commitSlot
}

type commitSlot struct {
	rev, sent, done atomic.Int64
}

// maxCommitLogSlots bounds the ring whatever the writes planned: 4Mi
// slots of 24 bytes (96 MiB). A watcher more than that many revisions
// behind the writers finds its events' writes gone and records them
// without a latency, as it does for writes it cannot match.
const maxCommitLogSlots = 1 << 22

// newCommitLog returns a ring of at least capacity slots (a power of two,
// at least 1024), but of no more than maxCommitLogSlots.
func newCommitLog(capacity int64) *commitLog {
	n := int64(1024)
	if capacity > n {
		n = 1 << bits.Len64(uint64(min(capacity, maxCommitLogSlots)-1))
	}
	return &commitLog{mask: n - 1, slots: make([]commitSlot, n)}
}

// publish records the write that committed revision rev; sent and done are
// nanoseconds since the run's epoch.
func (l *commitLog) publish(rev, sent, done int64) {
	s := &l.slots[rev&l.mask]
	s.rev.Store(0)
	s.sent.Store(sent)
	s.done.Store(done)
	s.rev.Store(rev)
}

// lookup returns the write of revision rev. found is false when no write
// of rev has been published (yet); gone is true when the slot has moved on
// to a later revision, so rev will never be found.
func (l *commitLog) lookup(rev int64) (sent, done int64, found, gone bool) {
	s := &l.slots[rev&l.mask]
	r := s.rev.Load()
	if r != rev {
		return 0, 0, false, r > rev
	}
	sent, done = s.sent.Load(), s.done.Load()
	if s.rev.Load() != rev {
		return 0, 0, false, true
	}
	return sent, done, true, false
}

// inflight tracks each writer worker's outstanding request: the time it
// was sent (nanoseconds since the epoch, plus one), 0 when idle.
type inflight struct{ sent []atomic.Int64 }

func newInflight(workers int) *inflight { return &inflight{sent: make([]atomic.Int64, workers)} }

func (f *inflight) begin(worker int, sent int64) { f.sent[worker].Store(sent + 1) }
func (f *inflight) end(worker int)               { f.sent[worker].Store(0) }

// mayCommit reports whether a write sent before at is still outstanding,
// so that an event received at at may yet be matched with its write. A
// write publishes its revision before it stops being outstanding.
func (f *inflight) mayCommit(at int64) bool {
	for i := range f.sent {
		if s := f.sent[i].Load(); s != 0 && s-1 < at {
			return true
		}
	}
	return false
}

// timing joins watch events with the writes that caused them and collects
// every latency of a run: totals and one-second intervals. The delivery
// latencies come in two groups: the events of watchers never held back,
// or not yet (fromResponse, fromSend: report.DeliveryStats' headline), and
// those of watchers held back, from their hold on (held:
// report.DeliveryStats.HeldBack), whose events of the hold may arrive
// late by up to its length. The counts are over both.
type timing struct {
	epoch    time.Time
	ring     *commitLog
	inflight *inflight
	// origin is the offset from the epoch at which interval 0 starts.
	origin atomic.Int64
	width  time.Duration
	// keepHDR keeps the totals' histograms in the result
	// (Env.KeepHistograms).
	keepHDR bool

	mu           sync.Mutex
	fromResponse histogram // watchers not held back
	fromSend     histogram // watchers not held back
	writes       histogram
	intervals    []*intervalStats
	// held is the delivery to watchers held back, from their hold on;
	// nil until one is.
	held *heldTiming
	// beforeResponse counts events received before their writer had the
	// response: latency from commit is then recorded as 0.
	beforeResponse int64
	timed, untimed int64
	// lastEvent is the latest receipt time of any event.
	lastEvent int64
	// members holds what the clients pinned to each member saw; nil
	// unless setMembers was called.
	members []*memberTiming
}

// heldTiming is the delivery to the watchers held back, from each one's
// hold on.
type heldTiming struct {
	watchers               int // watchers held back
	events, timed          int64
	fromResponse, fromSend histogram
}

// holdWatcher starts the held-back group, if it has not started, and
// counts one more watcher in it.
func (t *timing) holdWatcher() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held = &heldTiming{fromResponse: newHistogram(), fromSend: newHistogram()}
	}
	t.held.watchers++
}

// memberTiming is what the connections pinned to one member saw.
type memberTiming struct {
	writes                                histogram
	writesDone, writeErrors, writeTimeout int64
	delivery                              histogram
	events, timed                         int64
}

// setMembers starts per-member figures for n members; call it before any
// sample is recorded.
func (t *timing) setMembers(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.members = make([]*memberTiming, n)
	for i := range t.members {
		t.members[i] = &memberTiming{writes: newHistogram(), delivery: newHistogram()}
	}
}

// member returns member i's figures, nil if i is out of range; t.mu is
// held.
func (t *timing) member(i int) *memberTiming {
	if i < 0 || i >= len(t.members) {
		return nil
	}
	return t.members[i]
}

// intervalStats is what happened in one interval: events counts every
// watcher's, deliveryLat those of watchers not held back; heldEvents and
// heldLat (nil until one is timed) those of watchers held back.
type intervalStats struct {
	writesScheduled, writesDone, writeErrors, events int64
	writeLat, deliveryLat                            histogram
	heldEvents                                       int64
	heldLat                                          *histogram
}

func newTiming(epoch time.Time, ringCapacity int64, workers int) *timing {
	return &timing{
		epoch: epoch, ring: newCommitLog(ringCapacity), inflight: newInflight(workers), width: time.Second,
		fromResponse: newHistogram(), fromSend: newHistogram(), writes: newHistogram(),
	}
}

// now returns nanoseconds since the epoch (monotonic).
func (t *timing) now() int64 { return int64(time.Since(t.epoch)) }

// setOrigin makes interval 0 start at offset (nanoseconds since epoch).
func (t *timing) setOrigin(offset int64) { t.origin.Store(offset) }

// interval returns the stats of the interval holding offset at; t.mu is
// held.
func (t *timing) interval(at int64) *intervalStats {
	i := max(int((at-t.origin.Load())/int64(t.width)), 0)
	for len(t.intervals) <= i {
		t.intervals = append(t.intervals, &intervalStats{writeLat: newHistogramDigits(2), deliveryLat: newHistogramDigits(2)})
	}
	return t.intervals[i]
}

// writeSample is one write: when it was due, when it ended, whether it
// failed (and timed out), and the member its connection is pinned to (-1:
// any).
type writeSample struct {
	scheduled, done int64
	member          int32
	failed, timeout bool
}

// addWrites records write samples: latency from the scheduled time, in the
// interval the write was due in; completions and errors in the interval it
// ended in.
func (t *timing) addWrites(ss []writeSample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range ss {
		lat := time.Duration(s.done - s.scheduled)
		t.writes.record(lat)
		iv := t.interval(s.scheduled)
		iv.writeLat.record(lat)
		iv.writesScheduled++
		end := t.interval(s.done)
		if s.failed {
			end.writeErrors++
		} else {
			end.writesDone++
		}
		if m := t.member(int(s.member)); m != nil {
			m.writes.record(lat)
			switch {
			case s.timeout:
				m.writeErrors++
				m.writeTimeout++
			case s.failed:
				m.writeErrors++
			default:
				m.writesDone++
			}
		}
	}
}

// eventSample is one received event: when, its latencies from the
// write's response and send (-1 when the event was not matched to a
// write), and whether its watcher had been held back when it arrived.
type eventSample struct {
	at, fromResponse, fromSend int64
	held                       bool
}

// addEvents records one watcher's events; member is the member its
// stream is pinned to (-1: any). Every event counts; the latency of an
// event that arrived after its watcher was held back goes to the
// held-back group (holdWatcher, which the watcher called first) alone.
func (t *timing) addEvents(ss []eventSample, beforeResponse int64, member int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.beforeResponse += beforeResponse
	m := t.member(member)
	if m != nil {
		m.events += int64(len(ss))
	}
	for _, s := range ss {
		t.lastEvent = max(t.lastEvent, s.at)
		iv := t.interval(s.at)
		iv.events++
		if s.held {
			t.held.events++
			iv.heldEvents++
		}
		if s.fromResponse < 0 {
			t.untimed++
			continue
		}
		t.timed++
		if m != nil {
			m.timed++
		}
		if s.held {
			t.held.timed++
			t.held.fromResponse.record(time.Duration(s.fromResponse))
			t.held.fromSend.record(time.Duration(s.fromSend))
			if iv.heldLat == nil {
				h := newHistogramDigits(2)
				iv.heldLat = &h
			}
			iv.heldLat.record(time.Duration(s.fromResponse))
			continue
		}
		t.fromResponse.record(time.Duration(s.fromResponse))
		t.fromSend.record(time.Duration(s.fromSend))
		iv.deliveryLat.record(time.Duration(s.fromResponse))
		if m != nil {
			m.delivery.record(time.Duration(s.fromResponse))
		}
	}
}

// series returns the per-interval series.
func (t *timing) series() []report.Interval {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]report.Interval, len(t.intervals))
	for i, iv := range t.intervals {
		w, d := iv.writeLat.summary(), iv.deliveryLat.summary()
		out[i] = report.Interval{
			StartMs:         float64(i) * report.Ms(t.width),
			WritesScheduled: iv.writesScheduled, WritesCompleted: iv.writesDone, WriteErrors: iv.writeErrors,
			WriteP50Ms: w.P50Ms, WriteP99Ms: w.P99Ms, WriteP999Ms: w.P999Ms,
			Events:        iv.events,
			DeliveryP50Ms: d.P50Ms, DeliveryP99Ms: d.P99Ms, DeliveryP999Ms: d.P999Ms,
			HeldBackEvents: iv.heldEvents,
		}
		if iv.heldLat != nil {
			out[i].HeldBackDeliveryP99Ms = iv.heldLat.summary().P99Ms
		}
	}
	return out
}

// watchTiming is one watcher's side of the join: it looks events up in
// the ring, holds those whose write has not published yet, and hands
// samples to the shared timing in batches. Its methods are called from
// the watcher's goroutine, except holdBack.
type watchTiming struct {
	t              *timing
	member         int // the member the watcher's stream is pinned to, -1: any
	buf            []eventSample
	pending        []pendingEvent
	beforeResponse int64
	// heldBack is set once the watcher has been held back, after the
	// held-back group counts it: its events from then on are timed apart
	// (timing.held).
	heldBack atomic.Bool
	holdOnce sync.Once
}

type pendingEvent struct {
	rev, at int64
	held    bool // the watcher had been held back when it arrived
}

const timingBatch = 256

func newWatchTiming(t *timing, member int) *watchTiming {
	return &watchTiming{t: t, member: member, buf: make([]eventSample, 0, timingBatch)}
}

// holdBack marks the watcher held back: every event it receives from now
// on is timed in the held-back group (report.DeliveryStats.HeldBack),
// for the rest of the run. Calls after the first do nothing. It may be
// called from any goroutine.
func (w *watchTiming) holdBack() {
	w.holdOnce.Do(func() {
		w.t.holdWatcher()
		w.heldBack.Store(true)
	})
}

// event records an event of revision rev received at at.
func (w *watchTiming) event(rev, at int64) {
	held := w.heldBack.Load()
	if !w.resolve(rev, at, held) {
		w.pending = append(w.pending, pendingEvent{rev: rev, at: at, held: held})
	}
}

// resolve records the event if its write is known or will never be; it
// returns false if the write may still publish. held tells whether the
// watcher had been held back when the event arrived.
func (w *watchTiming) resolve(rev, at int64, held bool) bool {
	sent, done, found, gone := w.t.ring.lookup(rev)
	switch {
	case found:
		d := at - done
		if d < 0 {
			w.beforeResponse++
			d = 0
		}
		w.add(eventSample{at: at, fromResponse: d, fromSend: max(at-sent, 0), held: held})
	case gone || !w.t.inflight.mayCommit(at):
		w.add(eventSample{at: at, fromResponse: -1, held: held})
	default:
		return false
	}
	return true
}

func (w *watchTiming) add(s eventSample) {
	w.buf = append(w.buf, s)
	if len(w.buf) == cap(w.buf) {
		w.flush()
	}
}

// retry resolves held events whose writes have since published.
func (w *watchTiming) retry() {
	if len(w.pending) == 0 {
		return
	}
	kept := w.pending[:0]
	for _, p := range w.pending {
		if !w.resolve(p.rev, p.at, p.held) {
			kept = append(kept, p)
		}
	}
	w.pending = kept
}

// flush hands the batch to the shared timing.
func (w *watchTiming) flush() {
	if len(w.buf) == 0 && w.beforeResponse == 0 {
		return
	}
	w.t.addEvents(w.buf, w.beforeResponse, w.member)
	w.buf, w.beforeResponse = w.buf[:0], 0
}

// finish resolves what it can, counts the rest as unmatched, and flushes.
func (w *watchTiming) finish() {
	w.retry()
	for _, p := range w.pending {
		w.add(eventSample{at: p.at, fromResponse: -1, held: p.held})
	}
	w.pending = nil
	w.flush()
}

// eventsPerSecond returns events over the time from the interval origin
// (the start of the writes) to the last event received.
func (t *timing) eventsPerSecond(events int64) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := time.Duration(t.lastEvent - t.origin.Load())
	if d <= 0 {
		return 0
	}
	return float64(events) / d.Seconds()
}
