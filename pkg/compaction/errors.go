package compaction

import "errors"

// ErrNoRevisionInterval is returned by RevisionCompactor.Tick when Every is
// not positive.
var ErrNoRevisionInterval = errors.New("compact every N revisions: N must be positive")

// ErrInvalidSchedule is returned by NewScheduler and
// SchedulerOptions.Validate when the options do not make a schedule (an
// interval that is not positive, a negative offset or duration).
var ErrInvalidSchedule = errors.New("invalid compaction schedule")
