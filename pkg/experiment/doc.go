// Package experiment measures what compaction and defragmentation do to
// the clients of etcd, with Kubernetes' own clients modelled by
// pkg/watchload and kube-apiserver's compactor, defragmentation and a
// fixed-rate probe from pkg/compaction. Each experiment returns one
// versioned Result that lwbench renders as a table, JSON and plots.
//
// # Experiments
//
//   - RelistStorm: W informers held back past a compaction all relist at
//     once; swept over object count and LIST page size. A control case per
//     object count holds them back as long without compacting: no relist.
//   - Continuation: paginated LISTs pinned to their first page's revision
//     while a compactor runs; how often a list meets ErrCompacted on a
//     continuation page, and what each fallback costs: restart the
//     paginated list, or one unpaginated list as client-go's pager does
//     (tools/pager/pager.go FullListIfExpired).
//   - CompactionSweep: the same Kubernetes load under kube-apiserver's
//     compactor at several intervals, and never: db size over time,
//     relists of watchers that disconnect for a while, write latency and
//     throughput.
//   - DefragStall: a member grown to each db size, compacted, then
//     defragmented while the probe runs: how long the member stops, what
//     the probe sees, sizes before and after; then once more with the
//     defragmentation started while a compaction is still deleting.
//   - Catchup: a watcher resuming from a revision far behind (still
//     uncompacted) against a relist of the same objects. etcd sends a
//     lagging ("unsynced") watcher at most 1,000 revisions per response and
//     resyncs unsynced watchers every 100 ms (server/storage/mvcc/
//     watchable_store.go watchBatchMaxRevs, syncWatchersLoop).
//
// # Harness
//
// Each experiment is a script over pkg/watchload's Session: per member, a
// Session whose maintenance connection the probe, the size sampler and
// the compactions and defragmentations use; per Kubernetes prefix, a load
// (a Child of it: writers' connections, seeding, history recorder); per
// case, a watchload.Case with informers and writers of its own, validated
// against the load's history and etcd. Validation is the JSON view of
// what watchload counts.
//
// # Through kube-apiserver
//
// With Common.Stack, every experiment runs its Kubernetes clients
// through real kube-apiservers
// (pkg/kubeload): each load starts kube-apiservers of its own in front of
// the member, with --etcd-prefix the load's prefix, its pods seeded and
// written by client-go and its informers client-go's; a case's clients are
// then kubeload.Case instead of watchload.Case, both a
// watchload.ClientSet, and the scripts are the same. kube-apiserver's compactor is off except in the sweep,
// where it runs at the case's interval; defrag-stall adds a probe through
// the API; continuation's and catchup's lists are the API's (pageReader).
//
// # Time
//
// Every offset in a Result (atMs, startMs) runs from the experiment's
// epoch, its start; the probe shares that epoch, so its latency series
// and the compaction and defragmentation marks line up on one axis.
//
// # Targets
//
// An experiment asks its TargetFactory for a member per timeline: one for
// the whole experiment, except CompactionSweep, which wants a fresh member
// per case so that db sizes start equal. lwbench's factory starts an
// embedded member each time, or returns the same --endpoints (then the
// cases share the cluster, each under a prefix of its own).
//
// # Divided among workers
//
// The relist storm and the catch-up (Divisible) can run as one process
// per shard (Common.Shard, Common.Barrier), every process planning the
// whole experiment from the same options: each runs its block of the
// watchers (WatcherBlock), shard 0 alone seeds, writes, compacts and
// releases, and they meet at barrier points (BarrierPoint) per case; the
// catch-up's shard 0 publishes each distance's revisions (CatchupPlan).
// Merge combines the workers' results into exactly what one process
// would report. divide.go draws the steps.
//
// Through kube-apiserver the workers share one set of kube-apiservers
// (their coordinator's, or a cluster's): every load lives under those
// apiservers' --etcd-prefix, in namespaces named from Common.RunID and the
// load (kubeload.LoadOptions.RunID), which every worker plans alike; each
// starts its history before shard 0 seeds, and at a load's end they meet
// (load.end) before shard 0 deletes the load's pods (the coordinator's
// kube-apiservers) or namespaces (a cluster's).
package experiment
