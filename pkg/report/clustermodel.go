package report

import (
	"fmt"
	"slices"
	"time"
)

// ClusterModel is what the etcd-direct model of a cluster (lwbench run
// --nodes --cluster-model, pkg/clustermodel) sent etcd, by source, each
// request counted by the model once it succeeded. A worker of a divided
// load (lwbench run --workers) sends and counts its own part: its block
// of the nodes and of the plan's namespaces, and on shard 0 alone what a
// cluster has once (Singletons). MergeRuns sums the parts; the blocks of
// the merged result are the whole's.
type ClusterModel struct {
	// NodeFrom and NodeTo are the half-open block [NodeFrom, NodeTo) of
	// the nodes (0-based, in controlplane.NodeName's numbering) whose
	// traffic this model sent; NamespaceFrom and NamespaceTo the block of
	// the plan's namespaces, in the plan's order; Deployments are the
	// plan's Deployments in those namespaces.
	NodeFrom      int `json:"nodeFrom"`
	NodeTo        int `json:"nodeTo"`
	NamespaceFrom int `json:"namespaceFrom"`
	NamespaceTo   int `json:"namespaceTo"`
	Deployments   int `json:"deployments"`
	// Singletons is true when this model sent what a cluster has once
	// (shard 0's part): the leader-election Leases, kube-apiserver's
	// identity and peer endpoint leases, its watches, count polls, size
	// estimator and consistency checks, the compactor and the DaemonSet
	// object.
	Singletons bool `json:"singletons"`
	// NodeLeaseRenewals are the node Leases' renewals (a Txn each; the
	// seeding's creates apart), NodesRenewed the nodes renewed at least
	// once, RenewalsPerNodeMin and RenewalsPerNodeMax the fewest and the
	// most renewals of one node of the block (both 0 with no nodes).
	NodeLeaseRenewals  int64 `json:"nodeLeaseRenewals"`
	NodesRenewed       int   `json:"nodesRenewed"`
	RenewalsPerNodeMin int64 `json:"renewalsPerNodeMin"`
	RenewalsPerNodeMax int64 `json:"renewalsPerNodeMax"`
	// NodeLeaseIntervalMinMs and NodeLeaseIntervalMaxMs are the shortest
	// and the longest time between two successive renewals of one node's
	// Lease, from one's response to the next's, ms: the renewal period
	// (10 to 10.4 s) plus the next write's latency. 0 when no node was
	// renewed twice.
	NodeLeaseIntervalMinMs float64 `json:"nodeLeaseIntervalMinMs"`
	NodeLeaseIntervalMaxMs float64 `json:"nodeLeaseIntervalMaxMs"`
	// NodeLeaseMs is how long the node Leases' timers ran, from their
	// start after the nodes' seeding to their stop before the result was
	// collected, ms; in a merged result the longest worker's.
	NodeLeaseMs float64 `json:"nodeLeaseMs"`
	// NodeStatusWrites are KWOK's node heartbeats (status updates) after
	// the seeding's first status.
	NodeStatusWrites int64 `json:"nodeStatusWrites"`
	// ControlPlaneLeaseRenewals are the renewals of the leader-election
	// Leases and kube-apiserver's identity Lease (their creates apart);
	// PeerLeaseRenewals the writes of its peer endpoint lease.
	ControlPlaneLeaseRenewals int64 `json:"controlPlaneLeaseRenewals"`
	PeerLeaseRenewals         int64 `json:"peerLeaseRenewals"`
	// PodsCreated and PodsDeleted are the pods the modelled control plane
	// created and deleted, seeding and churn; Events the events it wrote
	// (created or patched).
	PodsCreated int64 `json:"podsCreated"`
	PodsDeleted int64 `json:"podsDeleted"`
	Events      int64 `json:"events"`
	// CacherWatchEvents are the events kube-apiserver's watches of etcd
	// received (Singletons' alone).
	CacherWatchEvents int64 `json:"cacherWatchEvents"`
	// PeriodicFailures are the periodic requests (Leases, heartbeats,
	// kube-apiserver's reads) that failed; none is retried.
	PeriodicFailures int64 `json:"periodicFailures"`
}

// perWorkerEtcd reports whether each worker's Etcd rows are its own
// counting proxy's (the model of a cluster: every worker has
// Cluster.Model), which MergeRuns sums, rather than one proxy's that
// counted every worker (kube-apiservers the workers share), which one
// worker alone may report.
func perWorkerEtcd(ws []*RunResult) bool {
	for _, r := range ws {
		if r.Cluster == nil || r.Cluster.Model == nil {
			return false
		}
	}
	return true
}

// mergeCluster returns the merged result's cluster section (MergeRuns):
// the plan, which every worker planned alike and must agree on; the pods
// Running after the seeding and the kubelet watches summed, the seeding's
// time the longest; the model's parts merged (mergeClusterModel). What
// one observer of a real control plane measures (NodeHealth, Restart,
// Exits) is shard 0's, and an error on another shard: its percentiles
// and times cannot be combined. Nil when no worker has one; an error
// when only some have one.
func mergeCluster(ws []*RunResult) (*ClusterScenario, error) {
	first := ws[0].Cluster
	for _, r := range ws[1:] {
		if (r.Cluster == nil) != (first == nil) {
			return nil, fmt.Errorf("shard %d and shard 0 disagree on whether the load is a cluster's (cluster): %w", r.Shard.Index, ErrNotOneLoad)
		}
	}
	if first == nil {
		return nil, nil
	}
	c := *first
	c.PodsRunning, c.SeedMs, c.KubeletWatchNodes, c.KubeletWatchObjects, c.Model = 0, 0, 0, 0, nil
	plan := clusterPlan(first)
	var models []*ClusterModel
	for _, r := range ws {
		x := r.Cluster
		if f := firstDifference(plan, clusterPlan(x)); f != "" {
			return nil, fmt.Errorf("shard %d planned another cluster than shard 0 (cluster.%s differs): %w", r.Shard.Index, f, ErrNotOneLoad)
		}
		if r.Shard.Index != 0 && (x.NodeHealth != nil || x.Restart != nil || len(x.Exits) > 0) {
			return nil, fmt.Errorf("shard %d has a real control plane's node health, restart or exits, which one worker observes and which cannot be merged: %w", r.Shard.Index, ErrNotOneLoad)
		}
		c.PodsRunning += x.PodsRunning
		c.SeedMs = max(c.SeedMs, x.SeedMs)
		c.KubeletWatchNodes += x.KubeletWatchNodes
		c.KubeletWatchObjects += x.KubeletWatchObjects
		if x.Model != nil {
			models = append(models, x.Model)
		}
	}
	switch {
	case len(models) == 0:
	case len(models) < len(ws):
		return nil, fmt.Errorf("%d of %d shards have the cluster model's counts (cluster.model): %w", len(models), len(ws), ErrNotOneLoad)
	default:
		m, err := mergeClusterModel(models, c.Nodes, c.Namespaces)
		if err != nil {
			return nil, err
		}
		c.Model = m
	}
	return &c, nil
}

// clusterPlan is c without what each worker measures of its own part:
// the figures every worker of one load plans alike.
func clusterPlan(c *ClusterScenario) ClusterScenario {
	p := *c
	p.PodsRunning, p.SeedMs, p.KubeletWatchNodes, p.KubeletWatchObjects = 0, 0, 0, 0
	p.NodeHealth, p.Restart, p.Exits, p.Model = nil, nil, nil, nil
	return p
}

// mergeClusterModel merges the workers' parts of a cluster's model, in
// shard order: their node blocks must follow each other from 0 to nodes
// and their namespace blocks from 0 to namespaces (each node and
// namespace driven by exactly one worker), and exactly one must hold the
// singletons; counts are summed, the per-node extremes and intervals
// kept at their extremes, NodeLeaseMs the longest.
func mergeClusterModel(parts []*ClusterModel, nodes, namespaces int) (*ClusterModel, error) {
	m := &ClusterModel{NodeTo: nodes, NamespaceTo: namespaces}
	nodeAt, nsAt, singletons := 0, 0, 0
	for i, x := range parts {
		if x.NodeFrom != nodeAt || x.NodeTo < x.NodeFrom {
			return nil, fmt.Errorf("shard %d drove nodes %d to %d, the shards before it up to %d: the shards' nodes must follow each other without gap or overlap: %w",
				i, x.NodeFrom, x.NodeTo, nodeAt, ErrNotOneLoad)
		}
		if x.NamespaceFrom != nsAt || x.NamespaceTo < x.NamespaceFrom {
			return nil, fmt.Errorf("shard %d drove namespaces %d to %d, the shards before it up to %d: the shards' namespaces must follow each other without gap or overlap: %w",
				i, x.NamespaceFrom, x.NamespaceTo, nsAt, ErrNotOneLoad)
		}
		nodeAt, nsAt = x.NodeTo, x.NamespaceTo
		if x.Singletons {
			singletons++
			m.Singletons = true
		}
		m.Deployments += x.Deployments
		m.NodeLeaseRenewals += x.NodeLeaseRenewals
		m.NodesRenewed += x.NodesRenewed
		if x.NodeTo > x.NodeFrom {
			if m.RenewalsPerNodeMax == 0 || x.RenewalsPerNodeMin < m.RenewalsPerNodeMin {
				m.RenewalsPerNodeMin = x.RenewalsPerNodeMin
			}
			m.RenewalsPerNodeMax = max(m.RenewalsPerNodeMax, x.RenewalsPerNodeMax)
		}
		if x.NodeLeaseIntervalMinMs > 0 && (m.NodeLeaseIntervalMinMs == 0 || x.NodeLeaseIntervalMinMs < m.NodeLeaseIntervalMinMs) {
			m.NodeLeaseIntervalMinMs = x.NodeLeaseIntervalMinMs
		}
		m.NodeLeaseIntervalMaxMs = max(m.NodeLeaseIntervalMaxMs, x.NodeLeaseIntervalMaxMs)
		m.NodeLeaseMs = max(m.NodeLeaseMs, x.NodeLeaseMs)
		m.NodeStatusWrites += x.NodeStatusWrites
		m.ControlPlaneLeaseRenewals += x.ControlPlaneLeaseRenewals
		m.PeerLeaseRenewals += x.PeerLeaseRenewals
		m.PodsCreated += x.PodsCreated
		m.PodsDeleted += x.PodsDeleted
		m.Events += x.Events
		m.CacherWatchEvents += x.CacherWatchEvents
		m.PeriodicFailures += x.PeriodicFailures
	}
	switch {
	case nodeAt != nodes:
		return nil, fmt.Errorf("the shards drove nodes 0 to %d of %d: %w", nodeAt, nodes, ErrNotOneLoad)
	case nsAt != namespaces:
		return nil, fmt.Errorf("the shards drove namespaces 0 to %d of %d: %w", nsAt, namespaces, ErrNotOneLoad)
	case singletons != 1:
		return nil, fmt.Errorf("%d shards sent the cluster's singletons, which one worker of a load sends: %w", singletons, ErrNotOneLoad)
	}
	return m, nil
}

// mergeEtcdRequests sums the workers' own counting proxies' rows
// (perWorkerEtcd) by phase, method, kind, resource and scope, in the
// order each row first appears, shard 0's first.
func mergeEtcdRequests(ws []*RunResult) []EtcdRequests {
	type key struct {
		phase, method, kind, resource, namespace, name string
		prefixKey                                      bool
	}
	index := map[key]int{}
	var out []EtcdRequests
	for _, r := range ws {
		for _, x := range r.Etcd {
			k := key{x.Phase, x.Method, x.Kind, x.Resource, x.Namespace, x.Name, x.PrefixKey}
			i, ok := index[k]
			if !ok {
				index[k] = len(out)
				out = append(out, x)
				continue
			}
			s := &out[i]
			s.Requests += x.Requests
			s.RequestBytes += x.RequestBytes
			s.Responses += x.Responses
			s.ResponseBytes += x.ResponseBytes
			s.Items += x.Items
			s.Errors += x.Errors
			s.FailedCompares += x.FailedCompares
		}
	}
	return out
}

// mergeEtcdPhases merges the workers' own proxies' phases by name, in the
// order each first appears: from the earliest start of the phase on any
// worker to its latest end (start plus duration), each on its worker's
// clock (the barrier lines the workers' phases up).
func mergeEtcdPhases(ws []*RunResult) []EtcdPhase {
	index := map[string]int{}
	var out []EtcdPhase
	var ends []time.Time
	for _, r := range ws {
		for _, x := range r.EtcdPhases {
			end := x.StartedAt.Add(time.Duration(x.DurationMs * float64(time.Millisecond)))
			i, ok := index[x.Phase]
			if !ok {
				index[x.Phase] = len(out)
				out = append(out, x)
				ends = append(ends, end)
				continue
			}
			if x.StartedAt.Before(out[i].StartedAt) {
				out[i].StartedAt = x.StartedAt
			}
			if end.After(ends[i]) {
				ends[i] = end
			}
		}
	}
	for i := range out {
		out[i].DurationMs = Ms(ends[i].Sub(out[i].StartedAt))
	}
	return slices.Clip(out)
}
