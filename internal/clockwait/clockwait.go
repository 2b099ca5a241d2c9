// Package clockwait waits for a duration, on a clock, or until a context
// ends: the one sleep of the harness's loops (the reflector's backoff, the
// compaction scheduler, the writers' schedule, the experiments' pauses).
package clockwait

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Sleep waits d on clk or until ctx ends, and reports whether d passed:
// false if ctx had ended before or ends first. It always starts a timer,
// so on a fake clock (k8s.io/utils/clock/testing) even a d <= 0 waits for
// the clock to be stepped, as the fake clock's timers do.
func Sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// SleepReal is Sleep on the real clock, except that a d <= 0 returns at
// once, without a timer (true unless ctx has ended): loops that sleep
// until a moment already past pay nothing.
func SleepReal(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	return Sleep(ctx, clock.RealClock{}, d)
}
