// Package clusterload shapes a whole cluster's objects and churn for
// lwbench run --nodes: ClusterLoader2's load test (perf-tests
// clusterloader2/testing/load/config.yaml) of Deployments of 5, 30 and 250
// replicas, a Service for half of them, a ConfigMap and a Secret per
// Deployment and a DaemonSet, in namespaces of 100 nodes each, on KWOK
// nodes (sigs.k8s.io/kwok), with pods of a chosen payload. It plans and
// builds the objects; a real control plane (kube-controller-manager,
// kube-scheduler, KWOK) turns them into pods, and lwbench drives the rest.
package clusterload

import (
	"fmt"
)

// CL2's group sizes and shapes (perf-tests
// clusterloader2/testing/load/config.yaml: BIG_GROUP_SIZE,
// MEDIUM_GROUP_SIZE, SMALL_GROUP_SIZE, NODES_PER_NAMESPACE,
// PODS_PER_NODE).
const (
	BigReplicas    = 250
	MediumReplicas = 30
	SmallReplicas  = 5
	// DefaultNodesPerNamespace is CL2's NODES_PER_NAMESPACE.
	DefaultNodesPerNamespace = 100
	// DefaultPodsPerNode is CL2's PODS_PER_NODE.
	DefaultPodsPerNode = 30
	// DefaultPodSize is CL2's pod of "~4 KB" (kubernetes issue 134375);
	// real clusters' are 10-20 KB (etcd issue 22332).
	DefaultPodSize = 4 << 10
	// DefaultNodeSize is a Node object of a real cluster's size: 10-30 KB
	// with its status.images (KEP-589, keps/sig-node/589-efficient-node-heartbeats).
	DefaultNodeSize = 12 << 10
	// ImmutablePercent of the ConfigMaps and Secrets are immutable, as
	// CL2's (its configmap.yaml and secret.yaml: 90 %).
	ImmutablePercent = 90
)

// Options shape a Plan.
type Options struct {
	// Nodes is the number of KWOK nodes, at least 1.
	Nodes int
	// PodsPerNode is the load's pods per node (DefaultPodsPerNode if 0),
	// the DaemonSet's one apart.
	PodsPerNode int
	// NodesPerNamespace (DefaultNodesPerNamespace if 0): one namespace
	// of load per that many nodes, at least one.
	NodesPerNamespace int
	// NamespacePrefix names the namespaces, followed by their number
	// from 0 ("" means "load-").
	NamespacePrefix string
	// RolloutPercent is the churn's share of ops that roll a small
	// Deployment out, in percent (DefaultRolloutPercent if 0; negative:
	// none, the churn only scales by one pod); at most 100.
	RolloutPercent int
}

// Deployment is one Deployment of a Plan, with its Service (half of them
// have one, as CL2's) and its ConfigMap and Secret (one each, named as
// the Deployment).
type Deployment struct {
	Namespace, Name string
	Replicas        int
	// Service is true when a Service selects its pods.
	Service bool
	// Immutable is true for an immutable ConfigMap and Secret.
	Immutable bool
}

// Plan is a cluster's load: its nodes and namespaces, the Deployments in
// them, and the DaemonSet (one pod per node) in the first namespace.
type Plan struct {
	Nodes       int
	Namespaces  []string
	Deployments []Deployment
	// DaemonSetNamespace holds the DaemonSet "daemon".
	DaemonSetNamespace string
	// RolloutPercent is the churn's share of rollouts, 0 to 100
	// (Options.RolloutPercent resolved); the other ops scale a Deployment
	// up or down by one, half each.
	RolloutPercent int
}

// NewPlan plans the load of o as CL2's load test does per namespace: with
// P = PodsPerNode x NodesPerNamespace pods per namespace, P/(4x250) big,
// P/(4x30) medium and P/(2x5) small Deployments (integer division: a
// quarter of the pods in big groups, a quarter in medium, half in small;
// 3,000 pods per namespace at the defaults), and (n+1)/2 Services for the
// n Deployments of each size. With fewer nodes than NodesPerNamespace the
// one namespace holds Nodes x PodsPerNode pods, planned the same way, so
// that small clusters keep the shape (and lose the groups they cannot
// fill). It returns an error for Nodes < 1 or a negative option.
func NewPlan(o Options) (*Plan, error) {
	if o.Nodes < 1 {
		return nil, fmt.Errorf("nodes %d: want at least 1", o.Nodes)
	}
	if o.PodsPerNode < 0 || o.NodesPerNamespace < 0 {
		return nil, fmt.Errorf("pods per node %d, nodes per namespace %d: want 0 (the default) or more", o.PodsPerNode, o.NodesPerNamespace)
	}
	if o.RolloutPercent > 100 {
		return nil, fmt.Errorf("rollout percent %d: want at most 100", o.RolloutPercent)
	}
	switch {
	case o.RolloutPercent == 0:
		o.RolloutPercent = DefaultRolloutPercent
	case o.RolloutPercent < 0:
		o.RolloutPercent = 0
	}
	if o.PodsPerNode == 0 {
		o.PodsPerNode = DefaultPodsPerNode
	}
	if o.NodesPerNamespace == 0 {
		o.NodesPerNamespace = DefaultNodesPerNamespace
	}
	if o.NamespacePrefix == "" {
		o.NamespacePrefix = "load-"
	}
	namespaces := max(1, o.Nodes/o.NodesPerNamespace)
	podsPerNamespace := min(o.Nodes, o.NodesPerNamespace) * o.PodsPerNode
	p := &Plan{Nodes: o.Nodes, RolloutPercent: o.RolloutPercent}
	for i := range namespaces {
		ns := fmt.Sprintf("%s%d", o.NamespacePrefix, i)
		p.Namespaces = append(p.Namespaces, ns)
		for _, g := range []struct {
			name     string
			replicas int
			count    int
		}{
			{"big", BigReplicas, podsPerNamespace / (4 * BigReplicas)},
			{"medium", MediumReplicas, podsPerNamespace / (4 * MediumReplicas)},
			{"small", SmallReplicas, podsPerNamespace / (2 * SmallReplicas)},
		} {
			services := (g.count + 1) / 2
			for j := range g.count {
				p.Deployments = append(p.Deployments, Deployment{Namespace: ns, Name: fmt.Sprintf("%s-%d", g.name, j),
					Replicas: g.replicas, Service: j < services, Immutable: j*100/g.count < ImmutablePercent})
			}
		}
	}
	p.DaemonSetNamespace = p.Namespaces[0]
	return p, nil
}

// Pods returns the pods the Plan's Deployments ask for, the DaemonSet's
// (one per node) apart.
func (p *Plan) Pods() int {
	n := 0
	for _, d := range p.Deployments {
		n += d.Replicas
	}
	return n
}

// Services returns how many of the Deployments have a Service.
func (p *Plan) Services() int {
	n := 0
	for _, d := range p.Deployments {
		if d.Service {
			n++
		}
	}
	return n
}
