// Package compaction reproduces how Kubernetes compacts etcd and measures
// what compaction and defragmentation cost.
//
// # kube-apiserver's compactor
//
// Every --etcd-compaction-interval (5 minutes by default) each
// kube-apiserver runs one transaction on the key "compact_rev_key":
//
//	if version(compact_rev_key) == t { put(compact_rev_key, rev) } else { get(compact_rev_key) }
//
// where t is the version it saw last and rev the header revision it saw on
// its previous tick. The apiserver whose transaction succeeds compacts to
// rev; the others adopt the key's version and skip. So history always
// covers at least one interval, several apiservers compact once per
// interval between them, and nothing is compacted on start-up, when rev is
// still 0 (k8s.io/apiserver/pkg/storage/etcd3/compact.go). A worked
// timeline, interval I, one apiserver:
//
//	t=0   txn(version==0) succeeds: version 1, rev 0 -> no compaction; rev := R0
//	t=I   txn(version==1) succeeds: version 2, compact(R0); rev := R1
//	t=2I  txn(version==2) succeeds: version 3, compact(R1); rev := R2
//
// Compactor runs it one Tick at a time on its caller's schedule.
//
// # Every N revisions
//
// RevisionCompactor compacts every N revisions, keeping a fixed number of
// revisions of history, as etcd's --auto-compaction-mode=revision and
// etcd's benchmark --compact-index-delta do. Both compactors implement
// Ticker.
//
// # Defragmentation
//
// Defragment rewrites one member's bbolt file and blocks its reads and
// writes for the whole duration (server/storage/backend/backend.go defrag).
// DefragmentAll does one member at a time, never two; LeaderLast orders the
// leader last. A compaction deletes the compacted revisions in batches of
// 1,000 with 10 ms pauses under the backend's batch lock
// (server/storage/mvcc/kvstore_compaction.go), and a defragmentation that
// starts between two batches holds the member until both are done: Gate
// keeps them apart, and CompactThenDefragment measures either order,
// in turn or overlapping.
//
// # Scheduler
//
// Scheduler runs a load's compaction and defragmentation schedule on a
// clock (k8s.io/utils/clock, so tests drive it with a fake one): a tick
// every interval, watchers held back once, released after the first
// compaction above the revision they resume from, then one
// defragmentation. It decides when; the session does the work through the
// small Actor interface it implements. Its documentation has the worked
// timeline.
//
// # Probe
//
// Probe reads and writes one key at a fixed rate while an experiment
// runs: latency from each operation's scheduled time (a stalled member
// cannot hide the operations it delayed), errors, timeouts, the longest
// stall, a series of buckets for latency-over-time plots, and windows
// around the events an experiment marks. Its samples are bounded
// (ProbeOptions.MaxSamples).
package compaction
