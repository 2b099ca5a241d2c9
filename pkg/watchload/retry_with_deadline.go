package watchload

import (
	"time"

	"k8s.io/utils/clock"
)

// retryWithDeadline decides whether a reflector watches again after a
// watch error instead of listing: for up to maxRetryDuration after the
// first of a run of errors, where a run ends after minResetPeriod without
// one (client-go tools/cache/retry_with_deadline.go, which the reflector
// applies to internal errors with MaxInternalErrorRetryDuration and a
// one-minute reset period). A maxRetryDuration of 0 never retries.
type retryWithDeadline struct {
	maxRetryDuration time.Duration
	minResetPeriod   time.Duration
	clock            clock.PassiveClock

	firstErr, lastErr time.Time
}

// after records an error now.
func (r *retryWithDeadline) after() {
	now := r.clock.Now()
	if now.Sub(r.lastErr) >= r.minResetPeriod {
		r.firstErr = time.Time{}
	}
	if r.firstErr.IsZero() {
		r.firstErr = now
	}
	r.lastErr = now
}

// shouldRetry reports whether the run of errors is still within
// maxRetryDuration.
func (r *retryWithDeadline) shouldRetry() bool {
	return r.maxRetryDuration > 0 && r.clock.Now().Sub(r.firstErr) <= r.maxRetryDuration
}
