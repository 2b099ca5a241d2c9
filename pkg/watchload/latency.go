package watchload

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/kubestore/etcdkit/pkg/report"
)

// histogram records latencies in microseconds, from 1 µs to 1 hour, with 3
// significant digits (HDR histogram: constant memory, exact to 0.1%).
type histogram struct{ h *hdrhistogram.Histogram }

func newHistogram() histogram {
	return histogram{h: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

// record adds one latency; values outside the range are clamped to it.
func (h histogram) record(d time.Duration) {
	us := max(int64(d/time.Microsecond), 1)
	us = min(us, h.h.HighestTrackableValue())
	h.h.RecordValue(us) // cannot fail inside the range
}

func (h histogram) summary() report.Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return report.Latency{
		Count:  h.h.TotalCount(),
		P50Ms:  ms(h.h.ValueAtQuantile(50)),
		P90Ms:  ms(h.h.ValueAtQuantile(90)),
		P99Ms:  ms(h.h.ValueAtQuantile(99)),
		P999Ms: ms(h.h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.h.Max()),
		MeanMs: h.h.Mean() / 1000,
	}
}
