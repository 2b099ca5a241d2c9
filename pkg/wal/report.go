package wal

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// ReportSchemaVersion versions the JSON of Report. Version 2 names the
// writes of the requests "requested" (writes, puts and deletes became
// requestedWrites, requestedPuts and requestedDeletes) and adds their
// outcomes (applied, failed, not decided) and Replay.
const ReportSchemaVersion = 2

// Report is what Read finds in a member's WAL and snap directories.
// Indexes and terms are raft's (uint64); revisions are etcd's (int64).
type Report struct {
	SchemaVersion int    `json:"schemaVersion"`
	WALDir        string `json:"walDir"`
	// SnapDir is the member's snap directory; empty when there is none.
	SnapDir string `json:"snapDir,omitempty"`
	// Prefixes are the Kubernetes prefixes keys were parsed with.
	Prefixes []string `json:"prefixes"`
	// NodeID and ClusterID come from the metadata record, in hex as
	// etcdctl prints them; empty when no metadata record was read.
	NodeID    string `json:"nodeID,omitempty"`
	ClusterID string `json:"clusterID,omitempty"`
	// HardState is the last state record: the member's term, vote and
	// commit index when it wrote it.
	HardState HardState `json:"hardState"`
	// FirstIndex and LastIndex bound the entries read (0 when none);
	// LastTerm is the term of the entry at LastIndex.
	FirstIndex uint64 `json:"firstIndex"`
	LastIndex  uint64 `json:"lastIndex"`
	LastTerm   uint64 `json:"lastTerm"`
	// Entries counts the entries kept (overwritten ones are not);
	// UncommittedEntries those above HardState.Commit.
	Entries            int64 `json:"entries"`
	UncommittedEntries int64 `json:"uncommittedEntries"`
	// OverwrittenEntries counts entries a later entry of the same index
	// replaced (a new leader's log overriding an old leader's tail).
	OverwrittenEntries int64 `json:"overwrittenEntries"`
	// LastSnapshot is the last snapshot record of the WAL: entries up to
	// its index are also in the snap files and the backend.
	LastSnapshot *SnapshotMark `json:"lastSnapshot,omitempty"`
	Segments     []Segment     `json:"segments"`
	SnapFiles    []SnapFile    `json:"snapFiles"`
	// Kinds counts entries per request kind, sorted by kind.
	Kinds []KindRow `json:"kinds"`
	// Writes aggregates the writes requested per resource and namespace,
	// with their outcomes, sorted by resource then namespace; see By for
	// other groupings.
	Writes []WriteRow `json:"writes"`
	// Total sums Writes.
	Total WriteRow `json:"total"`
	// TopKeys are the keys with the most writes requested, at most
	// Options.TopKeys, by writes then bytes descending, then key.
	TopKeys []KeyWrites `json:"topKeys"`
	// Txn summarises the transactions' compares and branches.
	Txn TxnStats `json:"txn"`
	// Compactions lists every compaction request, in index order.
	Compactions []Compaction `json:"compactions"`
	// Leases counts lease requests.
	Leases LeaseChurn `json:"leases"`
	// MemberChanges lists conf changes and member attribute updates, in
	// index order.
	MemberChanges []MemberChange `json:"memberChanges"`
	// Replay says how far the outcomes of the requests were decided.
	Replay Replay `json:"replay"`
	// Series is writes requested and bytes over index ranges of equal width
	// (a power of two, chosen so that there are at most 64).
	Series []SeriesPoint `json:"series"`
	// Faults lists every damage found, in file order.
	Faults []Fault `json:"faults"`
}

// HardState is raft's persistent state.
type HardState struct {
	Term   uint64 `json:"term"`
	Vote   string `json:"vote"` // member ID in hex, "0" for none
	Commit uint64 `json:"commit"`
}

// SnapshotMark is a WAL snapshot record: a snapshot was taken at Index.
type SnapshotMark struct {
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
}

// Segment describes one WAL file.
type Segment struct {
	Name string `json:"name"`
	// Seq and Index are parsed from the name: the segment's sequence
	// number and the index its first entry follows.
	Seq       uint64 `json:"seq"`
	Index     uint64 `json:"index"`
	SizeBytes int64  `json:"sizeBytes"`
	// Link is the target of the symbolic link the segment's name is,
	// which Read followed to a regular file; empty for a regular file.
	Link string `json:"link,omitempty"`
	// Records counts the records decoded; UsedBytes is the offset after
	// the last of them (the rest is preallocated zeros or damage).
	Records   int64 `json:"records"`
	UsedBytes int64 `json:"usedBytes"`
	// FirstEntry and LastEntry are the indexes of the entries it holds
	// (0 when none).
	FirstEntry uint64 `json:"firstEntry"`
	LastEntry  uint64 `json:"lastEntry"`
}

// SnapFile describes one .snap file of the snap directory.
type SnapFile struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"sizeBytes"`
	// Link is the target of the symbolic link the file's name is, which
	// Read followed to a regular file; empty for a regular file.
	Link string `json:"link,omitempty"`
	// Index and Term are the snapshot metadata's; Voters and Learners its
	// ConfState's member IDs in hex.
	Index    uint64   `json:"index"`
	Term     uint64   `json:"term"`
	Voters   []string `json:"voters"`
	Learners []string `json:"learners,omitempty"`
	// DataBytes is the size of the v2 store JSON it carries.
	DataBytes int64 `json:"dataBytes"`
	// OK is false when the file could not be read, was empty or too
	// large, failed its crc or did not decode; a Fault says why.
	OK bool `json:"ok"`
}

// KindRow counts the entries of one request kind. Kinds are the field
// names of etcdserverpb.InternalRaftRequest ("put", "txn", "deleteRange",
// "compaction", "leaseGrant", "authUserAdd", ...), plus "empty" (a new
// leader's no-op), "confChange", "confChangeV2", "v2.<METHOD>" (etcd 3.5
// and older v2 store requests), "undecodable" and "notCounted" (an entry
// whose data was not kept, past MaxPendingBytes: its EntryBytes are 0).
type KindRow struct {
	Kind    string `json:"kind"`
	Entries int64  `json:"entries"`
	// EntryBytes sums the entries' data.
	EntryBytes int64 `json:"entryBytes"`
}

// WriteRow aggregates the writes requested to one group of keys, and
// their outcomes. A WAL holds requests: a write requested is a put or a
// delete of a Put or DeleteRange request, or of a Txn's success branch
// (kube-apiserver's writes are in the success branch, and their failure
// branch only reads). Which branch ran, and whether a write changed the
// store, the WAL does not record: Read decides it by replaying the
// requests (see Replay). Every write requested is applied, failed or not
// decided:
//   - applied: it changed the store (a put stored a revision; a delete
//     removed at least one key);
//   - failed: it did not: its Txn's compares chose the failure branch (a
//     kube-apiserver update or delete with a stale mod_revision, a create
//     of a key that exists), etcd refused the request (lease not found,
//     IgnoreValue/IgnoreLease without the key, a Range at a compacted
//     revision in the same branch), or the delete found no key;
//   - not decided: the replay could not tell (Replay.NotDecided).
type WriteRow struct {
	// Class, Prefix, Group, Resource, Path and Namespace identify the row
	// as in snapshot.UsageRow.
	Class     keyspace.Class `json:"class"`
	Prefix    string         `json:"prefix,omitempty"`
	Group     string         `json:"group"`
	Resource  string         `json:"resource,omitempty"`
	Path      string         `json:"path,omitempty"`
	Namespace string         `json:"namespace,omitempty"`
	// Keys counts the distinct keys of the writes requested.
	Keys int64 `json:"keys"`
	// RequestedWrites is RequestedPuts plus RequestedDeletes.
	RequestedWrites  int64 `json:"requestedWrites"`
	RequestedPuts    int64 `json:"requestedPuts"`
	RequestedDeletes int64 `json:"requestedDeletes"`
	// AppliedWrites is AppliedPuts plus AppliedDeletes; RequestedWrites
	// is AppliedWrites plus FailedWrites plus NotDecidedWrites.
	AppliedWrites    int64 `json:"appliedWrites"`
	AppliedPuts      int64 `json:"appliedPuts"`
	AppliedDeletes   int64 `json:"appliedDeletes"`
	FailedWrites     int64 `json:"failedWrites"`
	NotDecidedWrites int64 `json:"notDecidedWrites"`
	// KeyValueBytes sums the key and value bytes of the puts and the key
	// bytes of the deletes requested, as the requests carry them;
	// ValueBytes sums the puts' values only (the objects as
	// kube-apiserver stores them).
	KeyValueBytes int64 `json:"keyValueBytes"`
	ValueBytes    int64 `json:"valueBytes"`
}

func (r *WriteRow) add(o *WriteRow) {
	r.Keys += o.Keys
	r.RequestedWrites += o.RequestedWrites
	r.RequestedPuts += o.RequestedPuts
	r.RequestedDeletes += o.RequestedDeletes
	r.AppliedWrites += o.AppliedWrites
	r.AppliedPuts += o.AppliedPuts
	r.AppliedDeletes += o.AppliedDeletes
	r.FailedWrites += o.FailedWrites
	r.NotDecidedWrites += o.NotDecidedWrites
	r.KeyValueBytes += o.KeyValueBytes
	r.ValueBytes += o.ValueBytes
}

// KeyWrites counts the writes requested to one key and their outcomes,
// as WriteRow does.
type KeyWrites struct {
	Key              string `json:"key"`
	Resource         string `json:"resource"`
	RequestedWrites  int64  `json:"requestedWrites"`
	RequestedPuts    int64  `json:"requestedPuts"`
	RequestedDeletes int64  `json:"requestedDeletes"`
	AppliedWrites    int64  `json:"appliedWrites"`
	FailedWrites     int64  `json:"failedWrites"`
	NotDecidedWrites int64  `json:"notDecidedWrites"`
	KeyValueBytes    int64  `json:"keyValueBytes"`
	ValueBytes       int64  `json:"valueBytes"`
	// LastIndex is the index of the last entry that requested a write to
	// it.
	LastIndex uint64 `json:"lastIndex"`
}

// TxnStats summarises transactions.
type TxnStats struct {
	Txns int64 `json:"txns"`
	// Compares counts compares per target: "version", "create", "mod",
	// "value", "lease" (etcdserverpb.Compare_CompareTarget).
	Compares map[string]int64 `json:"compares"`
	// SuccessOps and FailureOps count the operations of each branch
	// (puts, deletes, ranges, nested txns).
	SuccessOps int64 `json:"successOps"`
	FailureOps int64 `json:"failureOps"`
	// FailureWrites counts puts and deletes in failure branches: they are
	// not counted in Writes. FailureWritesApplied counts those the replay
	// decided were applied (their Txn's compares failed).
	FailureWrites        int64 `json:"failureWrites"`
	FailureWritesApplied int64 `json:"failureWritesApplied"`
}

// Replay says how far Read could decide the outcome of the requests: by
// replaying the WAL from entry 1 on an empty store at revision 1 (as
// etcd's apply does; see replay in replay.go), then checking the revision
// the replay reaches at the db's consistent index against the db's
// (member/snap/db). The check is what makes the empty start a fact, not
// an assumption: a member restored from a snapshot, or one whose WAL does
// not hold the whole history, reaches another revision, and then nothing
// is decided.
type Replay struct {
	// DB is the db file the replay was checked against; empty when none
	// was read.
	DB string `json:"db,omitempty"`
	// ConsistentIndex is the db's: the index of the last entry applied to
	// it. DBRevision is its current revision as etcd restores it (the
	// last revision, or a higher compact revision:
	// server/storage/mvcc/kvstore.go restore); ReplayRevision the
	// replay's after the entry at ConsistentIndex (0 when the replay did
	// not reach it). They agree when the check passed.
	ConsistentIndex uint64 `json:"consistentIndex"`
	DBRevision      int64  `json:"dbRevision"`
	ReplayRevision  int64  `json:"replayRevision"`
	// DecidedThroughIndex is the index of the last entry whose outcome is
	// decided (0: none); Revision the store's revision after it.
	DecidedThroughIndex uint64 `json:"decidedThroughIndex"`
	Revision            int64  `json:"revision"`
	// NotDecided says why the outcomes of the entries after
	// DecidedThroughIndex are not decided; empty when every entry's is.
	NotDecided string `json:"notDecided,omitempty"`
}

// Compaction is one compaction request.
type Compaction struct {
	Index    uint64 `json:"index"`
	Term     uint64 `json:"term"`
	Revision int64  `json:"revision"`
	Physical bool   `json:"physical"`
}

// LeaseChurn counts lease requests and the puts that attach a lease.
type LeaseChurn struct {
	Grants      int64 `json:"grants"`
	Revokes     int64 `json:"revokes"`
	Checkpoints int64 `json:"checkpoints"`
	// RevokedGranted counts revokes of leases granted in the same WAL.
	RevokedGranted int64 `json:"revokedGranted"`
	// MinTTLSeconds and MaxTTLSeconds bound the granted TTLs (0 without
	// grants).
	MinTTLSeconds int64 `json:"minTTLSeconds"`
	MaxTTLSeconds int64 `json:"maxTTLSeconds"`
	// PutsWithLease counts puts attaching a lease (Kubernetes events,
	// master leases).
	PutsWithLease int64 `json:"putsWithLease"`
}

// MemberChange is a conf change or a member/cluster attribute request.
type MemberChange struct {
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Change is raft's change type ("ConfChangeAddNode", ...) or the
	// request kind ("clusterMemberAttrSet", "clusterVersionSet",
	// "downgradeInfoSet").
	Change string `json:"change"`
	// NodeID is the member ID in hex, when the change names one.
	NodeID string `json:"nodeID,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// SeriesPoint aggregates the entries with index in [FirstIndex, LastIndex]:
// the writes they request and those writes' key and value bytes.
type SeriesPoint struct {
	FirstIndex      uint64 `json:"firstIndex"`
	LastIndex       uint64 `json:"lastIndex"`
	Entries         int64  `json:"entries"`
	RequestedWrites int64  `json:"requestedWrites"`
	KeyValueBytes   int64  `json:"keyValueBytes"`
}

// FaultKind classifies a Fault.
type FaultKind string

// The kinds of fault.
const (
	// FaultTornTail is a last record cut short by a crash (a zeroed
	// sector, or a frame past the end of the last segment); etcd's repair
	// truncates it.
	FaultTornTail FaultKind = "torn-tail"
	// FaultCorruptFrame is a frame that cannot be decoded before the end
	// of the log; the rest of its segment is skipped.
	FaultCorruptFrame FaultKind = "corrupt-frame"
	// FaultCRCMismatch is a record whose crc does not match the chain; it
	// is skipped.
	FaultCRCMismatch FaultKind = "crc-mismatch"
	// FaultCRCChain is a segment whose opening crc record does not
	// continue the previous segment's chain.
	FaultCRCChain FaultKind = "crc-chain"
	// FaultMissingSegment is a gap in the segments' sequence numbers.
	FaultMissingSegment FaultKind = "missing-segment"
	// FaultIndexGap is an entry index that skips indexes.
	FaultIndexGap FaultKind = "index-gap"
	// FaultBadEntry is an entry, state or metadata record whose data does
	// not decode.
	FaultBadEntry FaultKind = "bad-entry"
	// FaultBadSnap is a .snap file that is empty, fails its crc or does
	// not decode: etcd would not load it (ErrEmptySnapshot,
	// ErrCRCMismatch: server/etcdserver/api/snap/snapshotter.go).
	FaultBadSnap FaultKind = "bad-snap"
	// FaultDuplicateSegment is a segment whose sequence number an earlier
	// segment (by name) has too; it is not read. etcd refuses to open
	// such a WAL (server/storage/wal/util.go isValidSeq).
	FaultDuplicateSegment FaultKind = "duplicate-segment"
	// FaultUnreadable is a segment, a .snap file or the snap directory
	// that cannot be opened or read: not a regular file (a FIFO, a
	// directory, a device; the message says which), permission denied,
	// an I/O error. Reading goes on with the next file.
	FaultUnreadable FaultKind = "unreadable"
	// FaultTooLarge is a frame whose length field claims a record larger
	// than Options.MaxRecordBytes (the rest of its segment is skipped),
	// or a .snap file larger than Options.MaxSnapBytes (not read).
	FaultTooLarge FaultKind = "too-large"
	// FaultNotCounted is an entry read while more than MaxPendingBytes of
	// entries were pending a commit: it and the entries read until they
	// are committed are counted as kind "notCounted", without their data,
	// and the outcomes after it are not decided. It is reported once.
	FaultNotCounted FaultKind = "not-counted"
)

// Fault is one damage found, with the file and the byte offset of the
// frame (or file) at fault.
type Fault struct {
	File    string    `json:"file"`
	Offset  int64     `json:"offset"`
	Kind    FaultKind `json:"kind"`
	Message string    `json:"message"`
}

// Error implements error: "FILE offset N: KIND: MESSAGE".
func (f *Fault) Error() string {
	return fmt.Sprintf("%s offset %d: %s: %s", f.File, f.Offset, f.Kind, f.Message)
}

// By groups the write rows by dim as snapshot.Usage.By does: per resource
// (all namespaces together), per namespace, or per API group, keys that
// are not objects by their class; rows are sorted by writes requested
// descending, then by their labels.
func (r *Report) By(dim snapshot.Dimension) []WriteRow {
	type id struct {
		class                                    keyspace.Class
		prefix, group, resource, path, namespace string
	}
	m := map[id]*WriteRow{}
	var order []id
	for _, w := range r.Writes {
		var k id
		switch dim {
		case snapshot.ByNamespace:
			k = id{class: w.Class, namespace: w.Namespace}
			if w.Class.IsObject() {
				k.class = keyspace.ClassObject
			}
		case snapshot.ByGroup:
			k = id{class: w.Class, group: w.Group}
		default:
			k = id{class: w.Class, prefix: w.Prefix, group: w.Group, resource: w.Resource, path: w.Path}
		}
		row, ok := m[k]
		if !ok {
			row = &WriteRow{Class: k.class, Prefix: k.prefix, Group: k.group, Resource: k.resource, Path: k.path, Namespace: k.namespace}
			m[k] = row
			order = append(order, k)
		}
		row.add(&w)
	}
	out := make([]WriteRow, 0, len(order))
	for _, k := range order {
		out = append(out, *m[k])
	}
	slices.SortStableFunc(out, func(a, b WriteRow) int {
		return cmp.Or(cmp.Compare(b.RequestedWrites, a.RequestedWrites), cmp.Compare(a.Class, b.Class), cmp.Compare(a.Prefix, b.Prefix),
			cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Namespace, b.Namespace))
	})
	return out
}
