package compaction

import "errors"

// ErrNoRevisionInterval is returned by RevisionCompactor.Tick when Every is
// not positive.
var ErrNoRevisionInterval = errors.New("compact every N revisions: N must be positive")
