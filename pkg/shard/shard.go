// Package shard divides one load among the workers that drive it: worker
// i of n owns a contiguous block of every countable part of the load
// (namespaces, writers, informers, simulated nodes), decided by (i, n) and
// the part's size alone, so every worker computes the same plan without
// talking to the others. Blocks are disjoint, together cover every unit,
// and differ in size by at most one unit: the first size mod n shards hold
// one unit more.
//
// The index and count follow a Kubernetes Indexed Job's: the index is
// the pod's completion index (JOB_COMPLETION_INDEX, 0-based), the count
// the Job's completions (k8s.io/api batch/v1 JobSpec.CompletionMode
// Indexed).
package shard

import (
	"fmt"
	"strconv"
)

// Shard is one worker's part of a load: Index in [0, Count).
type Shard struct {
	Index int `json:"index"` // 0-based
	Count int `json:"count"` // number of shards, at least 1
}

// Whole is the single shard of an undivided load.
var Whole = Shard{Index: 0, Count: 1}

// Validate returns an error unless 0 <= Index < Count.
func (s Shard) Validate() error {
	if s.Count < 1 {
		return fmt.Errorf("shard count %d: want at least 1", s.Count)
	}
	if s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("shard index %d: want 0 to %d", s.Index, s.Count-1)
	}
	return nil
}

// String is "i/n", 0-based.
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Range returns the half-open block [from, to) of units 0..units-1 that the
// shard owns. With fewer units than shards the last shards own none
// (from == to). It panics on an invalid shard or negative units, which
// callers rule out with Validate.
func (s Shard) Range(units int) (from, to int) {
	if err := s.Validate(); err != nil {
		panic(err)
	}
	if units < 0 {
		panic(fmt.Sprintf("shard.Range: %d units", units))
	}
	q, r := units/s.Count, units%s.Count
	from = s.Index*q + min(s.Index, r)
	to = from + q
	if s.Index < r {
		to++
	}
	return from, to
}

// Len returns how many of units the shard owns.
func (s Shard) Len(units int) int {
	from, to := s.Range(units)
	return to - from
}

// Owns reports whether unit u of units belongs to the shard.
func (s Shard) Owns(u, units int) bool {
	from, to := s.Range(units)
	return u >= from && u < to
}

// Share returns the shard's part of a rate or other divisible total, in
// proportion to the units it owns: total * Len(units) / units; total / Count
// when units is 0.
func (s Shard) Share(total float64, units int) float64 {
	if units == 0 {
		return total / float64(s.Count)
	}
	return total * float64(s.Len(units)) / float64(units)
}

// Parse reads a shard from an index and a count as strings (flags or a
// Job's environment: JOB_COMPLETION_INDEX and its completions), with a
// one-line error naming what was wrong.
func Parse(index, count string) (Shard, error) {
	i, err := strconv.Atoi(index)
	if err != nil {
		return Shard{}, fmt.Errorf("shard index %q: not an integer", index)
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return Shard{}, fmt.Errorf("shard count %q: not an integer", count)
	}
	s := Shard{Index: i, Count: n}
	return s, s.Validate()
}
