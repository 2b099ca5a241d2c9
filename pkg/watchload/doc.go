// Package watchload drives Kubernetes-style list/watch load against etcd
// and measures it.
//
// # The load
//
// Writers create, update and delete pods with kube-apiserver's
// transactions (create if absent, update and delete if the mod_revision is
// the one last read), on an open-loop schedule: write i is due at
// start + i/rate, and its latency counts from then, so a stalled member
// cannot hide the writes it delayed. Reflectors LIST the pods in pages
// pinned to the first page's revision and WATCH from the next revision with
// prevKV, as client-go's reflector does against etcd directly; a watch
// cancelled because its revision was compacted ends in a relist. A
// compactor ticks on kube-apiserver's algorithm (package compaction).
//
// # The measurements
//
// Every write is recorded with its revision and its scheduled, send and
// response times; every event with its revision and receipt time. After the
// run the two are joined by revision: delivery latency from the writer's
// response (an upper bound of the commit) and from the send. The same join
// checks etcd's watch guarantees per watcher: no event lost inside the
// window a watch covered, none duplicated or out of order, prevKV matching
// the cache, and at the end each cache equal to etcd's state.
package watchload
