// Package quantile picks quantiles from samples kept whole (the probe's
// latencies, an experiment's per-case durations); the load's latency
// histograms are HDR histograms instead.
package quantile

import "cmp"

// NearestRank returns the nearest-rank q-quantile (0 < q <= 1) of sorted,
// which must be in ascending order: the smallest sample with at least a
// fraction q of the samples at or below it. It returns the zero value for
// no samples.
func NearestRank[T cmp.Ordered](sorted []T, q float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
