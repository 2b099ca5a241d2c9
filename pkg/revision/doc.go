// Package revision models etcd's multi-version revisions and the way
// Kubernetes turns them into resourceVersions.
//
// # Revisions
//
// Every etcd transaction that changes the key space gets a new main revision;
// each change inside it gets a sub revision, starting at 0. The pair
// {main, sub} names one entry of the bbolt "key" bucket, and entries sort in
// commit order because the key is the big-endian encoding of the pair
// (server/storage/mvcc/revision.go).
//
// # Kubernetes resourceVersion
//
// kube-apiserver stores objects with metadata.resourceVersion cleared and
// derives it on the way out: an object's resourceVersion is the decimal
// mod_revision of its key, a list's is the header revision of the etcd
// response (k8s.io/apiserver/pkg/storage/etcd3/store.go,
// k8s.io/apiserver/pkg/storage/api_object_versioner.go).
//
// # Compaction
//
// After a compaction at revision C, a read or watch at revision r fails with
// ErrCompacted exactly when r < C; reading at C itself still works
// (server/storage/mvcc/kvstore_txn.go rangeKeys). Compacted is that rule;
// the rest of the module asks it rather than comparing revisions itself.
// ParseResourceVersion and the ResourceVersion formatters are likewise the
// only place a resourceVersion is parsed or formatted.
package revision
