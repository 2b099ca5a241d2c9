package kubeload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name    string
		q       float64
		buckets []bucket
		want    float64
	}{
		{"none", 0.99, nil, 0},
		{"no observations", 0.99, []bucket{{0.001, 0}, {inf, 0}}, 0},
		{"all in the first bucket", 0.99, []bucket{{0.002, 100}, {0.004, 100}, {inf, 100}}, 0.002 * 0.99},
		{"interpolated in the second", 0.5, []bucket{{0.001, 40}, {0.002, 80}, {inf, 80}}, 0.001 + 0.001*(40-40)/40},
		{"p99 in the second", 0.99, []bucket{{0.001, 50}, {0.002, 100}, {inf, 100}}, 0.001 + 0.001*(99-50)/50.0},
		{"in +Inf: the last finite bound", 0.99, []bucket{{0.001, 10}, {0.002, 20}, {inf, 100}}, 0.002},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := histogramQuantile(tt.q, tt.buckets); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestParseEtcdMetricsMalformed checks that a broken exposition is an
// error naming the parse, not a panic or zeros.
func TestParseEtcdMetricsMalformed(t *testing.T) {
	_, err := parseEtcdMetrics(strings.NewReader("# TYPE etcd_mvcc_put_total counter\netcd_mvcc_put_total{a=\"b\" 3\n"))
	if err == nil || !strings.Contains(err.Error(), "parse metrics") {
		t.Errorf("got %v, want a parse error", err)
	}
}

// fakeCounter is an EtcdCounter whose rows a test sets.
type fakeCounter struct {
	mu   sync.Mutex
	rows []report.EtcdRequests
}

func (f *fakeCounter) Reset()                          {}
func (f *fakeCounter) SetPhase(string)                 {}
func (f *fakeCounter) Phases() []report.EtcdPhase      { return nil }
func (f *fakeCounter) set(rows ...report.EtcdRequests) { f.mu.Lock(); f.rows = rows; f.mu.Unlock() }
func (f *fakeCounter) Requests() []report.EtcdRequests {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]report.EtcdRequests(nil), f.rows...)
}

// TestEtcdSampler samples a real embedded etcd's /metrics and a counter
// while a test writes in two phases: the db size is sampled, etcd's puts
// count in the phase they were made in, the backend commits have a p99,
// and the writes per resource add up to the counter's.
func TestEtcdSampler(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	cli := etcdtest.NewClient(t, srv)
	ctx := context.Background()
	var mu sync.Mutex
	phase := "seed"
	current := func() string { mu.Lock(); defer mu.Unlock(); return phase }
	fc := &fakeCounter{}
	const update = "if mod_revision=? then put else range"
	fc.set(report.EtcdRequests{Phase: "before", Method: "Txn", Kind: update, Resource: "pods", Requests: 5}) // before sampling: no sample
	s := startEtcdSampler(ctx, fc, current, time.Now(), 50*time.Millisecond, srv.Endpoints[0], nil, nil)
	defer s.halt()

	put := func(n int) {
		for i := range n {
			if _, err := cli.Put(ctx, fmt.Sprintf("/registry/pods/ns/p%d", i), strings.Repeat("x", 1000)); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(200)
	fc.set(report.EtcdRequests{Phase: "before", Method: "Txn", Kind: update, Resource: "pods", Requests: 205},
		report.EtcdRequests{Phase: "seed", Method: "Range", Kind: "key", Resource: "pods", Requests: 50}) // a read: no write
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	phase = "steady"
	mu.Unlock()
	time.Sleep(120 * time.Millisecond) // a scrape in steady before its puts
	put(100)
	fc.set(report.EtcdRequests{Phase: "before", Method: "Txn", Kind: update, Resource: "pods", Requests: 205},
		report.EtcdRequests{Phase: "steady", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Requests: 7})
	time.Sleep(500 * time.Millisecond)
	writes, m := s.finish(ctx)

	if m == nil || m.Error != "" || len(m.Samples) < 5 {
		t.Fatalf("got metrics %+v, want 5 samples or more and no error", m)
	}
	last := m.Samples[len(m.Samples)-1]
	if last.DBSizeBytes < 300*1000 || last.DBSizeInUseBytes <= 0 || last.DBSizeInUseBytes > last.DBSizeBytes {
		t.Errorf("last sample %+v: want a db of at least 300 kB, some of it in use", last)
	}
	puts := map[string]int64{}
	for _, p := range m.Phases {
		puts[p.Phase] = p.Puts
		if p.Phase == "steady" && (p.BackendCommits == 0 || p.BackendCommitP99Ms <= 0) {
			t.Errorf("steady: %d backend commits, p99 %v ms; want some, with a p99", p.BackendCommits, p.BackendCommitP99Ms)
		}
	}
	if puts["seed"] < 195 || puts["seed"] > 200 || puts["steady"] < 100 || puts["seed"]+puts["steady"] != 300 {
		t.Errorf("etcd's puts by phase %v, want about 200 in seed, 100 in steady, 300 in all", puts)
	}
	if writes == nil || fmt.Sprint(writes.Resources) != "[leases.coordination.k8s.io pods]" {
		t.Fatalf("write series %+v, want leases and pods", writes)
	}
	var sums [2]int64
	for _, w := range writes.Samples {
		for i, n := range w.Writes {
			sums[i] += n
		}
	}
	if sums != [2]int64{7, 200} {
		t.Errorf("writes summed over the samples %v, want [7 200] (the 5 before sampling and the reads left out)", sums)
	}
}

// TestEtcdSamplerStatus samples the db size of one of two embedded
// members of this process, the one opened first, as a run with
// --events-etcd does: its /metrics shows the other member's db size
// (the premise: etcd's db size gauge is package state set by the last
// backend opened), its Status its own, which the sampler reports, with
// no phases.
func TestEtcdSamplerStatus(t *testing.T) {
	main := etcdtest.RunEtcd(t)
	cli := etcdtest.NewClient(t, main)
	ctx := t.Context()
	for i := range 2000 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/pods/ns/p%d", i), strings.Repeat("x", 2000)); err != nil {
			t.Fatal(err)
		}
	}
	etcdtest.RunEtcd(t) // opened last: the events' member

	a := &apiClients{st: Stack{Etcd: watchload.Target{Endpoints: main.Endpoints,
		Dial: func(ctx context.Context) (*clientv3.Client, error) {
			return clientv3.New(clientv3.Config{Endpoints: main.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), Context: ctx})
		}}}}
	status, closeStatus := a.statusOf(main.Endpoints[0])
	s := startEtcdSampler(ctx, nil, func() string { return "steady" }, time.Now(), 20*time.Millisecond, main.Endpoints[0], nil, status)
	s.release = closeStatus
	time.Sleep(100 * time.Millisecond)
	_, m := s.finish(ctx)
	if m == nil || m.Source != report.EtcdMetricsFromStatus || m.Errors != 0 || len(m.Samples) < 3 || len(m.Phases) != 0 {
		t.Fatalf("got metrics %+v, want 3 samples or more from Status, no phases, no error", m)
	}
	if last := m.Samples[len(m.Samples)-1]; last.DBSizeBytes < 4_000_000 || last.DBSizeInUseBytes <= 0 || last.DBSizeInUseBytes > last.DBSizeBytes {
		t.Errorf("last sample %+v: want the main member's db of at least 4 MB, some of it in use", last)
	}

	// A read that fails is counted with the time it was issued.
	var calls atomic.Int32
	epoch := time.Now()
	status, closeStatus = a.statusOf(main.Endpoints[0])
	failing := func(ctx context.Context) (*etcdScrape, error) {
		if calls.Add(1)%2 == 0 {
			return nil, errors.New("context deadline exceeded")
		}
		return status(ctx)
	}
	s = startEtcdSampler(ctx, nil, func() string { return "defrag" }, epoch, 20*time.Millisecond, main.Endpoints[0], nil, failing)
	s.release = closeStatus
	time.Sleep(100 * time.Millisecond)
	_, m = s.finish(ctx)
	elapsed := report.Ms(time.Since(epoch))
	if m.Errors == 0 || len(m.FailedAtMs) != m.Errors || len(m.Samples) == 0 || m.Error != "context deadline exceeded" ||
		!slices.IsSorted(m.FailedAtMs) || m.FailedAtMs[0] < 0 || m.FailedAtMs[len(m.FailedAtMs)-1] > elapsed {
		t.Errorf("got metrics %+v, want every other read failed, each with its time within the %.0f ms run", m, elapsed)
	}

	// The premise: the same member's /metrics gives the other one's size.
	sc, err := scrapeEtcd(ctx, http.DefaultClient, main.Endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.values[etcdDBSize]; got >= 4_000_000 {
		t.Errorf("the main member's /metrics says a db of %.0f bytes: its own; reading Status for it may no longer be needed", got)
	}
}

func TestSteadyCompactions(t *testing.T) {
	const m = time.Minute
	tests := []struct {
		name               string
		start, d, interval time.Duration
		wantN              int
		wantNeed           time.Duration
	}{
		{"short seeding, three intervals and a minute", 30 * time.Second, 16 * m, 5 * m, 2, 15*m - 30*time.Second},
		{"short seeding, 11 minutes: one", 30 * time.Second, 11 * m, 5 * m, 1, 15*m - 30*time.Second},
		{"long seeding, 11 minutes: two", 6 * m, 11 * m, 5 * m, 2, 9 * m},
		{"seeding past the first compaction", 11 * m, 10 * m, 5 * m, 2, 9 * m},
		{"on a compaction", 10 * m, 5 * m, 5 * m, 2, 5 * m},
		{"compaction off", m, 16 * m, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, need := steadyCompactions(tt.start, tt.d, tt.interval)
			if n != tt.wantN || need != tt.wantNeed {
				t.Errorf("got %d compactions, %v needed; want %d, %v", n, need, tt.wantN, tt.wantNeed)
			}
		})
	}
}

// TestEtcdSamplerHaltsAScrape stops a sampler whose scrape hangs: halt
// must end it at once (an interrupted run exits within 2 s), and the
// scrape it gives up is not a failed one.
func TestEtcdSamplerHaltsAScrape(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			fmt.Fprintln(w, "# TYPE etcd_mvcc_db_total_size_in_bytes gauge\netcd_mvcc_db_total_size_in_bytes 4096")
			return
		}
		<-r.Context().Done() // hangs until the scrape is given up
	}))
	defer srv.Close()
	s := startEtcdSampler(t.Context(), nil, func() string { return "steady" }, time.Now(), 10*time.Millisecond, srv.URL, nil, nil)
	for calls.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	s.halt()
	if d := time.Since(start); d > time.Second {
		t.Errorf("halt took %v, want it to end the hung scrape at once", d)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	writes, m := s.finish(ctx)
	if writes != nil || m == nil || len(m.Samples) != 1 || m.Samples[0].DBSizeBytes != 4096 || m.Errors != 0 {
		t.Errorf("got writes %+v, metrics %+v; want no write series, the baseline's 4096 bytes and the scrape halt gave up not counted as failed", writes, m)
	}
}

// TestEtcdMetricsSamplerMembers samples three members' /metrics (test
// servers whose second scrape has grown by known amounts): the result
// holds each member's figures and their sums, and the summed p99 comes
// from the members' buckets summed (two members' 100 fast commits
// outweigh the third's 2 slow ones: about 1 ms), not from the members'
// p99s averaged (about 34 ms).
func TestEtcdMetricsSamplerMembers(t *testing.T) {
	const head = "# TYPE etcd_disk_backend_commit_duration_seconds histogram\n# TYPE etcd_mvcc_put_total counter\n# TYPE grpc_server_handled_total counter\n"
	text := func(fast, slow, puts, ranges, failed int) string {
		return head + fmt.Sprintf(`etcd_disk_backend_commit_duration_seconds_bucket{le="0.001"} %d
etcd_disk_backend_commit_duration_seconds_bucket{le="0.1"} %d
etcd_disk_backend_commit_duration_seconds_bucket{le="+Inf"} %d
etcd_disk_backend_commit_duration_seconds_sum 0
etcd_disk_backend_commit_duration_seconds_count %d
etcd_mvcc_put_total %d
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} %d
grpc_server_handled_total{grpc_code="Unavailable",grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"} %d
`, fast, fast+slow, fast+slow, fast+slow, puts, ranges, failed)
	}
	members := []struct{ fast, slow, puts, ranges, failed int }{{100, 0, 50, 10, 0}, {0, 2, 50, 20, 3}, {100, 0, 50, 30, 0}}
	var urls []string
	for _, m := range members {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				fmt.Fprint(w, text(0, 0, 7, 5, 1)) // the baseline
				return
			}
			fmt.Fprint(w, text(m.fast, m.slow, 7+m.puts, 5+m.ranges, 1+m.failed))
		}))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	s := SampleEtcdMetrics(t.Context(), urls, nil, time.Now(), time.Hour, func() string { return "steady" })
	s.SampleNow()
	m := s.Finish(t.Context())
	if m == nil || len(m.Members) != 3 || len(m.Phases) != 1 || m.Endpoint != urls[0] || m.Errors != 0 {
		t.Fatalf("got %+v, want three members' one phase and no error", m)
	}
	wantP99 := []float64{0.99, 1 + 99*1.98/2, 0.99} // ms, each member's own
	for i, mm := range m.Members {
		p := mm.Phases[0]
		if mm.Endpoint != urls[i] || p.Puts != 50 || math.Abs(p.BackendCommitP99Ms-wantP99[i]) > 1e-9 {
			t.Errorf("member %d: %s, %+v; want %s, 50 puts, commit p99 %v ms", i, mm.Endpoint, p, urls[i], wantP99[i])
		}
	}
	sum := m.Phases[0]
	if sum.Puts != 150 || sum.BackendCommits != 202 || math.Abs(sum.BackendCommitP99Ms-0.9999) > 1e-9 {
		t.Errorf("summed %+v: want 150 puts, 202 commits, p99 0.9999 ms from the buckets summed", sum)
	}
	want := []report.EtcdHandledRPCs{{Service: "etcdserverpb.KV", Method: "Range", Code: "OK", Count: 60},
		{Service: "etcdserverpb.KV", Method: "Txn", Code: "Unavailable", Count: 3}}
	if !slices.Equal(sum.HandledRPCs, want) {
		t.Errorf("summed RPCs %+v, want %+v", sum.HandledRPCs, want)
	}
	if got := SampleEtcdMetrics(t.Context(), nil, nil, time.Now(), time.Hour, func() string { return "steady" }).Finish(t.Context()); got != nil {
		t.Errorf("no endpoints: got %+v, want nil", got)
	}
}
