package kubeload_test

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/embedetcd"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestClusterRun runs a small cluster's load through the one script: a
// real control plane and KWOK (StackConfig.ControlPlane) in front of an
// embedded etcd behind the counting proxy, 10 KWOK nodes with CL2's
// objects for 3 pods per node, every pod Running, then churn, with two
// informers validated against etcd's history and the kubelet watches of
// two nodes. Nothing may be lost, the churn's writes must be done, the
// node Leases must reach etcd (the counting proxy, by resource) at one per
// node every 10 s within 10 %, compactions must be seen, etcd's /metrics
// sampled, and the components metered.
func TestClusterRun(t *testing.T) {
	bins := apiservertest.ControlPlaneBinaries(t)
	srv := etcdtest.RunEtcd(t)
	target := watchload.Target{Endpoints: srv.Endpoints, Embedded: true, Managed: true,
		Dial: func(ctx context.Context) (*clientv3.Client, error) {
			return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		}}
	st, stop, err := kubeload.StartStack(t.Context(), target, kubeload.StackConfig{BinDir: bins.KubeAPIServer, ControlPlane: &bins,
		WatchCache: true, CountEtcd: true, EtcdCompactionInterval: 10 * time.Second})
	t.Cleanup(stop)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := clusterload.NewPlan(clusterload.Options{Nodes: 10, PodsPerNode: 3})
	if err != nil {
		t.Fatal(err)
	}
	lo := watchload.Options{Watchers: 2, WatchResources: []string{watchload.ResourcePods}, Duration: 30 * time.Second,
		WriterConcurrency: 2, Seed: 1, SyncTimeout: time.Minute, Logf: t.Logf}
	res, err := runAPI(t.Context(), st, lo, kubeload.Options{Cluster: &kubeload.ClusterOptions{Plan: plan, PodChurn: 4, QPS: 50,
		KubeletWatches: 2, RunningTimeout: 2 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cluster
	if c == nil || c.PodsRunning != plan.Pods()+plan.Nodes || c.KubeletWatchNodes != 2 || c.KubeletWatchObjects == 0 {
		t.Fatalf("got cluster %+v, want %d pods Running and the kubelet watches of 2 nodes receiving objects", c, plan.Pods()+plan.Nodes)
	}
	if !res.Validation.OK() {
		t.Errorf("validation failed: %s", res.Validation.Summary())
	}
	if res.Writes.Completed == 0 || res.Writes.Errors > 0 {
		t.Errorf("churn: got %d writes done, %d errors (%q)", res.Writes.Completed, res.Writes.Errors, res.Writes.ErrorSamples)
	}
	var leaseWrites int64
	for _, r := range res.Etcd {
		if r.Resource == "leases.coordination.k8s.io" && r.Method == "Txn" {
			leaseWrites += r.Requests
		}
	}
	if leaseWrites < 10 {
		t.Errorf("got %d lease writes at etcd, want at least one per node", leaseWrites)
	}
	checkPeriodic(t, res, plan.Nodes)
	if len(res.Components) != 3 {
		t.Fatalf("got %d components metered, want kube-controller-manager, kube-scheduler and kwok", len(res.Components))
	}
	for _, u := range res.Components {
		if u.CPUSeconds <= 0 || u.PeakResidentMemoryBytes <= 0 {
			t.Errorf("component %s: got %+v, want its CPU and memory", u.Server, u)
		}
	}
}

// TestClusterExperiments runs a small cluster with the experiments of a
// cluster run: 64 MiB of filler, a defragmentation at a fixed time and a
// restart of kube-apiserver, whose watch cache is then rebuilt from etcd;
// events go to a second etcd (--etcd-servers-overrides), as kops runs
// them, and none to the main one.
// The defragmentation must copy the filler, the restart must come back
// and its phase must show the watch cache's LIST of pods and nodes at
// etcd, the node Leases must be renewed every 10-10.4 s
// (controlplane.NodeLeaseRenewInterval) and no node may go NotReady (no
// stall here comes near node-monitor-grace-period), and the meter must
// follow kube-apiserver's new process. kube-controller-manager and
// kube-scheduler may exit when kube-apiserver is away longer than their
// renew deadline; they are started again (ComponentExit), and nothing
// is lost either way.
func TestClusterExperiments(t *testing.T) {
	bins := apiservertest.ControlPlaneBinaries(t)
	srv := etcdtest.RunEtcd(t)
	target := watchload.Target{Endpoints: srv.Endpoints, Embedded: true, Managed: true,
		Dial: func(ctx context.Context) (*clientv3.Client, error) {
			return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		}}
	events := etcdtest.RunEtcd(t)
	st, stop, err := kubeload.StartStack(t.Context(), target, kubeload.StackConfig{BinDir: bins.KubeAPIServer, ControlPlane: &bins,
		WatchCache: true, CountEtcd: true, EtcdCompactionInterval: time.Minute, Logf: t.Logf, EventsEtcd: events.Endpoints})
	t.Cleanup(stop)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := clusterload.NewPlan(clusterload.Options{Nodes: 10, PodsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	lo := watchload.Options{Watchers: 2, WatchResources: []string{watchload.ResourcePods}, Duration: 50 * time.Second,
		WriterConcurrency: 2, Seed: 1, SyncTimeout: time.Minute, Logf: t.Logf}
	const filler = 64 << 20
	res, err := runAPI(t.Context(), st, lo, kubeload.Options{Cluster: &kubeload.ClusterOptions{Plan: plan, PodChurn: 4, QPS: 50,
		RunningTimeout: 2 * time.Minute, FillerBytes: filler, DefragAt: 3 * time.Second, Restart: "kube-apiserver", RestartAt: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Validation.OK() {
		t.Errorf("validation failed: %s", res.Validation.Summary())
	}
	if d := res.Defrag; d == nil || len(d.Members) != 1 || d.Members[0].BeforeInUseBytes < filler || d.Members[0].Error != "" {
		t.Errorf("got defrag %+v, want one member of at least %d bytes (the filler)", d, filler)
	}
	c := res.Cluster
	if rs := c.Restart; rs == nil || rs.Component != "kube-apiserver" || rs.Error != "" || rs.DownMs <= 0 {
		t.Fatalf("got restart %+v, want kube-apiserver back", rs)
	}
	relisted := map[string]bool{}
	for _, r := range res.Etcd {
		if r.Phase == "restart kube-apiserver" && (r.Method == "Range" || r.Method == "RangeStream") && r.Items > 0 {
			relisted[r.Resource] = true
		}
	}
	if !relisted["pods"] || !relisted["nodes"] {
		t.Errorf("etcd reads with keys while kube-apiserver restarted: got %v, want pods and nodes (the watch cache's initial LISTs)", relisted)
	}
	// Between the defragmentation and the restart nothing stalls the
	// Leases: KWOK's interval.
	h := c.NodeHealth
	var between *report.NodeHealthPhase
	for i, p := range h.Phases {
		if p.Phase == "after defrag" {
			between = &h.Phases[i]
		}
	}
	if h.Nodes != plan.Nodes || between == nil || between.Renewals < int64(plan.Nodes) || between.IntervalP50Ms < 9500 || between.IntervalP50Ms > 11000 {
		t.Errorf("got node health %+v, want the Leases of %d nodes renewed every 10-10.4 s after the defragmentation", h, plan.Nodes)
	}
	if h.NotReady != 0 || h.LeaseExpired != 0 {
		t.Errorf("got %d nodes NotReady and %d past their Lease, want none", h.NotReady, h.LeaseExpired)
	}
	var after bool
	for _, u := range res.APIServers {
		for _, p := range u.Phases {
			after = after || (p.Phase == "after restart" && p.CPUSeconds > 0)
		}
	}
	if !after {
		t.Errorf("got apiserver usage %+v, want CPU metered after the restart (its new process)", res.APIServers)
	}
	count := func(srv *embedetcd.Server) int64 {
		r, err := etcdtest.NewClient(t, srv).Get(t.Context(), "/registry/events/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return r.Count
	}
	if inMain, inEvents := count(srv), count(events); inMain != 0 || inEvents == 0 {
		t.Errorf("got %d events in the main etcd and %d in the events etcd, want all in the events etcd", inMain, inEvents)
	}
	if len(c.EventsEtcd) != 1 {
		t.Errorf("got events etcd %v in the result, want the second etcd's URL", c.EventsEtcd)
	}
	// Both etcds run in the test process and share its Prometheus
	// registry: their /metrics cannot tell them apart, and the run reads
	// the main member's db size with Status instead, and says so.
	m := res.EtcdMetrics
	if m == nil || m.Source != report.EtcdMetricsFromStatus || len(m.FailedAtMs) != m.Errors || len(m.Samples) == 0 || len(m.Phases) != 0 ||
		!slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "both embedded members") }) {
		t.Errorf("got etcd metrics %+v and warnings %q, want the db sizes from Status, no phases, and a warning saying why", m, res.Warnings)
	} else if d := res.Defrag; d != nil && slices.ContainsFunc(m.FailedAtMs, func(at float64) bool {
		// Status waits while the defragmentation holds the backend's
		// read lock: a read issued within one interval before it, or
		// during it, may time out; no other read may fail.
		return at < d.AtMs-m.IntervalMs || at > d.AtMs+d.DurationMs+m.IntervalMs
	}) {
		t.Errorf("Status reads failed at %v ms (%s), want failures only within the defragmentation (%.0f ms for %.0f ms)", m.FailedAtMs, m.Error, d.AtMs, d.DurationMs)
	} else if peak := slices.MaxFunc(m.Samples, func(a, b report.EtcdDBSample) int { return cmp.Compare(a.DBSizeBytes, b.DBSizeBytes) }); peak.DBSizeBytes < filler {
		t.Errorf("the main etcd's db size peaked at %d bytes, want its %d bytes of filler", peak.DBSizeBytes, filler)
	}
	for _, e := range c.Exits {
		t.Logf("%s exited at %.1f s (%s) and was started again", e.Component, e.AtMs/1000, e.Status)
	}
}

// checkPeriodic checks what a cluster's run says of etcd's periodic
// traffic and its own /metrics: node Lease renewals at nodes/10 s within
// 10 %, both leaders' renewals, compactions seen, db sizes sampled, and
// the writes per resource over time holding the Leases.
func checkPeriodic(t *testing.T, res *report.RunResult, nodes int) {
	t.Helper()
	got := map[string]report.PeriodicTraffic{}
	for _, p := range res.PeriodicTraffic {
		got[p.Source] = p
	}
	if p := got["node Lease renewals"]; !p.Seen || p.Instances != nodes || math.Abs(p.ObservedIntervalMs-10000) > 1000 {
		t.Errorf("node Lease renewals: got %+v, want %d nodes renewing every 10 s within 10 %%", p, nodes)
	}
	if p := got["leader-election Lease renewals"]; !p.Seen || p.Instances != 2 {
		t.Errorf("leader-election Lease renewals: got %+v, want kube-controller-manager's and kube-scheduler's", p)
	}
	if p := got["compactions"]; !p.Seen || len(res.Compactions) == 0 {
		t.Errorf("compactions: got %+v and %d compactions, want some seen", p, len(res.Compactions))
	}
	m := res.EtcdMetrics
	if m == nil || m.Error != "" || len(m.Samples) < 10 || len(m.Phases) == 0 {
		t.Fatalf("etcd's /metrics: got %+v, want 10 samples or more, phases, no error", m)
	}
	for _, s := range m.Samples {
		if s.DBSizeBytes <= 0 || s.DBSizeInUseBytes <= 0 || s.Phase == "" {
			t.Fatalf("db size sample %+v: want sizes and a phase", s)
		}
	}
	if w := res.EtcdWrites; w == nil || !slices.Contains(w.Resources, "leases.coordination.k8s.io") || len(w.Samples) < 10 {
		t.Errorf("writes over time: got %+v, want 10 samples or more with the Leases", w)
	}
}
