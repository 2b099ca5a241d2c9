package compaction

import (
	"context"
	"time"
)

// Ticker is one compaction policy, advanced one tick at a time by its
// caller's schedule. Compactor (kube-apiserver's algorithm) and
// RevisionCompactor (every N revisions) implement it.
type Ticker interface {
	// Tick runs one round of the policy: it may compact, and says what it
	// did. See each implementation for its errors.
	Tick(ctx context.Context) (TickResult, error)
}

var (
	_ Ticker = (*Compactor)(nil)
	_ Ticker = (*RevisionCompactor)(nil)
)

// TickResult is what one tick did.
type TickResult struct {
	// Won is true when this compactor's transaction succeeded; false when
	// another compactor had moved compact_rev_key's version first.
	Won bool
	// Compacted is the revision compacted to, 0 when the tick did not
	// compact (first tick, or lost the race).
	Compacted int64
	// Duration is how long the Compact call took, 0 without one.
	Duration time.Duration
	// HeaderRevision is the store revision the transaction saw; the next
	// winning tick compacts to it.
	HeaderRevision int64
}
