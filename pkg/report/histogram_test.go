package report

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

func newTestHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
}

// TestMergeLatenciesExact: a sample set split at random into K parts, each
// kept as its own histogram, merges into exactly the summary of the one
// histogram of every sample, for several K and splits; the mean of the
// parts' p99s is not it (so the test would catch averaging).
func TestMergeLatenciesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	samples := make([]int64, 20000)
	for i := range samples {
		// Two modes and a long tail, as a stalled run has.
		switch {
		case i%100 == 0:
			samples[i] = 200_000 + rng.Int64N(2_000_000)
		case i%3 == 0:
			samples[i] = 5_000 + rng.Int64N(20_000)
		default:
			samples[i] = 300 + rng.Int64N(2_000)
		}
	}
	all := newTestHistogram()
	for _, v := range samples {
		all.RecordValue(v)
	}
	want, err := LatencyWithHDR(all)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, 2, 3, 8} {
		for trial := range 3 {
			parts := make([]*hdrhistogram.Histogram, k)
			for i := range parts {
				parts[i] = newTestHistogram()
			}
			for _, v := range samples {
				parts[rng.IntN(k)].RecordValue(v)
			}
			ls := make([]Latency, k)
			var meanP99 float64
			for i, h := range parts {
				if ls[i], err = LatencyWithHDR(h); err != nil {
					t.Fatal(err)
				}
				meanP99 += ls[i].P99Ms / float64(k)
			}
			got, err := MergeLatencies(ls...)
			if err != nil {
				t.Fatal(err)
			}
			g, w := got, want
			g.HDR, w.HDR = "", ""
			if g != w {
				t.Errorf("k=%d trial %d: merged %+v, want %+v", k, trial, g, w)
			}
			if k == 8 && meanP99 == want.P99Ms {
				t.Errorf("k=8: the parts' mean p99 equals the whole's; the test cannot tell a merge from an average")
			}
			// Merges compose: merging the merged result with nothing more
			// gives it back.
			again, err := MergeLatencies(got, Latency{})
			if err != nil || again.P999Ms != want.P999Ms || again.Count != want.Count {
				t.Errorf("k=%d: merging the merge again: %+v, %v", k, again, err)
			}
		}
	}
}

func TestMergeLatenciesErrors(t *testing.T) {
	h := newTestHistogram()
	h.RecordValue(1000)
	l, err := LatencyWithHDR(h)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := MergeLatencies(); err != nil || got != (Latency{}) {
		t.Errorf("no latencies: %+v, %v", got, err)
	}
	noHDR := l
	noHDR.HDR = ""
	if _, err := MergeLatencies(l, noHDR); err == nil {
		t.Error("a latency without its histogram merged")
	}
	bad := l
	bad.HDR = "not base64 at all"
	if _, err := MergeLatencies(bad); err == nil {
		t.Error("a corrupt histogram merged")
	}
	wrongCount := l
	wrongCount.Count = 5
	if _, err := MergeLatencies(wrongCount); err == nil {
		t.Error("a histogram disagreeing with its count merged")
	}
	small := hdrhistogram.New(1, 1000, 3)
	small.RecordValue(10)
	ls, err := LatencyWithHDR(small)
	if err != nil {
		t.Fatal(err)
	}
	big := newTestHistogram()
	big.RecordValue(1_000_000)
	lb, err := LatencyWithHDR(big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MergeLatencies(ls, lb); err == nil {
		t.Error("a sample beyond the first histogram's range dropped without an error")
	}
}
