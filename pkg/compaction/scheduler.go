package compaction

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/pkg/revision"
)

// Actor is what a Scheduler acts on: the session that owns the watchers,
// the compactor and the maintenance connection. The Scheduler calls it
// from one goroutine, one call at a time, so a compaction and a
// defragmentation never overlap (see Gate for why they must not).
type Actor interface {
	// Hold holds the watchers to be held back, as a broken connection
	// would, and waits until each has stopped, events already on their
	// way included. It returns the highest revision R a held watcher will
	// resume after: its next watch starts from R+1. An error (ctx ended)
	// ends the schedule.
	Hold(ctx context.Context) (heldRev int64, err error)
	// Compact runs one tick of the compaction policy (Compactor.Tick:
	// kube-apiserver's algorithm, which compacts to the revision seen on
	// the previous tick) and returns what it did. An error ends the
	// schedule; an actor that wants the schedule to go on after a failed
	// compaction records the failure and returns a TickResult with
	// Compacted 0 and a nil error.
	Compact(ctx context.Context) (TickResult, error)
	// Release is called once, after the first compaction that the held
	// watchers cannot resume across (compacted > heldRev+1), and before
	// the defragmentation: it lets the held watchers go, and the actor can
	// measure the compaction the defragmentation follows. Without a hold
	// it is called after the first compaction, with nothing to release.
	Release(ctx context.Context, compacted int64)
	// Defragment defragments the members, one at a time and the leader
	// last (DefragmentAll over LeaderLast). It is called once, right after
	// Release, when SchedulerOptions.Defragment is set. An error ends the
	// schedule; an actor that records failures returns nil.
	Defragment(ctx context.Context) error
}

// SchedulerOptions shape a Scheduler's timeline. Offsets are from the
// schedule's start, on Clock: the moment Run starts, less Offset.
type SchedulerOptions struct {
	// Interval is the time between two compaction ticks
	// (kube-apiserver's --etcd-compaction-interval); it must be positive.
	Interval time.Duration
	// FirstTick is the offset of the first tick. 0 ticks at once, so the
	// first compaction (the second tick: the first only notes a revision)
	// comes at Interval; lwbench has always done so. kube-apiserver waits
	// a full interval before its first tick, so its first compaction comes
	// at 2*Interval: FirstTick = Interval models that.
	FirstTick time.Duration
	// Offset is how far into the schedule Run starts: the schedule began
	// Offset before Run (a load's compactor starts with the load, as
	// kube-apiserver's starts with kube-apiserver, before the objects
	// are seeded and the watchers list). Ticks due before Run are made as
	// one tick when Run starts: it notes a revision and moves the
	// version, as they would have, short of the compactions of revisions
	// before Run that the second and later of them would have made; the
	// next tick comes on the schedule. 0: the schedule starts with Run.
	Offset time.Duration
	// Duration ends the schedule: nothing is done at or after it, and Run
	// returns when the next tick or hold would be.
	Duration time.Duration
	// Hold makes the scheduler hold watchers back (Actor.Hold) at
	// HoldAfter, and release them only after a compaction past them.
	Hold bool
	// HoldAfter is the offset of the hold; with Hold it must come before
	// Duration, or nothing is ever held or released.
	HoldAfter time.Duration
	// Defragment makes the scheduler call Actor.Defragment once, right
	// after Actor.Release.
	Defragment bool
	// Clock times the schedule; nil is the real clock.
	Clock clock.Clock
}

// Validate reports the first option that cannot make a schedule, wrapping
// ErrInvalidSchedule.
func (o SchedulerOptions) Validate() error {
	switch {
	case o.Interval <= 0:
		return fmt.Errorf("%w: interval %v must be positive", ErrInvalidSchedule, o.Interval)
	case o.FirstTick < 0:
		return fmt.Errorf("%w: first tick %v must not be negative", ErrInvalidSchedule, o.FirstTick)
	case o.Offset < 0:
		return fmt.Errorf("%w: offset %v must not be negative", ErrInvalidSchedule, o.Offset)
	case o.HoldAfter < 0:
		return fmt.Errorf("%w: hold after %v must not be negative", ErrInvalidSchedule, o.HoldAfter)
	case o.Duration < 0:
		return fmt.Errorf("%w: duration %v must not be negative", ErrInvalidSchedule, o.Duration)
	}
	return nil
}

// Scheduler runs the compaction and defragmentation schedule of a load:
// it ticks the compactor every Interval, holds watchers back once, releases
// them after the first compaction they cannot resume across, and then
// defragments once. It decides when; its Actor does the work.
//
// A held watcher resumes with a watch from heldRev+1, and etcd fails a
// watch from r as compacted only when r < the compact revision
// (server/storage/mvcc/watcher_group.go chooseAll: w.minRev < compactRev).
// So the release waits for a compaction above heldRev+1; a compaction to
// exactly heldRev+1 would let the watch resume and no relist would
// happen. Since kube-apiserver's compactor compacts to the revision it saw
// one tick earlier, the compaction that passes a hold is the second after
// it. A worked timeline, interval I, FirstTick 0, HoldAfter I/2, writes
// going on throughout:
//
//	t=0     Compact: the first tick compacts nothing and notes R0
//	t=I/2   Hold: the watcher stops at heldRev (> R0: events came after t=0)
//	t=I     Compact to R0: R0 <= heldRev+1, the resumed watch would not fail; keep holding; note R1 > heldRev
//	t=2I    Compact to R1: R1 > heldRev+1 (R1 counts the writes since the hold and the tick's own put
//	        of compact_rev_key): Release, then Defragment
//	        the released watch from heldRev+1 fails as compacted: the watcher relists once
//	t=3I    Compact to R2, and every I after, while t < Duration
//
// Had the watcher been at the store's revision and nothing been written
// since the hold, R1 would be exactly heldRev+1 (the tick's own put): no
// release at 2I, the one at 3I instead. Without Hold, Release and Defragment follow
// the compaction at t=I. With FirstTick = I (kube-apiserver's wait before
// its first tick) every tick comes one interval later. A Scheduler runs
// once; it is not safe for concurrent use.
type Scheduler struct {
	a   Actor
	o   SchedulerOptions
	clk clock.Clock
}

// NewScheduler returns a scheduler acting on a. It returns an error
// wrapping ErrInvalidSchedule if o does not make a schedule.
func NewScheduler(a Actor, o SchedulerOptions) (*Scheduler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Scheduler{a: a, o: o, clk: clk}, nil
}

// Run follows the schedule from now (Offset into it) until Duration has
// passed, calling the actor in this order: Compact at FirstTick and every
// Interval after it (on the schedule: a late tick does not move the later
// ones; the ticks due before Run are one tick at once), Hold once at
// HoldAfter (before a tick due at the same moment), Release once after
// the first compaction past the hold, Defragment right after it. Run
// returns nil at the end of the schedule, ctx's error if ctx ends first,
// and the first error of Hold, Compact or Defragment.
func (s *Scheduler) Run(ctx context.Context) error {
	now := s.clk.Now()
	start := now.Add(-s.o.Offset)
	end := start.Add(s.o.Duration)
	next := start.Add(s.o.FirstTick)
	if late := now.Sub(next); late > 0 {
		// The last tick due before Run, made at once.
		next = next.Add(late / s.o.Interval * s.o.Interval)
	}
	holdAt := start.Add(s.o.HoldAfter)
	held, released := false, false
	var heldRev int64
	for {
		if s.o.Hold && !held && !s.clk.Now().Before(holdAt) {
			rev, err := s.a.Hold(ctx)
			if err != nil {
				return err
			}
			held, heldRev = true, rev
		}
		if !s.clk.Now().Before(next) {
			tick, err := s.a.Compact(ctx)
			if err != nil {
				return err
			}
			if !released && passes(tick.Compacted, s.o.Hold, held, heldRev) {
				released = true
				s.a.Release(ctx, tick.Compacted)
				if s.o.Defragment {
					if err := s.a.Defragment(ctx); err != nil {
						return err
					}
				}
			}
			next = next.Add(s.o.Interval)
		}
		wake := next
		if s.o.Hold && !held && holdAt.Before(wake) {
			wake = holdAt
		}
		if !wake.Before(end) {
			return nil
		}
		if err := s.sleepUntil(ctx, wake); err != nil {
			return err
		}
	}
}

// passes reports whether a tick that compacted to compacted (0: none)
// lets the held watchers go: a compaction above heldRev+1 fails their
// resumed watch. With a hold planned but not yet made, no compaction
// does.
func passes(compacted int64, hold, held bool, heldRev int64) bool {
	switch {
	case compacted == 0:
		return false
	case !hold:
		return true
	case !held:
		return false
	}
	// The resumed watch starts at heldRev+1.
	return revision.Compacted(heldRev+1, compacted)
}

// sleepUntil waits on the scheduler's clock until t, or returns ctx's
// error.
func (s *Scheduler) sleepUntil(ctx context.Context, t time.Time) error {
	d := t.Sub(s.clk.Now())
	if d <= 0 {
		return ctx.Err()
	}
	if !clockwait.Sleep(ctx, s.clk, d) {
		return ctx.Err()
	}
	return nil
}
