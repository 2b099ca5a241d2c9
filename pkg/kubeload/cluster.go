package kubeload

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// ClusterOptions make a run through kube-apiserver a whole cluster's
// (lwbench run --nodes): KWOK nodes and ClusterLoader2-shaped objects
// (pkg/clusterload) seeded through the API, their pods made and run by
// the real control plane the Stack must hold (kube-controller-manager,
// kube-scheduler, KWOK), then churned at PodChurn pods per second while
// the run's informers watch and the node leases are renewed. A worker of
// a divided load (watchload.Options.Shard, through the control plane its
// coordinator started) seeds and churns its block of the nodes and of the
// plan's namespaces (clusterload.SeedOptions.Shard), watches its block of
// the kubelets' nodes and, on shard 0 alone, creates the DaemonSet,
// reports the pods Running and observes the nodes' health.
type ClusterOptions struct {
	// Plan is the cluster's nodes and objects (clusterload.NewPlan).
	Plan *clusterload.Plan
	// PodSize and NodeSize are the objects' sizes in bytes
	// (clusterload's defaults if 0).
	PodSize, NodeSize int
	// QPS bounds the seeding's creates per second
	// (clusterload.DefaultQPS if 0).
	QPS float64
	// PodChurn is the pods created (and deleted) per second once
	// seeded; CL2's CL2_LOAD_TEST_THROUGHPUT is 10.
	PodChurn float64
	// RunningTimeout bounds the wait for every pod to be Running after
	// the seeding: the run fails once this long passes without one more
	// pod Running (clusterload.WaitRunning; 5 minutes if 0).
	RunningTimeout time.Duration
	// KubeletWatches is how many nodes, from the first, get the watches
	// their kubelets would open (StartKubeletWatches), beside the run's
	// informers; 0: none.
	KubeletWatches int
	// FillerBytes, if above 0, grows etcd's db after the seeding by this
	// many bytes of live keys under FillerPrefix, so that a
	// defragmentation copies a db of the size operators report stalls
	// with; the etcd must be the run's own.
	FillerBytes int64
	// DefragAt, if above 0, defragments every member once this long
	// after the churn began (clusterEvents); the run then holds no
	// informer back (Options.HoldBack must be 0).
	DefragAt time.Duration
	// Restart, if set, is the component (controlplane.Components)
	// stopped and started again RestartAt after the churn began; the
	// run then holds no informer back.
	Restart   string
	RestartAt time.Duration
}

// clusterClients returns n clientsets from the Stack's connections.
func (a *apiClients) clusterClients(n int) ([]kubernetes.Interface, error) {
	out := make([]kubernetes.Interface, max(n, 1))
	for i := range out {
		cs, err := a.st.Connections.NewClientset()
		if err != nil {
			return nil, err
		}
		out[i] = cs
	}
	return out, nil
}

// seedCluster starts, on shard 0, the observation of the nodes' health
// (startNodeHealth: each Lease renewal counted in its phase), seeds the
// cluster's nodes and objects and waits until the control plane has
// every pod Running. A worker of a divided load seeds
// its part (clusterload.SeedOptions.Shard) and waits for every worker's
// pods; shard 0 alone reports them Running (the merge sums the workers').
func (a *apiClients) seedCluster(ctx context.Context) error {
	c, lo, r := a.o.Cluster, a.r.Options, a.r
	if lo.Shard.Index == 0 { // the nodes' health is observed once, by shard 0, from the seeding on
		h, err := a.startNodeHealth(ctx, watchload.PhaseSeed)
		if err != nil {
			return fmt.Errorf("node health: %w", err)
		}
		a.health = h
		r.Session.OnPhase(h.setPhase)
	}
	clients, err := a.clusterClients(lo.WriterConcurrency)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := clusterload.Seed(ctx, clients, c.Plan, clusterload.SeedOptions{QPS: c.QPS, PodSize: c.PodSize, NodeSize: c.NodeSize, Logf: r.Logf,
		Shard: lo.Shard}); err != nil {
		return err
	}
	want := c.Plan.Pods() + c.Plan.Nodes // the DaemonSet's one per node
	timeout := c.RunningTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	running, err := clusterload.WaitRunning(ctx, clients[0], want, timeout, r.Logf)
	cs := r.Result.Cluster
	cs.PodsRunning, cs.SeedMs = running, report.Ms(time.Since(start))
	if lo.Shard.Index != 0 {
		cs.PodsRunning = 0 // shard 0's count is every worker's
	}
	if err != nil {
		return fmt.Errorf("the control plane did not run the cluster's pods: %w", err)
	}
	r.Logf("%d pods Running on %d KWOK nodes after %v", running, c.Plan.Nodes, time.Since(start).Round(time.Second))
	if err := a.fill(ctx); err != nil {
		return err
	}
	ch, err := clusterload.NewChurn(c.Plan, clients, lo.Seed)
	if err != nil {
		return err
	}
	a.churn = ch
	if lo.Shard.Count > 1 {
		a.churn = newShardedChurn(ch, c.Plan, lo.Shard)
	}
	return nil
}

// shardedChurn is a worker's part of a cluster's churn: every worker
// plans every op (the same plan, seed and order) and performs those of
// its block of the plan's namespaces (shard.Range, as
// clusterload.SeedOptions.Shard seeds them: watchload.ShardedWorkload).
type shardedChurn struct {
	*clusterload.Churn
	shard shard.Shard
	own   map[string]bool // the shard's namespaces
}

var _ watchload.ShardedWorkload = (*shardedChurn)(nil)

func newShardedChurn(ch *clusterload.Churn, p *clusterload.Plan, sh shard.Shard) *shardedChurn {
	from, to := sh.Range(len(p.Namespaces))
	own := map[string]bool{}
	for _, ns := range p.Namespaces[from:to] {
		own[ns] = true
	}
	return &shardedChurn{Churn: ch, shard: sh, own: own}
}

// Shard returns the worker's shard.
func (c *shardedChurn) Shard() shard.Shard { return c.shard }

// Owns reports whether op's Deployment is in the worker's namespaces.
func (c *shardedChurn) Owns(op watchload.Op) bool { return c.own[op.Namespace] }

// startKubeletWatches starts the kubelet watches of the first
// KubeletWatches nodes (a worker of a divided load its block of them).
func (a *apiClients) startKubeletWatches(ctx context.Context) error {
	c := a.o.Cluster
	from, to := a.r.Options.Shard.Range(min(c.KubeletWatches, c.Plan.Nodes))
	n := to - from
	if n <= 0 {
		return nil
	}
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = controlplane.NodeName(from + i)
	}
	a.r.Logf("starting the kubelet watches of %d nodes", n)
	var err error
	a.kubelets, err = StartKubeletWatches(context.WithoutCancel(ctx), a.st.Connections, nodes)
	return err
}

// clusterScenario describes the cluster's plan in the result.
func clusterScenario(c *ClusterOptions) *report.ClusterScenario {
	p := c.Plan
	return &report.ClusterScenario{Nodes: p.Nodes, Namespaces: len(p.Namespaces), Deployments: len(p.Deployments),
		Services: p.Services(), Pods: p.Pods() + p.Nodes, PodSize: c.PodSize, NodeSize: c.NodeSize, PodChurn: c.PodChurn, RolloutPercent: &p.RolloutPercent,
		KubeletWatchNodes: min(c.KubeletWatches, p.Nodes), FillerBytes: c.FillerBytes, DefragAtMs: report.Ms(c.DefragAt)}
}

// startChurn starts the churn's writers at PodChurn pods per second
// (the plan's PodsPerOp pods per op) for the run's Duration.
func (a *apiClients) startChurn(ctx context.Context) (*watchload.Writing, error) {
	lo, c := a.r.Options, a.o.Cluster
	rate := c.PodChurn / c.Plan.PodsPerOp()
	a.r.Logf("churning %.0f pods/s (%.1f deployment writes/s) for %v", c.PodChurn, rate, lo.Duration)
	interval := time.Duration(a.st.APIServer.EtcdCompactionIntervalMs * float64(time.Millisecond))
	switch n, need := steadyCompactions(time.Since(a.r.Session.Epoch()), lo.Duration, interval); {
	case interval <= 0:
		a.r.Logf("warning: kube-apiserver's compaction is off: the run sees no compaction, and its periodic traffic misses it")
	case n < 2:
		a.r.Logf("warning: the steady phase (%v) can hold only %d of kube-apiserver's compactions (every %v, from two intervals after its start): give --duration %v or more to see two",
			lo.Duration, n, interval, need.Round(time.Second))
	}
	return a.r.Session.Write(ctx, a.churn, watchload.WriterOptions{Rate: rate, Total: int64(rate * lo.Duration.Seconds()),
		Workers: lo.WriterConcurrency}, watchload.PhaseSteady)
}

// steadyCompactions returns how many of kube-apiserver's compactions fall
// in a steady phase of duration d that begins start after kube-apiserver
// started (the run's epoch follows its start by seconds), and the duration
// that would hold two. Its compactor ticks every interval and compacts
// from the second tick on (k8s.io/apiserver/pkg/storage/etcd3/compact.go):
// at k x interval, k >= 2. No interval: none.
func steadyCompactions(start, d, interval time.Duration) (n int, need time.Duration) {
	if interval <= 0 {
		return 0, 0
	}
	first := max(2*interval, (start+interval-1)/interval*interval)
	for t := first; t <= start+d; t += interval {
		n++
	}
	return n, first + interval - start
}
