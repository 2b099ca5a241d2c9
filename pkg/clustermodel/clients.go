package clustermodel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/parallel"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// Counter is what the model reads etcd's requests from: a counting proxy
// in front of the target (kubeload.CounterOf an internal/etcdproxy
// Counter), its phases switched with the run's.
type Counter interface {
	SetPhase(phase string)
	Requests() []report.EtcdRequests
	Phases() []report.EtcdPhase
}

// Options shape the model of a cluster.
type Options struct {
	// Plan is the cluster's nodes and objects (clusterload.NewPlan).
	Plan *clusterload.Plan
	// PodSize and NodeSize are the objects' sizes in bytes
	// (clusterload's defaults if 0).
	PodSize, NodeSize int
	// QPS bounds the seeding's API creates per second
	// (clusterload.DefaultQPS if 0).
	QPS float64
	// PodChurn is the pods created (and deleted) per second once seeded,
	// as clusterload.Churn plans them (the same ops as the real
	// control plane's run with the same seed).
	PodChurn float64
	// Counter, if set, counts etcd's requests by phase (Result.Etcd).
	Counter Counter
}

// NewClients returns the model of a cluster as a run's client set
// (watchload.Options.Clients): Run's script seeds the plan, runs the
// informers and churns the Deployments through it, with the cluster's
// periodic traffic beside.
func NewClients(o Options) watchload.Clients { return &clients{o: o} }

type clients struct {
	o    Options
	r    *watchload.Script
	part Part // the run's shard's part of the cluster (all of it undivided)
	st   *store
	cl   *cluster
	pe   *periodic

	bg     context.Context
	stopBg context.CancelFunc
	churn  *churn
	conn   *clientv3.Client
	env    *watchload.Env

	// compactions are kube-apiserver's compactor's (compact), written by
	// its goroutine alone until Collect has waited for it.
	compactions []report.Compaction
}

var _ watchload.Clients = (*clients)(nil)

// apiserverID names the modelled kube-apiserver's Leases.
const apiserverID = "lwbench-model"

// Begin checks the options, divides the plan (r.Options.Shard's Part),
// connects, describes the scenario and, on shard 0, starts
// kube-apiserver's compactor.
func (c *clients) Begin(ctx context.Context, r *watchload.Script) error {
	c.r = r
	o := &c.o
	if o.Plan == nil || o.PodChurn <= 0 {
		return errors.New("a cluster's model needs a plan and a pod churn above 0")
	}
	if o.PodSize <= 0 {
		o.PodSize = clusterload.DefaultPodSize
	}
	if o.NodeSize <= 0 {
		o.NodeSize = clusterload.DefaultNodeSize
	}
	if o.QPS <= 0 {
		o.QPS = clusterload.DefaultQPS(o.Plan.Nodes)
	}
	lo, s, res := r.Options, r.Session, r.Result
	var err error
	if c.part, err = Divide(o.Plan, lo.Shard); err != nil {
		return fmt.Errorf("divide the cluster's model: %w", err)
	}
	topo, err := s.ConnectWriters(ctx, lo.WriterConnections, false)
	if err != nil {
		return err
	}
	c.conn = topo.Conns[0]
	if c.st, err = newStore(c.conn, lo.EventTTL); err != nil {
		return err
	}
	res.Scenario = watchload.ScenarioOf(lo)
	res.Scenario.Objects, res.Scenario.ConfigMaps, res.Scenario.Events = 0, 0, 0
	res.Scenario.WriteRatePerSecond = o.PodChurn / o.Plan.PodsPerOp()
	p := o.Plan
	res.Cluster = &report.ClusterScenario{Nodes: p.Nodes, Namespaces: len(p.Namespaces), Deployments: len(p.Deployments),
		Services: p.Services(), Pods: p.Pods() + p.Nodes, PodSize: o.PodSize, NodeSize: o.NodeSize, PodChurn: o.PodChurn, RolloutPercent: &p.RolloutPercent}
	if v, err := s.EtcdVersion(ctx); err == nil {
		res.Target.EtcdVersion = v
	}
	if o.Counter != nil {
		s.OnPhase(o.Counter.SetPhase)
	}
	c.cl = newCluster(c.st, lo.Prefix, p, o.PodSize, lo.Shard)
	// Each shard's timers draw from a seed of their own, so that its
	// nodes' renewals are spread as the whole's are.
	c.pe = newPeriodic(c.st, lo.Prefix, c.part.NodeFrom, c.part.NodeTo, lo.Seed+uint64(lo.Shard.Index), r.Logf)
	c.bg, c.stopBg = context.WithCancel(context.WithoutCancel(ctx))
	if lo.Shard.Count > 1 {
		singletons := ""
		if c.part.Singletons() {
			singletons = ", and the cluster's singletons"
		}
		r.Logf("model: shard %s drives nodes %d to %d and namespaces %d to %d of %d%s", lo.Shard, c.part.NodeFrom, c.part.NodeTo-1,
			c.part.NamespaceFrom, c.part.NamespaceTo-1, len(p.Namespaces), singletons)
	}
	if lo.CompactionInterval > 0 && c.part.Singletons() {
		c.pe.wg.Go(func() { c.compact(c.bg, lo.CompactionInterval) })
	}
	return nil
}

// Seed starts, on shard 0, the cacher's watches, the control plane's
// Leases and kube-apiserver's periodic reads, then seeds the part's
// share of the plan: its nodes (and their Leases, whose renewals start),
// its namespaces, each of their Deployments' objects and pods, the
// DaemonSet's pods on its nodes and, on shard 0, the DaemonSet. A
// divided load's shards share the seeding's rate (QPS), each a
// 1/shards of it.
func (c *clients) Seed(ctx context.Context) error {
	r, o, s, pt := c.r, c.o, c.r.Session, c.part
	c.env = s.NewEnv(1<<16, r.Options.WriterConcurrency)
	if r.Options.Divided() {
		c.env.KeepHistograms() // the workers' results merge (report.MergeRuns)
	}
	start := time.Now()
	if pt.Singletons() {
		c.pe.startWatches(c.bg, c.conn, r.Start+1, watchload.CompactRevKeyName(r.Options))
		if err := c.pe.startLeases(c.bg, apiserverID); err != nil {
			return err
		}
		c.pe.startReads(c.bg, c.env)
	}
	qps := pt.Shard.Share(o.QPS, 0)
	limit := flowcontrol.NewTokenBucketRateLimiter(float32(qps), max(1, int(qps)))
	defer limit.Stop()
	wait := func() error { return limit.Wait(ctx) }
	p := o.Plan
	workers := max(1, r.Options.WriterConcurrency)
	r.Logf("model: creating %d nodes of %d bytes at %.0f/s", pt.NodeTo-pt.NodeFrom, o.NodeSize, qps)
	if err := parallel.Each(ctx, workers, pt.NodeTo-pt.NodeFrom, func(ctx context.Context, _, i int) error {
		return c.seedNode(ctx, wait, pt.NodeFrom+i)
	}); err != nil {
		return fmt.Errorf("seed the nodes: %w", err)
	}
	c.pe.startNodeLeases(c.bg)
	c.pe.startNodeStatus(c.bg, o.NodeSize)
	for _, ns := range p.Namespaces[pt.NamespaceFrom:pt.NamespaceTo] {
		if err := c.seedNamespace(ctx, wait, ns); err != nil {
			return fmt.Errorf("seed namespace %s: %w", ns, err)
		}
	}
	deps := pt.Deployments(p)
	pods, services := 0, 0
	for _, i := range deps {
		pods += p.Deployments[i].Replicas
		if p.Deployments[i].Service {
			services++
		}
	}
	r.Logf("model: creating %d deployments (%d pods), %d services, %d configmaps and secrets, and the daemonset's pods on %d nodes",
		len(deps), pods, services, len(deps), pt.NodeTo-pt.NodeFrom)
	if err := parallel.Each(ctx, workers, len(deps), func(ctx context.Context, _, i int) error {
		return c.cl.seedDeployment(ctx, c.cl.deps[deps[i]], wait)
	}); err != nil {
		return fmt.Errorf("seed the deployments: %w", err)
	}
	if err := c.cl.seedDaemonSet(ctx, wait, pt); err != nil {
		return fmt.Errorf("seed the daemonset: %w", err)
	}
	res := r.Result.Cluster
	res.PodsRunning, res.SeedMs = int(c.cl.podsCreated.Load()), report.Ms(time.Since(start))
	r.Logf("model: %d pods Running on %d nodes after %v", res.PodsRunning, pt.NodeTo-pt.NodeFrom, time.Since(start).Round(time.Second))
	var err error
	c.churn, err = newChurn(c.cl, max(1, r.Options.WriterConcurrency), r.Options.Seed, pt)
	return err
}

// seedNode creates node i (the seeding's API create), its Lease (KWOK's
// node lease controller) and its first status (KWOK's node-initialize
// stage).
func (c *clients) seedNode(ctx context.Context, wait func() error, i int) error {
	n := clusterload.Node(i, c.o.NodeSize)
	if err := c.cl.createAt(ctx, wait, "", "nodes", "", n.Name, n); err != nil {
		return err
	}
	name := controlplane.NodeName(i)
	if _, err := c.st.create(ctx, nodeLeaseKey(c.r.Options.Prefix, i), leaseObject(corev1.NamespaceNodeLease, name, name, 40), false); err != nil {
		return err
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	_, err := c.st.update(ctx, nodeKey(c.r.Options.Prefix, i), n, false, false)
	return err
}

// seedNamespace creates a namespace and what kube-controller-manager
// adds to it: its default ServiceAccount (serviceaccounts controller) and
// the kube-root-ca.crt ConfigMap (root-ca-cert-publisher).
func (c *clients) seedNamespace(ctx context.Context, wait func() error, ns string) error {
	if err := c.cl.createAt(ctx, wait, "", "namespaces", "", ns, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	now := func() error { return nil }
	if err := c.cl.createAt(ctx, now, "", "serviceaccounts", ns, "default", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); err != nil {
		return err
	}
	return c.cl.createAt(ctx, now, "", "configmaps", ns, "kube-root-ca.crt", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-root-ca.crt"},
		Data: map[string]string{"ca.crt": strings.Repeat("c", 1100)}})
}

// StartInformers stands for the run's informers: through kube-apiserver
// with the watch cache each one's first LIST is a consistent read served
// from the cache, which asks etcd only for its current revision (a Range
// of the resource's prefix as a key, limit 1: etcd3/store.go
// GetCurrentResourceVersion); events, not cached, are listed and watched
// at etcd.
func (c *clients) StartInformers(ctx context.Context) error {
	lo := c.r.Options
	first, last := lo.Shard.Range(lo.Watchers) // a divided load's block, each informer's resource the whole's
	for i := first; i < last; i++ {
		res := lo.WatchResources[i%len(lo.WatchResources)]
		key := resource{name: res}.prefixKey(lo.Prefix)
		if res != watchload.ResourceEvents {
			if _, err := c.conn.Get(ctx, key, clientv3.WithLimit(1)); err != nil {
				return err
			}
			continue
		}
		resp, err := c.conn.Get(ctx, key+"/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		wch := c.conn.Watch(c.bg, key+"/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(resp.Header.Revision+1))
		c.pe.wg.Go(func() {
			for range wch {
			}
		})
	}
	c.r.Logf("model: %d informers of %s served by the watch cache", last-first, strings.Join(lo.WatchResources, ", "))
	return nil
}

// StartWrites starts the churn at PodChurn pods per second for the
// run's Duration.
func (c *clients) StartWrites(ctx context.Context) (*watchload.Writing, error) {
	lo := c.r.Options
	rate := c.o.PodChurn / c.o.Plan.PodsPerOp()
	c.r.Logf("model: churning %.0f pods/s (%.1f deployment writes/s) for %v", c.o.PodChurn, rate, lo.Duration)
	return c.r.Session.Write(ctx, c.churn, watchload.WriterOptions{Rate: rate, Total: int64(rate * lo.Duration.Seconds()),
		Workers: max(1, lo.WriterConcurrency), Timeout: time.Minute}, watchload.PhaseSteady)
}

// Maintain waits for the writes to end: kube-apiserver's compactor runs
// from the model's start (compact).
func (c *clients) Maintain(ctx context.Context, w *watchload.Writing) {
	select {
	case <-ctx.Done():
	case <-w.Done():
	}
}

// compact runs kube-apiserver's compactor every interval from now, as
// kube-apiserver runs it from its start (pkg/compaction: its algorithm;
// the first compaction comes on the second tick), until ctx ends, and
// records each compaction as a run through kube-apiserver reports the
// compactions its compactor announces (report.Compaction: numbered from
// 1, at ms since the Session's epoch, the revision compacted to; a
// failed Compact with its error and revision 0).
func (c *clients) compact(ctx context.Context, interval time.Duration) {
	comp := compaction.NewCompactor(watchload.CompactKV(c.conn, c.r.Options))
	epoch := c.r.Session.Epoch()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			at := time.Since(epoch)
			res, err := comp.Tick(ctx)
			switch {
			case err != nil && ctx.Err() != nil:
				return
			case err != nil && res.Won:
				// compact_rev_key announced the compaction; Compact failed.
				c.compactions = append(c.compactions, report.Compaction{N: len(c.compactions) + 1, AtMs: report.Ms(at),
					DurationMs: report.Ms(res.Duration), Error: err.Error()})
				c.r.Logf("model: compaction: %v", err)
			case err != nil:
				c.r.Logf("model: compaction: %v", err)
			case res.Won && res.Compacted > 0:
				c.compactions = append(c.compactions, report.Compaction{N: len(c.compactions) + 1, AtMs: report.Ms(at),
					Revision: res.Compacted, DurationMs: report.Ms(res.Duration)})
				c.r.Logf("model: kube-apiserver's compactor compacted etcd to revision %d (compaction %d)", res.Compacted, len(c.compactions))
			}
		}
	}
}

// Confirm has nothing to wait for: the model's informers are the cache's.
func (c *clients) Confirm(_ context.Context, rev int64, _ time.Duration) (int, int64) { return 0, rev }

// Validate has nothing to validate.
func (c *clients) Validate(context.Context) {}

// Collect stops the periodic traffic, so that what the model counts and
// what the counting proxy counted are of the same requests, then gathers
// the writes' intervals, etcd's requests and what the model did
// (Result.Cluster.Model).
func (c *clients) Collect(ctx context.Context, _ int) error {
	res := c.r.Result
	c.stopBg()
	c.pe.wait()
	res.Cluster.Model = c.counts()
	res.Intervals = c.env.Collect(&res.Writes, &res.Delivery)
	if c.o.Counter != nil {
		res.Etcd = c.o.Counter.Requests()
		res.EtcdPhases = c.o.Counter.Phases()
	}
	// Shard 0 alone runs the compactor: the merged result's are its.
	res.Relists, res.Compactions = []report.Relist{}, append([]report.Compaction{}, c.compactions...)
	if n := c.pe.failures.Load(); n > 0 {
		c.r.Logf("model: %d periodic requests failed, the last: %v", n, c.pe.lastErr.Load())
	}
	c.r.Logf("model: %d pods created, %d deleted, %d events written; the cacher's watches received %d events",
		c.cl.podsCreated.Load(), c.cl.podsDeleted.Load(), c.cl.events.Load(), c.pe.watching.Load())
	return nil
}

// counts returns what the part of the model sent, once its periodic
// traffic has stopped.
func (c *clients) counts() *report.ClusterModel {
	pt, pe := c.part, c.pe
	m := &report.ClusterModel{NodeFrom: pt.NodeFrom, NodeTo: pt.NodeTo, NamespaceFrom: pt.NamespaceFrom, NamespaceTo: pt.NamespaceTo,
		Deployments: len(pt.Deployments(c.o.Plan)), Singletons: pt.Singletons(),
		NodeLeaseIntervalMinMs: report.Ms(pe.intervalMin), NodeLeaseIntervalMaxMs: report.Ms(pe.intervalMax),
		NodeStatusWrites: pe.nodeStatus.Load(), ControlPlaneLeaseRenewals: pe.cpRenewals.Load(), PeerLeaseRenewals: pe.peerWrites.Load(),
		PodsCreated: c.cl.podsCreated.Load(), PodsDeleted: c.cl.podsDeleted.Load(), Events: c.cl.events.Load(),
		CacherWatchEvents: pe.watching.Load(), PeriodicFailures: pe.failures.Load()}
	if !pe.nodeLeasesStarted.IsZero() {
		m.NodeLeaseMs = report.Ms(time.Since(pe.nodeLeasesStarted))
	}
	for i := range pe.nodeRenewals {
		n := pe.nodeRenewals[i].Load()
		m.NodeLeaseRenewals += n
		if n > 0 {
			m.NodesRenewed++
		}
		if i == 0 || n < m.RenewalsPerNodeMin {
			m.RenewalsPerNodeMin = n
		}
		m.RenewalsPerNodeMax = max(m.RenewalsPerNodeMax, n)
	}
	return m
}

// Stop ends the periodic traffic and the watches.
func (c *clients) Stop() {
	if c.stopBg != nil {
		c.stopBg()
	}
}

// CleanUp, with Options.Cleanup (a cluster lwbench does not own:
// --endpoints), deletes exactly what the part of the model wrote, within
// 10 minutes, once its traffic has stopped: every key it may have created
// and not deleted since, each while its create revision is still one of
// the run's, compact_rev_key under the prefix on shard 0 (its compactor
// wrote it), and every lease it granted (the events' and the peer
// endpoint lease's), which takes the keys attached to them along
// (watchload.DeleteWritten). Another client's keys, under the prefix or
// not, are never touched. Each worker of a divided load deletes its own
// part's, after the last barrier point, and counts what is left under
// the prefix once every worker has (watchload.BarrierCleaned).
func (c *clients) CleanUp(ctx context.Context) {
	r := c.r
	if r == nil || c.st == nil || !r.Options.Cleanup {
		return
	}
	c.Stop()
	if c.pe != nil {
		c.pe.wait()
	}
	o := r.Options
	cctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	keys := c.st.writtenKeys()
	if o.NamespaceCompactRevKey && c.part.Singletons() {
		keys = append(keys, watchload.CompactRevKeyName(o))
	}
	var settle func(context.Context)
	if o.Divided() {
		settle = func(ctx context.Context) {
			if _, err := r.Meet(ctx, watchload.BarrierCleaned); err != nil {
				r.Logf("cleanup: counting what is left without waiting for the other workers: %v", err)
			}
		}
	}
	res := watchload.DeleteWritten(cctx, r.Admin, keys, c.st.grantedLeases(), r.Start, o.Prefix, o.ReusePrefix, settle)
	r.Logf("model: cleanup: deleted %d keys and revoked %d leases the model wrote; %d keys left under %s/", res.KeysDeleted, res.LeasesRevoked, res.KeysLeft, o.Prefix)
	if res.Error != "" {
		r.Logf("model: cleanup: %s", res.Error)
	}
	if ctx.Err() != nil {
		r.Logf("model: cleanup: cut short by the second interrupt; what is left under %s/ is lwbench's: run again with --reuse-prefix, or delete it", o.Prefix)
	}
	r.Result.Cleanup = &res
}

// cleanupTimeout bounds CleanUp: one transaction per key written, eight
// at a time (watchload.DeleteWritten).
const cleanupTimeout = 10 * time.Minute

// churn is clusterload.Churn's ops (the same plan as the real control
// plane's run with the same seed) performed by the model: each op the
// Deployment's write and the control plane's answer to it. In a divided
// load every shard plans every op and performs those of its part's
// namespaces (watchload.ShardedWorkload).
type churn struct {
	plan *clusterload.Churn
	cl   *cluster
	part Part
}

var _ watchload.ShardedWorkload = (*churn)(nil)

func newChurn(cl *cluster, workers int, seed uint64, part Part) (*churn, error) {
	ch, err := clusterload.NewChurn(cl.plan, make([]kubernetes.Interface, workers), seed)
	if err != nil {
		return nil, err
	}
	return &churn{plan: ch, cl: cl, part: part}, nil
}

// Next returns clusterload.Churn's op i.
func (c *churn) Next(i int64) watchload.Op { return c.plan.Next(i) }

// Shard returns the part's shard.
func (c *churn) Shard() shard.Shard { return c.part.Shard }

// Owns reports whether op's Deployment is in the part's namespaces.
func (c *churn) Owns(op watchload.Op) bool { return c.part.Owns(op) }

// Do performs op: a Deployment scaled up or down by one, or rolled out.
func (c *churn) Do(ctx context.Context, _ int, _ watchload.KV, op watchload.Op) (int64, bool, error) {
	i, ok := c.cl.byName[op.Namespace+"/"+op.Name]
	if !ok {
		return 0, false, fmt.Errorf("churn: no deployment %s/%s in the plan", op.Namespace, op.Name)
	}
	d := c.cl.deps[i]
	var err error
	switch op.Kind {
	case clusterload.ChurnScaleUp:
		err = c.cl.scaleUp(ctx, d)
	case clusterload.ChurnScaleDown:
		err = c.cl.scaleDown(ctx, d)
	default:
		err = c.cl.rollout(ctx, d)
	}
	return 0, false, err
}
