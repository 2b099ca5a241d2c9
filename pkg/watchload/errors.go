package watchload

import "errors"

// ErrObjectNotFound is returned by a Kubernetes write when the object it
// updates or deletes no longer exists in etcd.
var ErrObjectNotFound = errors.New("object not found")

// ErrObjectExists is returned by a Kubernetes create when the key already
// exists in etcd.
var ErrObjectExists = errors.New("object already exists")

// ErrViolations is wrapped by commands when a run broke a watch guarantee.
var ErrViolations = errors.New("watch guarantees violated")

// ErrPrefixNotEmpty is returned by Run, before it writes anything, when
// the prefix already holds keys and Options.ReusePrefix is not set.
var ErrPrefixNotEmpty = errors.New("prefix is not empty")

// ErrNoFaults is returned by Run when faults are asked of a target whose
// member processes it does not control (Target.Members), or of a cluster
// too small for them.
var ErrNoFaults = errors.New("faults cannot be injected into this target")

// ErrAbandoned is wrapped by Run's error when, interrupted, it was told to
// give up collecting its result too (Options.Abandon), before the list of
// what was not collected; the error also wraps the interruption
// (context.Canceled).
var ErrAbandoned = errors.New("not collected")
