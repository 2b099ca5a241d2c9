package clustermodel

import (
	"fmt"

	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// Part is one worker's part of a cluster's model when lwbench run
// --workers N --nodes K --cluster-model divides it, decided by the plan
// and the shard alone (Divide), so that every worker computes the same
// parts without talking (doc.go, "Shards").
type Part struct {
	Shard shard.Shard
	// NodeFrom and NodeTo are its block [NodeFrom, NodeTo) of the plan's
	// nodes; NamespaceFrom and NamespaceTo its block of Plan.Namespaces.
	NodeFrom, NodeTo           int
	NamespaceFrom, NamespaceTo int
	namespaces                 map[string]bool
}

// Divide returns shard sh's part of p: shard.Range's blocks of the nodes
// and of the namespaces (with more shards than namespaces the last own
// none). It returns an error for an invalid shard or a shard that would
// own no node (more shards than nodes).
func Divide(p *clusterload.Plan, sh shard.Shard) (Part, error) {
	if err := sh.Validate(); err != nil {
		return Part{}, err
	}
	if sh.Count > p.Nodes {
		return Part{}, fmt.Errorf("%d shards of %d nodes: each shard needs at least one node", sh.Count, p.Nodes)
	}
	pt := Part{Shard: sh, namespaces: map[string]bool{}}
	pt.NodeFrom, pt.NodeTo = sh.Range(p.Nodes)
	pt.NamespaceFrom, pt.NamespaceTo = sh.Range(len(p.Namespaces))
	for _, ns := range p.Namespaces[pt.NamespaceFrom:pt.NamespaceTo] {
		pt.namespaces[ns] = true
	}
	return pt, nil
}

// Singletons reports whether the part holds what a cluster has once:
// shard 0's.
func (pt Part) Singletons() bool { return pt.Shard.Index == 0 }

// OwnsNamespace reports whether ns is one of the part's namespaces.
func (pt Part) OwnsNamespace(ns string) bool { return pt.namespaces[ns] }

// Deployments returns the indexes into p.Deployments of the part's
// Deployments (those in its namespaces), in the plan's order.
func (pt Part) Deployments(p *clusterload.Plan) []int {
	var out []int
	for i, d := range p.Deployments {
		if pt.OwnsNamespace(d.Namespace) {
			out = append(out, i)
		}
	}
	return out
}

// Source is one source of a cluster model's requests, as doc.go lists
// them: Kind names the source, Name the node, namespace, Deployment
// (namespace/name), Lease or resource it is about ("" for one of a kind).
type Source struct {
	Kind, Name string
}

// The kinds of Source.
const (
	SourceNode             = "node"              // the seeding's create, its Lease's create, KWOK's first status
	SourceNodeLease        = "node lease"        // its renewals
	SourceNodeStatus       = "node status"       // KWOK's heartbeats
	SourceDaemonSetPod     = "daemonset pod"     // the DaemonSet's pod on the node
	SourceNamespace        = "namespace"         // with its ServiceAccount and kube-root-ca.crt, LimitRanger's lookups
	SourceDeployment       = "deployment"        // its objects, pods, events and endpoints, seeded and churned
	SourceDaemonSet        = "daemonset"         // the object and its status
	SourceLease            = "lease"             // a control-plane Lease in kube-system (controlPlaneLeases)
	SourcePeerLease        = "peer lease"        // kube-apiserver's peer endpoint lease
	SourceWatch            = "watch"             // kube-apiserver's watch of a cached resource, or of compact_rev_key
	SourceCountPoll        = "count poll"        // of a served resource
	SourceSizeEstimator    = "size estimator"    // of a cached resource
	SourceConsistencyCheck = "consistency check" // of a cached resource
	SourceCompactor        = "compactor"         // kube-apiserver's
)

// Sources returns every source of requests the part sends, in a fixed
// order: its nodes' (SourceNode, SourceNodeLease, SourceNodeStatus,
// SourceDaemonSetPod per node), its namespaces' and their Deployments',
// then, for shard 0, the cluster's singletons. The shards' Sources
// together are the whole plan's (Divide with shard.Whole), each once.
func (pt Part) Sources(p *clusterload.Plan) []Source {
	var out []Source
	for i := pt.NodeFrom; i < pt.NodeTo; i++ {
		n := controlplane.NodeName(i)
		out = append(out, Source{SourceNode, n}, Source{SourceNodeLease, n}, Source{SourceNodeStatus, n}, Source{SourceDaemonSetPod, n})
	}
	for _, ns := range p.Namespaces[pt.NamespaceFrom:pt.NamespaceTo] {
		out = append(out, Source{SourceNamespace, ns})
	}
	for _, i := range pt.Deployments(p) {
		d := p.Deployments[i]
		out = append(out, Source{SourceDeployment, d.Namespace + "/" + d.Name})
	}
	if !pt.Singletons() {
		return out
	}
	out = append(out, Source{SourceDaemonSet, p.DaemonSetNamespace + "/daemon"})
	for _, l := range controlPlaneLeases(apiserverID) {
		out = append(out, Source{SourceLease, l.name})
	}
	out = append(out, Source{SourcePeerLease, apiserverID})
	for _, r := range servedResources {
		name := keyspace.ResourcePath(r.group, r.name)
		out = append(out, Source{SourceCountPoll, name})
		if r.cached {
			out = append(out, Source{SourceWatch, name}, Source{SourceSizeEstimator, name}, Source{SourceConsistencyCheck, name})
		}
	}
	return append(out, Source{SourceWatch, keyspace.CompactRevKey}, Source{SourceCompactor, ""})
}

// Owns reports whether the churn's op is the part's: its Deployment's
// namespace is one of the part's (watchload.ShardedWorkload).
func (pt Part) Owns(op watchload.Op) bool { return pt.OwnsNamespace(op.Namespace) }
