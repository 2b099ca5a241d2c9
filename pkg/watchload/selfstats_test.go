package watchload

import (
	"math"
	"runtime/metrics"
	"testing"
)

// TestHistogramQuantile: the quantile of what a cumulative runtime/metrics
// histogram gained between two reads, as its bucket's upper bound.
func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	buckets := []float64{math.Inf(-1), 0.001, 0.005, 0.010, inf}
	h := func(counts ...uint64) *metrics.Float64Histogram {
		return &metrics.Float64Histogram{Counts: counts, Buckets: buckets}
	}
	for _, tt := range []struct {
		name          string
		before, after *metrics.Float64Histogram
		q             float64
		want          float64
	}{
		{name: "no samples", before: h(5, 5, 0, 0), after: h(5, 5, 0, 0), q: 0.99, want: 0},
		{name: "only new samples count", before: h(0, 0, 0, 1000), after: h(0, 100, 0, 1000), q: 0.99, want: 0.005},
		{name: "p99 in the bucket of 5 to 10 ms", before: h(0, 0, 0, 0), after: h(0, 98, 2, 0), q: 0.99, want: 0.010},
		{name: "p50 in the bucket of 1 to 5 ms", before: h(0, 0, 0, 0), after: h(0, 98, 2, 0), q: 0.5, want: 0.005},
		{name: "unbounded last bucket: its lower bound", before: nil, after: h(0, 0, 0, 10), q: 0.99, want: 0.010},
		{name: "mismatched buckets", before: h(0, 0), after: h(0, 1, 0, 0), q: 0.99, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := histogramQuantile(tt.before, tt.after, tt.q); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
