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
// # Which member answers
//
// The Ranges go wherever the Client sends them. The commands read one
// member through a client of its endpoint alone, chosen by ChooseMember
// (a follower unless the user names one), so the serializable pages load
// a member the writes do not wait on; Usage.MemberID and Keys.MemberID
// name the member from the responses' headers. On etcd 3.7 a scan is one
// RangeStream (DefaultScanMethod, measured by BenchmarkScanMethods), on
// older servers pages of MaxKeysPerRequest keys.
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
// # History bytes
//
// A Range tells only the current entry of a live key. HistoryEstimate
// multiplies its revisions kept less one by its current entry bytes.
// HistoryExact reads what the key bucket holds instead: the entry kept at
// the compact revision C of every key (a Range with values at C), and
// every entry after C by replaying a watch from C+1 to ReadAtRevision;
// each entry that is not a live key's current one is history, a delete
// event a tombstone (its bucket key 18 bytes, its value the KeyValue of
// the key alone). Worked example, C = 10, read at 20: a key put at 8 and
// 15 and deleted at 18 holds the entry at 8 (kept at C, read at C), 15
// and the tombstone at 18 (replayed): three entries of history, no live
// one; a key put at 5 and never since is live, its entry at 5 the current
// one, no history. The replay costs the member a read of every revision
// since C.
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
