package clustermodel_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/clustermodel"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// expectedChurn replays clusterload.Churn's ops as the model performs
// them and returns the pods they create and delete: a scale up creates
// one, a scale down deletes one (none left: nothing), a rollout replaces
// every pod the Deployment has.
func expectedChurn(t *testing.T, plan *clusterload.Plan, workers int, seed uint64, ops int64) (created, deleted int) {
	t.Helper()
	ch, err := clusterload.NewChurn(plan, make([]kubernetes.Interface, workers), seed)
	if err != nil {
		t.Fatal(err)
	}
	replicas := map[string]int{}
	for _, d := range plan.Deployments {
		replicas[d.Namespace+"/"+d.Name] = d.Replicas
	}
	for i := range ops {
		op := ch.Next(i)
		k := op.Namespace + "/" + op.Name
		switch op.Kind {
		case clusterload.ChurnScaleUp:
			replicas[k]++
			created++
		case clusterload.ChurnScaleDown:
			if replicas[k] > 0 {
				replicas[k]--
				deleted++
			}
		default:
			created += replicas[k]
			deleted += replicas[k]
		}
	}
	return created, deleted
}

// TestModelTraffic runs a small cluster's model against an embedded etcd
// behind the counting proxy and holds etcd's requests by resource against
// what the plan and the periods ask for: every planned pod created while
// seeding, each churned pod's create, binding read, deletes and reads
// exactly as the churn's ops make them, the cacher's watch receiving
// every pod write, the Leases renewed at their rates (node Leases every
// 10 s, two leader elections every 2 s, the identity Lease every 10 s)
// within 15 %, and one events' lease granted.
func TestModelTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an embedded etcd for 20 s")
	}
	srv := etcdtest.RunEtcd(t)
	p, err := etcdproxy.Start(t.Context(), etcdproxy.Config{Upstream: srv.Endpoints[0], Prefixes: []string{"/registry"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	dial := func(url string) func(ctx context.Context) (*clientv3.Client, error) {
		return func(ctx context.Context) (*clientv3.Client, error) {
			return clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Context: ctx, Logger: zap.NewNop()})
		}
	}
	target := watchload.Target{Endpoints: []string{p.URL()}, Embedded: true, Managed: true, Dial: dial(p.URL()),
		Harness: &watchload.Harness{Endpoints: srv.Endpoints, Dial: dial(srv.Endpoints[0])}}
	const nodes, workers, seed = 10, 2, 7
	plan, err := clusterload.NewPlan(clusterload.Options{Nodes: nodes, PodsPerNode: 3})
	if err != nil {
		t.Fatal(err)
	}
	p.Counter().SetPhase("before")
	counter := kubeload.CounterOf(p.Counter())
	const churn = 3.0
	duration := 20 * time.Second
	lo := watchload.Options{Watchers: 1, WatchResources: []string{watchload.ResourcePods}, Duration: duration, Prefix: "/registry",
		WriterConcurrency: workers, Seed: seed, SyncTimeout: time.Minute, CompactionInterval: time.Hour, Logf: t.Logf,
		Clients: clustermodel.NewClients(clustermodel.Options{Plan: plan, PodChurn: churn, QPS: 200, Counter: counter})}
	res, err := watchload.Run(t.Context(), target, lo)
	if err != nil {
		t.Fatal(err)
	}
	if res.Writes.Errors > 0 {
		t.Fatalf("got %d failed churn ops (%q), want none", res.Writes.Errors, res.Writes.ErrorSamples)
	}
	reqs := counter.Requests()
	count := func(seeding bool, resource, method, kind string) int64 {
		var n int64
		for _, r := range reqs {
			if strings.HasPrefix(r.Phase, watchload.PhaseSeed) == seeding && r.Resource == resource && r.Method == method && r.Kind == kind {
				n += r.Requests + r.Items*boolInt(method == "Watch")
			}
		}
		return n
	}
	const (
		create = "if mod_revision=0 then put"
		update = "if mod_revision=? then put else range"
		del    = "if mod_revision=? then delete else range"
	)
	if got, want := count(true, "pods", "Txn", create), int64(plan.Pods()+nodes); got != want {
		t.Errorf("seeding: got %d pod creates, want %d (the plan's and the DaemonSet's)", got, want)
	}
	if got, want := count(true, "nodes", "Txn", create), int64(nodes); got != want {
		t.Errorf("seeding: got %d node creates, want %d", got, want)
	}
	ops := int64(churn / plan.PodsPerOp() * duration.Seconds())
	created, deleted := expectedChurn(t, plan, workers, seed, ops)
	if created == 0 || deleted == 0 {
		t.Fatalf("the churn's %d ops create %d and delete %d pods; want some of each", ops, created, deleted)
	}
	for _, c := range []struct {
		name     string
		resource string
		method   string
		kind     string
		want     int
	}{
		{"pod creates", "pods", "Txn", create, created},
		{"pod deletes (a stale one first)", "pods", "Txn", del, 2 * deleted},
		{"pod updates (binding, status, two graceful deletes)", "pods", "Txn", update, 2*created + 2*deleted},
		{"pod reads (binding, two deletes, the informer's consistent LIST)", "pods", "Range", "key limit", created + 2*deleted + lo.Watchers},
		{"pod watch events (every write but the failed delete)", "pods", "Watch", "events", 3*created + 3*deleted},
	} {
		if got := count(false, c.resource, c.method, c.kind); got != int64(c.want) {
			t.Errorf("churn of %d ops: got %d %s, want %d", ops, got, c.name, c.want)
		}
	}
	var phases []report.EtcdPhase
	for _, ph := range counter.Phases() {
		if !strings.HasPrefix(ph.Phase, watchload.PhaseSeed) && ph.Phase != "before" {
			phases = append(phases, ph)
		}
	}
	var seconds float64
	for _, ph := range phases {
		seconds += ph.DurationMs / 1000
	}
	leases := float64(count(false, "leases.coordination.k8s.io", "Txn", update))
	want := seconds * (float64(nodes)/clustermodel.NodeLeaseRenewInterval.Seconds() +
		2/clustermodel.LeaderElectionRetryPeriod.Seconds() + 1/clustermodel.IdentityLeaseRenewInterval.Seconds())
	if math.Abs(leases-want) > 0.15*want {
		t.Errorf("got %.0f lease renewals in %.1f s, want %.0f within 15 %%", leases, seconds, want)
	}
	if got := count(true, "", "LeaseGrant", "grant ttl=3660s") + count(false, "", "LeaseGrant", "grant ttl=3660s"); got != 1 {
		t.Errorf("got %d events' leases granted, want 1 (reused for 60 s)", got)
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestModelReportsCompactions runs a small cluster's model with
// kube-apiserver's compactor every 1.5 s: the result lists the
// compactions it made as a run through kube-apiserver does, numbered from
// 1, in time order within the run, each to a revision above the last and
// that etcd has compacted (a read below the last one is refused).
func TestModelReportsCompactions(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	dial := func(ctx context.Context) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Context: ctx, Logger: zap.NewNop()})
	}
	target := watchload.Target{Endpoints: srv.Endpoints, Embedded: true, Managed: true, Dial: dial}
	plan, err := clusterload.NewPlan(clusterload.Options{Nodes: 3, PodsPerNode: 10})
	if err != nil {
		t.Fatal(err)
	}
	const interval = 1500 * time.Millisecond
	lo := watchload.Options{Watchers: 1, WatchResources: []string{watchload.ResourcePods}, Duration: 6 * time.Second, Prefix: "/registry",
		WriterConcurrency: 1, Seed: 1, SyncTimeout: time.Minute, CompactionInterval: interval, Logf: t.Logf,
		Clients: clustermodel.NewClients(clustermodel.Options{Plan: plan, PodChurn: 2, QPS: 200})}
	res, err := watchload.Run(t.Context(), target, lo)
	if err != nil {
		t.Fatal(err)
	}
	cs := res.Compactions
	if len(cs) < 2 {
		t.Fatalf("got compactions %+v, want at least 2 in %v at every %v", cs, lo.Duration, interval)
	}
	for i, c := range cs {
		if c.N != i+1 || c.Error != "" || c.Revision <= 0 || c.AtMs <= 0 || c.Revision > res.Final.Revision {
			t.Errorf("compaction %d: got %+v, want number %d, a revision up to the final %d, at a time in the run", i, c, i+1, res.Final.Revision)
		}
		if i > 0 && (c.Revision <= cs[i-1].Revision || c.AtMs <= cs[i-1].AtMs) {
			t.Errorf("compaction %d: got %+v after %+v, want a later one to a higher revision", i, c, cs[i-1])
		}
	}
	last := cs[len(cs)-1].Revision
	if _, err := etcdtest.NewClient(t, srv).Get(t.Context(), "/registry/pods/", clientv3.WithPrefix(), clientv3.WithRev(last-1)); err == nil {
		t.Errorf("read at revision %d: got no error, want it compacted (the last compaction reported is to %d)", last-1, last)
	}
}
