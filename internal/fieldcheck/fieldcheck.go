// Package fieldcheck holds the range checks every options type of lwbench
// shares, as Kubernetes' field.ErrorList (k8s.io/apimachinery/pkg/util/
// validation/field): each error carries the path of the field it is about,
// which the commands map to a flag name.
//
// Durations are reported as their String form ("-1s"), not as
// nanoseconds.
package fieldcheck

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MinRatePerSecond and MaxRatePerSecond bound every scheduled rate (writes,
// probes, lists per second). Below the minimum a run would make no
// operation in any useful time (a rate of 1e-300 plans none); above the
// maximum, far beyond any etcd's capacity, the schedule is a busy loop and
// the buffers sized from the rate grow without purpose: 1e6 already
// measures the ceiling (etcd's benchmark compares at that rate).
const (
	MinRatePerSecond = 0.001
	MaxRatePerSecond = 1e7
)

// Positive reports v at p unless it is greater than 0.
func Positive[T int | int64](v T, p *field.Path) field.ErrorList {
	if v > 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, int64(v), "must be greater than 0")}
}

// NonNegative reports v at p if it is below 0.
func NonNegative[T int | int64](v T, p *field.Path) field.ErrorList {
	if v >= 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, int64(v), "must be greater than or equal to 0")}
}

// AtMost reports v at p if it is above limit, which is described by what
// (e.g. "the number of watchers").
func AtMost[T int | int64](v, limit T, what string, p *field.Path) field.ErrorList {
	if v <= limit {
		return nil
	}
	return field.ErrorList{field.Invalid(p, int64(v), "must not exceed "+what+" ("+strconv.FormatInt(int64(limit), 10)+")")}
}

// PositiveDuration reports d at p unless it is greater than 0.
func PositiveDuration(d time.Duration, p *field.Path) field.ErrorList {
	if d > 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, d.String(), "must be greater than 0")}
}

// NonNegativeDuration reports d at p if it is below 0.
func NonNegativeDuration(d time.Duration, p *field.Path) field.ErrorList {
	if d >= 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, d.String(), "must be greater than or equal to 0")}
}

// Rate reports a rate per second at p unless it is finite and within
// [MinRatePerSecond, MaxRatePerSecond].
func Rate(v float64, p *field.Path) field.ErrorList {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0) || v <= 0:
		return field.ErrorList{field.Invalid(p, v, "must be finite and positive")}
	case v < MinRatePerSecond:
		return field.ErrorList{field.Invalid(p, v, "must be at least 0.001 per second")}
	case v > MaxRatePerSecond:
		return field.ErrorList{field.Invalid(p, v, "must be at most 1e+07 per second (1e6 already measures etcd's ceiling)")}
	}
	return nil
}

// OptionalRate is Rate for a rate whose 0 means a default and whose
// negative values mean none: only NaN, infinities and finite rates
// outside the bounds are reported.
func OptionalRate(v float64, p *field.Path) field.ErrorList {
	if v == 0 || (v < 0 && !math.IsInf(v, 0)) {
		return nil
	}
	return Rate(v, p)
}

// PlannedWrites reports, at p, a rate per second that plans no write in
// d, or more than max.
func PlannedWrites(rate float64, d time.Duration, max int64, p *field.Path) field.ErrorList {
	planned := rate * d.Seconds()
	switch {
	case planned < 1:
		return field.ErrorList{field.Invalid(p, rate, fmt.Sprintf("plans no write in a duration of %v", d))}
	case planned > float64(max):
		return field.ErrorList{field.Invalid(p, rate, fmt.Sprintf("plans %.3g writes in a duration of %v, more than %d", planned, d, max))}
	}
	return nil
}

// Ascending reports, at p's index, the first element of vs that is not
// above the one before it, or (with positive) not above 0.
func Ascending[T cmp.Ordered](vs []T, positive bool, p *field.Path) field.ErrorList {
	var zero T
	for i, v := range vs {
		switch {
		case positive && v <= zero:
			return field.ErrorList{field.Invalid(p.Index(i), v, "must be greater than 0")}
		case i > 0 && v <= vs[i-1]:
			return field.ErrorList{field.Invalid(p.Index(i), v, "must be greater than the value before it (values ascending)")}
		}
	}
	return nil
}
