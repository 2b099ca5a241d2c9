package clustermodel_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/clustermodel"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
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

// TestModelCleansUpAfterItself runs a small cluster's model against an
// etcd it does not own (watchload.Options.Cleanup, as lwbench run
// --endpoints sets it), whole and divided between two workers meeting at
// an etcd barrier, with kube-apiserver's compactor on: afterwards etcd
// holds exactly the keys and leases it held before, each foreign key
// (one under the model's reused prefix, a kube-apiserver's
// compact_rev_key at the root, a key attached to a lease) with its value
// and mod_revision unchanged, and every worker's cleanup counted the
// foreign key alone left under the prefix.
func TestModelCleansUpAfterItself(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers_%d", workers), func(t *testing.T) {
			srv := etcdtest.RunEtcd(t)
			c := etcdtest.NewClient(t, srv)
			ctx := t.Context()
			const prefix = "/lwbench-model"
			lease, err := c.Grant(ctx, 600)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range []struct {
				key, value string
				opts       []clientv3.OpOption
			}{
				{prefix + "/pods/default/users-pod", "the user's", nil},
				{"compact_rev_key", "41", nil},
				{"/registry/pods/default/leased", "the user's, on a lease", []clientv3.OpOption{clientv3.WithLease(lease.ID)}},
			} {
				if _, err := c.Put(ctx, kv.key, kv.value, kv.opts...); err != nil {
					t.Fatal(err)
				}
			}
			before, err := c.Get(ctx, "\x00", clientv3.WithFromKey())
			if err != nil {
				t.Fatal(err)
			}
			dial := func(ctx context.Context) (*clientv3.Client, error) {
				return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Context: ctx, Logger: zap.NewNop()})
			}
			target := watchload.Target{Endpoints: srv.Endpoints, Dial: dial}
			plan, err := clusterload.NewPlan(clusterload.Options{Nodes: 4, PodsPerNode: 10, NodesPerNamespace: 2})
			if err != nil {
				t.Fatal(err)
			}
			results := make([]*report.RunResult, workers)
			errs := make([]error, workers)
			var wg sync.WaitGroup
			for i := range workers {
				lo := watchload.Options{Watchers: 2, WatchResources: []string{watchload.ResourcePods}, Duration: 4 * time.Second, Prefix: prefix,
					WriterConcurrency: 1, Seed: 1, SyncTimeout: time.Minute, CompactionInterval: time.Second, Logf: t.Logf,
					ReusePrefix: true, Cleanup: true, NamespaceCompactRevKey: true,
					Clients: clustermodel.NewClients(clustermodel.Options{Plan: plan, PodChurn: 4, QPS: 200})}
				if workers > 1 {
					lo.Shard = shard.Shard{Index: i, Count: workers}
					if lo.Barrier, err = barrier.NewEtcd(c, "/lwbench-barrier/test-cleanup", lo.Shard); err != nil {
						t.Fatal(err)
					}
				}
				wg.Go(func() { results[i], errs[i] = watchload.Run(ctx, target, lo) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("worker %d: %v", i, err)
				}
				cl := results[i].Cleanup
				if cl == nil || cl.Error != "" || cl.KeysDeleted == 0 || cl.LeasesRevoked == 0 || cl.KeysLeft != 1 {
					t.Errorf("worker %d: cleanup %+v: want keys deleted, leases revoked, no error and the user's key alone left under %s/", i, cl, prefix)
				}
			}
			if len(results[0].Compactions) == 0 {
				t.Errorf("no compaction: want the compactor to have written its compact_rev_key under %s/", prefix)
			}

			after, err := c.Get(ctx, "\x00", clientv3.WithFromKey())
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for _, kv := range before.Kvs {
				want[string(kv.Key)] = fmt.Sprintf("%q at mod_revision %d", kv.Value, kv.ModRevision)
			}
			got := map[string]string{}
			for _, kv := range after.Kvs {
				if !strings.HasPrefix(string(kv.Key), "/lwbench-barrier/") { // the test's own
					got[string(kv.Key)] = fmt.Sprintf("%q at mod_revision %d", kv.Value, kv.ModRevision)
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("etcd holds %d keys after the run:\n%v\nwant exactly the %d before it, unchanged:\n%v", len(got), got, len(want), want)
			}
			leases, err := c.Leases(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(leases.Leases) != 1 || leases.Leases[0].ID != lease.ID {
				t.Errorf("leases after the run: got %v, want the user's %x alone", leases.Leases, lease.ID)
			}
		})
	}
}
