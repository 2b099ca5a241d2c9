package command

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestRunWorkersClusterFlags: --workers divides a cluster's load
// (--nodes, modelled or through the coordinator's control plane), at
// least a node per worker, and refuses the cluster experiments in one
// line.
func TestRunWorkersClusterFlags(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"model", []string{"--workers", "3", "--nodes", "6", "--cluster-model", "--nodes-per-namespace", "2"}, ""},
		{"real control plane", []string{"--workers", "2", "--nodes", "50"}, ""},
		{"an experiment", []string{"--workers", "2", "--nodes", "50", "--defrag-at", "1m"}, "--workers cannot be used with --defrag-at: a cluster's experiments are not divided into shards"},
		{"more workers than nodes", []string{"--workers", "3", "--nodes", "2", "--cluster-model"}, "--workers 3 with --nodes 2: each worker drives a block of the nodes and needs at least one"},
		{"nodes per namespace", []string{"--nodes", "2", "--cluster-model", "--nodes-per-namespace", "0"}, "--nodes-per-namespace: Invalid value: 0"},
		{"nodes per namespace without nodes", []string{"--nodes-per-namespace", "2"}, "--nodes-per-namespace needs --nodes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := &cobra.Command{Use: "lwbench"}
			cli.PrepareRoot(root)
			root.AddCommand(newRunCommand(func(*cobra.Command, *runOptions) error { return nil }))
			var errOut bytes.Buffer
			code := cli.Run(root, append([]string{"run"}, tt.args...), &errOut)
			switch {
			case tt.wantErr == "" && code != 0:
				t.Errorf("exit %d: %s", code, errOut.String())
			case tt.wantErr != "" && (code != cli.ExitUsage || !strings.Contains(errOut.String(), tt.wantErr) || strings.Count(strings.TrimSpace(errOut.String()), "\n") > 0):
				t.Errorf("exit %d, stderr %q: want %d and one line mentioning %q", code, errOut.String(), cli.ExitUsage, tt.wantErr)
			}
		})
	}
}

// TestRunWorkersClusterModel runs `lwbench run --workers 3 --nodes 6
// --cluster-model` against the embedded member: three worker processes
// (this test binary as lwbench) each drive two nodes and one of the three
// namespaces, shard 0 the cluster's singletons. The merged result
// accounts for every shard: the pods seeded are the whole plan's, each
// worker wrote its share of the churn, all completed, and the merged
// counts are the workers' sums; every node's Lease was renewed by one
// worker, once per period (10 to 10.4 s apart, plus a write's latency);
// what each worker's counting proxy saw of the Lease writes is what the
// workers counted, with no failed compare (no two writers of a Lease);
// nothing failed or was left unsent.
func TestRunWorkersClusterModel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd and three worker processes for about a minute; skipped under -short")
	}
	t.Setenv(subprocessEnv, "1") // the workers: this binary as lwbench
	const nodes, churn, duration = 6, 4.0, 25
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, []string{"run", "--workers", "3", "--unsafe-no-fsync", "--nodes", "6", "--cluster-model", "--nodes-per-namespace", "2",
		"--pods-per-node", "5", "--pod-churn", "4", "--create-qps", "100", "--watchers", "3", "--duration", "25s", "--compaction-interval", "5s",
		"-w", "json"}, &errOut)
	if code != 0 {
		t.Fatalf("lwbench run --workers 3 --nodes 6 --cluster-model: exit %d:\n%s", code, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v\n%s", err, out.String())
	}
	plan, err := clusterload.NewPlan(clusterload.Options{Nodes: nodes, PodsPerNode: 5, NodesPerNamespace: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cluster
	if c == nil || c.Model == nil || len(res.Workers) != 3 {
		t.Fatalf("cluster %+v, %d workers: want the model's counts and 3 workers", c, len(res.Workers))
	}
	if want := plan.Pods() + nodes; c.PodsRunning != want || c.Namespaces != 3 {
		t.Errorf("%d pods Running after the seeding in %d namespaces, want the whole plan's %d in 3", c.PodsRunning, c.Namespaces, want)
	}

	// Each worker its block, its share of the churn, all completed; the
	// merged counts the sums of the workers'.
	var sum report.ClusterModel
	var planned, completed int64
	for i, w := range res.Workers {
		m := w.ClusterModel
		if m == nil {
			t.Fatalf("worker %d has no part of the cluster model", i)
		}
		if m.NodeFrom != 2*i || m.NodeTo != 2*i+2 || m.NamespaceFrom != i || m.NamespaceTo != i+1 || m.Singletons != (i == 0) {
			t.Errorf("worker %d drove %+v: want nodes %d to %d, namespace %d, singletons %v", i, *m, 2*i, 2*i+2, i, i == 0)
		}
		if w.Writes.Planned == 0 || w.Writes.Completed != w.Writes.Planned || w.Writes.Errors != 0 {
			t.Errorf("worker %d: writes %+v: want its share of the churn, all completed", i, w.Writes)
		}
		if m.PodsCreated == 0 || m.NodesRenewed != 2 || m.PeriodicFailures != 0 {
			t.Errorf("worker %d: %d pods created, %d nodes renewed, %d periodic failures: want pods, its 2 nodes, none", i, m.PodsCreated, m.NodesRenewed, m.PeriodicFailures)
		}
		// Once per period: over NodeLeaseMs, first within a period of
		// the start, then every 10 to 10.4 s plus a write's latency.
		if periods := int64(m.NodeLeaseMs / 10_000); m.RenewalsPerNodeMax > periods+1 || m.RenewalsPerNodeMin < max(1, int64((m.NodeLeaseMs-10_000)/12_000)) {
			t.Errorf("worker %d: %d to %d renewals per node in %.1f s: want one per 10 s period", i, m.RenewalsPerNodeMin, m.RenewalsPerNodeMax, m.NodeLeaseMs/1000)
		}
		planned += w.Writes.Planned
		completed += w.Writes.Completed
		sum.NodeLeaseRenewals += m.NodeLeaseRenewals
		sum.NodesRenewed += m.NodesRenewed
		sum.ControlPlaneLeaseRenewals += m.ControlPlaneLeaseRenewals
		sum.PodsCreated += m.PodsCreated
		sum.PodsDeleted += m.PodsDeleted
		sum.Events += m.Events
		sum.NodeStatusWrites += m.NodeStatusWrites
	}
	wantPlanned := int64(churn / plan.PodsPerOp() * duration)
	if planned != wantPlanned || res.Writes.Planned != planned || res.Writes.Completed != completed || res.Writes.Errors != 0 || res.Writes.Unsent != 0 {
		t.Errorf("writes planned %d by the workers, merged %+v: want the whole churn's %d, all completed, none failed or unsent", planned, res.Writes, wantPlanned)
	}
	m := c.Model
	if m.NodeLeaseRenewals != sum.NodeLeaseRenewals || m.NodesRenewed != nodes || m.ControlPlaneLeaseRenewals != sum.ControlPlaneLeaseRenewals ||
		m.PodsCreated != sum.PodsCreated || m.PodsDeleted != sum.PodsDeleted || m.Events != sum.Events || m.NodeStatusWrites != sum.NodeStatusWrites {
		t.Errorf("merged model %+v: want the workers' sums %+v, every one of the %d nodes renewed", *m, sum, nodes)
	}
	if m.ControlPlaneLeaseRenewals == 0 || m.NodeLeaseIntervalMinMs < 10_000 || m.NodeLeaseIntervalMaxMs > 10_400+1_500 {
		t.Errorf("control-plane renewals %d, node Lease intervals %.0f to %.0f ms: want leader elections renewed and every node's 10 to 10.4 s apart (+ latency)",
			m.ControlPlaneLeaseRenewals, m.NodeLeaseIntervalMinMs, m.NodeLeaseIntervalMaxMs)
	}

	// What etcd received of the Leases, counted by each worker's proxy
	// and summed: the nodes' and control plane's creates and every
	// renewal the workers counted, none a failed compare.
	var leaseTxns, failed int64
	for _, e := range res.Etcd {
		if e.Method == "Txn" && e.Resource == "leases.coordination.k8s.io" {
			leaseTxns += e.Requests - e.Errors
			failed += e.FailedCompares
		}
	}
	t.Logf("merged model %+v; %d Lease Txns at etcd", *m, leaseTxns)
	if want := int64(nodes) + 3 + m.NodeLeaseRenewals + m.ControlPlaneLeaseRenewals; leaseTxns != want || failed != 0 {
		t.Errorf("etcd received %d Lease Txns (%d failed compares), want %d (%d nodes' and 3 control-plane creates, %d node and %d control-plane renewals) and none failed",
			leaseTxns, failed, want, nodes, m.NodeLeaseRenewals, m.ControlPlaneLeaseRenewals)
	}
	// Shard 0 alone runs kube-apiserver's compactor (every 5 s here).
	compacted := map[string]int{}
	for _, line := range strings.Split(errOut.String(), "\n") {
		if w, _, ok := strings.Cut(line, ": "); ok && strings.Contains(line, "kube-apiserver's compactor compacted etcd") {
			compacted[w[strings.LastIndex(w, " ")+1:]]++
		}
	}
	if compacted["0"] == 0 || len(compacted) != 1 {
		t.Errorf("compactions by worker %v: want shard 0's alone", compacted)
	}
	// The merged result reports shard 0's, as a run through
	// kube-apiserver reports its compactor's.
	if len(res.Compactions) != compacted["0"] {
		t.Errorf("merged compactions %+v: want shard 0's %d", res.Compactions, compacted["0"])
	}
	for i, cp := range res.Compactions {
		if cp.N != i+1 || cp.Revision <= 0 || cp.Error != "" {
			t.Errorf("merged compaction %d: got %+v, want number %d to a revision", i, cp, i+1)
		}
	}
}

// TestRunWorkersClusterControlPlane runs `lwbench run --workers 3 --nodes
// 6`: the coordinator starts kube-apiserver, kube-controller-manager,
// kube-scheduler and KWOK in front of its embedded member, and three
// worker processes (this test binary as lwbench), client-go through that
// control plane, each seed and churn their block of the nodes and
// namespaces and watch their block of the kubelets' nodes; shard 0
// alone creates the DaemonSet and observes the nodes' health. The merged
// result holds the whole plan's pods Running, every worker's share of the
// churn completed, the kubelet watches of every block, and nothing lost.
func TestRunWorkersClusterControlPlane(t *testing.T) {
	apiservertest.ControlPlaneBinaries(t)
	t.Setenv(subprocessEnv, "1") // the workers: this binary as lwbench
	const nodes, churn, duration = 6, 2.0, 20
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, []string{"run", "--workers", "3", "--unsafe-no-fsync", "--nodes", "6", "--nodes-per-namespace", "2", "--pods-per-node", "5",
		"--pod-churn", "2", "--create-qps", "50", "--kubelet-watches", "3", "--watchers", "3", "--duration", "20s", "--compaction-interval", "10s",
		"-w", "json"}, &errOut)
	if code != 0 {
		t.Fatalf("lwbench run --workers 3 --nodes 6: exit %d:\n%s", code, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v\n%s", err, out.String())
	}
	plan, err := clusterload.NewPlan(clusterload.Options{Nodes: nodes, PodsPerNode: 5, NodesPerNamespace: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cluster
	if c == nil || len(res.Workers) != 3 || res.APIServer == nil {
		t.Fatalf("cluster %+v, %d workers, apiserver %+v: want a cluster's load of 3 workers through kube-apiserver", c, len(res.Workers), res.APIServer)
	}
	t.Logf("pods Running %d, kubelet watches %d nodes %d objects, node health %+v, writes %+v", c.PodsRunning, c.KubeletWatchNodes,
		c.KubeletWatchObjects, c.NodeHealth, res.Writes)
	for _, line := range strings.Split(errOut.String(), "\n") {
		if strings.Contains(line, "creating") || strings.Contains(line, "kubelet watches of") || strings.Contains(line, "Running on") {
			t.Log(line)
		}
	}
	if want := plan.Pods() + nodes; c.PodsRunning != want || c.KubeletWatchNodes != 3 || c.KubeletWatchObjects == 0 {
		t.Errorf("%d pods Running, kubelet watches of %d nodes (%d objects): want the whole plan's %d, 3 nodes' and objects", c.PodsRunning,
			c.KubeletWatchNodes, c.KubeletWatchObjects, want)
	}
	if c.NodeHealth == nil || c.NodeHealth.Renewals == 0 {
		t.Fatalf("node health %+v: want shard 0's observation of the nodes' Leases", c.NodeHealth)
	}
	// Each renewal counted once, in a phase of the run it happened in.
	runPhases := map[string]bool{watchload.PhaseSeed: true, watchload.PhaseSync: true, watchload.PhaseSteady: true, "held": true, "released": true,
		kubeload.PhaseDefrag: true, watchload.PhaseDrain: true, watchload.PhaseStop: true}
	var sum int64
	for _, p := range c.NodeHealth.Phases {
		if !runPhases[p.Phase] || p.Renewals <= 0 {
			t.Errorf("node health phase %+v: want renewals in one of the run's phases", p)
		}
		sum += p.Renewals
	}
	if sum != c.NodeHealth.Renewals || sum < nodes {
		t.Errorf("node Lease renewals by phase %+v (%d in all): want their sum the total, every node's renewed", c.NodeHealth.Phases, c.NodeHealth.Renewals)
	}
	// Observed from the seeding on, the nodes' creation is not their
	// leaving Ready.
	if h := c.NodeHealth; h.NotReady != 0 || h.Transitions != 0 {
		t.Errorf("node health %+v: want no node NotReady", h)
	}
	var planned int64
	for i, w := range res.Workers {
		if w.Writes.Planned == 0 || w.Writes.Completed != w.Writes.Planned {
			t.Errorf("worker %d: writes %+v: want its share of the churn, all completed", i, w.Writes)
		}
		planned += w.Writes.Planned
	}
	if want := int64(churn / plan.PodsPerOp() * duration); planned != want || res.Writes.Planned != want || res.Writes.Errors != 0 {
		t.Errorf("writes planned %d by the workers, merged %+v: want the whole churn's %d, none failed", planned, res.Writes, want)
	}
	if !res.Validation.OK() || res.Validation.Lost != 0 || res.Validation.UnsyncedWatchers != 0 {
		t.Errorf("merged validation %+v: want nothing lost", res.Validation)
	}
}
