// Package snapshot reads etcd backend databases offline and read-only: a
// member's member/snap/db or a file written by `etcdctl snapshot save`.
//
// # Safety
//
// Open uses bbolt's read-only mode: the file is opened O_RDONLY and mapped
// read-only, and no transaction is ever committed. (A read-write bbolt open
// rewrites an etcd file, because etcd does not sync bbolt's freelist.) A
// file locked by a running member gives ErrLocked after a short timeout
// instead of a hang. Panics from bbolt on corrupt pages and faults on
// truncated files are recovered and returned as ErrCorrupt.
//
// # Layout
//
// The "key" bucket maps 17-byte revisions (18 with the tombstone marker) to
// marshalled mvccpb.KeyValue; "meta" holds the consistent index, term,
// storage version and compact revisions; "lease" maps 8-byte lease IDs to
// leasepb.Lease (server/storage/schema/bucket.go). ForEachRevision streams
// the key bucket in revision order; Usage and Status aggregate one scan.
package snapshot
