package report

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// clusterWorkers returns 3 workers' results of one cluster model of 10
// nodes and 2 namespaces, divided as pkg/shard divides them (nodes 0-3,
// 4-6, 7-9; namespaces 0, 1, none), each with its own counting proxy's
// rows and phases.
func clusterWorkers(t *testing.T) []*RunResult {
	t.Helper()
	rs, _ := workerResults(t, rand.New(rand.NewPCG(13, 14)), 3)
	rollouts := 20
	nodes := [][2]int{{0, 4}, {4, 7}, {7, 10}}
	nss := [][2]int{{0, 1}, {1, 2}, {2, 2}}
	for i, r := range rs {
		r.Cluster = &ClusterScenario{Nodes: 10, Namespaces: 2, Deployments: 8, Services: 4, Pods: 60, PodChurn: 10, RolloutPercent: &rollouts,
			PodsRunning: 20 + i, SeedMs: 1000 * float64(i+1),
			Model: &ClusterModel{NodeFrom: nodes[i][0], NodeTo: nodes[i][1], NamespaceFrom: nss[i][0], NamespaceTo: nss[i][1], Deployments: 4 * (nss[i][1] - nss[i][0]),
				Singletons: i == 0, NodeLeaseRenewals: 3 * int64(nodes[i][1]-nodes[i][0]), NodesRenewed: nodes[i][1] - nodes[i][0],
				RenewalsPerNodeMin: 3 - int64(i%2), RenewalsPerNodeMax: 3 + int64(i), NodeLeaseIntervalMinMs: 10_050 - float64(i), NodeLeaseIntervalMaxMs: 10_300 + float64(i),
				NodeLeaseMs: 30_000 + float64(i), PodsCreated: 25, PodsDeleted: 5, Events: 40}}
		start := testStart.Add(time.Duration(i) * 100 * time.Millisecond)
		r.Etcd = []EtcdRequests{{Phase: "steady", Method: "Txn", Kind: "txn put", Resource: "leases.coordination.k8s.io", Requests: 10 + int64(i), Errors: int64(i)}}
		if i == 2 {
			r.Etcd = append(r.Etcd, EtcdRequests{Phase: "steady", Method: "Range", Kind: "range", Resource: "pods", Requests: 7})
		}
		r.EtcdPhases = []EtcdPhase{{Phase: "steady", StartedAt: start, DurationMs: 5000}}
	}
	return rs
}

// TestMergeRunsClusterModel: the workers' parts of a cluster's model sum
// into the whole (pods Running, the model's counts, its blocks the
// whole's), the seeding's time is the longest, the per-node extremes kept
// at their extremes, each worker's own proxy rows summed and its phases
// spanning all; each worker's part is kept in Workers.
func TestMergeRunsClusterModel(t *testing.T) {
	m, err := MergeRuns(clusterWorkers(t))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Cluster
	if c == nil || c.Model == nil {
		t.Fatalf("merged cluster %+v: want the model's counts", c)
	}
	if c.Nodes != 10 || c.PodsRunning != 63 || c.SeedMs != 3000 {
		t.Errorf("merged cluster: nodes %d, pods Running %d, seed %v ms: want 10, 63 (20+21+22), 3000", c.Nodes, c.PodsRunning, c.SeedMs)
	}
	want := ClusterModel{NodeFrom: 0, NodeTo: 10, NamespaceFrom: 0, NamespaceTo: 2, Deployments: 8, Singletons: true,
		NodeLeaseRenewals: 30, NodesRenewed: 10, RenewalsPerNodeMin: 2, RenewalsPerNodeMax: 5,
		NodeLeaseIntervalMinMs: 10_048, NodeLeaseIntervalMaxMs: 10_302, NodeLeaseMs: 30_002, PodsCreated: 75, PodsDeleted: 15, Events: 120}
	if *c.Model != want {
		t.Errorf("merged model\n got %+v\nwant %+v", *c.Model, want)
	}
	if len(m.Etcd) != 2 || m.Etcd[0].Requests != 33 || m.Etcd[0].Errors != 3 || m.Etcd[1].Resource != "pods" || m.Etcd[1].Requests != 7 {
		t.Errorf("merged etcd rows %+v: want the lease Txns summed (33 requests, 3 errors), then shard 2's pods Range", m.Etcd)
	}
	if len(m.EtcdPhases) != 1 || !m.EtcdPhases[0].StartedAt.Equal(testStart) || m.EtcdPhases[0].DurationMs != 5200 {
		t.Errorf("merged phases %+v: want steady from shard 0's start to shard 2's end, 5200 ms", m.EtcdPhases)
	}
	for i, w := range m.Workers {
		if w.ClusterModel == nil || w.ClusterModel.NodeFrom != []int{0, 4, 7}[i] {
			t.Errorf("worker %d's part %+v: want its own", i, w.ClusterModel)
		}
	}
}

// TestMergeRunsClusterModelErrors: parts that are not one cluster's
// division are refused, naming what differs.
func TestMergeRunsClusterModelErrors(t *testing.T) {
	tests := []struct {
		name    string
		change  func(rs []*RunResult)
		wantErr string
	}{
		{"another plan", func(rs []*RunResult) { rs[1].Cluster.Nodes = 11 }, "shard 1 planned another cluster than shard 0 (cluster.nodes differs)"},
		{"nodes overlap", func(rs []*RunResult) { rs[1].Cluster.Model.NodeFrom = 3 }, "shard 1 drove nodes 3 to 7, the shards before it up to 4"},
		{"nodes short", func(rs []*RunResult) { rs[2].Cluster.Model.NodeTo = 9 }, "the shards drove nodes 0 to 9 of 10"},
		{"namespaces gap", func(rs []*RunResult) { rs[1].Cluster.Model.NamespaceFrom = 2 }, "shard 1 drove namespaces 2 to 2"},
		{"singletons twice", func(rs []*RunResult) { rs[2].Cluster.Model.Singletons = true }, "2 shards sent the cluster's singletons"},
		{"model missing", func(rs []*RunResult) { rs[1].Cluster.Model = nil }, "2 of 3 shards have the cluster model's counts"},
		{"cluster missing", func(rs []*RunResult) { rs[2].Cluster = nil }, "shard 2 and shard 0 disagree"},
		{"node health on shard 1", func(rs []*RunResult) { rs[1].Cluster.NodeHealth = &NodeHealth{Nodes: 1} }, "shard 1 has a real control plane's node health"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := clusterWorkers(t)
			tt.change(rs)
			_, err := MergeRuns(rs)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrNotOneLoad) {
				t.Errorf("got %v, want an error containing %q wrapping ErrNotOneLoad", err, tt.wantErr)
			}
		})
	}
}

// TestMergeRunsOneProxy: without the model's parts, the counting proxy's
// rows are one worker's (the proxy the workers shared counted them all)
// and two workers with rows are refused.
func TestMergeRunsOneProxy(t *testing.T) {
	rs := clusterWorkers(t)
	for _, r := range rs {
		r.Cluster = nil
	}
	if _, err := MergeRuns(rs); err == nil || !strings.Contains(err.Error(), "both have etcd") {
		t.Errorf("got %v, want shards with etcd rows refused", err)
	}
}
