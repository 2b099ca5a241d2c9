package report

import (
	"errors"
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// LatencyOf summarises h, whose values are microseconds, in milliseconds;
// the zero Latency when h holds no sample. The summary leaves HDR empty
// (LatencyWithHDR keeps the histogram too).
func LatencyOf(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		Count:  h.TotalCount(),
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P90Ms:  ms(h.ValueAtQuantile(90)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
		MeanMs: h.Mean() / 1000,
	}
}

// LatencyWithHDR is LatencyOf with the histogram kept in HDR; an error only
// when hdrhistogram-go cannot encode it.
func LatencyWithHDR(h *hdrhistogram.Histogram) (Latency, error) {
	l := LatencyOf(h)
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return Latency{}, fmt.Errorf("encode histogram: %w", err)
	}
	l.HDR = string(b)
	return l, nil
}

// ErrNoHDR is returned by MergeLatencies for a latency with samples but
// no histogram kept: its percentiles cannot be merged exactly.
var ErrNoHDR = errors.New("latency has samples but no histogram (HDR): percentiles cannot be merged exactly")

// MergeLatencies merges latency distributions bucket by bucket: each
// one's HDR histogram is decoded and added into the first's (hdrhistogram-go
// Merge), then summarised, so the merged percentiles are those of one
// histogram holding every sample, never averages of percentiles. Latencies
// without samples are skipped; one with samples but no HDR is ErrNoHDR.
// The result keeps the merged HDR, so merges compose. Histograms of
// different ranges or precisions merge into the first's; a sample the
// first cannot hold is an error, never dropped.
func MergeLatencies(ls ...Latency) (Latency, error) {
	var merged *hdrhistogram.Histogram
	for i, l := range ls {
		if l.Count == 0 {
			continue
		}
		if l.HDR == "" {
			return Latency{}, fmt.Errorf("latency %d of %d: %w", i+1, len(ls), ErrNoHDR)
		}
		h, err := hdrhistogram.Decode([]byte(l.HDR))
		if err != nil {
			return Latency{}, fmt.Errorf("latency %d of %d: decode its histogram: %w", i+1, len(ls), err)
		}
		if h.TotalCount() != l.Count {
			return Latency{}, fmt.Errorf("latency %d of %d: its histogram holds %d samples, its count says %d", i+1, len(ls), h.TotalCount(), l.Count)
		}
		if merged == nil {
			merged = h
			continue
		}
		if dropped := merged.Merge(h); dropped != 0 {
			return Latency{}, fmt.Errorf("latency %d of %d: %d samples outside the first histogram's range", i+1, len(ls), dropped)
		}
	}
	if merged == nil {
		return Latency{}, nil
	}
	return LatencyWithHDR(merged)
}
