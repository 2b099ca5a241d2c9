// Package wal reads an etcd member's write-ahead log and snap files
// offline and read-only, and maps every request in them onto Kubernetes'
// key space: who writes what, how much, and where the log is damaged.
//
// # Safety
//
// Files are opened O_RDONLY and only read; nothing is locked, repaired or
// truncated. Every file is opened through internal/inputfile: without
// blocking (a FIFO does not hang open(2)), regular files only (a FIFO, a
// directory or a device named *.wal or *.snap is a fault saying what it
// is), following a symbolic link to a regular file and reporting it. etcd's own wal.Open/ReadAll with repair rewrites the last
// segment of a torn log, so this package never calls it: it decodes the
// record framing itself (record.go) and the records' contents with etcd's
// own protobuf types (walpb, raftpb, etcdserverpb, snappb).
//
// # Segments and records
//
// member/wal holds segments named "%016x-%016x.wal" (sequence, index of
// the first entry the segment may hold), each preallocated to 64 MB and
// zero-filled past its last record. A segment is a series of frames:
//
//	+--------------------------+---------------------------+---------+
//	| length field (8 bytes LE) | walpb.Record (len bytes)  | padding |
//	+--------------------------+---------------------------+---------+
//
// The low 56 bits of the length field are the record's length; when its
// top bit is set, the low 3 bits of the top byte are the number of padding
// bytes that align the next frame to 8 bytes. A zero length field ends a
// segment (preallocated space). A Record is {type, crc, data}; the types
// are metadata (1, etcdserverpb.Metadata: node and cluster ID), entry (2,
// raftpb.Entry), state (3, raftpb.HardState), crc (4) and snapshot (5,
// walpb.Snapshot: the index and term of a snapshot taken). crc is the
// CRC-32 (Castagnoli) of data chained across records: each record's crc
// continues from the previous one's; a crc record, the first of every
// segment, carries the chain's value at the end of the previous segment
// (server/storage/wal/decoder.go, encoder.go, wal.go).
//
// # Faults
//
// A frame that runs past the end of the segment, or whose bytes hold a
// zeroed 512-byte sector, in the last segment is a torn tail (a write cut
// short by a crash; etcd's repair would truncate it); elsewhere it is
// corruption. A record whose crc does not match is reported and skipped,
// and the chain is resynchronised from the stored crc so that the records
// after it are still checked. A gap in the segment sequence is a missing
// segment; two segments of one sequence number are a duplicate segment,
// and the later one is not read. A segment or .snap file that cannot be
// opened (not a regular file, permission denied) is unreadable. Read
// reports each fault as one Fault (file, offset, what) and keeps reading
// where it can: past a bad record to the next one, past a bad frame to
// the next segment, past an unreadable file to the next one; after 100
// faults in one segment, the rest of it is skipped.
//
// # Limits and memory
//
// A frame's length field is trusted only up to Options.MaxRecordBytes
// (DefaultMaxRecordBytes, 10.5 MiB, above what etcd accepts with
// --max-request-bytes at its recommended ceiling of 10 MiB): a longer
// record is a too-large fault and ends its segment, since etcd 3.5 to 3.7
// check it only against the rest of the file. A .snap file is read only
// up to Options.MaxSnapBytes (DefaultMaxSnapBytes, 512 MiB). Segments are
// streamed through a 1 MiB buffer, one record at a time; a .snap file is
// held once and walked in place. So Read holds at most about four copies
// of the largest record (the frame, and its data decoded as a record, an
// entry and a request) or one .snap file, plus the buffer, beside the
// aggregate below, whatever the size of the files: a 20 GiB segment or
// .snap, or /dev/zero, costs no more. Entries not yet committed are held
// up to MaxPendingBytes (64 MiB of data, plus 160 bytes each); entries
// read past it, until a HardState commits them, are kept as an index
// range only and counted as kind "notCounted", without their requests
// (a FaultNotCounted), so a crafted WAL that never commits costs no more
// either. What is counted grows with the distinct keys written, the
// faults, the member changes and compactions, and a bit per entry index
// replayed. ctx is checked before every record and every 1 MiB of a .snap
// file.
//
// # Entries
//
// Entries are kept as raft would: an entry whose index is at or below one
// already read replaces it and every later uncommitted one (a new leader
// overwriting an old leader's tail). Entries above the last HardState's
// commit index are held until a later state record commits them, up to
// MaxPendingBytes (see Limits and memory), so memory follows the number
// of distinct keys written, not the size of the log.
//
// A normal entry's data is an etcdserverpb.InternalRaftRequest (empty
// data is a new leader's no-op); etcd 3.5 and older also wrote v2 store
// requests (field 2 of InternalRaftRequest, or a bare v2 Request in 3.4
// and older), which are counted by method. Conf change entries are
// raftpb.ConfChange or ConfChangeV2.
//
// # Requests and outcomes
//
// A WAL holds requests, not their results: a Txn's compares may have
// chosen its failure branch (kube-apiserver's update or delete with a
// stale mod_revision), etcd may have refused a request at apply (a lease
// not found), a delete may have found no key. Read counts the writes
// requested, and decides each one's outcome by replaying the committed
// requests in index order on a model of etcd's store (replay.go) that
// starts empty at entry 1, then checks the revision the replay reaches at
// the db's consistent index against member/snap/db. Outcomes are decided
// only when that check passes, and only up to the first entry the model
// cannot follow; the rest are "not decided", and Report.Replay says why.
//
// # Snap files
//
// member/snap holds "%016x-%016x.snap" files (term, index): a
// snappb.Snapshot whose crc is the CRC-32 (Castagnoli) of its data, a
// marshalled raftpb.Snapshot
// (server/etcdserver/api/snap/snapshotter.go). Its metadata says from
// which index on the WAL must be replayed. An empty file, or one without
// data or crc, is a bad snap, as etcd's snapshotter refuses it
// (ErrEmptySnapshot); a snap directory that cannot be listed is
// unreadable.
package wal
