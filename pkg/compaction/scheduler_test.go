package compaction_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/compaction"
)

// schedEvent is one call a Scheduler made: when (on the fake clock, from
// the start), what, and the revision involved, relative to the store's
// revision before the schedule began (0 when none).
type schedEvent struct {
	At   time.Duration
	What string
	Rev  int64
}

func (e schedEvent) String() string { return fmt.Sprintf("%v %s %d", e.At, e.What, e.Rev) }

// sessionActor is a load session reduced to what the scheduler drives, on
// embedded etcd: kube-apiserver's Compactor, a held watcher that stops at
// the store's revision, writesAfterHold puts while it is held (before the
// next tick), and DefragmentAll on the one member. It logs every call and
// counts calls that overlapped another.
type sessionActor struct {
	c               *clientv3.Client
	comp            *compaction.Compactor
	clk             *clocktesting.FakeClock
	start           time.Time
	base            int64 // the store's revision before the schedule
	writesAfterHold int

	mu       sync.Mutex
	events   []schedEvent
	heldRev  int64
	busy     atomic.Int32
	overlaps atomic.Int32
}

var _ compaction.Actor = (*sessionActor)(nil)

func (a *sessionActor) enter() func() {
	if a.busy.Add(1) > 1 {
		a.overlaps.Add(1)
	}
	return func() { a.busy.Add(-1) }
}

func (a *sessionActor) record(what string, rev int64) {
	if rev != 0 {
		rev -= a.base
	}
	a.mu.Lock()
	a.events = append(a.events, schedEvent{At: a.clk.Since(a.start), What: what, Rev: rev})
	a.mu.Unlock()
}

func (a *sessionActor) revision(ctx context.Context) (int64, error) {
	resp, err := a.c.Get(ctx, "/registry/pods/ns/p", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

func (a *sessionActor) Hold(ctx context.Context) (int64, error) {
	defer a.enter()()
	rev, err := a.revision(ctx)
	if err != nil {
		return 0, err
	}
	a.record("hold", rev)
	a.mu.Lock()
	a.heldRev = rev
	a.mu.Unlock()
	for range a.writesAfterHold {
		if _, err := a.c.Put(ctx, "/registry/pods/ns/p", "v"); err != nil {
			return 0, err
		}
	}
	return rev, nil
}

func (a *sessionActor) Compact(ctx context.Context) (compaction.TickResult, error) {
	defer a.enter()()
	tick, err := a.comp.Tick(ctx)
	a.record("compact", tick.Compacted)
	return tick, err
}

func (a *sessionActor) Release(ctx context.Context, compacted int64) {
	defer a.enter()()
	a.record("release", compacted)
}

func (a *sessionActor) Defragment(ctx context.Context) error {
	defer a.enter()()
	a.record("defragment", 0)
	_, err := compaction.DefragmentAll(ctx, a.c, a.c.Endpoints())
	return err
}

// runSchedule runs s to its end, stepping the fake clock by step each time
// the scheduler waits on it, and returns Run's error.
func runSchedule(t *testing.T, s *compaction.Scheduler, clk *clocktesting.FakeClock, step time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Run(t.Context()) }()
	deadline := time.After(time.Minute)
	for {
		select {
		case err := <-done:
			return err
		case <-deadline:
			t.Fatalf("the schedule did not end within a minute; fake clock at %v", clk.Now())
		default:
		}
		if clk.HasWaiters() {
			clk.Step(step)
			continue
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSchedulerTimeline runs the schedule on a fake clock against etcd and
// compares every call the scheduler made, in order, with its offset and
// revision (relative to the store's revision before the schedule: each
// tick's transaction puts compact_rev_key, one revision, and a tick
// compacts to the revision the previous tick saw).
func TestSchedulerTimeline(t *testing.T) {
	const I = 10 * time.Second
	ev := func(at time.Duration, what string, rev int64) schedEvent { return schedEvent{at, what, rev} }
	tests := []struct {
		name            string
		o               compaction.SchedulerOptions
		writesAfterHold int
		want            []schedEvent
	}{{
		// lwbench's rule: the first tick at once, so the first compaction
		// comes one interval in; without a hold, the release (nothing to
		// let go) and the defragmentation follow it.
		name: "no hold: first compaction at I",
		o:    compaction.SchedulerOptions{Interval: I, Duration: 3 * I, Defragment: true},
		want: []schedEvent{ev(0, "compact", 0), ev(I, "compact", 1), ev(I, "release", 1), ev(I, "defragment", 0), ev(2*I, "compact", 2)},
	}, {
		// kube-apiserver's rule: it waits a full interval before its first
		// tick, so the first compaction comes at 2I.
		name: "first tick after one interval: first compaction at 2I",
		o:    compaction.SchedulerOptions{Interval: I, FirstTick: I, Duration: 4 * I, Defragment: true},
		want: []schedEvent{ev(I, "compact", 0), ev(2*I, "compact", 1), ev(2*I, "release", 1), ev(2*I, "defragment", 0), ev(3*I, "compact", 2)},
	}, {
		// The schedule began I/2 before Run (a load's compactor starts
		// with the load, before the seeding): the first tick is due I/2
		// into Run.
		name: "offset within the first interval: the first tick at FirstTick-Offset",
		o:    compaction.SchedulerOptions{Interval: I, FirstTick: I, Offset: I / 2, Duration: 3 * I, Defragment: true},
		want: []schedEvent{ev(I/2, "compact", 0), ev(3*I/2, "compact", 1), ev(3*I/2, "release", 1), ev(3*I/2, "defragment", 0)},
	}, {
		// The ticks due at I and 2I after the schedule's start came before
		// Run (started at 5I/2): one tick at once, then on the schedule,
		// at 3I (I/2 into Run) and 4I; the schedule ends at 5I.
		name: "offset past two ticks: one tick at once, then on the schedule",
		o:    compaction.SchedulerOptions{Interval: I, FirstTick: I, Offset: 5 * I / 2, Duration: 5 * I, Defragment: true},
		want: []schedEvent{ev(0, "compact", 0), ev(I/2, "compact", 1), ev(I/2, "release", 1), ev(I/2, "defragment", 0), ev(3*I/2, "compact", 2)},
	}, {
		// The hold comes after the first tick (R0 = 1); a write while held
		// makes the second tick see 3 > heldRev+1 = 2, so the compaction at
		// 2I is the one the held watcher cannot resume across.
		name:            "hold, a write while held: released at 2I",
		o:               compaction.SchedulerOptions{Interval: I, Duration: 3 * I, Hold: true, HoldAfter: I / 2, Defragment: true},
		writesAfterHold: 1,
		want: []schedEvent{ev(0, "compact", 0), ev(I/2, "hold", 1), ev(I, "compact", 1),
			ev(2*I, "compact", 3), ev(2*I, "release", 3), ev(2*I, "defragment", 0)},
	}, {
		// Nothing written while held: the compaction at 2I is to exactly
		// heldRev+1, from where the held watcher's watch resumes without
		// failing, so the release waits for the next one (above it).
		name: "hold, nothing written while held: compaction to heldRev+1 releases nothing",
		o:    compaction.SchedulerOptions{Interval: I, Duration: 4 * I, Hold: true, HoldAfter: I / 2, Defragment: true},
		want: []schedEvent{ev(0, "compact", 0), ev(I/2, "hold", 1), ev(I, "compact", 1),
			ev(2*I, "compact", 2), ev(3*I, "compact", 3), ev(3*I, "release", 3), ev(3*I, "defragment", 0)},
	}, {
		name:            "hold without defragmentation",
		o:               compaction.SchedulerOptions{Interval: I, Duration: 3 * I, Hold: true, HoldAfter: I / 2},
		writesAfterHold: 1,
		want: []schedEvent{ev(0, "compact", 0), ev(I/2, "hold", 1), ev(I, "compact", 1),
			ev(2*I, "compact", 3), ev(2*I, "release", 3)},
	}, {
		// A hold and a tick due at the same moment: the hold first, so
		// the tick's compaction counts against it. The hold is at the
		// base revision (0), the write while held makes it 1, the first
		// tick notes 2 and the second compacts to it: above heldRev+1.
		name:            "hold and tick at the same moment: hold first",
		o:               compaction.SchedulerOptions{Interval: I, Duration: 2 * I, Hold: true},
		writesAfterHold: 1,
		want:            []schedEvent{ev(0, "hold", 0), ev(0, "compact", 0), ev(I, "compact", 2), ev(I, "release", 2)},
	}, {
		// A compaction before the hold releases nothing: the release
		// waits for the hold and a compaction past it.
		name:            "hold after the first compaction",
		o:               compaction.SchedulerOptions{Interval: I, Duration: 4 * I, Hold: true, HoldAfter: 3 * I / 2},
		writesAfterHold: 1,
		want: []schedEvent{ev(0, "compact", 0), ev(I, "compact", 1), ev(3*I/2, "hold", 2),
			ev(2*I, "compact", 2), ev(3*I, "compact", 4), ev(3*I, "release", 4)},
	}, {
		name: "hold at the end: never held nor released",
		o:    compaction.SchedulerOptions{Interval: I, Duration: 2 * I, Hold: true, HoldAfter: 2 * I},
		want: []schedEvent{ev(0, "compact", 0), ev(I, "compact", 1)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := etcdtest.RunEtcd(t)
			c := etcdtest.NewClient(t, srv)
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			a := &sessionActor{c: c, comp: compaction.NewCompactor(c), clk: clk, start: clk.Now(), writesAfterHold: tt.writesAfterHold}
			a.comp.Physical = true
			var err error
			if a.base, err = a.revision(t.Context()); err != nil {
				t.Fatal(err)
			}
			o := tt.o
			o.Clock = clk
			s, err := compaction.NewScheduler(a, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := runSchedule(t, s, clk, I/2); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !slices.Equal(a.events, tt.want) {
				t.Errorf("got timeline\n%v\nwant\n%v", a.events, tt.want)
			}
			if n := a.overlaps.Load(); n != 0 {
				t.Errorf("got %d calls overlapping another, want none", n)
			}
			// The release is the first compaction above heldRev+1.
			for _, e := range a.events {
				if e.What == "release" && a.heldRev != 0 && e.Rev+a.base <= a.heldRev+1 {
					t.Errorf("released at compaction %d, not above heldRev+1 = %d", e.Rev, a.heldRev+1-a.base)
				}
			}
		})
	}
}

// failingActor fails the call named fail with errFail, and does nothing
// else.
type failingActor struct {
	fail  string
	calls []string
	rev   int64
}

var errFail = errors.New("injected failure")

func (a *failingActor) do(what string) error {
	a.calls = append(a.calls, what)
	if what == a.fail {
		return errFail
	}
	return nil
}

func (a *failingActor) Hold(context.Context) (int64, error) { return 10, a.do("hold") }

func (a *failingActor) Compact(context.Context) (compaction.TickResult, error) {
	a.rev += 10
	return compaction.TickResult{Won: true, Compacted: a.rev}, a.do("compact")
}

func (a *failingActor) Release(context.Context, int64) { a.calls = append(a.calls, "release") }

func (a *failingActor) Defragment(context.Context) error { return a.do("defragment") }

// TestSchedulerErrors checks that the first error of Hold, Compact or
// Defragment ends the schedule and is returned, and that a cancelled
// context ends it with ctx's error.
func TestSchedulerErrors(t *testing.T) {
	const I = time.Second
	o := compaction.SchedulerOptions{Interval: I, Duration: 5 * I, Hold: true, HoldAfter: I / 2, Defragment: true}
	tests := []struct {
		fail      string
		wantCalls []string
	}{
		{"hold", []string{"compact", "hold"}},
		{"compact", []string{"compact"}},
		{"defragment", []string{"compact", "hold", "compact", "release", "defragment"}},
	}
	for _, tt := range tests {
		t.Run(tt.fail, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			o := o
			o.Clock = clk
			a := &failingActor{fail: tt.fail}
			s, err := compaction.NewScheduler(a, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := runSchedule(t, s, clk, I/2); !errors.Is(err, errFail) {
				t.Errorf("Run = %v, want %v", err, errFail)
			}
			if !slices.Equal(a.calls, tt.wantCalls) {
				t.Errorf("got calls %v, want %v", a.calls, tt.wantCalls)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		o := o
		o.Clock = clk
		s, err := compaction.NewScheduler(&failingActor{}, o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want %v", err, context.Canceled)
		}
	})
}

func TestSchedulerOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		o       compaction.SchedulerOptions
		wantErr bool
	}{
		{"valid", compaction.SchedulerOptions{Interval: time.Second, Duration: time.Minute}, false},
		{"zero interval", compaction.SchedulerOptions{Duration: time.Minute}, true},
		{"negative interval", compaction.SchedulerOptions{Interval: -time.Second}, true},
		{"negative first tick", compaction.SchedulerOptions{Interval: time.Second, FirstTick: -1}, true},
		{"negative offset", compaction.SchedulerOptions{Interval: time.Second, Offset: -1}, true},
		{"negative hold", compaction.SchedulerOptions{Interval: time.Second, Hold: true, HoldAfter: -1}, true},
		{"negative duration", compaction.SchedulerOptions{Interval: time.Second, Duration: -1}, true},
	}
	for _, tt := range tests {
		_, err := compaction.NewScheduler(&failingActor{}, tt.o)
		if got := err != nil; got != tt.wantErr {
			t.Errorf("%s: NewScheduler error %v, want error: %v", tt.name, err, tt.wantErr)
		}
		if err != nil && !errors.Is(err, compaction.ErrInvalidSchedule) {
			t.Errorf("%s: error %v does not wrap ErrInvalidSchedule", tt.name, err)
		}
	}
}
