// Package watchload drives Kubernetes-style list/watch load against etcd
// and measures it: delivery latency from commit, the cost of lists and
// relists, and whether any event is ever lost.
//
// # Parts
//
// A load is assembled from parts that experiments can reuse on their own:
//
//   - Env: the epoch, the join of writes with the events they caused, the
//     history oracle and the violations found. Every other part records
//     into one Env.
//   - Topology and Stream: connections (one *clientv3.Client each) and
//     watch streams over them; clientv3 puts every watch whose context
//     carries the same gRPC metadata on one stream, and a progress request
//     reaches only the watches of its stream.
//   - Reflector: one list/watch client of one resource, modelled on a
//     Profile; Hold and Release interrupt its watch as a broken
//     connection would; ReflectorHooks observe or alter what it sees.
//   - Writers and a Workload: open-loop writes; KubernetesWorkload
//     (pods, configmaps and events on leases, with kube-apiserver's
//     transactions) or rawWorkload (plain puts, as etcd's benchmark).
//   - Recorder: the history every watch is validated against.
//   - Watch caches (cacher.go, Run only): kube-apiserver's watch cache of
//     one resource, filled by a Reflector and serving its watchers'
//     LISTs and WATCHes in-process; its progress requester; the
//     consistent reader, extra consistent LISTs served from the caches
//     (KEP-2340).
//   - Session: one load assembled from these parts against one Target
//     (session.go): the epoch, the connections, the recorder, the Env, the
//     watchers and the writers, with each phase a method; collect.go turns
//     what it measured into a result, loadstatus.go is its live view.
//   - Case: one case of a Session's load (case.go), with an Env, watchers
//     and writers of its own over the Session's writers, recorder and
//     maintenance connection; pkg/experiment runs its cases as Cases,
//     several on one load, each validated on its own.
//   - Run, Watch, Put and List: the scenarios lwbench's subcommands run,
//     each a short script over one Session.
//   - Fault and MemberControl: faults injected into a cluster whose
//     processes the run controls.
//
// The load and the harness reach etcd apart when the Target says so
// (Target.Harness): the writers, the watchers with their reads and
// progress requests, and the compactor (kube-apiserver's: its
// compare-and-swap on compact_rev_key and a Compact that does not wait
// for the deletion unless Options.PhysicalCompaction) are the load; the
// maintenance connection (status, sizes, counts, final reads, cleanup,
// defragmentation) and the recorder are the harness, and confirming the
// final revision asks etcd for nothing (ReflectorSet.WaitSynced). Behind
// a counting proxy (`lwbench conformance`) the proxy then counts what
// models kube-apiserver's requests and nothing else.
//
// A fixed-rate probe of a member (through a defragmentation, say) is
// Writers with a rawWorkload at a low rate: its one-second series shows
// the stall, and its errors and timeouts count in the latency.
//
// # Profiles
//
// ProfileInformer is client-go's reflector reading etcd through a
// kube-apiserver with the watch cache off (client-go
// tools/cache/reflector.go, tools/pager/pager.go; k8s.io/apiserver
// pkg/storage/etcd3/store.go), modelled file for file: reflector.go (the
// list/watch loop; Reflector's doc walks through a relist after a
// compaction), pager.go (pages and the fall-back to one full list),
// store.go (the etcd ranges a LIST's resourceVersion and limit make),
// cache.go (events applied, prevKV checked) and hold.go (the broken
// connection that holds a watcher back).
//
// ProfileAPIServerCache is kube-apiserver with its watch cache on
// (k8s.io/apiserver/pkg/storage/cacher): the watchers are the same client
// informers, and kube-apiserver keeps one watch cache per cached resource
// (pods, configmaps; events have watch cache size 0 and are not cached),
// each a Reflector of its own against etcd on the resource's stream
// (kube-apiserver gives each resource's storage its own etcd client):
// pages of 10,000 always read at the latest revision (its listerWatcher
// drops the resourceVersion), one watch with prevKV that never times out,
// watch errors other than compaction retried by watching again for up to
// 30 s, a fixed one-second pause before relisting. The watchers of a
// cached resource list and watch from its cache in-process; etcd sees for
// each only a consistent read's current revision (one key, limit 1), the
// progress requests (every 100 ms, on the cache's stream) while the read
// waits for the cache, and a LIST from etcd if it waited 3 s in vain.
// Watchers of events reach etcd as informers do. A watcher held back
// across a compaction resumes from its cache's history (75 s of events),
// so it does not relist, as a client of a real kube-apiserver with the
// cache on. `--watchers` counts the informers; the caches follow them in
// results (report.InformerStats.Cache), validated and compared with etcd like
// them.
//
// # Writes
//
// Write i is due at start + i/rate whatever happened to earlier writes,
// and its latency runs from that due time to its end, so a stalled member
// cannot hide the writes it delayed (no coordinated omission). Errors and
// timeouts count in the latency at the time they failed and are reported
// beside it. Writes to one key go to one worker, in order, so that each
// worker knows its keys' mod_revisions for kube-apiserver's
// compare-and-swap transactions.
//
// A KubernetesWorkload op sends etcd what kube-apiserver sends for the
// API request of the real writers (registry.go): with the watch cache off
// (the informer profile) a read before every update and delete; a pod's
// graceful delete is two DELETE requests making two updates and then the
// delete; with the cache on (apiserver-cache) updates and deletes start
// from the watch cache's object, current or stale as the model's own
// watch cache of the resource has seen its last write, and a stale one
// costs a read or a failed transaction. The revisions an op commits
// before its last are published as they commit (CommitObserver).
//
// # Delivery latency
//
// Writers publish each committed revision with its send and response
// times into a ring indexed by revision; watchers look every event up as
// it arrives. An event that arrives before its writer has the response
// waits, per watcher, until the write publishes or no write that could
// have caused it is still in flight. Latency from the response is a lower
// bound of the delay from commit (the response follows the commit);
// latency from the send an upper bound. Samples go in batches into HDR
// histograms shared by all watchers and into a one-second series, so
// memory does not grow with events. A watcher held back (Reflector.Hold,
// Observer.HoldBack) has its samples from then on kept in histograms of
// their own (report.DeliveryStats.HeldBack): resumed from a watch cache's
// history, it receives the events of its hold late by up to the hold, a
// delay of the scenario that would otherwise make the run's p90 and p99.
//
// # Validation
//
// The Recorder watches the whole key space from the first revision any
// watcher can see; since every revision changes at least one key, it must
// see every revision, and reports any it skips. Every watch of every
// watcher is checked against etcd's guarantees as etcd's robustness tests
// check them (tests/robustness/validate/watch.go): ordered, unique,
// atomic, reliable (no event of the history missing between the watch's
// start and its last event or progress notification), resumable (the
// first event is the first at or after the start revision), bookmarkable
// (nothing at or below a progress notification after it: an event that
// arrives after one is a bookmark violation, neither lost nor duplicated);
// and prevKV against the watcher's cache. The history checks take
// WatchEvents (key, revision, put or delete, create), whichever client
// set delivered them: the Reflector makes them from its etcd responses,
// the Observer is given them from client-go's events; a resourceVersion
// from kube-apiserver that is not a revision is a violation of its own
// (ViolationUnparsedResourceVersion), never a dropped event. etcd v3.7.3 breaks bookmarkable
// on a stream that carries several watches: a progress request's answer
// can reach a watch created just after the request ahead of that watch's
// events (scripts/repro-progress-overtake.sh), as the fault runner's
// progress requests on a lagging watcher's stream provoke. At the end each cache is compared with
// etcd's state at the watcher's last revision. Violations carry the
// revision where they happened. Every write etcd acknowledged must also be
// in the history: that checks the recorder when a user limited to the
// benchmark's prefix cannot watch the whole key space and the recorder
// falls back to the prefix (Recorder.FallbackScope).
//
// # Clusters and faults
//
// A Target lists one endpoint per member. Every connection has them all
// and fails over, as kube-apiserver's does, unless Options.PinConnections
// dials connection i to member i mod N alone, which attributes write and
// delivery latency to members. Compaction is cluster-wide; the
// defragmentation goes member by member, the leader last.
//
// When the target's member processes are the run's (Target.Members), each
// Options.Faults kills, pauses or cuts off the leader or a follower and
// then undoes it. A worked timeline, kill-leader at 10 s for 5 s:
//
//	 9 s   probe starts: 20 small writes and reads per second, every member
//	10 s   leader found (status of each member) and killed: t0
//	       writes through every member at once, retried: the first success
//	       at t0+2.1 s, revision R, is when writes succeeded again
//	       every watcher and the recorder must see R (event or progress
//	       notification): the last one at t0+2.2 s; recovery is the later
//	15 s   the member restarts on its data; all members have one leader
//	       again at t0+5.4 s: healthy
//	       the window ends a write timeout later (or when the writers end):
//	       relists started, writer errors and the probe's figures in it
//
// A watch that a fault ends resumes from the watcher's last revision:
// clientv3 does it inside a connection that fails over; a reflector whose
// watch ends with "no leader" (kube-apiserver sets require-leader) lists
// again (informer) or watches again (watch cache). The history recorder
// resumes on its own connection, so that no event goes unchecked.
//
// # Clusters lwbench does not own
//
// Run refuses a prefix that already holds keys before writing anything
// (ErrPrefixNotEmpty), unless Options.ReusePrefix. The caller decides
// whether to compact and defragment; Options.NamespaceCompactRevKey keeps
// the compactor's compare-and-swap key under the prefix, away from a real
// kube-apiserver's compact_rev_key; Options.Cleanup revokes the leases the
// run granted and deletes each key it created while the key's create
// revision is still one of the run's, at the end and after a failure.
//
// # Interruption
//
// When ctx ends during the writes (SIGINT), Run, Watch and Put stop
// writing and still hand back what they measured: Session.AfterWrites
// gives the confirmation, the validation and the collection a context of
// their own, bounded by 20 s; the watchers stopped with ctx, so nobody
// waits for them to confirm (ReflectorSet.WaitSynced). The result says
// Interrupted, and the error wraps ctx's. Options.Abandon (a second
// SIGINT) ends that context too: Run then returns no result and an error
// naming the steps it did not take (ErrAbandoned), and cuts the cleanup
// of a cluster it does not own short, saying so.
package watchload
