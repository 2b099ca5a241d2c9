// Package barrier is where the workers of one divided load meet: each
// worker arrives at a named point (seeded, synced, written) and waits
// until every worker of the load has arrived, or one has failed. The
// meeting place is one object of what the workers already talk to: a key
// prefix in etcd (Etcd, for loads against --endpoints) or one ConfigMap
// in a Kubernetes cluster (ConfigMap, for a load run as an Indexed Job),
// so that no coordinator process has to hold the load.
//
// Every worker writes its arrival with its own wall-clock time; Wait
// returns the latest of the arrivals, the same value for every worker, so
// workers can agree on a start time (the latest arrival plus a lead) from
// the object alone. Times from different machines are only as comparable
// as their clocks: the result of a divided load states which latencies
// cross workers.
package barrier

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/kubestore/etcdkit/pkg/shard"
)

// Barrier is one load's meeting place, as seen by one worker (its shard).
type Barrier interface {
	// Wait records that this worker has reached point and blocks until
	// every worker of the load (shard.Count) has, returning the latest
	// arrival time recorded (UTC; the same for every worker). It returns
	// an error wrapping ErrAborted as soon as any worker has aborted, and
	// ctx's error when ctx ends first. Arriving twice at one point is
	// allowed (the later time counts).
	Wait(ctx context.Context, point string) (time.Time, error)
	// Abort records that this worker failed, with why (one line), so
	// that every worker waiting, or yet to wait, stops with ErrAborted.
	Abort(ctx context.Context, why string) error
}

// ErrAborted is returned by Wait when a worker of the load has aborted;
// the message names the worker and its reason.
var ErrAborted = errors.New("a worker of the load aborted")

// pointPattern is what a point's name may hold: it becomes part of an
// etcd key and of a ConfigMap data key (IsConfigMapKey: [-._a-zA-Z0-9]+).
var pointPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// abortPoint is the reserved point of aborts.
const abortPoint = "abort"

// checkPoint returns an error for a point name Wait cannot record.
func checkPoint(point string) error {
	if !pointPattern.MatchString(point) || point == abortPoint {
		return fmt.Errorf("barrier point %q: want lowercase letters, digits and dashes, not %q", point, abortPoint)
	}
	return nil
}

// arrivals tracks one point's arrivals by shard index.
type arrivals struct {
	count  int
	seen   map[int]time.Time
	latest time.Time
}

func newArrivals(count int) *arrivals {
	return &arrivals{count: count, seen: make(map[int]time.Time, count)}
}

// add records index's arrival at t; out-of-range indices (another load
// with more workers under the same name) are an error.
func (a *arrivals) add(index int, t time.Time) error {
	if index < 0 || index >= a.count {
		return fmt.Errorf("arrival of worker %d at a barrier of %d workers: another load uses the same barrier", index, a.count)
	}
	a.seen[index] = t
	if t.After(a.latest) {
		a.latest = t
	}
	return nil
}

// complete reports whether every worker has arrived.
func (a *arrivals) complete() bool { return len(a.seen) == a.count }

// abortError is what Wait returns for worker index's abort.
func abortError(index int, why string) error {
	return fmt.Errorf("%w: worker %d: %s", ErrAborted, index, why)
}

// formatTime is how arrival times are stored: RFC 3339 with nanoseconds,
// UTC.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// parseTime reads formatTime's output.
func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

// validShard returns s's validation error wrapped for a barrier.
func validShard(s shard.Shard) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	return nil
}

// follower tracks every point of a barrier for one that watches without
// taking part (FollowEtcd, FollowConfigMap): it calls onMet once per
// point, when the point's last worker arrives.
type follower struct {
	count  int
	points map[string]*arrivals
	met    map[string]bool
	onMet  func(point string, latest time.Time)
}

func newFollower(count int, onMet func(string, time.Time)) *follower {
	return &follower{count: count, points: map[string]*arrivals{}, met: map[string]bool{}, onMet: onMet}
}

// apply adds worker index's record at point (an arrival time, or why it
// aborted): an abort is returned as the error (ErrAborted), as is a
// malformed time or an index beyond the load.
func (f *follower) apply(point string, index int, value string) error {
	if point == abortPoint {
		return abortError(index, value)
	}
	t, err := parseTime(value)
	if err != nil {
		return fmt.Errorf("worker %d at %s: arrival time: %w", index, point, err)
	}
	a := f.points[point]
	if a == nil {
		a = newArrivals(f.count)
		f.points[point] = a
	}
	if err := a.add(index, t); err != nil {
		return err
	}
	if a.complete() && !f.met[point] {
		f.met[point] = true
		f.onMet(point, a.latest)
	}
	return nil
}
