package report

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/kubestore/etcdkit/pkg/shard"
)

// samples returns n latencies in microseconds with two modes and a long
// tail, as a stalled run has.
func samples(rng *rand.Rand, n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		switch {
		case i%100 == 0:
			s[i] = 200_000 + rng.Int64N(2_000_000)
		case i%3 == 0:
			s[i] = 5_000 + rng.Int64N(20_000)
		default:
			s[i] = 300 + rng.Int64N(2_000)
		}
	}
	return s
}

// splitLatencies splits vs at random among k histograms and returns each
// as a Latency with its HDR, and the Latency of all of vs.
func splitLatencies(t *testing.T, rng *rand.Rand, vs []int64, k int) ([]Latency, Latency) {
	t.Helper()
	all := newTestHistogram()
	parts := make([]*hdrhistogram.Histogram, k)
	for i := range parts {
		parts[i] = newTestHistogram()
	}
	for _, v := range vs {
		all.RecordValue(v)
		parts[rng.IntN(k)].RecordValue(v)
	}
	ls := make([]Latency, k)
	for i, h := range parts {
		l, err := LatencyWithHDR(h)
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	whole, err := LatencyWithHDR(all)
	if err != nil {
		t.Fatal(err)
	}
	return ls, whole
}

var testStart = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// workerResults returns k worker results of one load, their latencies a
// random split of one sample set each, and the latencies of the whole.
func workerResults(t *testing.T, rng *rand.Rand, k int) ([]*RunResult, map[string]Latency) {
	t.Helper()
	writes, wholeWrites := splitLatencies(t, rng, samples(rng, 20000), k)
	fromResponse, wholeResponse := splitLatencies(t, rng, samples(rng, 30000), k)
	fromSend, wholeSend := splitLatencies(t, rng, samples(rng, 30000), k)
	lists, wholeLists := splitLatencies(t, rng, samples(rng, 500), k)
	rs := make([]*RunResult, k)
	for i := range rs {
		sh := shard.Shard{Index: i, Count: k}
		r := &RunResult{
			Kind: KindRun, SchemaVersion: RunSchemaVersion, Shard: &sh,
			// Worker i's run began i*100 ms after worker 0's and its
			// writes 2 s - i*100 ms later: they began together.
			StartedAt: testStart.Add(time.Duration(i) * 100 * time.Millisecond),
			Target:    Target{Endpoints: []string{"http://127.0.0.1:2379", "http://127.0.0.1:22379"}, EtcdVersion: "3.7.3"},
			Scenario:  Scenario{Profile: "informer", Prefix: "/registry", Objects: 1000, Watchers: 9, Seed: 7},
			Writes: WriteStats{Planned: 100 + int64(i), Sent: 100 + int64(i), Completed: 90 + int64(i), Errors: int64(i),
				Creates: 10, Updates: 70, Deletes: 10 + int64(i), StartMs: 2000 - float64(i)*100, DurationMs: 10_000 + float64(i)*10,
				Latency: writes[i]},
			Delivery: DeliveryStats{Events: 1000 * int64(i+1), TimedEvents: 300, UntimedEvents: 1000*int64(i+1) - 300,
				EventsPerSecond: 1000 * float64(i+1) / 10.5, FromResponse: fromResponse[i], FromSend: fromSend[i]},
			InitialLists: ListSummary{Count: 3, Objects: 3000, Bytes: 1 << 20, Pages: 6, Latency: lists[i]},
			Relists:      []Relist{{Informer: 3*i + 2, Resource: "pods", Reason: "compacted", AtMs: 5000}},
			Compactions:  []Compaction{},
			DBSize:       DBSizes{EndBytes: 1 << 20 * int64(i+1), EndInUseBytes: 1 << 19},
			Validation: Validation{PrevKVMissing: int64(i), HistoryEvents: 5000 + int64(i), RecorderScope: "keyspace",
				UnverifiedEvents: 0},
			Final:     FinalState{Revision: 5000 + int64(i), CompactRevision: 4000, Objects: 1000},
			Informers: []InformerStats{{ID: 3*i + 2}, {ID: 3*i + 1}, {ID: 3 * i}},
			Intervals: []Interval{{StartMs: 0, WritesScheduled: 10, WritesCompleted: 9, Events: 100, WriteP99Ms: 3},
				{StartMs: 1000, WritesScheduled: 10, WritesCompleted: 10, Events: 100, WriteP99Ms: 4}},
			Self:     SelfStats{WallMs: 12_000, CPUSeconds: 6, CPUCores: 0.5, NumCPU: 4, MaxRSSBytes: 100 << 20, LoadAverageMax: 1},
			Warnings: []string{"something of worker " + string(rune('0'+i))},
		}
		if i == 0 {
			r.Compactions = []Compaction{{AtMs: 6000, Revision: 4000}}
			r.DBSize.BeforeCompactionBytes = 3 << 20
		}
		r.Verdict = RunVerdict(r)
		rs[i] = r
	}
	return rs, map[string]Latency{"writes": wholeWrites, "fromResponse": wholeResponse, "fromSend": wholeSend, "lists": wholeLists}
}

// sameQuantiles reports whether a and b summarise the same distribution,
// whatever their HDR strings.
func sameQuantiles(a, b Latency) bool {
	a.HDR, b.HDR = "", ""
	return a == b
}

// TestMergeRunsExact: K workers' results, each holding a random share of
// one sample set per latency, merge into the quantiles of the single
// histogram of all samples, with every count the workers' sum.
func TestMergeRunsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{1, 2, 3, 5} {
		rs, whole := workerResults(t, rng, k)
		// The order the results come in does not matter.
		rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		m, err := MergeRuns(rs)
		if err != nil {
			t.Fatalf("k=%d: %v", k, err)
		}
		for name, got := range map[string]Latency{"writes": m.Writes.Latency, "fromResponse": m.Delivery.FromResponse,
			"fromSend": m.Delivery.FromSend, "lists": m.InitialLists.Latency} {
			if !sameQuantiles(got, whole[name]) {
				t.Errorf("k=%d: %s merged %+v, want %+v", k, name, got, whole[name])
			}
			if got.HDR == "" {
				t.Errorf("k=%d: %s lost its HDR: merges would not compose", k, name)
			}
		}
		var planned, completed, errs, deletes, events, untimed, historyMax int64
		for _, r := range rs {
			planned += r.Writes.Planned
			completed += r.Writes.Completed
			errs += r.Writes.Errors
			deletes += r.Writes.Deletes
			events += r.Delivery.Events
			untimed += r.Delivery.UntimedEvents
			historyMax = max(historyMax, r.Validation.HistoryEvents)
		}
		w := m.Writes
		if w.Planned != planned || w.Completed != completed || w.Errors != errs || w.Deletes != deletes {
			t.Errorf("k=%d: writes %+v, want planned %d completed %d errors %d deletes %d", k, w, planned, completed, errs, deletes)
		}
		if m.Delivery.Events != events || m.Delivery.UntimedEvents != untimed || m.Delivery.TimedEvents != 300*int64(k) {
			t.Errorf("k=%d: delivery %d events (%d untimed), want %d (%d)", k, m.Delivery.Events, m.Delivery.UntimedEvents, events, untimed)
		}
		if m.InitialLists.Count != 3*int64(k) || m.InitialLists.Objects != 3000*int64(k) {
			t.Errorf("k=%d: initial lists %+v", k, m.InitialLists)
		}
		// Every worker's writes began at 2 s on the merged clock; the
		// last ended 10 s + 10(k-1) ms later.
		wantSpan := 10_000 + float64(k-1)*10
		if w.StartMs != 2000 || w.DurationMs != wantSpan {
			t.Errorf("k=%d: writes start %.1f ms span %.1f ms, want 2000 and %.1f", k, w.StartMs, w.DurationMs, wantSpan)
		}
		if want := float64(completed) / (wantSpan / 1000); w.ThroughputPerSecond != want {
			t.Errorf("k=%d: throughput %.3f/s, want %.3f", k, w.ThroughputPerSecond, want)
		}
		if want := float64(events) / 10.5; !near(m.Delivery.EventsPerSecond, want) {
			t.Errorf("k=%d: events per second %.3f, want %.3f", k, m.Delivery.EventsPerSecond, want)
		}
		if m.Validation.PrevKVMissing != int64(k*(k-1)/2) || m.Validation.HistoryEvents != historyMax {
			t.Errorf("k=%d: validation %+v", k, m.Validation)
		}
		if m.Final.Revision != 5000+int64(k-1) || m.Final.Objects != 1000 {
			t.Errorf("k=%d: final %+v, want the latest worker's", k, m.Final)
		}
		if m.DBSize.EndBytes != 1<<20*int64(k) || m.DBSize.BeforeCompactionBytes != 3<<20 {
			t.Errorf("k=%d: db sizes %+v", k, m.DBSize)
		}
		if len(m.Compactions) != 1 || m.Compactions[0].AtMs != 6000 {
			t.Errorf("k=%d: compactions %+v, want shard 0's", k, m.Compactions)
		}
		if len(m.Informers) != 3*k {
			t.Fatalf("k=%d: %d informers, want %d", k, len(m.Informers), 3*k)
		}
		for i, inf := range m.Informers {
			if inf.ID != i {
				t.Errorf("k=%d: informer %d has ID %d: not sorted", k, i, inf.ID)
			}
		}
		if len(m.Relists) != k {
			t.Fatalf("k=%d: %d relists", k, len(m.Relists))
		}
		for i, rl := range m.Relists {
			// Worker i's epoch is i*100 ms after the merged one.
			if rl.Informer != 3*i+2 || rl.AtMs != 5000+float64(i)*100 {
				t.Errorf("k=%d: relist %d: informer %d at %.1f ms", k, i, rl.Informer, rl.AtMs)
			}
		}
		if len(m.Intervals) != 2 || m.Intervals[1].WritesScheduled != 10*int64(k) || m.Intervals[1].Events != 100*int64(k) ||
			m.Intervals[1].StartMs != 1000 || m.Intervals[0].WritesCompleted != 9*int64(k) {
			t.Errorf("k=%d: intervals %+v", k, m.Intervals)
		}
		if m.Intervals[1].WriteP99Ms != 0 {
			t.Errorf("k=%d: an interval's p99 %.1f ms: per-interval quantiles cannot be merged", k, m.Intervals[1].WriteP99Ms)
		}
		if m.Clocks == nil || m.Clocks.IntervalAlignment != "wall" || m.Clocks.LatencyScope != LatencyScopeOwnWrites || m.Clocks.WriteStartSpreadMs != 0 {
			t.Errorf("k=%d: clocks %+v", k, m.Clocks)
		}
		if m.Shard != nil || len(m.Workers) != k || m.Workers[k-1].Shard.Index != k-1 || m.Workers[k-1].Writes.Planned != 100+int64(k-1) {
			t.Errorf("k=%d: shard %v, workers %+v", k, m.Shard, m.Workers)
		}
		if m.Self.CPUSeconds != 6*float64(k) || m.Self.NumCPU != 4 {
			t.Errorf("k=%d: self %+v", k, m.Self)
		}
		if len(m.Warnings) != k || !strings.HasPrefix(m.Warnings[k-1], "worker ") {
			t.Errorf("k=%d: warnings %q", k, m.Warnings)
		}
		if m.Verdict != RunVerdict(m) || !strings.HasPrefix(m.Verdict, "PASS") {
			t.Errorf("k=%d: verdict %q", k, m.Verdict)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-6*b && b-a < 1e-6*b }

// TestMergeRunsIntervalsOnWallTime: a worker whose writes began a second
// after the others' adds its interval k into the merged interval k+1;
// without a recorded start the intervals align by index, with a warning.
func TestMergeRunsIntervalsOnWallTime(t *testing.T) {
	rs, _ := workerResults(t, rand.New(rand.NewPCG(5, 6)), 2)
	rs[1].Writes.StartMs += 1000
	m, err := MergeRuns(rs)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, iv := range m.Intervals {
		got = append(got, iv.WritesScheduled)
	}
	if want := []int64{10, 20, 10}; !slices.Equal(got, want) {
		t.Errorf("writes scheduled per interval %v, want %v", got, want)
	}
	if m.Clocks.WriteStartSpreadMs != 1000 {
		t.Errorf("write start spread %.1f ms, want 1000", m.Clocks.WriteStartSpreadMs)
	}
	rs[1].Writes.StartMs = 0
	if m, err = MergeRuns(rs); err != nil {
		t.Fatal(err)
	}
	if m.Clocks.IntervalAlignment != "index" || len(m.Intervals) != 2 || !strings.Contains(strings.Join(m.Warnings, "\n"), "aligned by their index") {
		t.Errorf("index alignment: clocks %+v, %d intervals, warnings %q", m.Clocks, len(m.Intervals), m.Warnings)
	}
}

// TestMergeRunsGeneratorLimited: a saturated worker is marked in Workers
// and in a merged warning naming it, and the merged Self keeps its delay.
func TestMergeRunsGeneratorLimited(t *testing.T) {
	rs, _ := workerResults(t, rand.New(rand.NewPCG(7, 8)), 3)
	rs[2].Self.CPUCores, rs[2].Self.CPULimitCores = 1.95, 2
	rs[1].Self.SchedLatencyP99Ms = 12
	m, err := MergeRuns(rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, true} {
		if m.Workers[i].GeneratorLimited != want {
			t.Errorf("worker %d limited %v, want %v (%s)", i, m.Workers[i].GeneratorLimited, want, m.Workers[i].GeneratorLimitedWhy)
		}
	}
	all := strings.Join(m.Warnings, "\n")
	for _, want := range []string{"figures of worker 1 were limited by the generator: its goroutines waited 12.0 ms",
		"figures of worker 2 were limited by the generator: its CPU was 1.95 cores of 2.00 (its cgroup's CPU limit)"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", m.Warnings, want)
		}
	}
	if m.Self.SchedLatencyP99Ms != 12 || !strings.Contains(m.Verdict, "busy machine") {
		t.Errorf("merged self %+v, verdict %q", m.Self, m.Verdict)
	}
}

func TestMergeRunsErrors(t *testing.T) {
	tests := []struct {
		name    string
		change  func(rs []*RunResult) []*RunResult
		wantErr string
		wantIs  error
	}{
		{"missing index", func(rs []*RunResult) []*RunResult { return []*RunResult{rs[0], rs[2]} }, "shard 1 of 3 missing", ErrNotOneLoad},
		{"duplicate index", func(rs []*RunResult) []*RunResult { return []*RunResult{rs[0], rs[1], rs[1], rs[2]} }, "shard 1 appears twice", ErrNotOneLoad},
		{"another count", func(rs []*RunResult) []*RunResult {
			rs[2].Shard = &shard.Shard{Index: 2, Count: 4}
			return rs
		}, "a load of another number of shards", ErrNotOneLoad},
		{"no shard", func(rs []*RunResult) []*RunResult { rs[1].Shard = nil; return rs }, "result 2 is not a worker's", ErrNotOneLoad},
		{"another scenario", func(rs []*RunResult) []*RunResult { rs[2].Scenario.Seed = 8; return rs }, "shard 2 ran another scenario than shard 0 (scenario.seed differs)", ErrNotOneLoad},
		{"another target", func(rs []*RunResult) []*RunResult {
			rs[1].Target.Endpoints = []string{"http://10.0.0.1:2379"}
			return rs
		}, "shard 1 drove", ErrNotOneLoad},
		{"compactions twice", func(rs []*RunResult) []*RunResult {
			rs[1].Compactions = []Compaction{{Revision: 9}}
			return rs
		}, "shards 0 and 1 both have compactions", ErrNotOneLoad},
		{"no HDR", func(rs []*RunResult) []*RunResult { rs[1].Delivery.FromSend.HDR = ""; return rs }, "merge delivery.fromSend: latency 2 of 3", ErrNoHDR},
		{"no HDR on two members", func(rs []*RunResult) []*RunResult {
			for _, r := range rs[:2] {
				r.Members = []MemberStats{{Endpoint: "http://127.0.0.1:2379", Writes: &MemberWrites{Completed: 1, Latency: Latency{Count: 1, P50Ms: 1}}}}
			}
			return rs
		}, "merge members[http://127.0.0.1:2379].writes.latency: latency 1 of 2", ErrNoHDR},
		{"none", func([]*RunResult) []*RunResult { return nil }, "no results to merge", ErrNotOneLoad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, _ := workerResults(t, rand.New(rand.NewPCG(9, 10)), 3)
			_, err := MergeRuns(tt.change(rs))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, tt.wantIs) {
				t.Errorf("got %v, want an error containing %q wrapping %v", err, tt.wantErr, tt.wantIs)
			}
		})
	}
}

// TestMergeRunsOneWorkersLatency: a latency only one worker has samples
// of (shard 0's consistent reads) is kept as it is, without its HDR.
func TestMergeRunsOneWorkersLatency(t *testing.T) {
	rs, _ := workerResults(t, rand.New(rand.NewPCG(11, 12)), 3)
	wait := Latency{Count: 10, P50Ms: 2, P99Ms: 9, MaxMs: 9}
	rs[0].ConsistentReads = &ConsistentReads{Requests: 10, ServedFromCache: 10, ReadWait: wait}
	m, err := MergeRuns(rs)
	if err != nil {
		t.Fatal(err)
	}
	if m.ConsistentReads == nil || m.ConsistentReads.ReadWait != wait || m.ConsistentReads.Requests != 10 {
		t.Errorf("consistent reads %+v, want shard 0's", m.ConsistentReads)
	}
}

func TestGeneratorLimited(t *testing.T) {
	tests := []struct {
		name    string
		s       SelfStats
		want    bool
		wantWhy string
	}{
		{"idle", SelfStats{CPUCores: 0.5, NumCPU: 2}, false, ""},
		{"near the machine's CPUs", SelfStats{CPUCores: 1.85, NumCPU: 2}, true, "its CPU was 1.85 cores of 2.00 (the machine's 2 CPUs), at least 90%"},
		{"below 90% of the machine", SelfStats{CPUCores: 1.75, NumCPU: 2}, false, ""},
		{"near its cgroup limit", SelfStats{CPUCores: 0.46, NumCPU: 16, CPULimitCores: 0.5}, true, "(its cgroup's CPU limit)"},
		{"the limit, not the machine, counts", SelfStats{CPUCores: 1.9, NumCPU: 2, CPULimitCores: 4}, false, ""},
		{"scheduling delay", SelfStats{CPUCores: 0.2, NumCPU: 8, SchedLatencyP99Ms: 6}, true, "its goroutines waited 6.0 ms (p99) for a CPU, above 5 ms"},
		{"delay at the threshold", SelfStats{NumCPU: 8, SchedLatencyP99Ms: SchedLatencyBusyMs}, false, ""},
		{"both", SelfStats{CPUCores: 2, NumCPU: 2, SchedLatencyP99Ms: 40}, true, "; its goroutines waited 40.0 ms"},
		{"not measured", SelfStats{}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := GeneratorLimited(tt.s)
			if got != tt.want || !strings.Contains(why, tt.wantWhy) || (!got && why != "") {
				t.Errorf("got %v %q, want %v containing %q", got, why, tt.want, tt.wantWhy)
			}
		})
	}
}
