package command

import (
	"bytes"
	"encoding/csv"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/report"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// golden compares got with testdata/golden/name, or rewrites it with
// -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(g), len(w)); i++ {
			if i >= len(g) || i >= len(w) || g[i] != w[i] {
				t.Errorf("%s differs from the golden file from line %d:\ngot:  %q\nwant: %q", name, i+1, line(g, i), line(w, i))
				return
			}
		}
	}
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}

// render writes t and v in format f.
func render(t *testing.T, f output.Format, tb output.Table, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := output.Write(&b, f, tb, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func latency(p50 float64) report.Latency {
	return report.Latency{Count: 100, P50Ms: p50, P90Ms: 2 * p50, P99Ms: 4 * p50, P999Ms: 8 * p50, MaxMs: 10 * p50, MeanMs: 1.5 * p50}
}

// syntheticRun is a fixed RunResult with every section filled: a three
// member cluster, a relist with two attempts, a compaction, a defrag of
// each member, a fault, a cleanup and the delivery to a watcher held
// back.
func syntheticRun() *report.RunResult {
	return &report.RunResult{
		Kind: report.KindRun, SchemaVersion: report.RunSchemaVersion,
		StartedAt: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		Target:    report.Target{Endpoints: []string{"http://127.0.0.1:2379", "http://127.0.0.1:2380", "http://127.0.0.1:2381"}, EtcdVersion: "3.7.3", Managed: true},
		Scenario: report.Scenario{Profile: "informer", Prefix: "/registry", Objects: 1000, ConfigMaps: 200, Events: 500, Namespaces: 10,
			Watchers: 12, WatchResources: []string{"pods"}, Connections: 3, Streams: 3, WriterConnections: 3, WriteRatePerSecond: 200,
			DurationMs: 20000, PageSize: 500, ResourceMix: report.ResourceMix{PodsPercent: 60, ConfigMapsPercent: 10, EventsPercent: 30},
			CompactionIntervalMs: 6666.667, CreatePercent: 20, UpdatePercent: 60, DeletePercent: 20, WriterConcurrency: 16,
			HeldBackWatchers: 1, Seed: 1, Defragment: true, PhysicalCompaction: true, ProgressRequestPeriod: 100, EventTTLMs: 3600000,
			ConsistentListRatePerSecond: -1, StartConcurrency: 4, CompactRevKey: "compact_rev_key",
			Faults: []report.PlannedFault{{Kind: "kill-leader", AtMs: 8000, DurationMs: 5000}}},
		Writes: report.WriteStats{Planned: 4000, Sent: 4000, Completed: 3990, Errors: 10, Timeouts: 4, Creates: 500, Updates: 2890,
			Deletes: 400, Puts: 200, Conflicts: 3, ThroughputPerSecond: 199.5, DurationMs: 20000, Latency: latency(1.25),
			ErrorSamples: []string{"etcdserver: request timed out"}},
		Delivery: report.DeliveryStats{Events: 47880, TimedEvents: 47000, UntimedEvents: 880, EventsPerSecond: 2394,
			FromResponse: latency(0.5), FromSend: latency(1.5), DeliveredBeforeResponse: 12,
			HeldBack: &report.HeldBackDelivery{Watchers: 1, Events: 2600, TimedEvents: 2550, FromResponse: latency(1500), FromSend: latency(1501)}},
		InitialLists: report.ListSummary{Count: 12, Objects: 12000, Bytes: 9600000, Pages: 24, Latency: latency(40)},
		Relists: []report.Relist{{Informer: 0, Resource: "pods", Reason: "compacted", Verb: "list", ResourceVersion: "1500", FromRevision: 1500, CompactRevision: 2100, ListRevision: 2150,
			AtMs: 9000, DurationMs: 35.5, BackoffMs: 800, Objects: 1000, Bytes: 800000, Pages: 2, FailedRequests: 1, Expired: 1,
			Attempts: []report.ListAttempt{
				{ResourceVersion: "1500", Limit: 500, ReadRevision: 1500, Error: "etcdserver: mvcc: required revision has been compacted", DurationMs: 1.5},
				{ResourceVersion: "", Limit: 500, Revision: 2150, Pages: 2, Objects: 1000, DurationMs: 34}}}},
		Compactions: []report.Compaction{{AtMs: 8500, Revision: 2100, DurationMs: 12.5}, {AtMs: 15000, DurationMs: 3, Error: "etcdserver: no leader"}},
		Defrag: &report.Defrag{AtMs: 9500, DurationMs: 150, Members: []report.MemberDefrag{
			{Endpoint: "http://127.0.0.1:2380", AtMs: 9500, DurationMs: 50, BeforeBytes: 8e6, BeforeInUseBytes: 4e6, AfterBytes: 4e6, AfterInUseBytes: 4e6},
			{Endpoint: "http://127.0.0.1:2379", Leader: true, AtMs: 9600, DurationMs: 100, BeforeBytes: 8e6, BeforeInUseBytes: 4e6, AfterBytes: 4e6, AfterInUseBytes: 4e6}}},
		DBSize: report.DBSizes{BeforeCompactionBytes: 8e6, BeforeCompactionInUseBytes: 7e6, AfterCompactionBytes: 8e6, AfterCompactionInUseBytes: 4e6,
			AfterDefragBytes: 4e6, AfterDefragInUseBytes: 4e6, EndBytes: 5e6, EndInUseBytes: 4.5e6},
		Validation: report.Validation{PrevKVMissing: 3, RecorderScope: "keyspace", HistoryEvents: 3990},
		Final: report.FinalState{Revision: 5000, CompactRevision: 2100, Objects: 1300,
			Resources: []report.ResourceCount{{Resource: "pods", Objects: 1000}, {Resource: "configmaps", Objects: 200}, {Resource: "events", Objects: 100}}},
		Informers: []report.InformerStats{{ID: 0, Resource: "pods", Events: 3990, Lists: 2, Sessions: 2, LastRevision: 5000, CacheObjects: 1000, HeldBack: true}},
		Intervals: []report.Interval{
			{StartMs: 0, WritesScheduled: 200, WritesCompleted: 199, WriteP50Ms: 1.25, WriteP99Ms: 5, WriteP999Ms: 10, Events: 2388, DeliveryP50Ms: 0.5, DeliveryP99Ms: 2, DeliveryP999Ms: 4},
			{StartMs: 1000, WritesScheduled: 200, WritesCompleted: 190, WriteErrors: 10, WriteP50Ms: 1.5, WriteP99Ms: 7000, WriteP999Ms: 7000, Events: 2280, DeliveryP50Ms: 0.75, DeliveryP99Ms: 3, DeliveryP999Ms: 6,
				HeldBackEvents: 190, HeldBackDeliveryP99Ms: 5900}},
		Self: report.SelfStats{WallMs: 25000, CPUSeconds: 12.5, CPUCores: 0.5, NumCPU: 2, MaxRSSBytes: 200e6, PeakHeapBytes: 100e6, PeakGoroutines: 300,
			GCCount: 40, GCPauseMs: 5, Etcd: &report.ProcessStats{Endpoint: "http://127.0.0.1:2379", CPUSeconds: 8, CPUCores: 0.32, RSSBytes: 150e6}},
		Members: []report.MemberStats{
			{Name: "m0", Endpoint: "http://127.0.0.1:2379", ID: "8e9e05c52164694d", Version: "3.7.3", LeaderAtStart: true, WatchConnections: 1, WriterConnections: 1, Watchers: 4,
				Writes:   &report.MemberWrites{Completed: 1330, Errors: 10, Timeouts: 4, Latency: latency(1.5)},
				Delivery: &report.MemberDelivery{Events: 15960, TimedEvents: 15600, FromResponse: latency(0.6)}, DBSizeBytes: 5e6, DBSizeInUseBytes: 4.5e6},
			{Name: "m1", Endpoint: "http://127.0.0.1:2380", ID: "91bc3c398fb3c146", Version: "3.7.3", DBSizeBytes: 5e6, DBSizeInUseBytes: 4.5e6},
			{Name: "m2", Endpoint: "http://127.0.0.1:2381", ID: "fd422379fda50e48", Version: "3.7.3", Error: "context deadline exceeded"}},
		Faults: []report.Fault{{Kind: "kill-leader", Member: "m0", Endpoint: "http://127.0.0.1:2379", AtMs: 10000, PlannedDurationMs: 5000, EndedAtMs: 15000,
			LeaderBefore: "m0", LeaderAfter: "m1", Recovered: true, RecoveryRevision: 3000, WriteRecoveryMs: 1200, WatchRecoveryMs: 1250, RecoveryMs: 1250,
			SlowestWatcher: 3, HealthyMs: 6000, SettledAtMs: 26000, Relists: 4, RelistReasons: map[string]int{"watch-error": 3, "compacted": 1}, WatchersRelisted: 4,
			WriteErrors: 10, WriteTimeouts: 4, Probe: report.FaultProbe{Writes: report.ProbeOps{Count: 100, Errors: 5, Timeouts: 2, Latency: latency(2)},
				Reads: report.ProbeOps{Count: 100, Errors: 3, Latency: latency(1)}, LongestStallMs: 1100, Errors: map[string]int{"etcdserver: no leader": 8}}}},
		Cleanup: &report.Cleanup{KeysDeleted: 1300, LeasesRevoked: 5, KeysLeft: 0, DurationMs: 250},
	}
}

// syntheticKubeRun is a fixed RunResult through one kube-apiserver
// with the watch cache off: an informer held back across a compaction
// relists after a 410 (one failed LIST, then two pages), a second
// compaction follows, a defragmentation, the etcd requests of two phases
// by resource.
func syntheticKubeRun() *report.RunResult {
	return &report.RunResult{
		Kind: report.KindRun, SchemaVersion: report.RunSchemaVersion,
		StartedAt: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC),
		Target:    report.Target{Endpoints: []string{"http://127.0.0.1:2379"}, EtcdVersion: "3.7.3", Managed: true},
		APIServer: &report.APIServerTarget{Version: "v1.37.2", Servers: 1, Managed: true, EtcdCompactionIntervalMs: 10000,
			ClientWatchList: "off"},
		Scenario: report.Scenario{Profile: "client-go", Prefix: "/registry", Objects: 1000, ConfigMaps: 100, Events: 250, Namespaces: 10,
			Watchers: 4, WatchResources: []string{"pods"}, WriteRatePerSecond: 100, DurationMs: 30000, PageSize: 500,
			ResourceMix: report.ResourceMix{PodsPercent: 60, ConfigMapsPercent: 10, EventsPercent: 30}, CompactionIntervalMs: 10000,
			CreatePercent: 20, UpdatePercent: 70, DeletePercent: 10, HeldBackWatchers: 1, Seed: 1, Defragment: true},
		Writes: report.WriteStats{Planned: 3000, Sent: 3000, Completed: 2998, Errors: 2, Creates: 600, Updates: 2100, Deletes: 298,
			ThroughputPerSecond: 99.9, DurationMs: 30000, Latency: latency(4)},
		Delivery: report.DeliveryStats{Events: 11000, TimedEvents: 10900, UntimedEvents: 100, EventsPerSecond: 360,
			FromResponse: latency(2), FromSend: latency(6),
			HeldBack: &report.HeldBackDelivery{Watchers: 1, Events: 1500, TimedEvents: 1490, FromResponse: latency(900), FromSend: latency(905)}},
		Informers: []report.InformerStats{{ID: 0, Resource: "pods", Requests: 6, Lists: 2, Events: 2700, Bookmarks: 3, ResponseBytes: 4e6,
			CacheObjects: 1000, LastRevision: 9000, HeldBack: true},
			{ID: 1, Resource: "pods", Requests: 3, Lists: 1, Events: 2750, ResponseBytes: 3e6, CacheObjects: 1000, LastRevision: 9000}},
		Requests: []report.RequestCount{{Verb: "list", Outcome: "ok", ResourceVersion: "", Count: 4, Objects: 2000, Bytes: 2.4e6},
			{Verb: "list", Outcome: "expired", ResourceVersion: "exact", Count: 1},
			{Verb: "watch", Outcome: "expired", ResourceVersion: "exact", Count: 1}},
		Relists: []report.Relist{{Informer: 0, Resource: "pods", AtMs: 14000, Reason: "expired", Verb: "list", ResourceVersion: "", Pages: 2,
			Objects: 1000, Bytes: 1.2e6, DurationMs: 250, FailedRequests: 1, Expired: 1, BackoffMs: 800}},
		Holds:       []report.Hold{{Informer: 0, HeldAtMs: 5000, ReleasedAtMs: 13000, HeldRevision: 2000, Compacted: true}},
		Compactions: []report.Compaction{{N: 1, AtMs: 12000, Revision: 4000}, {N: 2, AtMs: 22000, Revision: 7000}},
		Etcd: []report.EtcdRequests{
			{Phase: "steady", Method: "Txn", Kind: "if mod_revision=0 then put", Resource: "leases.coordination.k8s.io", Requests: 200, RequestBytes: 2e5, Responses: 200, ResponseBytes: 2e4},
			{Phase: "steady", Method: "Txn", Kind: "if mod_revision=0 then put", Resource: "pods", Requests: 1900, RequestBytes: 2.3e6, Responses: 1900, ResponseBytes: 1.8e5},
			{Phase: "steady", Method: "Watch", Kind: "events", Resource: "leases.coordination.k8s.io", Responses: 200, ResponseBytes: 1e5, Items: 200},
			{Phase: "steady", Method: "Watch", Kind: "events", Resource: "pods", Responses: 1800, ResponseBytes: 2.2e6, Items: 1900},
			{Phase: "steady", Method: "Watch", Kind: "progress notify all", Responses: 3, ResponseBytes: 60},
			{Phase: "released after compaction 1", Method: "Range", Kind: "range limit=501", Resource: "pods", Requests: 2, RequestBytes: 100, Responses: 2, ResponseBytes: 1.1e6, Items: 1000}},
		EtcdPhases: []report.EtcdPhase{{Phase: "before", StartedAt: time.Date(2026, 11, 27, 9, 59, 50, 0, time.UTC), DurationMs: 10000},
			{Phase: "steady", StartedAt: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC), DurationMs: 30000},
			{Phase: "released after compaction 1", StartedAt: time.Date(2026, 11, 27, 10, 0, 30, 0, time.UTC), DurationMs: 5000}},
		Defrag: &report.Defrag{AtMs: 13500, DurationMs: 120, Members: []report.MemberDefrag{
			{Endpoint: "http://127.0.0.1:2379", Leader: true, AtMs: 13500, DurationMs: 120, BeforeBytes: 2e7, BeforeInUseBytes: 1e7, AfterBytes: 1e7, AfterInUseBytes: 1e7}}},
		APIServers: []report.APIServerUsage{{Server: "apiserver0", PID: 4242, CPUSeconds: 12.5, PeakResidentMemoryBytes: 4e8, FinalResidentMemoryBytes: 3.5e8,
			Phases: []report.APIServerPhaseUsage{{Phase: "seed", DurationMs: 2000, CPUSeconds: 2.5, PeakResidentMemoryBytes: 3e8, ResidentMemoryBytes: 3e8},
				{Phase: "steady", DurationMs: 30000, CPUSeconds: 10, PeakResidentMemoryBytes: 4e8, ResidentMemoryBytes: 3.5e8}}}},
		Validation: report.Validation{RecorderScope: "keyspace", HistoryEvents: 2998},
		Intervals:  []report.Interval{{StartMs: 0, WritesScheduled: 100, WritesCompleted: 100, WriteP50Ms: 4, WriteP99Ms: 16, Events: 360, DeliveryP50Ms: 2, DeliveryP99Ms: 8}},
	}
}

// TestKubeRunResultGolden renders the fixed synthetic RunResult through
// kube-apiserver as JSON, as the table `lwbench run --kube-apiserver`
// prints and as CSV: the same RunResult, tables and CSV columns as the
// model's, with the API front's sections.
func TestKubeRunResultGolden(t *testing.T) {
	r := judged(syntheticKubeRun())
	golden(t, "kube-run.json", render(t, output.FormatJSON, output.Table{}, r))
	golden(t, "kube-run.table", renderRun(t, output.FormatTable, r))
	golden(t, "kube-run.csv", render(t, output.FormatCSV, makeRunCSVTable(r), r))
}

// TestClusterRunResultGolden renders a synthetic run of a whole cluster
// (lwbench run --nodes) as the table prints it: the kube-apiserver run's
// rows and the cluster's.
func TestClusterRunResultGolden(t *testing.T) {
	r := syntheticKubeRun()
	r.Cluster = &report.ClusterScenario{Nodes: 100, Namespaces: 1, Deployments: 328, Services: 165, Pods: 3100,
		PodChurn: 10, PodsRunning: 3100, SeedMs: 412500, KubeletWatchNodes: 10, KubeletWatchObjects: 4321,
		FillerBytes: 2 << 30, DefragAtMs: 30000,
		Restart: &report.ComponentRestart{Component: "kube-apiserver", AtMs: 60000, DownMs: 12500},
		Exits:   []report.ComponentExit{{Component: "kube-controller-manager", AtMs: 61000, Status: "exit status 1"}},
		NodeHealth: &report.NodeHealth{Nodes: 100, Renewals: 2900, IntervalP50Ms: 10150, IntervalP99Ms: 41000, IntervalMaxMs: 52000,
			Phases: []report.NodeHealthPhase{{Phase: "steady", Renewals: 1500, IntervalP50Ms: 10100, IntervalP99Ms: 10400, IntervalMaxMs: 10500},
				{Phase: "defrag", Renewals: 100, IntervalP50Ms: 41000, IntervalP99Ms: 52000, IntervalMaxMs: 52000}},
			LeaseExpired: 12, NotReady: 12, Transitions: 12, FirstNotReadyMs: 81000, StillNotReady: 0}}
	r.Scenario.Objects, r.Scenario.ConfigMaps, r.Scenario.Events, r.Scenario.WriteRatePerSecond = 0, 0, 0, 10/1.4
	r.Delivery.TimedEvents, r.Delivery.FromResponse, r.Delivery.FromSend = 0, report.Latency{}, report.Latency{}
	r.Components = []report.APIServerUsage{{Server: "kube-controller-manager", PID: 4343, CPUSeconds: 3.25, PeakResidentMemoryBytes: 2e8, FinalResidentMemoryBytes: 1.9e8,
		Phases: []report.APIServerPhaseUsage{{Phase: "seed", DurationMs: 2000, CPUSeconds: 2, PeakResidentMemoryBytes: 1.5e8, ResidentMemoryBytes: 1.5e8}}}}
	const update = "if mod_revision=? then put else range"
	r.PeriodicTraffic = report.PeriodicTrafficOf(report.PeriodicInput{Nodes: 100, APIServers: 1, CompactionIntervalMs: r.APIServer.EtcdCompactionIntervalMs,
		Phases: r.EtcdPhases, Compactions: r.Compactions, Requests: []report.EtcdRequests{
			{Phase: "steady", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Namespace: "kube-node-lease", Requests: 296},
			{Phase: "steady", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Namespace: "kube-system", Name: "kube-scheduler", Requests: 15},
			{Phase: "steady", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Namespace: "kube-system", Name: "kube-controller-manager", Requests: 15},
			{Phase: "steady", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Namespace: "kube-system", Name: "apiserver-5n2c", Requests: 3},
			{Phase: "steady", Method: "Range", Kind: "key limit", Resource: "pods", PrefixKey: true, Requests: 1},
			{Phase: "steady", Method: "Compact", Kind: "compact", Requests: 1},
			{Phase: "released after compaction 1", Method: "Compact", Kind: "compact", Requests: 1},
			{Phase: "steady", Method: "Txn", Kind: "if version=? then put else range", Resource: "(compact_rev_key)", Requests: 2},
			{Phase: "steady", Method: "Status", Kind: "call", Requests: 1},
			{Phase: "steady", Method: "Txn", Kind: update, Resource: "peerserverleases", Requests: 3},
		}})
	r.EtcdWrites = &report.EtcdWriteSeries{IntervalMs: 1000, Resources: []string{"leases.coordination.k8s.io", "pods"},
		Samples: []report.EtcdWriteSample{{AtMs: 11000, Phase: "steady", Writes: []int64{11, 60}}, {AtMs: 12000, Phase: "steady", Writes: []int64{10}}}}
	r.EtcdMetrics = &report.EtcdMetrics{Endpoint: "http://127.0.0.1:2379", IntervalMs: 1000,
		Samples: []report.EtcdDBSample{{AtMs: 10000, Phase: "steady", DBSizeBytes: 20 << 20, DBSizeInUseBytes: 12 << 20},
			{AtMs: 25000, Phase: "steady", DBSizeBytes: 24 << 20, DBSizeInUseBytes: 18 << 20},
			{AtMs: 40000, Phase: "released after compaction 1", DBSizeBytes: 10 << 20, DBSizeInUseBytes: 9 << 20}},
		Phases: []report.EtcdMetricsPhase{{Phase: "steady", DurationMs: 30000, Puts: 2100, Ranges: 2200, Txns: 2150, ProposalsCommitted: 2105,
			Watchers: 63, BackendCommits: 310, BackendCommitP99Ms: 8.2, WALFsyncs: 2105, WALFsyncP99Ms: 4.1},
			{Phase: "released after compaction 1", DurationMs: 5000, Ranges: 3, Txns: 2, Watchers: 64, SlowWatchers: 1}}}
	judged(r)
	golden(t, "cluster-run.table", renderRun(t, output.FormatTable, r))
	golden(t, "cluster-run.json", render(t, output.FormatJSON, output.Table{}, r))

	// With events in a second embedded etcd the sizes come from Status:
	// no table of etcd's counters, the sizes in a line of their own.
	m := *r.EtcdMetrics
	m.Source, m.Phases = report.EtcdMetricsFromStatus, []report.EtcdMetricsPhase{}
	m.Errors, m.Error, m.FailedAtMs = 2, "context deadline exceeded", []float64{31000, 32000}
	r.EtcdMetrics = &m
	text := strings.Join(strings.Fields(string(renderRun(t, output.FormatTable, r))), " ") // unwrapped
	want := "etcd's db size from Maintenance Status (http://127.0.0.1:2379, every 1.0 s): db size (in use) over 3 samples: first 20 MiB (12 MiB), peak 24 MiB (18 MiB) at 25.0 s in steady, " +
		"last 10 MiB (9.0 MiB); 2 reads failed (issued from 31.0 s to 32.0 s), the first: context deadline exceeded"
	if strings.Contains(text, "etcd phase (/metrics)") || !strings.Contains(text, want) {
		t.Errorf("sizes from Status rendered as:\n%s\nwant no /metrics table and %q", text, want)
	}
}

// renderRun renders r as `lwbench run` prints it on stdout in format f:
// the summary, then (table, markdown) the relists, notes, warnings and
// verdict.
func renderRun(t *testing.T, f output.Format, r *report.RunResult) []byte {
	t.Helper()
	summary, notes := makeRunTable(r)
	var b, errOut bytes.Buffer
	if err := output.Write(&b, f, summary, r); err != nil {
		t.Fatal(err)
	}
	if err := writeRunTail(&b, &errOut, f, r, notes); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// judged is r with the warnings and the verdict Run gives it.
func judged(r *report.RunResult) *report.RunResult {
	r.Warnings = report.BusyWarnings(r.Self)
	r.Verdict = report.RunVerdict(r)
	return r
}

// TestRunResultGolden renders the fixed synthetic RunResult as JSON, as
// the table `lwbench run` prints (with its relists, notes, warnings and
// verdict), as markdown, as CSV and as the interval CSV.
func TestRunResultGolden(t *testing.T) {
	r := syntheticRun()
	r.Self.LoadAverageMax, r.Self.SchedLatencyP99Ms = 3.5, 1.25
	judged(r)
	golden(t, "run.json", render(t, output.FormatJSON, output.Table{}, r))
	golden(t, "run.table", renderRun(t, output.FormatTable, r))
	golden(t, "run.md", renderRun(t, output.FormatMarkdown, r))
	golden(t, "run-intervals.csv", render(t, output.FormatCSV, makeIntervalTable(r.Intervals), nil))
	golden(t, "run.csv", render(t, output.FormatCSV, makeRunCSVTable(r), r))
}

// TestRunTableWidth: no line of what `lwbench run` prints by default is
// wider than 120 columns, for the synthetic run and for one with the
// longest names and figures (a partition-follower fault, long errors,
// five-digit latencies, several relist reasons), and for a run through
// kube-apiserver; what does not fit goes below the table as a note.
// Before, the first relist's requests and the per-member defrag durations
// made run's table 151 columns wide, etcd's requests by phase the kube
// run's 134.
func TestRunTableWidth(t *testing.T) {
	wide := syntheticRun()
	long := "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:2381: connect: connection refused\""
	wide.Writes.Latency, wide.Delivery.FromResponse = latency(12345.5), latency(23456.25)
	wide.Defrag.Error = long
	wide.Members[2].Error = long
	wide.Faults[0].Kind, wide.Faults[0].Member, wide.Faults[0].Error = "partition-follower", "m2", long
	wide.Faults[0].RelistReasons = map[string]int{"compacted": 1, "watch-error": 30, "list-error": 2}
	wide.Cleanup.Error = long
	wide.Relists = append(wide.Relists, report.Relist{Reason: "watch-error", DurationMs: 123456.5, BackoffMs: 1600, Objects: 50000, Cache: true},
		report.Relist{Reason: "list-error", DurationMs: 12.5, BackoffMs: 400})
	wide.Self.LoadAverageMax, wide.Self.SchedLatencyP99Ms = 18.87, 45
	kube := judged(syntheticKubeRun())
	kube.Requests = append(kube.Requests, report.RequestCount{Verb: "watchlist", Outcome: "ok", ResourceVersion: "", Count: 12},
		report.RequestCount{Verb: "watch", Outcome: "ok", ResourceVersion: "notOlderThan", Count: 40})
	kube.Validation.Lost = 2 // a FAIL verdict
	for _, tt := range []struct {
		name   string
		render func(t *testing.T) []byte
	}{
		{"synthetic", func(t *testing.T) []byte { return renderRun(t, output.FormatTable, judged(syntheticRun())) }},
		{"wide", func(t *testing.T) []byte { return renderRun(t, output.FormatTable, judged(wide)) }},
		{"through kube-apiserver", func(t *testing.T) []byte { return renderRun(t, output.FormatTable, kube) }},
		{"servers' metrics of 3 members", func(t *testing.T) []byte { return renderRun(t, output.FormatTable, serversRun()) }},
		{"a --nodes run's etcd requests", func(t *testing.T) []byte { return renderRun(t, output.FormatTable, nodesRunEtcd()) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lines := strings.Split(strings.TrimRight(string(tt.render(t)), "\n"), "\n")
			verdict := -1
			for i, l := range lines {
				if n := len([]rune(l)); n > maxRunTableWidth {
					t.Errorf("line %d is %d columns, want at most %d: %q", i+1, n, maxRunTableWidth, l)
				}
				if strings.HasPrefix(l, "PASS: ") || strings.HasPrefix(l, "FAIL: ") {
					verdict = i
				}
			}
			if verdict < 0 {
				t.Fatalf("no verdict line")
			}
			for _, l := range lines[verdict+1:] {
				if !strings.HasPrefix(l, "  ") {
					t.Errorf("got %q after the verdict, want the verdict last (wrapped lines only)", l)
				}
			}
		})
	}
}

// nodesRunEtcd is a run through kube-apiserver with what the counting
// proxy saw in two real runs of a whole cluster (results/cluster/
// nodes-5000.json, restart-kcm-100-nocache.json): their longest phase
// names, the longest resource kube-apiserver serves and their largest
// request shapes and byte counts, which made the etcd tables 130 and 154
// columns wide.
func nodesRunEtcd() *report.RunResult {
	r := judged(syntheticKubeRun())
	const (
		released = "released after compaction 4"
		restart  = "restart kube-controller-manager"
		vapb     = "validatingadmissionpolicybindings.admissionregistration.k8s.io"
	)
	r.Etcd = []report.EtcdRequests{
		{Phase: released, Method: "Range", Kind: "key limit", Resource: "pods", Requests: 2733, RequestBytes: 139174, Responses: 2733, ResponseBytes: 11955458, Items: 1896},
		{Phase: released, Method: "Range", Kind: "key limit", Resource: vapb, Requests: 5, RequestBytes: 235, Responses: 5, ResponseBytes: 145},
		{Phase: released, Method: "RangeStream", Kind: "prefix limit rev", Resource: "pods", Requests: 1, RequestBytes: 41, Responses: 66, ResponseBytes: 62152713, Items: 10000},
		{Phase: released, Method: "Txn", Kind: "if mod_revision=? then delete else range", Resource: "pods", Requests: 1941, RequestBytes: 316503, Responses: 1941, ResponseBytes: 5724008},
		{Phase: released, Method: "Txn", Kind: "if mod_revision=? then put else range", Resource: "pods", Requests: 5081, RequestBytes: 31445991, Responses: 5081, ResponseBytes: 221206},
		{Phase: released, Method: "Watch", Kind: "events", Resource: "pods", Responses: 6899, ResponseBytes: 71651983, Items: 6899},
		{Phase: released, Method: "Range", Kind: "key limit", Resource: "apiservices.apiregistration.k8s.io", Requests: 5, RequestBytes: 235, Responses: 5, ResponseBytes: 145},
		{Phase: restart, Method: "Range", Kind: "prefix count_only", Resource: vapb, Requests: 1, RequestBytes: 94, Responses: 1, ResponseBytes: 29},
		{Phase: restart, Method: "Watch", Kind: "events", Resource: "pods", Responses: 934, ResponseBytes: 9396937, Items: 934},
	}
	r.EtcdPhases = []report.EtcdPhase{{Phase: released, DurationMs: 286744.695417}, {Phase: restart, DurationMs: 19930.81226}}
	return r
}

// serversRun is a run through kube-apiserver with the widest figures of
// the servers' own /metrics: three etcd members, RPCs that failed, and an
// apiserver's metrics, in phases of the longest names.
func serversRun() *report.RunResult {
	r := syntheticKubeRun()
	const long = "released after compaction 1"
	rpcs := []report.EtcdHandledRPCs{{Service: "etcdserverpb.KV", Method: "Range", Code: "OK", Count: 123456},
		{Service: "etcdserverpb.KV", Method: "Txn", Code: "OK", Count: 234567}, {Service: "etcdserverpb.KV", Method: "Txn", Code: "Unavailable", Count: 12},
		{Service: "etcdserverpb.Lease", Method: "LeaseGrant", Code: "OK", Count: 3000}, {Service: "etcdserverpb.Watch", Method: "Watch", Code: "Canceled", Count: 1000},
		{Service: "etcdserverpb.Maintenance", Method: "Status", Code: "OK", Count: 30}}
	phase := func(name string, k int64) report.EtcdMetricsPhase {
		return report.EtcdMetricsPhase{Phase: name, DurationMs: 30000, Puts: 123456 * k, Deletes: 12345 * k, Ranges: 234567 * k, Txns: 1234 * k,
			ProposalsCommitted: 123456 * k, Watchers: 12345 * k, SlowWatchers: 123 * k, DBSizeBytes: 1234 << 20, BackendCommits: 4000,
			BackendCommitP99Ms: 1234.5, WALFsyncs: 5000, WALFsyncP99Ms: 2345.25, HandledRPCs: rpcs}
	}
	m := &report.EtcdMetrics{Endpoint: "http://127.0.0.1:23790", IntervalMs: 1000, Samples: []report.EtcdDBSample{{AtMs: 1000, Phase: "seed", DBSizeBytes: 1 << 30}},
		Phases: []report.EtcdMetricsPhase{phase("seed", 3), phase(long, 3)}}
	for i := range 3 {
		m.Members = append(m.Members, report.EtcdMemberMetrics{Endpoint: fmt.Sprintf("http://127.0.0.1:2379%d", i),
			Phases: []report.EtcdMetricsPhase{phase("seed", 1), phase(long, 1)}})
	}
	r.EtcdMetrics = m
	r.APIServers[0].Phases = append(r.APIServers[0].Phases, report.APIServerPhaseUsage{Phase: long, DurationMs: 5000, CPUSeconds: 9.5, PeakResidentMemoryBytes: 12e9})
	for _, p := range []string{"seed", long} {
		r.APIServerMetrics = append(r.APIServerMetrics,
			report.APIServerMetric{Server: "apiserver0", Phase: p, Name: "apiserver_request_total", Labels: map[string]string{"verb": "POST", "resource": "pods", "code": "201"}, Value: 1234567},
			report.APIServerMetric{Server: "apiserver0", Phase: p, Name: "apiserver_request_total", Labels: map[string]string{"verb": "PATCH", "resource": "pods", "code": "429"}, Value: 123456},
			report.APIServerMetric{Server: "apiserver0", Phase: p, Name: "etcd_requests_total", Labels: map[string]string{"operation": "create", "resource": "pods"}, Value: 1234567},
			report.APIServerMetric{Server: "apiserver0", Phase: p, Name: "apiserver_resource_objects", Labels: map[string]string{"resource": "pods"}, Value: 123456, Gauge: true})
	}
	return judged(r)
}

// TestServerMetricsTables renders the servers' own /metrics of serversRun:
// the members summed, each member, the RPCs by method with the codes not
// OK named, and the apiserver's requests by verb per phase.
func TestServerMetricsTables(t *testing.T) {
	text := string(renderRun(t, output.FormatTable, serversRun()))
	flat := strings.Join(strings.Fields(text), " ")
	for _, want := range []string{
		"etcd's /metrics (3 members summed, every 1.0 s)",
		"db size (in use) of member 0 over 1 samples",
		"| seed | 370368 | 37035 | 703701 |",                    // the members' sums
		"| released after compaction 1 | 2 | 123456 | 234567 |", // member 2 alone
		"| etcd phase (RPCs handled) | Range | Txn | Put | DeleteRange | Watch | Lease* | other | not OK |",
		"| seed | 123456 | 234579 | 0 | 0 | 1000 | 3000 | 30 | 1012 |",
		"(seed: Txn Unavailable 12, Watch Canceled 1000; released after compaction 1: Txn Unavailable 12, Watch Canceled 1000)",
		"0 http://127.0.0.1:23790, 1 http://127.0.0.1:23791, 2 http://127.0.0.1:23792",
		"| seed | 1358023 | 123456 | 1234567 | 123456 | 0 | 0 | 1234567 | 1.25 | 286 MiB |",
		"| released after compaction 1 | 1358023 | 123456 | 1234567 | 123456 | 0 | 0 | 1234567 | 1.90 | 11 GiB |",
		"objects stored at each phase's end (apiserver_resource_objects summed over resources, a count it refreshes periodically, " +
			"not at each write): apiserver0 seed 123456, released after compaction 1 123456",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
}

// TestCSVIsATable checks that -w csv of run, put and watch is a header
// and a row of the same width, which a CSV reader can use, not
// metric/value pairs; a latency without samples is "-".
func TestCSVIsATable(t *testing.T) {
	put := &report.PutResult{Kind: report.KindPut, SchemaVersion: report.PutSchemaVersion, Target: report.Target{EtcdVersion: "3.7.3", Embedded: true},
		Scenario: report.PutScenario{Workers: 16, Connections: 4, RatePerSecond: 1000}, Writes: report.WriteStats{Planned: 1000, Completed: 1000,
			ThroughputPerSecond: 990, Latency: latency(2)}}
	watch := &report.WatchResult{Kind: report.KindWatch, SchemaVersion: report.WatchSchemaVersion, Target: report.Target{EtcdVersion: "3.7.3"},
		Scenario: report.WatchScenario{Watchers: 100, Streams: 10, Connections: 2}, Writes: report.WriteStats{Completed: 10, Latency: latency(1)},
		ExpectedEvents: 1000, Delivery: report.DeliveryStats{Events: 1000, FromResponse: latency(0.5)}}
	for _, tt := range []struct {
		name    string
		table   output.Table
		wantCol string // a column the table must have
	}{
		{"run", makeRunCSVTable(syntheticRun()), "write_p99_ms"},
		{"put", makePutCSVTable(put), "op_p99_ms"},
		{"watch", makeWatchCSVTable(watch), "delivery_from_commit_p99_ms"},
	} {
		rows, err := csv.NewReader(bytes.NewReader(render(t, output.FormatCSV, tt.table, nil))).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(rows) != 2 || len(rows[0]) < 10 || rows[0][0] == "metric" {
			t.Fatalf("%s: %d rows of %d columns, header %q; want a header and one row of figures", tt.name, len(rows), len(rows[0]), rows[0])
		}
		col := slices.Index(rows[0], tt.wantCol)
		if col < 0 {
			t.Errorf("%s: no column %s in %q", tt.name, tt.wantCol, rows[0])
		}
		if tt.name == "watch" {
			if i := slices.Index(rows[0], "delivery_from_send_p99_ms"); i < 0 || rows[1][i] != "-" {
				t.Errorf("watch: delivery_from_send_p99_ms without samples, want -; header %q row %q", rows[0], rows[1])
			}
		}
	}
	golden(t, "put.csv", render(t, output.FormatCSV, makePutCSVTable(put), put))
}

// TestEmptyRunResultRenders checks that a result with nothing in it
// still lays out every row, with "-" for what was not measured.
func TestEmptyRunResultRenders(t *testing.T) {
	tb, _ := makeRunTable(&report.RunResult{})
	if len(tb.Rows) < 30 || tb.Header[0] != "metric" {
		t.Errorf("run table of an empty result: %d rows, header %q; want 30 or more under metric", len(tb.Rows), tb.Header)
	}
	// Figures not measured show "-", never 0.
	for _, row := range tb.Rows {
		if strings.HasPrefix(row[0], "db size") || strings.HasSuffix(row[0], "latency") || row[0] == "defrag duration" {
			if row[1] != "-" {
				t.Errorf("%s of an empty result = %q, want -", row[0], row[1])
			}
		}
	}
	csvTable := makeRunCSVTable(&report.RunResult{})
	for i, h := range csvTable.Header {
		if strings.HasPrefix(h, "db_") && csvTable.Rows[0][i] != "-" {
			t.Errorf("CSV %s of an empty result = %q, want -", h, csvTable.Rows[0][i])
		}
	}
}

func TestFaultRows(t *testing.T) {
	rows := faultRows([]report.Fault{{Kind: "kill", Member: "m0", Relists: 2, RelistReasons: map[string]int{"watch-error": 2}}})
	found := false
	for _, r := range rows {
		if strings.HasSuffix(r[0], " relists") {
			found = true
			if r[1] != "2 (2 watch-error)" {
				t.Errorf("row %q = %q, want the relists with their reasons", r[0], r[1])
			}
		}
	}
	if !found {
		t.Errorf("no relists row in %q", rows)
	}
}

func probeWindow(p99 float64) compaction.ProbeWindow {
	return compaction.ProbeWindow{FromMs: 1000, ToMs: 5000, Ops: 80, Errors: 2, Timeouts: 1, P50Ms: p99 / 4, P99Ms: p99, MaxMs: 2 * p99, LongestStallMs: 3 * p99}
}

// syntheticExperiments returns one fixed result of each experiment, with
// its case summaries as the experiment fills them.
func syntheticExperiments() []*experiment.Result {
	env := experiment.Environment{CPUModel: "Test CPU", Cores: 2, MemoryBytes: 8 << 30, Kernel: "Linux 6.1", GoVersion: "go1.26", EtcdVersion: "3.7.3"}
	base := func(name string) *experiment.Result {
		return &experiment.Result{Kind: report.KindExperiment, SchemaVersion: experiment.SchemaVersion, Experiment: name,
			StartedAt: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), DurationMs: 60000, Environment: env,
			Target: report.Target{Embedded: true, Endpoints: []string{"http://127.0.0.1:2379"}, EtcdVersion: "3.7.3", Managed: true}}
	}
	writes := report.WriteStats{Completed: 1000, ThroughputPerSecond: 49.5, Latency: latency(2)}

	rs := base(experiment.NameRelistStorm)
	rs.RelistStorm = &experiment.RelistStormResult{Cases: []experiment.RelistStormCase{
		{Objects: 1000, PageSize: 500, Compacted: true, Watchers: 10, Relists: 10, RelistRequests: 20, RelistPages: 20, RelistObjects: 10000,
			RelistBytes: 8e6, Expired: 10, ResyncP50Ms: 900, ResyncMaxMs: 1200, ListP50Ms: 35.25, ListMaxMs: 60, BackoffP50Ms: 800,
			Probe: probeWindow(4), Writes: writes, Validation: experiment.Validation{HistoryEvents: 100}},
		{Objects: 1000, PageSize: 0, Compacted: false, Watchers: 10, Probe: probeWindow(2), Writes: writes}}}
	rs.Cases = []experiment.CaseSummary{
		{Experiment: experiment.NameRelistStorm, Case: "objects=1000 pageSize=500", Relists: 10, RelistObjects: 10000, RelistBytes: 8e6,
			BackoffP50Ms: 800, RelistP50Ms: 35.25, ResyncP50Ms: 900, ResyncMaxMs: 1200, ListRestarts: 10, Compactions: 1, WritesPerSecond: 49.5,
			WriteP99Ms: 8, Probe: probeWindow(4)},
		{Experiment: experiment.NameRelistStorm, Case: "objects=1000 pageSize=none control", WritesPerSecond: 49.5, WriteP99Ms: 8, Probe: probeWindow(2)}}

	co := base(experiment.NameContinuation)
	co.Continuation = &experiment.ContinuationResult{Cases: []experiment.ContinuationCase{
		{PageSize: 500, Fallback: "restart", Lists: 20, RevisionsP50: 120, RequestsP50: 20, BytesP50: 8e6, DurationP50Ms: 110, DurationMaxMs: 150, Probe: probeWindow(3), Writes: writes},
		{PageSize: 500, Fallback: "full-list", Compacting: true, RetainLists: 0.5, CompactEvery: 30, Retain: 60, Compactions: 40, Lists: 20,
			Expired: 12, Restarts: 12, Fallbacks: 12, WastedPages: 36, RevisionsP50: 118, RequestsP50: 21, BytesP50: 8.1e6, DurationP50Ms: 180,
			DurationMaxMs: 300, Probe: probeWindow(5), Writes: writes}}}
	co.Cases = []experiment.CaseSummary{
		{Experiment: experiment.NameContinuation, Case: "pageSize=500 control", ResyncP50Ms: 110, ResyncMaxMs: 150, WritesPerSecond: 49.5, WriteP99Ms: 8, Probe: probeWindow(3)},
		{Experiment: experiment.NameContinuation, Case: "pageSize=500 full-list retain=0.5", ResyncP50Ms: 180, ResyncMaxMs: 300, ListRestarts: 12,
			Compactions: 40, WritesPerSecond: 49.5, WriteP99Ms: 8, Probe: probeWindow(5)}}

	sw := base(experiment.NameCompactionSweep)
	sw.CompactionSweep = &experiment.CompactionSweepResult{Cases: []experiment.CompactionSweepCase{
		{IntervalMs: -1, DBSizeStartBytes: 2e6, DBSizePeakBytes: 30e6, DBSizeEndBytes: 30e6, DBSizeEndInUseBytes: 29e6, Writes: writes, Probe: probeWindow(2)},
		{IntervalMs: 2000, Compactions: 30, CompactionP50Ms: 15.5, CompactionMaxMs: 40, Disconnections: 5, Relists: 2, RelistObjects: 4000, RelistBytes: 3.2e6,
			DBSizeStartBytes: 2e6, DBSizePeakBytes: 9e6, DBSizeEndBytes: 9e6, DBSizeEndInUseBytes: 3e6, Writes: writes, Probe: probeWindow(6),
			Validation: experiment.Validation{Lost: 1}}}}
	sw.Cases = []experiment.CaseSummary{
		{Experiment: experiment.NameCompactionSweep, Case: "interval=never", WritesPerSecond: 49.5, WriteP99Ms: 8, Probe: probeWindow(2), DBSizeBeforeBytes: 2e6, DBSizeAfterBytes: 30e6},
		{Experiment: experiment.NameCompactionSweep, Case: "interval=2s", Relists: 2, RelistObjects: 4000, RelistBytes: 3.2e6, Compactions: 30,
			WritesPerSecond: 49.5, WriteP99Ms: 8, Probe: probeWindow(6), DBSizeBeforeBytes: 2e6, DBSizeAfterBytes: 9e6, LostEvents: 1}}

	df := base(experiment.NameDefragStall)
	df.DefragStall = &experiment.DefragStallResult{Cases: []experiment.DefragStallCase{
		{TargetBytes: 100e6, Keys: 12000, CompactionMs: 250, DefragMs: 1800, BeforeBytes: 101e6, BeforeInUseBytes: 51e6, AfterBytes: 51e6, AfterInUseBytes: 50e6, Probe: probeWindow(1800)},
		{TargetBytes: 100e6, Overlapping: true, Keys: 12000, CompactionMs: 260, OverlapMs: 120, DefragMs: 1900, BeforeBytes: 101e6, BeforeInUseBytes: 60e6,
			AfterBytes: 52e6, AfterInUseBytes: 51e6, Probe: probeWindow(1900)}}}
	df.Cases = []experiment.CaseSummary{
		{Experiment: experiment.NameDefragStall, Case: "size=100MB", Compactions: 1, Defrags: 1, DefragMs: 1800, Probe: probeWindow(1800), DBSizeBeforeBytes: 101e6, DBSizeAfterBytes: 51e6},
		{Experiment: experiment.NameDefragStall, Case: "size=100MB overlapping", Compactions: 1, Defrags: 1, DefragMs: 1900, Probe: probeWindow(1900), DBSizeBeforeBytes: 101e6, DBSizeAfterBytes: 52e6}}

	cu := base(experiment.NameCatchup)
	cu.Catchup = &experiment.CatchupResult{Cases: []experiment.CatchupCase{
		{Behind: 1000, Revisions: 1000, CatchupMs: 150, Events: 1000, Responses: 2, EventBytes: 1.6e6, RevisionsPerSecond: 6667, RelistMs: 30.5,
			RelistPages: 2, RelistObjects: 1000, RelistBytes: 8e5, RelistUnpaginatedMs: 25.25, Probe: probeWindow(3)}}}
	cu.Cases = []experiment.CaseSummary{{Experiment: experiment.NameCatchup, Case: "behind=1000", ResyncP50Ms: 150, ResyncMaxMs: 150,
		RelistObjects: 1000, RelistBytes: 8e5, Probe: probeWindow(3)}}
	return []*experiment.Result{rs, co, sw, df, cu}
}

// renderLayout writes l in format f.
func renderLayout(t *testing.T, f output.Format, l layout, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := l.write(&b, f, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// assertWidth fails for every line of text wider than maxTableWidth
// columns.
func assertWidth(t *testing.T, name string, text []byte) {
	t.Helper()
	for i, l := range strings.Split(string(text), "\n") {
		if n := utf8.RuneCountInString(l); n > maxTableWidth {
			t.Errorf("%s line %d is %d columns wide, want at most %d: %q", name, i+1, n, maxTableWidth, l)
		}
	}
}

// TestExperimentTablesGolden renders each experiment's own table as its
// command prints it, no line wider than 120 columns, the relist storm
// through kube-apiserver (two more columns) too.
func TestExperimentTablesGolden(t *testing.T) {
	results := syntheticExperiments()
	kube := *results[0]
	kube.APIServer = &report.APIServerTarget{Version: "v1.37.2", Servers: 1, Managed: true, ClientWatchList: "off"}
	kube.Label = "relist-storm-kube"
	for _, r := range append(results, &kube) {
		t.Run(r.Name(), func(t *testing.T) {
			got := renderLayout(t, output.FormatTable, experimentLayout(r), r)
			assertWidth(t, r.Name(), got)
			golden(t, r.Name()+".table", got)
		})
	}
}

// TestComparisonTableGolden renders every experiment, a run and a run
// through kube-apiserver in the comparison `lwbench report` prints, no
// line wider than 120 columns; the wide table is kept for markdown and
// CSV.
func TestComparisonTableGolden(t *testing.T) {
	results := append(syntheticExperiments(), experiment.FromRun(syntheticRun(), "run"),
		experiment.FromRun(syntheticKubeRun(), "kube-run"))
	got := renderLayout(t, output.FormatTable, comparisonLayout(results), nil)
	assertWidth(t, "comparison.table", got)
	golden(t, "comparison.table", got)
	golden(t, "comparison.md", renderLayout(t, output.FormatMarkdown, comparisonLayout(results), nil))
}

// TestEveryExperimentDescribed checks that each experiment of
// experiment.Specs has a command, its own table (not the comparison's)
// and a synthetic result here, so that adding an experiment without one
// of them fails.
func TestEveryExperimentDescribed(t *testing.T) {
	root := NewRootCommand()
	synthetic := map[string]*experiment.Result{}
	for _, r := range syntheticExperiments() {
		synthetic[r.Experiment] = r
	}
	comparison := makeComparisonTable(nil).Header
	for _, s := range experiment.Specs {
		if s.Name == experiment.NameRun || s.Name == experiment.NameKubeRun {
			continue
		}
		if cmd, _, err := root.Find([]string{s.Name}); err != nil || cmd.Name() != s.Name {
			t.Errorf("%s: no lwbench subcommand", s.Name)
		}
		r, ok := synthetic[s.Name]
		if !ok {
			t.Errorf("%s: no synthetic result in syntheticExperiments", s.Name)
			continue
		}
		if h := makeExperimentTable(r).Header; slices.Equal(h, comparison) {
			t.Errorf("%s: its table is the comparison table; want its own", s.Name)
		}
		if len(s.Figures) == 0 {
			t.Errorf("%s: no figures in experiment.Specs", s.Name)
		}
	}
	if len(experiment.Specs) != len(experiment.Names)+2 {
		t.Errorf("experiment.Specs has %d entries, want the %d experiments, run and kube-run", len(experiment.Specs), len(experiment.Names))
	}
}

// TestListTableWidth holds `lwbench list`'s table to maxTableWidth with
// the largest figures a list run prints (a million objects, unpaginated,
// count-only, seconds-long lists), and its CSV to exact bytes.
func TestListTableWidth(t *testing.T) {
	r := &report.ListResult{Rows: []report.ListRow{
		{Objects: 1_000_000, Mode: "count-only", PageSize: 10000, Pages: 100, ObjectsReturned: 1_000_000, ResponseBytes: 4_123_456_789,
			Latency: report.Latency{P50Ms: 12345.67, P99Ms: 23456.78, MaxMs: 34567.89}, ObjectsPerSecond: 12_345_678, MegabytesPerSecond: 12345.6, Errors: 1000},
	}}
	assertWidth(t, "list table", render(t, output.FormatTable, makeListTextTable(r), r))
	if csv := string(render(t, output.FormatCSV, makeListTable(r), r)); !strings.Contains(csv, ",4123456789,") {
		t.Errorf("list CSV %q: want the exact response bytes", csv)
	}
}

// TestModelCompactionsRow renders the compactions of a cluster's model
// (lwbench run --nodes --cluster-model: no kube-apiserver, its
// compactor's compactions) as a run through kube-apiserver shows them:
// kube-apiserver's, each with its time.
func TestModelCompactionsRow(t *testing.T) {
	r := syntheticRun()
	r.Cluster = &report.ClusterScenario{Nodes: 10, Namespaces: 1, Deployments: 3, Pods: 40, PodChurn: 2,
		Model: &report.ClusterModel{NodeTo: 10, NamespaceTo: 1, Singletons: true}}
	r.Compactions = []report.Compaction{{N: 1, AtMs: 12000, Revision: 4000}, {N: 2, AtMs: 22000, Revision: 7000}}
	summary, _ := makeRunTable(r)
	var got string
	for _, row := range summary.Rows {
		if strings.Contains(row[0], "compactions at revision") {
			got = row[0] + ": " + row[1]
		}
	}
	if want := "kube-apiserver's compactions at revision: 4000 at 12.0 s, 7000 at 22.0 s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
