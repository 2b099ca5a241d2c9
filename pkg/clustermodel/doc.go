// Package clustermodel is the etcd-direct model of a whole cluster's
// traffic (lwbench run --nodes N --cluster-model): what etcd receives
// from a kube-apiserver 1.37 in front of kube-controller-manager,
// kube-scheduler and KWOK nodes running a ClusterLoader2-shaped plan
// (pkg/clusterload), sent by lwbench itself, in kube-apiserver's key
// layout and request shapes, with objects encoded by Kubernetes' own
// serializers (keyspace.Codec). It needs no control plane, so it reaches
// sizes the control plane cannot hold on one machine; `lwbench
// conformance --nodes N` holds it against the real one, resource by
// resource and request kind by request kind.
//
// # Requests
//
// Every write is one of etcd3's store transactions
// (k8s.io/apiserver/pkg/storage/etcd3/store.go): a create "if
// mod_revision=0 then put", an update "if mod_revision=R then put else
// range" from the object the watch cache holds, a delete "if
// mod_revision=R then delete else range". Reads are a Range of one key,
// limit 1, where kube-apiserver reads before it writes.
//
// # Periodic traffic (periodic.go)
//
//	node Leases          one Txn per node every 10 s, jitter 4 %     NodeLeaseRenewInterval
//	leader election      kube-controller-manager, kube-scheduler:   LeaderElectionRetryPeriod
//	                     one Txn each every 2 s
//	identity Lease       one Txn every 10 s                          IdentityLeaseRenewInterval
//	peer endpoint lease  a Range, a LeaseGrant of 15 s, a Txn        PeerLeaseRenewInterval
//	                     every 10 s
//	node status          KWOK's heartbeat: every 600-610 s           KWOKNodeStatusPeriod
//	count polls          a Range per served resource and a progress  CountPollPeriod
//	                     request every 1-2.2 minutes
//	size estimator       the same every 1-1.5 minutes unless read    SizeEstimatorRefresh
//	                     within a minute (cached resources)
//	consistency checks   a LIST at etcd of each cached resource,     ConsistencyCheckPeriod
//	                     pages of 10,000, every 5-7.5 minutes
//	watches              one per cached resource (prefix, prev_kv,
//	                     progress notify) and one of compact_rev_key
//	compaction           kube-apiserver's compactor every
//	                     --compaction-interval (pkg/compaction)
//
// kube-apiserver 1.37 asks etcd for its Status only when its /metrics is
// scraped (the storage size collector); its --etcd-db-metric-poll-interval
// is parsed and not used (k8s.io/apiserver/pkg/storage/storagebackend/
// config.go DBMetricPollInterval), so the model sends no Status.
//
// # A Deployment's changes (cluster.go)
//
// The churn is clusterload.Churn's plan of ops (a Deployment scaled up or
// down by one, a small one rolled out), the same ops as the real control
// plane's run with the same seed. Each op is the churn's PATCH of the
// Deployment and the control plane's answer, written at once, in order:
//
//	scale up    ReplicaSet spec; ScalingReplicaSet event; LimitRanger's
//	            live lookup (at most every 30 s per namespace); pod create
//	            and SuccessfulCreate event; Binding (a Range, a Txn) and
//	            Scheduled event; KWOK's status patch; ReplicaSet status
//	            twice (replicas, then ready and available); Endpoints and
//	            EndpointSlice if a Service selects the pods; the
//	            Deployment's status after each of those changes (3)
//	scale down  ReplicaSet spec; ScalingReplicaSet event; the replicaset
//	            controller's graceful DELETE (a Range, a Txn) and
//	            SuccessfulDelete event; ReplicaSet status (terminating
//	            replicas); Endpoints and EndpointSlice; KWOK's DELETE with
//	            grace 0 (a Range, a Txn, a failed delete from the cached
//	            pod, the delete); EndpointSlice again; ReplicaSet status;
//	            the Deployment's status after each change (3)
//	rollout     the Deployment; a new ReplicaSet; then pod by pod a
//	            scale up of the new one and a scale down of the old, the
//	            Deployment's status once per pod started and per pod gone
//
// Events go through client-go's own EventCorrelator per component
// (k8s.io/client-go/tools/record/events_cache.go: aggregation, counts,
// the spam filter), then a create, or a patch (a Range and a Txn: events
// have no watch cache), with the events' lease from kube-apiserver's
// lease manager (a grant at most once per 60 s at the 1-hour TTL).
//
// # Shards (shard.go)
//
// lwbench run --workers N --nodes K --cluster-model divides the model
// among N workers, each a Part decided by the plan and its shard alone
// (Divide, pkg/shard's blocks), so that they agree without talking:
//
//	nodes       shard i's block of the nodes: their creates, Leases and
//	            first status, Lease renewals, KWOK's heartbeats, and the
//	            DaemonSet's pod on each (the plan ties those to nodes)
//	namespaces  its block of the plan's namespaces (the last shards own
//	            none when there are fewer namespaces than shards): each
//	            namespace with its ServiceAccount and kube-root-ca.crt,
//	            LimitRanger's lookups, its Deployments' objects, pods,
//	            events and endpoints, seeded and churned (every shard
//	            plans every op of the churn and performs its own)
//	singletons  shard 0 alone: what a cluster has once, the leader-election
//	            and identity Leases, the peer endpoint lease, the
//	            cacher's watches, count polls, size estimator,
//	            consistency checks, the compactor, the DaemonSet object
//
// The shards' Sources together are the whole plan's, each once. What
// differs from one process: each shard is a kube-apiserver's lease
// manager of its own (one grant of the events' lease per shard per
// minute, as a cluster of several kube-apiservers has), and the pods of
// one shard's Deployments are scheduled round-robin over every node.
// Each worker counts what its part sent (report.ClusterModel) behind a
// counting proxy of its own; report.MergeRuns sums both.
//
// # Cleanup (clients.go)
//
// On a cluster lwbench does not own (watchload.Options.Cleanup: lwbench
// run --endpoints), each part deletes what it wrote once the load is
// done: every key it may have created and not deleted since, while its
// create revision is one of the run's, the compactor's compact_rev_key,
// kept under the prefix, and every lease it granted. Another client's
// keys are never touched, nor the root compact_rev_key of that cluster's
// kube-apiservers.
//
// The model's control plane keeps up with any churn: it answers each op
// at once. A real control plane on a busy machine falls behind (its
// controllers' queues grow), and its rollouts of one Deployment can
// overlap, when ops come faster than a rollout ends, and then replace
// fewer pods. What it does not model is listed by `lwbench conformance
// --nodes` beside the rows it explains.
package clustermodel
