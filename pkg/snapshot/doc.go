// Package snapshot reads etcd backend databases offline and read-only: a
// member's member/snap/db, a data directory, or a file written by
// `etcdctl snapshot save`, of etcd 3.4 to 3.7.
//
// # Safety
//
// Open takes a shared flock (a running member holds an exclusive one: Open
// gives ErrLocked after Options.LockTimeout instead of hanging), opens the
// file O_RDONLY and maps it PROT_READ. No bbolt transaction is ever begun,
// so nothing can be written back (a read-write bbolt open rewrites an etcd
// file, because etcd does not sync bbolt's freelist).
//
// # Reading pages
//
// The package reads bbolt's page format itself (bolt.go) through
// bounds-checked accessors: a malformed page, element or entry is an error
// wrapping ErrCorrupt that names the page or revision, never a panic, and
// every walk visits a page at most once, so a corrupt tree cannot loop.
// Faults on the mapping (a file truncated while open) are turned into
// ErrCorrupt by debug.SetPanicOnFault in every goroutine that reads it.
// This is also why Check reimplements bbolt's tx.Check: bbolt runs its
// check, and its free-page scan for files without a synced freelist, in
// goroutines of its own, where a panic on a corrupt page would end the
// process.
//
// # Scanning
//
// The "key" bucket maps 17-byte revisions (18 with the tombstone marker) to
// marshalled mvccpb.KeyValue, decoded with protowire without copying
// (DecodeKeyValue). A scan splits the bucket's B+tree into contiguous
// subtrees and gives each worker (Options.Workers, default GOMAXPROCS) a
// range of them in revision order; per-key aggregates of the ranges are
// merged oldest first. Memory follows the number of distinct keys, not the
// number of revisions or the file size. Status, Usage, Keys, Leases,
// Compaction and Diff aggregate one scan each (Compaction two); Get scans
// backwards from the newest entry; History scans in parallel.
//
// # Other buckets
//
// "meta" holds the consistent index, term, confState, storage version and
// compact revisions; "lease" maps 8-byte lease IDs to leasepb.Lease;
// "members", "members_removed", "cluster", "alarm", "auth", "authUsers" and
// "authRoles" describe the cluster (server/storage/schema/bucket.go).
package snapshot
