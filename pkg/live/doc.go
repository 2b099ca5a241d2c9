// Package live reads what etcdinspect reports offline from a running etcd
// cluster instead of a db file, with read-only requests only: Status,
// MemberList, AlarmList, Range (count_only, keys_only, serializable) and
// HashKV.
// It never writes, compacts, defragments or grants a lease, so a role with
// read access to the key range is enough: Status and AlarmList need an
// authenticated user and no more (server/etcdserver/api/v3rpc/
// maintenance.go), ReadStatus's revision probes range the one key
// compact_rev_key, ReadUsage ranges the whole key space, ReadKeys its
// prefix; ReadMembers' HashKV needs the root role.
//
// # Revisions
//
// A scan is pinned to one revision: the header revision of its first
// Range (ReadAtRevision, a linearizable read); every later page asks for
// that revision, serializable, so the result is the key space of one
// instant, the same instant a snapshot saved at that revision holds. A
// member that has not applied that revision yet refuses the page (etcd's
// ErrFutureRev) rather than answer from another instant.
//
// The compact revision is found by etcd's own rule for a Range at an old
// revision: etcd refuses a revision below the compact revision with
// ErrCompacted and serves the compact revision itself
// (server/storage/mvcc/kvstore_txn.go rangeKeys). CompactRevision bisects
// [1, ReadAtRevision] with count_only Ranges of one key (about 40 cheap
// requests). A compaction that runs during the bisection can make the
// answer older than the newest compaction; kube-apiserver's compact_rev_key
// is not read, because it names the revision kube-apiserver asked for,
// not one etcd completed, and misses compactions by etcd's
// --auto-compaction or etcdctl.
//
// # Revisions kept per key
//
// A compaction at revision C keeps, per key, the latest entry at or below
// C unless it is a tombstone, and every entry above C
// (server/storage/mvcc/key_index.go compact). Live, a key's version now
// minus its version at C, plus the entry kept at C, is the number of its
// entries the key bucket holds; a key created after C holds its version.
// That needs two keys_only reads, at ReadAtRevision and at C. A key
// deleted after C (and not re-created) is invisible to both reads, and a
// key deleted and re-created after C hides its earlier generation: the
// revisions counted are then a lower bound of what a snapshot's key bucket
// holds (Usage.RevisionsLowerBound).
//
// # Cost
//
// keys_only Ranges are served from etcd's in-memory index on etcd 3.7
// (etcd PR 21791); older servers read every value from disk to answer
// them (etcd issue 20386), which costs what a full read of values does.
// ReadUsage and ReadKeys therefore refuse older servers unless the caller
// allows value reads (ErrValueReads).
//
// HashKV modifies nothing, but a member answers it by reading every entry
// of its key space up to the revision asked, values included
// (server/storage/mvcc/hash.go): ReadMembers costs every member a full
// read of its db.
package live
