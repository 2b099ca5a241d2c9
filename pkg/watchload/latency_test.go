package watchload

import (
	"testing"
	"time"
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
	c, s := tm.fromCommit.summary(), tm.fromSend.summary()
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
