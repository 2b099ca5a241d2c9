package wal

import (
	"bytes"
	"fmt"
	"math/bits"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/lease"
)

// outcome is what became of one write a request asked for.
type outcome int8

const (
	// notDecided: the replay cannot tell (see Replay.NotDecided).
	notDecided outcome = iota
	// applied: the write changed the store (a put stored a revision, a
	// delete removed at least one key).
	applied
	// failed: the write did not change the store: its Txn took the
	// other branch, etcd refused the request, or a delete found no key.
	failed
)

// kvState is a live key's mvccpb.KeyValue without its value.
type kvState struct {
	create, mod, version, lease int64
}

// replay executes the committed requests of a WAL, in index order, on a
// model of etcd's store that starts empty at entry 1, to decide which
// writes took effect. It follows etcd's apply code:
//   - server/etcdserver/apply/uber_applier.go dispatch and
//     apply/backend.go: which requests touch the key-value store;
//   - server/etcdserver/txn/txn.go: a Txn's compares are all evaluated
//     before any of its writes (compareToPath, applyCompare, compareKV: a
//     missing key compares as a zero KeyValue, except for a value compare,
//     which fails), the ops of the branch taken are checked (checkTxn:
//     a Put's lease must exist, IgnoreValue/IgnoreLease need the key, a
//     Range's revision must be neither compacted nor in the future) and
//     any failed check refuses the whole Txn; its writes share one main
//     revision, and the store's revision advances only when some write
//     changed something (txn.go txn);
//   - server/etcdserver/txn/put.go and delete.go: a plain Put or
//     DeleteRange, the same checks;
//   - server/storage/mvcc/kvstore_txn.go put and deleteRange: a put keeps
//     the key's create revision, increments its version and moves its
//     lease; a delete removes the keys in its range and their leases;
//   - server/storage/mvcc/kvstore.go: the revision starts at 1, a
//     compaction must lie in (compact revision, current revision];
//   - server/lease/lessor.go Grant and Revoke: a grant of ID 0, a TTL
//     above MaxLeaseTTL or an existing ID fails; a revoke deletes the
//     lease's keys in one transaction (one revision when it deleted any).
//
// What it cannot follow, it does not guess: the entry where that happens
// and every entry after it are not decided (lose). That is: a WAL that
// does not start at entry 1 (segments purged: the state before them is
// only in the db), missing or undecodable entries, entries not committed,
// value compares (values are not kept), and requests after an alarm is
// raised or auth is enabled (etcd's capped, corrupt and auth appliers,
// server/etcdserver/apply/capped.go, corrupt.go, auth.go).
//
// Memory: the live keys (without values), the leases and their keys, and
// one bit per entry replayed (whether it advanced the revision, so that
// the revision at the db's consistent index can be checked afterwards).
type replay struct {
	// next is the index of the next entry to replay, 0 before entry 1.
	next uint64
	// lostAt is the index of the first entry not decided, 0 while every
	// entry is; why says why.
	lostAt uint64
	why    string
	// revAtLoss is the revision after the entry before lostAt.
	revAtLoss int64

	rev        int64 // mvcc's currentRev
	compactRev int64 // mvcc's compactMainRev; -1 before any compaction
	keys       map[string]kvState
	leases     map[int64]map[string]struct{}
	// advanced has bit i set when entry i+1 advanced the revision.
	advanced []uint64
	// effect holds the write requests of the entry being replayed
	// (*PutRequest, *DeleteRangeRequest) that changed the store.
	effect map[any]bool
	// cur is the index of the entry being replayed; rangeScanned counts
	// the keys visited by range compares and range deletes so far, at
	// most rangeBudget (maxRangeScanned).
	cur                       uint64
	rangeScanned, rangeBudget int64
}

// maxRangeScanned bounds the keys visited by range operations (each
// visits every live key): past it the replay stops, so that its time
// stays bounded (about a second) on a WAL of many range deletes over many
// keys.
const maxRangeScanned = 1 << 26

func newReplay() *replay {
	return &replay{rev: 1, compactRev: -1, rangeBudget: maxRangeScanned, keys: map[string]kvState{},
		leases: map[int64]map[string]struct{}{}, effect: map[any]bool{}}
}

// lose marks entry idx and every later one as not decided.
func (r *replay) lose(idx uint64, format string, args ...any) {
	if r.lostAt != 0 {
		return
	}
	r.lostAt, r.why, r.revAtLoss = idx, fmt.Sprintf(format, args...), r.rev
}

// decided reports whether the outcome of entry idx is decided.
func (r *replay) decided(idx uint64) bool { return r.lostAt == 0 || idx < r.lostAt }

// begin starts entry idx and reports whether it is to be replayed: it is
// when it follows the last entry replayed and is committed.
func (r *replay) begin(idx uint64, committed bool) bool {
	clear(r.effect)
	if r.lostAt != 0 {
		return false
	}
	switch {
	case r.next == 0 && idx != 1:
		r.lose(idx, "the WAL starts at entry %d, not 1: the store's state before it is only in the db (older segments were purged, or the member received a snapshot)", idx)
	case r.next != 0 && idx != r.next:
		r.lose(idx, "entry %d follows entry %d: the entries between are missing or were skipped", idx, r.next-1)
	case !committed:
		r.lose(idx, "entry %d is not committed", idx)
	}
	if r.lostAt != 0 {
		return false
	}
	r.next, r.cur = idx+1, idx
	return true
}

// advance moves the revision on by one for entry idx.
func (r *replay) advance(idx uint64) {
	r.rev++
	i := idx - 1
	for uint64(len(r.advanced)) <= i/64 {
		r.advanced = append(r.advanced, 0)
	}
	r.advanced[i/64] |= 1 << (i % 64)
}

// revisionAt returns the revision after entry idx, which must have been
// replayed: 1 plus the entries up to idx that advanced it.
func (r *replay) revisionAt(idx uint64) int64 {
	n := int64(1)
	for w := uint64(0); w < uint64(len(r.advanced)) && w*64 < idx; w++ {
		word := r.advanced[w]
		if left := idx - w*64; left < 64 {
			word &= 1<<left - 1
		}
		n += int64(bits.OnesCount64(word))
	}
	return n
}

// request replays entry idx's request.
func (r *replay) request(idx uint64, req *etcdserverpb.InternalRaftRequest) {
	switch {
	case req.Put != nil:
		if r.checkPut(req.Put) {
			w := r.write()
			w.put(req.Put)
			w.end(idx)
		}
	case req.DeleteRange != nil:
		w := r.write()
		w.deleteRange(req.DeleteRange)
		w.end(idx)
	case req.Txn != nil:
		r.txn(idx, req.Txn)
	case req.Compaction != nil:
		if rev := req.Compaction.GetRevision(); rev > r.compactRev && rev <= r.rev {
			r.compactRev = rev
		}
	case req.LeaseGrant != nil:
		id, ttl := req.LeaseGrant.GetID(), req.LeaseGrant.GetTTL()
		if _, ok := r.leases[id]; id != 0 && ttl <= lease.MaxLeaseTTL && !ok {
			r.leases[id] = map[string]struct{}{}
		}
	case req.LeaseRevoke != nil:
		id := req.LeaseRevoke.GetID()
		keys, ok := r.leases[id]
		if !ok {
			return
		}
		w := r.write()
		for k := range keys {
			w.delete(k)
		}
		delete(r.leases, id)
		w.end(idx)
	case req.Alarm != nil:
		if req.Alarm.GetAction() == etcdserverpb.AlarmRequest_ACTIVATE {
			r.lose(idx, "entry %d raises a %s alarm: etcd then refuses writes", idx, req.Alarm.GetAlarm())
		}
	case req.AuthEnable != nil:
		r.lose(idx, "entry %d enables auth: the permission checks at apply are not replayed", idx)
	}
}

// txn replays a Txn: compares, checks of the branch taken, then its ops.
func (r *replay) txn(idx uint64, t *etcdserverpb.TxnRequest) {
	taken := map[*etcdserverpb.TxnRequest]bool{}
	if !r.compareToPath(idx, t, taken) {
		return
	}
	if !r.checkTxn(t, taken) {
		return
	}
	w := r.write()
	w.txn(t, taken)
	w.end(idx)
}

// branch returns the ops of the branch of t that runs.
func branch(t *etcdserverpb.TxnRequest, taken map[*etcdserverpb.TxnRequest]bool) []*etcdserverpb.RequestOp {
	if taken[t] {
		return t.GetSuccess()
	}
	return t.GetFailure()
}

// compareToPath evaluates the compares of t and of the Txns nested in the
// branch it takes, on the store before any write (txn.go compareToPath),
// and records in taken whether each takes its success branch. It returns
// false, having lost the replay, for a compare it cannot evaluate.
func (r *replay) compareToPath(idx uint64, t *etcdserverpb.TxnRequest, taken map[*etcdserverpb.TxnRequest]bool) bool {
	ok := true
	for _, c := range t.GetCompare() {
		if c.GetTarget() == etcdserverpb.Compare_VALUE {
			r.lose(idx, "entry %d compares a value: values are not kept", idx)
			return false
		}
		if !r.compare(c) {
			ok = false
			break
		}
	}
	taken[t] = ok
	for _, op := range branch(t, taken) {
		if nt := op.GetRequestTxn(); nt != nil && !r.compareToPath(idx, nt, taken) {
			return false
		}
	}
	return true
}

// compare evaluates a compare other than a value compare (txn.go
// applyCompare, compareKV).
func (r *replay) compare(c *etcdserverpb.Compare) bool {
	keys := r.rangeKeys(c.GetKey(), c.GetRangeEnd())
	if len(keys) == 0 {
		return compareKV(c, kvState{})
	}
	for _, k := range keys {
		if !compareKV(c, r.keys[k]) {
			return false
		}
	}
	return true
}

func compareKV(c *etcdserverpb.Compare, kv kvState) bool {
	var got, want int64
	switch c.GetTarget() {
	case etcdserverpb.Compare_CREATE:
		got, want = kv.create, c.GetCreateRevision()
	case etcdserverpb.Compare_MOD:
		got, want = kv.mod, c.GetModRevision()
	case etcdserverpb.Compare_VERSION:
		got, want = kv.version, c.GetVersion()
	case etcdserverpb.Compare_LEASE:
		got, want = kv.lease, c.GetLease()
	}
	switch c.GetResult() {
	case etcdserverpb.Compare_EQUAL:
		return got == want
	case etcdserverpb.Compare_NOT_EQUAL:
		return got != want
	case etcdserverpb.Compare_GREATER:
		return got > want
	case etcdserverpb.Compare_LESS:
		return got < want
	}
	return true
}

// checkTxn checks the ops of the branches taken as etcd does before
// writing (txn.go checkTxn); false refuses the whole Txn.
func (r *replay) checkTxn(t *etcdserverpb.TxnRequest, taken map[*etcdserverpb.TxnRequest]bool) bool {
	for _, op := range branch(t, taken) {
		switch {
		case op.GetRequestRange() != nil:
			rev := op.GetRequestRange().GetRevision()
			if rev != 0 && (rev > r.rev || rev < r.compactRev) {
				return false
			}
		case op.GetRequestPut() != nil:
			if !r.checkPut(op.GetRequestPut()) {
				return false
			}
		case op.GetRequestTxn() != nil:
			if !r.checkTxn(op.GetRequestTxn(), taken) {
				return false
			}
		}
	}
	return true
}

// checkPut reports whether etcd accepts the put (put.go checkPut): its
// lease exists, and the key does when the put keeps its value or lease.
func (r *replay) checkPut(p *etcdserverpb.PutRequest) bool {
	if id := p.GetLease(); id != 0 {
		if _, ok := r.leases[id]; !ok {
			return false
		}
	}
	if p.GetIgnoreValue() || p.GetIgnoreLease() {
		if _, ok := r.keys[string(p.GetKey())]; !ok {
			return false
		}
	}
	return true
}

// rangeKeys returns the live keys of [key, end) as etcd's Range reads
// them: key alone when end is empty, every key from key on when end is
// "\x00" (txn.go mkGteRange). Their order is not etcd's.
func (r *replay) rangeKeys(key, end []byte) []string {
	if len(end) == 0 {
		if _, ok := r.keys[string(key)]; ok {
			return []string{string(key)}
		}
		return nil
	}
	if r.rangeScanned += int64(len(r.keys)); r.rangeScanned > r.rangeBudget {
		r.lose(r.cur, "entry %d: the range operations so far visited more than %d keys, the replay's bound", r.cur, r.rangeBudget)
		return nil
	}
	gte := len(end) == 1 && end[0] == 0
	var out []string
	for k := range r.keys {
		kb := []byte(k)
		if bytes.Compare(kb, key) >= 0 && (gte || bytes.Compare(kb, end) < 0) {
			out = append(out, k)
		}
	}
	return out
}

// writeTxn is one write transaction of the store: its writes share the
// main revision rev+1 (mvcc/kvstore_txn.go).
type writeTxn struct {
	r       *replay
	main    int64
	changes int
}

func (r *replay) write() *writeTxn { return &writeTxn{r: r, main: r.rev + 1} }

// end advances the revision when the transaction changed something.
func (w *writeTxn) end(idx uint64) {
	if w.changes > 0 {
		w.r.advance(idx)
	}
}

func (w *writeTxn) txn(t *etcdserverpb.TxnRequest, taken map[*etcdserverpb.TxnRequest]bool) {
	for _, op := range branch(t, taken) {
		switch {
		case op.GetRequestPut() != nil:
			w.put(op.GetRequestPut())
		case op.GetRequestDeleteRange() != nil:
			w.deleteRange(op.GetRequestDeleteRange())
		case op.GetRequestTxn() != nil:
			w.txn(op.GetRequestTxn(), taken)
		}
	}
}

// put stores p's key at the transaction's revision (kvstore_txn.go put).
func (w *writeTxn) put(p *etcdserverpb.PutRequest) {
	r, key := w.r, string(p.GetKey())
	prev, existed := r.keys[key]
	kv := kvState{create: w.main, mod: w.main, version: 1, lease: p.GetLease()}
	if p.GetIgnoreLease() {
		kv.lease = prev.lease
	}
	if existed {
		kv.create, kv.version = prev.create, prev.version+1
		if prev.lease != kv.lease {
			delete(r.leases[prev.lease], key)
		}
	}
	if l, ok := r.leases[kv.lease]; ok {
		l[key] = struct{}{}
	}
	r.keys[key] = kv
	r.effect[p] = true
	w.changes++
}

// deleteRange deletes the keys of d's range (kvstore_txn.go deleteRange).
func (w *writeTxn) deleteRange(d *etcdserverpb.DeleteRangeRequest) {
	keys := w.r.rangeKeys(d.GetKey(), d.GetRangeEnd())
	for _, k := range keys {
		w.delete(k)
	}
	if len(keys) > 0 {
		w.r.effect[d] = true
	}
}

func (w *writeTxn) delete(key string) {
	r := w.r
	if kv, ok := r.keys[key]; ok {
		delete(r.leases[kv.lease], key)
		delete(r.keys, key)
		w.changes++
	}
}
