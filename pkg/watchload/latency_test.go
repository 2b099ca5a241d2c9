package watchload

import (
	"testing"
	"time"

	"github.com/kubestore/etcdkit/pkg/report"
)

func TestCommitLog(t *testing.T) {
	l := newCommitLog(1000) // rounds up to 1024 slots
	if len(l.slots) != 1024 {
		t.Fatalf("%d slots, want 1024", len(l.slots))
	}
	l.publish(5, 100, 200)
	if sent, done, found, gone := l.lookup(5); !found || gone || sent != 100 || done != 200 {
		t.Errorf("lookup(5) = %d, %d, found %v, gone %v; want 100, 200, found", sent, done, found, gone)
	}
	if _, _, found, gone := l.lookup(5 + 1024); found || gone {
		t.Errorf("lookup of a later revision in the same slot: found %v gone %v; want neither (it may still come)", found, gone)
	}
	l.publish(5+1024, 300, 400)
	if _, _, found, gone := l.lookup(5); found || !gone {
		t.Errorf("lookup of an overwritten revision: found %v gone %v; want gone", found, gone)
	}
}

// TestWatchTimingJoin covers the three ways an event meets its write: the
// write published first, the event arrived first (held until the write
// publishes), and no write will ever publish it.
func TestWatchTimingJoin(t *testing.T) {
	tm := newTiming(time.Now(), 1024, 2)
	w := newWatchTiming(tm, -1)
	ms := int64(time.Millisecond)

	tm.ring.publish(10, 1*ms, 3*ms)
	w.event(10, 5*ms) // 2 ms after the response, 4 ms after the send

	tm.inflight.begin(1, 6*ms) // a write in flight since 6 ms
	w.event(11, 7*ms)          // arrives before its response
	if len(w.pending) != 1 {
		t.Fatalf("%d pending events, want the one whose write is in flight", len(w.pending))
	}
	tm.ring.publish(11, 6*ms, 8*ms)
	tm.inflight.end(1)
	w.retry()
	if len(w.pending) != 0 {
		t.Fatalf("%d pending events after the write published", len(w.pending))
	}

	w.event(12, 9*ms) // nothing in flight, nothing published: not ours
	w.finish()

	if tm.timed != 2 || tm.untimed != 1 || tm.beforeResponse != 1 {
		t.Errorf("timed %d, untimed %d, before response %d; want 2, 1, 1", tm.timed, tm.untimed, tm.beforeResponse)
	}
	c, s := tm.fromResponse.summary(), tm.fromSend.summary()
	// From commit: 2 ms and 0 (before the response); from send: 4 ms and 1 ms.
	if c.MaxMs < 1.99 || c.MaxMs > 2.01 || s.MaxMs < 3.99 || s.MaxMs > 4.01 {
		t.Errorf("from commit max %.3f ms, from send max %.3f ms; want 2 and 4", c.MaxMs, s.MaxMs)
	}
	if got := tm.series(); len(got) != 1 || got[0].Events != 3 {
		t.Errorf("series %+v, want one interval with 3 events", got)
	}
}

func TestTimingIntervals(t *testing.T) {
	tm := newTiming(time.Now(), 1024, 1)
	s := int64(time.Second)
	tm.setOrigin(10 * s)
	// A write due at 10.5 s that ended at 12.2 s: latency 1.7 s in
	// interval 0, completion in interval 2.
	tm.addWrites([]writeSample{{scheduled: 10*s + s/2, done: 12*s + s/5}, {scheduled: 11 * s, done: 11*s + s/10, failed: true}})
	got := tm.series()
	if len(got) != 3 {
		t.Fatalf("%d intervals, want 3", len(got))
	}
	if got[0].WritesScheduled != 1 || got[0].WriteP99Ms < 1690 || got[2].WritesCompleted != 1 || got[1].WriteErrors != 1 {
		t.Errorf("intervals %+v: want the slow write's latency in interval 0, its completion in 2, the error in 1", got)
	}
	if tm.writes.count() != 2 {
		t.Errorf("write latency counted %d writes, want 2 (failures count)", tm.writes.count())
	}
}

// TestCommitLogBounded: a capacity sized from an absurd rate (1e9 writes
// per second for 20 s) gets the bounded ring instead of tens of GiB.
func TestCommitLogBounded(t *testing.T) {
	for _, tt := range []struct {
		name      string
		capacity  int64
		wantSlots int
	}{
		{"small", 3000, 4096},
		{"at the bound", maxCommitLogSlots, maxCommitLogSlots},
		{"beyond the bound", 2e10, maxCommitLogSlots},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(newCommitLog(tt.capacity).slots); got != tt.wantSlots {
				t.Errorf("newCommitLog(%d): got %d slots, want %d", tt.capacity, got, tt.wantSlots)
			}
		})
	}
}

// TestHeldBackDelivery holds one of two watchers back, as kubeload's client set
// and the model's maintenance do, and has it receive the events of its
// hold late by the hold's length, as a watch resumed from kube-apiserver's
// watch cache does: the headline latencies must stay those of the
// watchers not held back (and of the held one before its hold), the late
// events must be reported apart, and every count must stay a total.
func TestHeldBackDelivery(t *testing.T) {
	ms := int64(time.Millisecond)
	env := NewEnv(time.Now(), 1<<12, 1, nil)
	env.SetIntervalOrigin(0)
	held, free := env.NewObserver(0, "/registry/pods/"), env.NewObserver(1, "/registry/pods/")
	const hold = 15000 // ms
	rev := int64(0)
	// write publishes a write answered at ms since the epoch.
	write := func(at int64) int64 {
		rev++
		env.timing.ring.publish(rev, (at-1)*ms, at*ms)
		return rev
	}
	// Before the hold (0-999 ms): both watchers receive every event 5 ms
	// after its write's response.
	for at := int64(0); at < 1000; at += 10 {
		r := write(at)
		held.Event(WatchEvent{Key: []byte("/registry/pods/ns/a"), Revision: r}, (at+5)*ms)
		free.Event(WatchEvent{Key: []byte("/registry/pods/ns/a"), Revision: r}, (at+5)*ms)
	}
	held.HoldBack()
	held.HoldBack() // a second call counts no second watcher
	// During the hold (1000-15999 ms) only the free watcher receives them.
	var missed []int64
	for at := int64(1000); at < 1000+hold; at += 10 {
		r := write(at)
		missed = append(missed, r)
		free.Event(WatchEvent{Key: []byte("/registry/pods/ns/a"), Revision: r}, (at+5)*ms)
	}
	// At the release the held watcher receives the hold's events at once,
	// late by up to the hold.
	release := int64(1000 + hold)
	for _, r := range missed {
		held.Event(WatchEvent{Key: []byte("/registry/pods/ns/a"), Revision: r}, release*ms)
	}
	held.Finish()
	free.Finish()

	var d report.DeliveryStats
	var w report.WriteStats
	ivs := env.Collect(&w, &d)

	before, during := int64(100), int64(hold/10)
	if want := 2*before + 2*during; d.TimedEvents != want || d.UntimedEvents != 0 {
		t.Errorf("timed %d, untimed %d events; want %d and 0: the counts are every watcher's", d.TimedEvents, d.UntimedEvents, want)
	}
	if want := 2*before + during; d.FromResponse.Count != want || d.FromSend.Count != want {
		t.Errorf("fromResponse counts %d, fromSend %d events; want %d, the free watcher's and the held one's before its hold", d.FromResponse.Count, d.FromSend.Count, want)
	}
	if d.FromResponse.MaxMs > 5.1 || d.FromResponse.P99Ms > 5.1 {
		t.Errorf("fromResponse p99 %.1f ms, max %.1f ms; want 5 ms, the hold's late events left out", d.FromResponse.P99Ms, d.FromResponse.MaxMs)
	}
	h := d.HeldBack
	if h == nil {
		t.Fatal("no heldBack delivery; want the held watcher's")
	}
	if h.Watchers != 1 || h.Events != during || h.TimedEvents != during || h.FromResponse.Count != during {
		t.Errorf("heldBack %d watchers, %d events, %d timed, fromResponse count %d; want 1 watcher and %d events", h.Watchers, h.Events, h.TimedEvents, h.FromResponse.Count, during)
	}
	if h.FromResponse.MaxMs < hold-1 || h.FromResponse.MaxMs > hold*1.01 || h.FromResponse.P50Ms < hold/2*0.99 {
		t.Errorf("heldBack fromResponse p50 %.0f ms, max %.0f ms; want about %d and %d (late by up to the hold)", h.FromResponse.P50Ms, h.FromResponse.MaxMs, hold/2, hold)
	}

	last := ivs[release/1000]
	if last.Events != during || last.HeldBackEvents != during {
		t.Errorf("interval of the release: %d events, %d held back; want %d and %d", last.Events, last.HeldBackEvents, during, during)
	}
	if last.DeliveryP99Ms != 0 || last.HeldBackDeliveryP99Ms < hold*0.98 {
		t.Errorf("interval of the release: delivery p99 %.0f ms, held back p99 %.0f ms; want 0 (no free event then) and about %d", last.DeliveryP99Ms, last.HeldBackDeliveryP99Ms, hold)
	}
	if first := ivs[0]; first.HeldBackEvents != 0 || first.Events != 2*before || first.DeliveryP99Ms > 5.1 {
		t.Errorf("first interval: %d events, %d held back, delivery p99 %.1f ms; want %d, 0, 5 ms", first.Events, first.HeldBackEvents, first.DeliveryP99Ms, 2*before)
	}
}

// TestNoHoldNoHeldBackDelivery: without a hold, nothing is reported apart.
func TestNoHoldNoHeldBackDelivery(t *testing.T) {
	env := NewEnv(time.Now(), 1024, 1, nil)
	o := env.NewObserver(0, "/registry/pods/")
	env.timing.ring.publish(1, 0, int64(time.Millisecond))
	o.Event(WatchEvent{Key: []byte("/registry/pods/ns/a"), Revision: 1, Create: true}, int64(2*time.Millisecond))
	o.Finish()
	d := report.DeliveryStats{HeldBack: &report.HeldBackDelivery{Watchers: 9}} // a stale value is replaced
	var w report.WriteStats
	ivs := env.Collect(&w, &d)
	if d.HeldBack != nil || d.FromResponse.Count != 1 || ivs[0].HeldBackEvents != 0 {
		t.Errorf("heldBack %+v, fromResponse count %d, interval held back events %d; want nil, 1, 0", d.HeldBack, d.FromResponse.Count, ivs[0].HeldBackEvents)
	}
}

// TestHeldBackMemberDelivery: a member's delivery latency, as the run's,
// leaves out the events its watcher received once held back; its counts
// keep them.
func TestHeldBackMemberDelivery(t *testing.T) {
	ms := int64(time.Millisecond)
	tm := newTiming(time.Now(), 1024, 1)
	tm.setMembers(1)
	w := newWatchTiming(tm, 0)
	tm.ring.publish(1, 0, 1*ms)
	w.event(1, 2*ms) // 1 ms
	w.holdBack()
	tm.ring.publish(2, 2*ms, 3*ms)
	w.event(2, 5003*ms) // 5 s late, after the hold
	w.finish()
	m := tm.members[0]
	if got := m.delivery.summary(); m.events != 2 || m.timed != 2 || got.Count != 1 || got.MaxMs > 1.01 {
		t.Errorf("member: %d events, %d timed, delivery %+v; want 2, 2 and the 1 ms of the event before the hold alone", m.events, m.timed, got)
	}
	if tm.held == nil || tm.held.watchers != 1 || tm.held.fromResponse.summary().MaxMs < 4990 {
		t.Errorf("held-back group %+v; want one watcher and its 5 s late event", tm.held)
	}
}
