package report

import (
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/pkg/shard"
)

// TestRunVerdict: one line, PASS only when every guarantee held, the run
// ended and every fault was recovered from; FAIL naming each failure.
func TestRunVerdict(t *testing.T) {
	ok := func() *RunResult {
		return &RunResult{Scenario: Scenario{Watchers: 10}, Writes: WriteStats{Planned: 100, Completed: 100},
			Delivery: DeliveryStats{Events: 1000}, Validation: Validation{HistoryEvents: 100}}
	}
	for _, tt := range []struct {
		name   string
		change func(r *RunResult)
		want   []string
	}{
		{name: "pass", change: func(*RunResult) {}, want: []string{"PASS: every watch guarantee held, nothing lost (1000 events to 10 informers, checked against the 100 in etcd's recorded history)"}},
		{name: "lost", change: func(r *RunResult) { r.Validation.Lost = 3 }, want: []string{"FAIL: 3 lost"}},
		{name: "interrupted", change: func(r *RunResult) { r.Interrupted, r.Writes.Completed = true, 40 }, want: []string{"FAIL: interrupted after 40 of 100 writes"}},
		{name: "fault", change: func(r *RunResult) { r.Faults = []Fault{{Kind: "kill-leader", Member: "m0"}} }, want: []string{"FAIL: fault kill-leader (m0) not recovered from"}},
		{name: "defrag and cleanup", change: func(r *RunResult) {
			r.Defrag = &Defrag{Error: "context deadline exceeded"}
			r.Cleanup = &Cleanup{KeysLeft: 7, Error: "etcdserver: no leader"}
		}, want: []string{"FAIL: defragmentation failed: context deadline exceeded; cleanup failed (7 keys left): etcdserver: no leader"}},
		{name: "worker", change: func(r *RunResult) {
			r.Shard = &shard.Shard{Index: 1, Count: 3}
			r.Informers = []InformerStats{{ID: 4}, {ID: 5}, {ID: 6, Cache: true}}
		}, want: []string{"(1000 events to 2 informers,"}},
		{name: "busy", change: func(r *RunResult) { r.Self.NumCPU, r.Self.LoadAverageMax = 2, 9 }, want: []string{"PASS: ", "; latencies distorted by a busy machine (see the warnings)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := ok()
			tt.change(r)
			got := RunVerdict(r)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q, want it to contain %q", got, w)
				}
			}
			if strings.Contains(got, "\n") {
				t.Errorf("got %q, want one line", got)
			}
		})
	}
}

// TestVerdictOtherWarnings: a warning that is not about a busy machine
// (etcd's /metrics not read) does not call the latencies distorted.
func TestVerdictOtherWarnings(t *testing.T) {
	r := &RunResult{Scenario: Scenario{Watchers: 10}, Writes: WriteStats{Planned: 100, Completed: 100}, Validation: Validation{HistoryEvents: 100}}
	r.Warnings = []string{"etcd's /metrics not read"}
	if got := RunVerdict(r); strings.Contains(got, "busy") {
		t.Errorf("got %q, want no busy machine", got)
	}
}

// TestBusyWarnings: a load average above the CPUs and a starved lwbench
// each warn, naming the figures affected; a quiet machine does not.
func TestBusyWarnings(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    SelfStats
		want []string
	}{
		{name: "quiet", s: SelfStats{NumCPU: 2, LoadAverageMax: 1.5, SchedLatencyP99Ms: 0.5}},
		{name: "not measured", s: SelfStats{NumCPU: 2}},
		{name: "load above the CPUs", s: SelfStats{NumCPU: 2, LoadAverageMax: 18.9},
			want: []string{"load average up to 18.9 on 2 CPUs during the run; every latency (writes, delivery, lists, relists"}},
		{name: "lwbench starved", s: SelfStats{NumCPU: 2, LoadAverageMax: 1, SchedLatencyP99Ms: 12},
			want: []string{"its goroutines waited 12.0 ms (p99) for a CPU; the write and delivery latencies"}},
		{name: "both", s: SelfStats{NumCPU: 4, LoadAverageMax: 5, SchedLatencyP99Ms: 6},
			want: []string{"load average up to 5.0 on 4 CPUs", "waited 6.0 ms (p99)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := BusyWarnings(tt.s)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d warnings %q, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d: got %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestScheduleWarnings: writes that took more than 1.5 times their
// schedule (and 2 s more) warn, naming the compaction interval when it
// is shorter than the writes took; on time, a short slip, or no writes
// do not.
func TestScheduleWarnings(t *testing.T) {
	for _, tt := range []struct {
		name                         string
		plannedMs, tookMs, compactMs float64
		writes                       int64
		want                         []string
	}{
		{name: "on time", plannedMs: 20000, tookMs: 20400, compactMs: 6667, writes: 4000},
		{name: "a short run's slip under 2 s", plannedMs: 1000, tookMs: 2900, writes: 100},
		{name: "no writes", plannedMs: 20000, tookMs: 65000},
		{name: "saturated, compaction within", plannedMs: 20000, tookMs: 65000, compactMs: 6667, writes: 4000,
			want: []string{"the writes scheduled over 20.0 s took 65.0 s (61.5/s of 200.0/s scheduled)", "with compaction every 6.7 s, watches"}},
		{name: "saturated, compaction off", plannedMs: 20000, tookMs: 31000, compactMs: -1, writes: 4000,
			want: []string{"took 31.0 s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &RunResult{Scenario: Scenario{DurationMs: tt.plannedMs, WriteRatePerSecond: 200, CompactionIntervalMs: tt.compactMs},
				Writes: WriteStats{Planned: tt.writes, Completed: tt.writes, DurationMs: tt.tookMs, ThroughputPerSecond: float64(tt.writes) / tt.tookMs * 1000}}
			got := ScheduleWarnings(r)
			if len(got) != min(len(tt.want), 1) {
				t.Fatalf("got %q, want a warning with %q", got, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("got %q, want it to contain %q", got[0], w)
				}
			}
			if tt.compactMs <= 0 && len(got) > 0 && strings.Contains(got[0], "compaction") {
				t.Errorf("got %q, want no compaction named with compaction off", got[0])
			}
		})
	}
}
