package wal

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// maxSeriesPoints bounds Report.Series: when there would be more, the
// width of a point doubles and neighbours merge.
const maxSeriesPoints = 64

// keyStat counts the writes requested to one key and their outcomes.
type keyStat struct {
	puts, deletes               int64
	appliedPuts, appliedDeletes int64
	failed, notDecided          int64
	keyValueBytes, values       int64
	lastIndex                   uint64
}

// count adds one write's outcome.
func (s *keyStat) count(o outcome, put bool) {
	switch {
	case o == notDecided:
		s.notDecided++
	case o == failed:
		s.failed++
	case put:
		s.appliedPuts++
	default:
		s.appliedDeletes++
	}
}

// MaxPendingBytes bounds what Read holds of the entries not yet known to
// be committed (above the last HardState's commit index): their data
// plus pendingEntryOverhead bytes each. An entry read while the entries
// held would pass it (unless none is held: one entry, however large, is
// always held) is kept only as its index: its data is dropped, and when it
// is committed, or at the end of the log, it is counted as kind
// "notCounted", without its bytes or requests, and the replay stops
// before it. A FaultNotCounted names the first such entry. etcd commits
// entries within a few records of appending them, so a WAL passes the
// bound only when a leader kept appending without a quorum for 64 MiB of
// requests, or when it was crafted.
const MaxPendingBytes = 64 << 20

// pendingEntryOverhead is what a held entry costs beside its data (the
// pendingEntry, the raftpb.Entry and the slice's share), charged against
// MaxPendingBytes so that entries without data are bounded too.
const pendingEntryOverhead = 160

// pendingEntry is an entry not yet known to be committed.
type pendingEntry struct {
	file   string
	offset int64
	e      *raftpb.Entry
}

// notKept is the run of n entries read after the pending entries held,
// whose data was dropped at MaxPendingBytes: at indexes first to last,
// one each, the last of term lastTerm. An index gap inside the run (itself
// a FaultIndexGap) is not kept: the entries before the last are taken to
// follow first without one.
type notKept struct {
	first, last uint64
	lastTerm    uint64
	n           uint64
}

// index returns the index of the i-th entry of the run, from 0.
func (d *notKept) index(i uint64) uint64 {
	if i == d.n-1 {
		return d.last
	}
	return d.first + i
}

// add appends entry idx of term.
func (d *notKept) add(idx, term uint64) {
	if d.n == 0 {
		d.first = idx
	}
	d.n++
	d.last, d.lastTerm = idx, term
}

// truncate drops the entries at or above idx and returns how many.
func (d *notKept) truncate(idx uint64) uint64 {
	keep := uint64(0)
	for keep < d.n && d.index(keep) < idx {
		keep++
	}
	if keep == d.n {
		return 0
	}
	dropped := d.n - keep
	if keep == 0 {
		*d = notKept{}
		return dropped
	}
	// The new last entry's term was not kept: the entry that overwrites
	// follows it and becomes the run's last (hold).
	d.n, d.last = keep, d.index(keep-1)
	return dropped
}

// aggregator folds records into a Report.
type aggregator struct {
	rep *Report

	// crc is the chain's value after the last record; altCRC the value
	// computed over a record whose stored crc did not match.
	crc      uint32
	altCRC   uint32
	altValid bool
	// afterGap is set after a missing segment or a skipped record: the
	// next entry may skip indexes without a further fault.
	afterGap bool

	commit    uint64
	lastIndex uint64 // of the last entry applied or pending
	// pending are the entries held until a HardState commits them,
	// pendingBytes what they cost (data plus pendingEntryOverhead each,
	// at most MaxPendingBytes plus one entry); dropped are those read
	// after them without their data.
	pending      []pendingEntry
	pendingBytes int64
	dropped      notKept
	droppedFault bool // a FaultNotCounted was reported

	// rp replays the requests to decide their outcomes.
	rp *replay

	kinds      map[string]*KindRow
	keys       map[string]*keyStat
	granted    map[int64]bool
	series     map[uint64]*SeriesPoint // by index / seriesWidth
	seriesWide uint64
}

func newAggregator(rep *Report) *aggregator {
	return &aggregator{rep: rep, rp: newReplay(), kinds: map[string]*KindRow{}, keys: map[string]*keyStat{},
		granted: map[int64]bool{}, series: map[uint64]*SeriesPoint{}, seriesWide: 1}
}

func (a *aggregator) fault(f Fault) { a.rep.Faults = append(a.rep.Faults, f) }

func (a *aggregator) state(hs *raftpb.HardState) {
	a.rep.HardState = HardState{Term: hs.GetTerm(), Vote: hexID(hs.GetVote()), Commit: hs.GetCommit()}
	a.commit = hs.GetCommit()
	a.flush()
}

// flush applies the pending entries at or below the commit index.
func (a *aggregator) flush() {
	n := 0
	for n < len(a.pending) && a.pending[n].e.GetIndex() <= a.commit {
		n++
	}
	for _, p := range a.pending[:n] {
		a.apply(p)
		a.pendingBytes -= pendingCost(p.e)
	}
	clear(a.pending[:n])
	a.pending = slices.Delete(a.pending, 0, n)
	if len(a.pending) == 0 && a.dropped.n > 0 {
		a.applyDropped(a.commit)
	}
}

// pendingCost is what a held entry counts against MaxPendingBytes.
func pendingCost(e *raftpb.Entry) int64 { return int64(len(e.GetData())) + pendingEntryOverhead }

// applyDropped counts the entries of a.dropped up to index through as
// kind "notCounted" and removes them from it. Their terms were not kept
// but the last one's: Report.LastTerm is exact once the last is counted.
func (a *aggregator) applyDropped(through uint64) {
	d := &a.dropped
	for d.n > 0 && d.index(0) <= through {
		idx := d.index(0)
		a.rp.lose(idx, "entry %d was read while more than %d bytes of entries were pending a commit: its request was not kept", idx, MaxPendingBytes)
		a.count(idx, d.lastTerm)
		a.countKind("notCounted", 0)
		if d.n == 1 {
			*d = notKept{}
			return
		}
		d.first, d.n = idx+1, d.n-1
	}
}

func (a *aggregator) snapshot(s *walpb.Snapshot) {
	a.rep.LastSnapshot = &SnapshotMark{Index: s.GetIndex(), Term: s.GetTerm()}
	// A follower restored from a leader's snapshot continues after it.
	if s.GetIndex() > a.lastIndex {
		a.lastIndex = s.GetIndex()
		at := a.rp.next // the entry expected next was not replayed
		if at == 0 {
			at = s.GetIndex() + 1
		}
		a.rp.lose(at, "the member received a snapshot at index %d: the store's state then is only in the db", s.GetIndex())
	}
}

// entry takes an entry as raft's log would: it replaces the pending
// entries at or above its index.
func (a *aggregator) entry(file string, offset int64, e *raftpb.Entry) {
	idx := e.GetIndex()
	switch {
	case a.lastIndex != 0 && idx > a.lastIndex+1 && !a.afterGap:
		a.fault(Fault{File: file, Offset: offset, Kind: FaultIndexGap,
			Message: fmt.Sprintf("entry %d follows entry %d: entries %d to %d are missing", idx, a.lastIndex, a.lastIndex+1, idx-1)})
	case a.lastIndex != 0 && idx <= a.lastIndex:
		a.truncate(idx)
		if idx <= a.applied() {
			a.fault(Fault{File: file, Offset: offset, Kind: FaultIndexGap,
				Message: fmt.Sprintf("entry %d (term %d) rewrites an entry at or below the commit index %d", idx, e.GetTerm(), a.commit)})
		}
	}
	a.afterGap = false
	a.lastIndex = idx
	a.hold(file, offset, e)
	if idx <= a.commit {
		a.flush()
	}
}

// truncate drops the pending entries at or above idx, which a new entry
// overwrites.
func (a *aggregator) truncate(idx uint64) {
	a.rep.OverwrittenEntries += int64(a.dropped.truncate(idx))
	n := len(a.pending)
	for n > 0 && a.pending[n-1].e.GetIndex() >= idx {
		n--
		a.pendingBytes -= pendingCost(a.pending[n].e)
	}
	a.rep.OverwrittenEntries += int64(len(a.pending) - n)
	clear(a.pending[n:]) // let the entries' data go
	a.pending = a.pending[:n]
}

// hold keeps e until it is committed: whole while the entries held cost
// at most MaxPendingBytes, otherwise (and after the first entry dropped,
// so that the entries stay in index order) as an index of a.dropped.
func (a *aggregator) hold(file string, offset int64, e *raftpb.Entry) {
	c := pendingCost(e)
	if a.dropped.n == 0 && (len(a.pending) == 0 || a.pendingBytes+c <= MaxPendingBytes) {
		a.pending = append(a.pending, pendingEntry{file: file, offset: offset, e: e})
		a.pendingBytes += c
		return
	}
	if !a.droppedFault {
		a.droppedFault = true
		a.fault(Fault{File: file, Offset: offset, Kind: FaultNotCounted,
			Message: fmt.Sprintf("entry %d was read while more than %d bytes of entries were pending a commit: its data, and that of the entries read until they are committed, is not kept, so their requests are not counted (kind notCounted)",
				e.GetIndex(), MaxPendingBytes)})
	}
	a.dropped.add(e.GetIndex(), e.GetTerm())
}

// applied returns the index of the last entry applied (committed).
func (a *aggregator) applied() uint64 {
	switch {
	case len(a.pending) > 0:
		return a.pending[0].e.GetIndex() - 1
	case a.dropped.n > 0:
		return a.dropped.index(0) - 1
	}
	return a.rep.LastIndex
}

// count counts entry idx of term in the log, the series and the replay
// (which it begins: see replay.begin) and returns whether the replay is
// to execute its request, and its series point.
func (a *aggregator) count(idx, term uint64) (replayed bool, pt *SeriesPoint) {
	r := a.rep
	if r.FirstIndex == 0 {
		r.FirstIndex = idx
	}
	r.LastIndex, r.LastTerm = idx, term
	r.Entries++
	if idx > a.commit {
		r.UncommittedEntries++
	}
	replayed = a.rp.begin(idx, idx <= a.commit)
	pt = a.point(idx)
	pt.Entries++
	return replayed, pt
}

// countKind counts one entry of kind with dataBytes of data.
func (a *aggregator) countKind(kind string, dataBytes int) {
	k, ok := a.kinds[kind]
	if !ok {
		k = &KindRow{Kind: kind}
		a.kinds[kind] = k
	}
	k.Entries++
	k.EntryBytes += int64(dataBytes)
}

// apply counts one entry.
func (a *aggregator) apply(p pendingEntry) {
	e := p.e
	idx := e.GetIndex()
	r := a.rep
	replayed, pt := a.count(idx, e.GetTerm())
	data := e.GetData()
	kind := ""
	switch e.GetType() {
	case raftpb.EntryType_EntryConfChange:
		kind = "confChange"
		var cc raftpb.ConfChange
		if err := proto.Unmarshal(data, &cc); err != nil {
			a.badEntry(p, kind, err)
			kind = "undecodable"
			break
		}
		r.MemberChanges = append(r.MemberChanges, MemberChange{Index: idx, Term: e.GetTerm(), Change: cc.GetType().String(), NodeID: hexID(cc.GetNodeId())})
	case raftpb.EntryType_EntryConfChangeV2:
		kind = "confChangeV2"
		var cc raftpb.ConfChangeV2
		if err := proto.Unmarshal(data, &cc); err != nil {
			a.badEntry(p, kind, err)
			kind = "undecodable"
			break
		}
		for _, c := range cc.GetChanges() {
			r.MemberChanges = append(r.MemberChanges, MemberChange{Index: idx, Term: e.GetTerm(), Change: c.GetType().String(), NodeID: hexID(c.GetNodeId())})
		}
	default:
		if len(data) == 0 {
			kind = "empty"
			break
		}
		kind = a.request(p, pt, replayed)
	}
	a.countKind(kind, len(data))
}

func (a *aggregator) badEntry(p pendingEntry, what string, err error) {
	a.fault(Fault{File: p.file, Offset: p.offset, Kind: FaultBadEntry,
		Message: fmt.Sprintf("entry %d: %s data does not decode: %v", p.e.GetIndex(), what, err)})
}

// request counts a normal entry's request and returns its kind; when
// replayed is set, the replay executes it first so that its writes are
// counted with their outcome.
func (a *aggregator) request(p pendingEntry, pt *SeriesPoint, replayed bool) string {
	e := p.e
	idx := e.GetIndex()
	var req etcdserverpb.InternalRaftRequest
	if err := proto.Unmarshal(e.GetData(), &req); err != nil {
		if method, ok := v2Method(e.GetData()); ok {
			return "v2." + method
		}
		a.badEntry(p, "request", err)
		a.rp.lose(idx, "entry %d does not decode", idx)
		return "undecodable"
	}
	kind := ""
	req.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if fd.Name() == "header" || fd.Name() == "ID" {
			return true
		}
		kind = fd.JSONName()
		return false
	})
	if kind == "" {
		if method, ok := v2Field(req.ProtoReflect().GetUnknown()); ok {
			return "v2." + method
		}
		a.rp.lose(idx, "entry %d holds a request this etcdinspect does not know", idx)
		return "unknown"
	}
	if replayed {
		a.rp.request(idx, &req)
	}
	r := a.rep
	switch {
	case req.Put != nil:
		a.put(req.Put, idx, pt)
	case req.DeleteRange != nil:
		a.del(req.DeleteRange, idx, pt)
	case req.Txn != nil:
		a.txn(req.Txn, idx, pt)
	case req.Compaction != nil:
		r.Compactions = append(r.Compactions, Compaction{Index: idx, Term: e.GetTerm(), Revision: req.Compaction.GetRevision(), Physical: req.Compaction.GetPhysical()})
	case req.LeaseGrant != nil:
		l := &r.Leases
		ttl := req.LeaseGrant.GetTTL()
		if l.Grants == 0 || ttl < l.MinTTLSeconds {
			l.MinTTLSeconds = ttl
		}
		l.MaxTTLSeconds = max(l.MaxTTLSeconds, ttl)
		l.Grants++
		a.granted[req.LeaseGrant.GetID()] = true
	case req.LeaseRevoke != nil:
		r.Leases.Revokes++
		if a.granted[req.LeaseRevoke.GetID()] {
			r.Leases.RevokedGranted++
		}
	case req.LeaseCheckpoint != nil:
		r.Leases.Checkpoints++
	case req.ClusterMemberAttrSet != nil:
		m := req.ClusterMemberAttrSet
		r.MemberChanges = append(r.MemberChanges, MemberChange{Index: idx, Term: e.GetTerm(), Change: kind, NodeID: hexID(m.GetMember_ID()),
			Detail: fmt.Sprintf("name=%s clientURLs=%v", m.GetMemberAttributes().GetName(), m.GetMemberAttributes().GetClientUrls())})
	case req.ClusterVersionSet != nil:
		r.MemberChanges = append(r.MemberChanges, MemberChange{Index: idx, Term: e.GetTerm(), Change: kind, Detail: "version=" + req.ClusterVersionSet.GetVer()})
	case req.DowngradeInfoSet != nil:
		r.MemberChanges = append(r.MemberChanges, MemberChange{Index: idx, Term: e.GetTerm(), Change: kind,
			Detail: fmt.Sprintf("enabled=%v version=%s", req.DowngradeInfoSet.GetEnabled(), req.DowngradeInfoSet.GetVer())})
	}
	return kind
}

func (a *aggregator) key(k []byte) *keyStat {
	s, ok := a.keys[string(k)]
	if !ok {
		s = &keyStat{}
		a.keys[string(k)] = s
	}
	return s
}

// outcome returns the outcome of the write op (a *PutRequest or
// *DeleteRangeRequest) of entry idx, which the replay has executed.
func (a *aggregator) outcome(idx uint64, op any) outcome {
	switch {
	case !a.rp.decided(idx):
		return notDecided
	case a.rp.effect[op]:
		return applied
	}
	return failed
}

func (a *aggregator) put(p *etcdserverpb.PutRequest, idx uint64, pt *SeriesPoint) {
	s := a.key(p.GetKey())
	n := int64(len(p.GetKey()) + len(p.GetValue()))
	s.puts++
	s.count(a.outcome(idx, p), true)
	s.keyValueBytes += n
	s.values += int64(len(p.GetValue()))
	s.lastIndex = idx
	pt.RequestedWrites++
	pt.KeyValueBytes += n
	if p.GetLease() != 0 {
		a.rep.Leases.PutsWithLease++
	}
}

// del counts a delete once, on its start key (a range delete removes keys
// the WAL does not name).
func (a *aggregator) del(d *etcdserverpb.DeleteRangeRequest, idx uint64, pt *SeriesPoint) {
	s := a.key(d.GetKey())
	s.deletes++
	s.count(a.outcome(idx, d), false)
	s.keyValueBytes += int64(len(d.GetKey()))
	s.lastIndex = idx
	pt.RequestedWrites++
	pt.KeyValueBytes += int64(len(d.GetKey()))
}

func (a *aggregator) txn(t *etcdserverpb.TxnRequest, idx uint64, pt *SeriesPoint) {
	st := &a.rep.Txn
	st.Txns++
	if st.Compares == nil {
		st.Compares = map[string]int64{}
	}
	for _, c := range t.GetCompare() {
		st.Compares[compareTarget(c.GetTarget())]++
	}
	st.SuccessOps += int64(len(t.GetSuccess()))
	st.FailureOps += int64(len(t.GetFailure()))
	for _, op := range t.GetSuccess() {
		switch {
		case op.GetRequestPut() != nil:
			a.put(op.GetRequestPut(), idx, pt)
		case op.GetRequestDeleteRange() != nil:
			a.del(op.GetRequestDeleteRange(), idx, pt)
		case op.GetRequestTxn() != nil:
			a.txn(op.GetRequestTxn(), idx, pt)
		}
	}
	for _, op := range t.GetFailure() {
		var w any
		switch {
		case op.GetRequestPut() != nil:
			w = op.GetRequestPut()
		case op.GetRequestDeleteRange() != nil:
			w = op.GetRequestDeleteRange()
		default:
			continue
		}
		st.FailureWrites++
		if a.outcome(idx, w) == applied {
			st.FailureWritesApplied++
		}
	}
}

// compareTarget names a compare's target in lower case ("mod", ...).
func compareTarget(t etcdserverpb.Compare_CompareTarget) string {
	switch t {
	case etcdserverpb.Compare_VERSION:
		return "version"
	case etcdserverpb.Compare_CREATE:
		return "create"
	case etcdserverpb.Compare_MOD:
		return "mod"
	case etcdserverpb.Compare_VALUE:
		return "value"
	case etcdserverpb.Compare_LEASE:
		return "lease"
	}
	return fmt.Sprint(int32(t))
}

// v2Field finds field 2 (v2, an etcd 3.5 and older v2 store Request) in
// an InternalRaftRequest's unknown fields and returns its method.
func v2Field(unknown []byte) (string, bool) {
	for len(unknown) > 0 {
		num, typ, n := protowire.ConsumeTag(unknown)
		if n < 0 {
			return "", false
		}
		unknown = unknown[n:]
		if num == 2 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(unknown)
			if m < 0 {
				return "", false
			}
			return v2Method(v)
		}
		m := protowire.ConsumeFieldValue(num, typ, unknown)
		if m < 0 {
			return "", false
		}
		unknown = unknown[m:]
	}
	return "", false
}

// v2Method decodes a v2 store Request (etcdserverpb.Request of etcd 3.5
// and older: ID 1, Method 2, Path 3, ...) far enough to return its
// method; ok is false when b is not such a message.
func v2Method(b []byte) (method string, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", false
		}
		if num == 2 && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			method = string(v)
		}
		b = b[m:]
	}
	return method, method != ""
}

// point returns the series point of index idx, doubling the points'
// width while there are more than maxSeriesPoints.
func (a *aggregator) point(idx uint64) *SeriesPoint {
	slot := idx / a.seriesWide
	if pt, ok := a.series[slot]; ok {
		return pt
	}
	if len(a.series) >= maxSeriesPoints {
		a.seriesWide *= 2
		merged := map[uint64]*SeriesPoint{}
		for s, pt := range a.series {
			m, ok := merged[s/2]
			if !ok {
				m = &SeriesPoint{}
				merged[s/2] = m
			}
			m.Entries += pt.Entries
			m.RequestedWrites += pt.RequestedWrites
			m.KeyValueBytes += pt.KeyValueBytes
		}
		a.series = merged
		return a.point(idx)
	}
	pt := &SeriesPoint{}
	a.series[slot] = pt
	return pt
}

// finish applies the entries still pending, checks the replay against
// the member's db and builds the sorted rows.
func (a *aggregator) finish(ctx context.Context, o Options) {
	a.applyPending()
	a.checkReplay(ctx)
	a.rows(o)
}

// applyPending applies the entries not committed, at the end of the log.
func (a *aggregator) applyPending() {
	for _, p := range a.pending {
		a.apply(p)
	}
	a.pending, a.pendingBytes = nil, 0
	a.applyDropped(math.MaxUint64)
}

// rows builds the report's sorted rows.
func (a *aggregator) rows(o Options) {
	r := a.rep
	for _, k := range slices.Sorted(maps.Keys(a.kinds)) {
		r.Kinds = append(r.Kinds, *a.kinds[k])
	}
	for _, s := range slices.Sorted(maps.Keys(a.series)) {
		pt := a.series[s]
		pt.FirstIndex, pt.LastIndex = max(s*a.seriesWide, r.FirstIndex), min((s+1)*a.seriesWide-1, r.LastIndex)
		r.Series = append(r.Series, *pt)
	}
	p := o.Parser
	if len(p.Prefixes) == 0 {
		p = keyspace.Parser{Prefixes: keyspace.DetectPrefixes(func(yield func(string) bool) {
			for k := range a.keys {
				if !yield(k) {
					return
				}
			}
		})}
	}
	r.Prefixes = p.Prefixes
	if r.Prefixes == nil {
		r.Prefixes = keyspace.KnownPrefixes
	}
	type rowID struct {
		class                                    keyspace.Class
		prefix, group, resource, path, namespace string
	}
	rows := map[rowID]*WriteRow{}
	var top []KeyWrites
	for key, s := range a.keys {
		k := p.Parse(key)
		id := rowID{k.Class, k.Prefix, k.Group, k.Resource, k.Path, k.Namespace}
		row, ok := rows[id]
		if !ok {
			row = &WriteRow{Class: k.Class, Prefix: k.Prefix, Group: k.Group, Resource: k.Resource, Path: k.Path, Namespace: k.Namespace}
			rows[id] = row
		}
		w := WriteRow{Keys: 1, RequestedWrites: s.puts + s.deletes, RequestedPuts: s.puts, RequestedDeletes: s.deletes,
			AppliedWrites: s.appliedPuts + s.appliedDeletes, AppliedPuts: s.appliedPuts, AppliedDeletes: s.appliedDeletes,
			FailedWrites: s.failed, NotDecidedWrites: s.notDecided, KeyValueBytes: s.keyValueBytes, ValueBytes: s.values}
		row.add(&w)
		r.Total.add(&w)
		top = append(top, KeyWrites{Key: key, Resource: snapshot.ResourceLabel(k), RequestedWrites: w.RequestedWrites,
			RequestedPuts: s.puts, RequestedDeletes: s.deletes, AppliedWrites: w.AppliedWrites, FailedWrites: s.failed,
			NotDecidedWrites: s.notDecided, KeyValueBytes: s.keyValueBytes, ValueBytes: s.values, LastIndex: s.lastIndex})
	}
	r.Writes = make([]WriteRow, 0, len(rows))
	for _, row := range rows {
		r.Writes = append(r.Writes, *row)
	}
	slices.SortFunc(r.Writes, func(a, b WriteRow) int {
		return cmp.Or(cmp.Compare(a.Class, b.Class), cmp.Compare(a.Prefix, b.Prefix), cmp.Compare(a.Group, b.Group),
			cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Namespace, b.Namespace))
	})
	n := o.TopKeys
	if n == 0 {
		n = 10
	}
	slices.SortFunc(top, func(a, b KeyWrites) int {
		return cmp.Or(cmp.Compare(b.RequestedWrites, a.RequestedWrites), cmp.Compare(b.KeyValueBytes, a.KeyValueBytes), cmp.Compare(a.Key, b.Key))
	})
	r.TopKeys = top[:max(0, min(n, len(top)))]
	if r.Kinds == nil {
		r.Kinds = []KindRow{}
	}
	if r.Compactions == nil {
		r.Compactions = []Compaction{}
	}
	if r.MemberChanges == nil {
		r.MemberChanges = []MemberChange{}
	}
	if r.Series == nil {
		r.Series = []SeriesPoint{}
	}
	if r.Txn.Compares == nil {
		r.Txn.Compares = map[string]int64{}
	}
}

// dbLockTimeout bounds the wait for the db's lock: a running member holds
// it, and then the replay is not checked.
const dbLockTimeout = time.Second

// checkReplay reads the consistent index and revision of the member's db
// (member/snap/db, read-only) and settles the replay against them. The db
// is not opened when nothing was replayed.
func (a *aggregator) checkReplay(ctx context.Context) {
	if a.rp.next == 0 {
		a.settle("", 0, 0, nil)
		return
	}
	if a.rep.SnapDir == "" {
		a.settle("", 0, 0, fmt.Errorf("no snap directory, so no db"))
		return
	}
	path := filepath.Join(a.rep.SnapDir, "db")
	ci, rev, err := dbAnchor(ctx, path)
	a.settle(path, ci, rev, err)
}

// dbAnchor returns the consistent index of the db at path and its current
// revision as etcd restores it: the last revision, at least 1, or a higher
// compact revision (server/storage/mvcc/kvstore.go restore).
func dbAnchor(ctx context.Context, path string) (consistentIndex uint64, rev int64, err error) {
	db, err := snapshot.OpenContext(ctx, path, snapshot.Options{LockTimeout: dbLockTimeout})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	m, err := db.Meta()
	if err != nil {
		return 0, 0, err
	}
	last, err := db.LastRevision(ctx)
	if err != nil {
		return 0, 0, err
	}
	return m.ConsistentIndex, max(1, last, m.FinishedCompactRevision, m.ScheduledCompactRevision), nil
}

// settle fills Report.Replay: the replay's outcomes stand when the replay
// reached the db's consistent index ci at the db's revision rev;
// otherwise (dbErr set, ci beyond the entries decided, another revision)
// every outcome becomes not decided.
func (a *aggregator) settle(dbPath string, ci uint64, rev int64, dbErr error) {
	r, out := a.rp, &a.rep.Replay
	decidedThrough, revision := uint64(0), int64(0)
	switch {
	case r.next == 0:
	case r.lostAt != 0:
		decidedThrough, revision = min(r.lostAt, r.next)-1, r.revAtLoss
	default:
		decidedThrough, revision = r.next-1, r.rev
	}
	out.DB, out.NotDecided = dbPath, r.why
	if dbErr == nil && dbPath != "" {
		out.ConsistentIndex, out.DBRevision = ci, rev
	}
	why := ""
	switch {
	case r.next == 0:
		// Nothing was replayed; r.why says why.
	case dbErr != nil:
		why = fmt.Sprintf("the replay from entry 1 cannot be checked against the db: %v", dbErr)
	case ci > decidedThrough && r.lostAt != 0:
		why = fmt.Sprintf("%s; that is before the db's consistent index %d, so the replay cannot be checked against the db", r.why, ci)
	case ci > decidedThrough:
		why = fmt.Sprintf("the db's consistent index %d is past the WAL's last entry %d, so the replay from entry 1 cannot be checked against the db", ci, decidedThrough)
	default:
		out.ReplayRevision = r.revisionAt(ci)
		if out.ReplayRevision != rev {
			why = fmt.Sprintf("the replay from entry 1 reaches revision %d at the db's consistent index %d, the db is at revision %d: the store did not start empty (a member restored from a snapshot?)",
				out.ReplayRevision, ci, rev)
		}
	}
	if r.next == 0 || why != "" {
		if why != "" {
			out.NotDecided = why
		}
		for _, s := range a.keys {
			s.notDecided += s.appliedPuts + s.appliedDeletes + s.failed
			s.appliedPuts, s.appliedDeletes, s.failed = 0, 0, 0
		}
		a.rep.Txn.FailureWritesApplied = 0
		return
	}
	out.DecidedThroughIndex, out.Revision = decidedThrough, revision
}
