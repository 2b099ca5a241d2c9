package compaction

import (
	"context"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

func TestLongestStall(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name               string
		scheduled, success []time.Duration
		end                time.Duration
		want, wantAt       time.Duration
	}{
		{"steady", ms(0, 10, 20, 30), ms(1, 11, 21, 31), 40 * time.Millisecond, time.Millisecond, 0},
		// Ops due at 20, 30 and 40 all wait for the member to come back at 500.
		{"stall", ms(0, 10, 20, 30, 40), ms(1, 11, 500, 500, 500), 510 * time.Millisecond, 480 * time.Millisecond, 20 * time.Millisecond},
		// A failure does not end a stall; the next success does.
		{"failures inside", ms(0, 10, 20), ms(1, 300), 310 * time.Millisecond, 290 * time.Millisecond, 10 * time.Millisecond},
		// A stall that lasts to the end counts up to the end.
		{"never again", ms(0, 10, 20), ms(1), 1000 * time.Millisecond, 990 * time.Millisecond, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		got, at := longestStall(tt.scheduled, tt.success, tt.end)
		if got != tt.want || at != tt.wantAt {
			t.Errorf("%s: longestStall = %v at %v, want %v at %v", tt.name, got, at, tt.want, tt.wantAt)
		}
	}
}

func TestProbeOnSchedule(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	p := NewProbe(c, ProbeOptions{Key: "/probe/k", RatePerSecond: 100})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	p.Run(ctx)
	r := p.Result()
	total := r.Writes.Count + r.Reads.Count
	if total < 80 || total > 101 || r.Writes.Errors+r.Reads.Errors != 0 {
		t.Fatalf("probe over 1 s at 100/s: %s", r)
	}
	if r.Writes.Latency.P50Ms <= 0 || r.LongestStallMs > 500 {
		t.Errorf("probe latency %+v, stall %.0f ms", r.Writes.Latency, r.LongestStallMs)
	}
}

func TestProbeCountsErrorsAndTimeouts(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	srv.Close() // the member is gone: every operation times out
	p := NewProbe(c, ProbeOptions{Key: "/probe/k", RatePerSecond: 50, Timeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
	defer cancel()
	p.Run(ctx)
	r := p.Result()
	if r.Writes.Count == 0 || r.Writes.Errors != r.Writes.Count || r.Reads.Errors != r.Reads.Count || r.Writes.Timeouts == 0 {
		t.Fatalf("probe of a stopped member: %s", r)
	}
	if r.Writes.Latency.P50Ms < 150 {
		t.Errorf("failed operations counted at %v ms, want their timeout (200 ms)", r.Writes.Latency.P50Ms)
	}
	if len(r.Errors) == 0 {
		t.Error("no error message recorded")
	}
	if r.LongestStallMs < 400 {
		t.Errorf("longest stall %.0f ms, want the whole ~600 ms run without a success", r.LongestStallMs)
	}
}
