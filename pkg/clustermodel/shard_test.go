package clustermodel

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// singletonKinds are the sources a cluster has once, which shard 0 alone
// sends.
var singletonKinds = map[string]bool{SourceDaemonSet: true, SourceLease: true, SourcePeerLease: true, SourceWatch: true,
	SourceCountPoll: true, SourceSizeEstimator: true, SourceConsistencyCheck: true, SourceCompactor: true}

// TestDivideSources: for plans of 1 to 3 namespaces and 1 to 7 shards,
// the shards' parts are disjoint and complete (every source of the whole
// plan's, each in exactly one shard's Sources), the singletons are shard
// 0's alone, and the node and namespace blocks are balanced within one.
func TestDivideSources(t *testing.T) {
	for _, nodes := range []int{1, 7, 50, 230} {
		p, err := clusterload.NewPlan(clusterload.Options{Nodes: nodes, PodsPerNode: 2, NodesPerNamespace: 100})
		if err != nil {
			t.Fatal(err)
		}
		whole, err := Divide(p, shard.Whole)
		if err != nil {
			t.Fatal(err)
		}
		all := whole.Sources(p)
		for n := 1; n <= min(7, nodes); n++ {
			t.Run(fmt.Sprintf("nodes_%d_shards_%d", nodes, n), func(t *testing.T) {
				owner := map[Source]int{}
				minNodes, maxNodes, minNS, maxNS := nodes, 0, len(p.Namespaces), 0
				for i := range n {
					pt, err := Divide(p, shard.Shard{Index: i, Count: n})
					if err != nil {
						t.Fatal(err)
					}
					minNodes, maxNodes = min(minNodes, pt.NodeTo-pt.NodeFrom), max(maxNodes, pt.NodeTo-pt.NodeFrom)
					minNS, maxNS = min(minNS, pt.NamespaceTo-pt.NamespaceFrom), max(maxNS, pt.NamespaceTo-pt.NamespaceFrom)
					for _, s := range pt.Sources(p) {
						if j, ok := owner[s]; ok {
							t.Fatalf("%v is shard %d's and shard %d's", s, j, i)
						}
						owner[s] = i
						if singletonKinds[s.Kind] && i != 0 {
							t.Errorf("singleton %v on shard %d, want shard 0's", s, i)
						}
					}
				}
				if len(owner) != len(all) {
					t.Errorf("the shards send %d sources, the whole plan %d", len(owner), len(all))
				}
				for _, s := range all {
					if _, ok := owner[s]; !ok {
						t.Errorf("%v of the whole plan is no shard's", s)
					}
				}
				if maxNodes-minNodes > 1 || maxNS-minNS > 1 || minNodes < 1 {
					t.Errorf("blocks of %d to %d nodes and %d to %d namespaces: want at least one node and within one of each other", minNodes, maxNodes, minNS, maxNS)
				}
			})
		}
	}
}

// TestDivideWholeSources: the undivided part sends every node's,
// namespace's and Deployment's traffic and one of each singleton: a
// watch, a size estimator and a consistency check per cached resource,
// a count poll per served one, three control-plane Leases.
func TestDivideWholeSources(t *testing.T) {
	p, err := clusterload.NewPlan(clusterload.Options{Nodes: 230, PodsPerNode: 2, NodesPerNamespace: 100})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := Divide(p, shard.Whole)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, s := range pt.Sources(p) {
		kinds[s.Kind]++
	}
	cached := 0
	for _, r := range servedResources {
		if r.cached {
			cached++
		}
	}
	want := map[string]int{SourceNode: 230, SourceNodeLease: 230, SourceNodeStatus: 230, SourceDaemonSetPod: 230, SourceNamespace: 2,
		SourceDeployment: len(p.Deployments), SourceDaemonSet: 1, SourceLease: 3, SourcePeerLease: 1, SourceWatch: cached + 1,
		SourceCountPoll: len(servedResources), SourceSizeEstimator: cached, SourceConsistencyCheck: cached, SourceCompactor: 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d sources of kind %q, want %d", kinds[k], k, n)
		}
	}
	if len(kinds) != len(want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
}

// TestDivideErrors: a shard out of range, or more shards than nodes, is
// refused.
func TestDivideErrors(t *testing.T) {
	p, err := clusterload.NewPlan(clusterload.Options{Nodes: 3, PodsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sh      shard.Shard
		wantErr string
	}{
		{shard.Shard{Index: 3, Count: 3}, "shard index 3"},
		{shard.Shard{Index: 0, Count: 4}, "4 shards of 3 nodes"},
	} {
		if _, err := Divide(p, tc.sh); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Divide(%v): got %v, want an error containing %q", tc.sh, err, tc.wantErr)
		}
	}
}

// TestChurnDivided: every shard plans the whole churn (the same ops in
// the same order as the undivided plan) and each op is owned by exactly
// one shard, the one whose namespaces hold its Deployment.
func TestChurnDivided(t *testing.T) {
	p, err := clusterload.NewPlan(clusterload.Options{Nodes: 500, PodsPerNode: 1, NodesPerNamespace: 100})
	if err != nil {
		t.Fatal(err)
	}
	const ops, n = 2000, 3
	plan := func() *clusterload.Churn {
		ch, err := clusterload.NewChurn(p, make([]kubernetes.Interface, 2), 42)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	whole := plan()
	shards := make([]*clusterload.Churn, n)
	parts := make([]Part, n)
	for i := range n {
		shards[i] = plan()
		if parts[i], err = Divide(p, shard.Shard{Index: i, Count: n}); err != nil {
			t.Fatal(err)
		}
	}
	owned := make([]int, n)
	for k := range int64(ops) {
		want := whole.Next(k)
		owners := 0
		for i := range n {
			op := shards[i].Next(k)
			if op != want {
				t.Fatalf("shard %d's op %d is %+v, the whole plan's %+v", i, k, op, want)
			}
			if parts[i].Owns(op) {
				owners++
				owned[i]++
				if !parts[i].OwnsNamespace(op.Namespace) {
					t.Errorf("shard %d owns op %d in namespace %s, not its own", i, k, op.Namespace)
				}
			}
		}
		if owners != 1 {
			t.Fatalf("op %d (%s/%s) is owned by %d shards, want 1", k, want.Namespace, want.Name, owners)
		}
	}
	for i, c := range owned {
		if c == 0 {
			t.Errorf("shard %d owns none of the %d ops (owned %v)", i, ops, owned)
		}
	}
}
