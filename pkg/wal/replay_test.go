package wal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/internal/filetest"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// TestReadStaleDelete writes what kube-apiserver writes when a delete
// races an update (a create, an update, a delete that compares the
// mod_revision read before the update, and its retry with the current
// one) to an embedded member, and checks that Read counts both deletes
// as requested, and as applied and failed as etcd answered them.
func TestReadStaleDelete(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	key := "/registry/pods/default/web-0"
	// What was requested, and what etcd answered it applied.
	var puts, deletes, deletesApplied int64
	txn := func(cmpRev int64, then clientv3.Op) bool {
		t.Helper()
		resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cmpRev)).Then(then).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if !txn(0, clientv3.OpPut(key, "v1")) {
		t.Fatal("create: compare failed")
	}
	puts++
	get, err := c.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	stale := get.Kvs[0].ModRevision
	if !txn(stale, clientv3.OpPut(key, "v2")) {
		t.Fatal("update: compare failed")
	}
	puts++
	for _, rev := range []int64{stale, 0} {
		if rev == 0 { // the retry reads the key again, as kube-apiserver does
			get, err := c.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			rev = get.Kvs[0].ModRevision
		}
		deletes++
		if txn(rev, clientv3.OpDelete(key)) {
			deletesApplied++
		}
	}
	if deletesApplied != 1 {
		t.Fatalf("etcd applied %d of the 2 deletes, want 1 (the stale one fails)", deletesApplied)
	}
	c.Close()
	srv.Close()
	dir := srv.Dir
	defer filetest.Unchanged(t, dir)()
	rep, err := Read(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pods := row(rep, snapshot.ByResource, func(w WriteRow) bool { return w.Resource == "pods" })
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"requested deletes", pods.RequestedDeletes, deletes},
		{"applied deletes", pods.AppliedDeletes, deletesApplied},
		{"failed writes", pods.FailedWrites, deletes - deletesApplied},
		{"requested puts", pods.RequestedPuts, puts},
		{"applied puts", pods.AppliedPuts, puts},
		{"writes not decided", pods.NotDecidedWrites, 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
	if rep.Replay.NotDecided != "" || rep.Replay.ReplayRevision != rep.Replay.DBRevision {
		t.Errorf("got replay %+v, want it checked against the db", rep.Replay)
	}
}

// TestReadReplayOtherDB gives a fixture's WAL (entries 1-23, revision 16
// at the end) the db of another history: one whose consistent index lies
// past the WAL's last entry, and one with a consistent index inside the
// WAL but another revision there (a lease grant, which takes no revision,
// where the WAL has a write). Neither check passes, and no outcome is
// decided. A db that is a FIFO is not opened (that would block): its
// outcomes are not decided either.
func TestReadReplayOtherDB(t *testing.T) {
	cases := []struct {
		name    string
		db      func(t *testing.T) string // "" for a FIFO
		wantWhy string
	}{
		{"a FIFO", func(t *testing.T) string { return "" }, "not a regular file"},
		{"consistent index past the WAL", func(t *testing.T) string {
			return filepath.Join("..", "..", "testdata", "fixtures", "etcd-3.7.db")
		}, "is past the WAL's last entry 23"},
		{"another revision at the consistent index", func(t *testing.T) string {
			return etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
				if _, err := c.Grant(ctx, 60); err != nil {
					t.Fatal(err)
				}
				for _, k := range []string{"a", "b"} {
					if _, err := c.Put(ctx, "/registry/configmaps/default/"+k, "v"); err != nil {
						t.Fatal(err)
					}
				}
			})
		}, "the replay from entry 1 reaches revision"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filetest.CopyTree(t, fixtureDir("3.7"))
			dbPath := filepath.Join(dir, "member", "snap", "db")
			if src := c.db(t); src != "" {
				b, err := os.ReadFile(src)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dbPath, b, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.Remove(dbPath); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(dbPath, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := Read(t.Context(), dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			tot := rep.Total
			if tot.NotDecidedWrites != tot.RequestedWrites || tot.AppliedWrites != 0 || tot.FailedWrites != 0 {
				t.Errorf("got %d applied, %d failed, %d not decided of %d; want all not decided",
					tot.AppliedWrites, tot.FailedWrites, tot.NotDecidedWrites, tot.RequestedWrites)
			}
			if rep.Replay.DecidedThroughIndex != 0 || !strings.Contains(rep.Replay.NotDecided, c.wantWhy) {
				t.Errorf("got replay %+v, want nothing decided because %q", rep.Replay, c.wantWhy)
			}
		})
	}
}

// Requests as clients send them, for TestReplay.
func putReq(key string, lease int64) *pb.InternalRaftRequest {
	return &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte(key), Value: []byte("v"), Lease: lease}}
}

func opPut(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: []byte("v")}}}
}

func opDelete(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(key)}}}
}

func opGet(key string, rev int64) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte(key), Revision: rev}}}
}

func modIs(key string, rev int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: rev}}
}

func txnReq(cmps []*pb.Compare, success, failure []*pb.RequestOp) *pb.InternalRaftRequest {
	return &pb.InternalRaftRequest{Txn: &pb.TxnRequest{Compare: cmps, Success: success, Failure: failure}}
}

// kubeUpdate is kube-apiserver's update or delete: op if key's
// mod_revision is rev, else read it.
func kubeUpdate(key string, rev int64, op *pb.RequestOp) *pb.InternalRaftRequest {
	return txnReq([]*pb.Compare{modIs(key, rev)}, []*pb.RequestOp{op}, []*pb.RequestOp{opGet(key, 0)})
}

// TestReplay feeds requests to the aggregator as committed entries 1, 2,
// ... and settles the replay against a db at the last entry whose revision
// is the one etcd reaches (worked out by hand in wantRev), then checks the
// outcomes counted.
func TestReplay(t *testing.T) {
	const a, b, c = "/registry/pods/default/a", "/registry/pods/default/b", "/registry/pods/default/c"
	cases := []struct {
		name     string
		reqs     []*pb.InternalRaftRequest
		first    uint64 // index of the first entry; 0 means 1
		skip     uint64 // an index left out
		ci       uint64 // the db's consistent index; 0 means the last entry
		budget   int64  // keys range operations may visit; 0 means the default
		dbRev    int64  // the db's revision; 0 means wantRev
		wantRev  int64  // the revision after the last entry decided
		applied  int64
		failed   int64
		undec    int64
		wantWhy  string // in Replay.NotDecided
		failureW int64  // failure-branch writes applied
	}{
		{name: "stale delete fails, its retry applies", reqs: []*pb.InternalRaftRequest{
			kubeUpdate(a, 0, opPut(a)),    // rev 2
			kubeUpdate(a, 2, opPut(a)),    // rev 3
			kubeUpdate(a, 2, opDelete(a)), // stale: fails
			kubeUpdate(a, 3, opDelete(a)), // rev 4
		}, wantRev: 4, applied: 3, failed: 1},
		{name: "create of a key that exists fails", reqs: []*pb.InternalRaftRequest{
			kubeUpdate(a, 0, opPut(a)), kubeUpdate(a, 0, opPut(a)),
		}, wantRev: 2, applied: 1, failed: 1},
		{name: "create and version compares", reqs: []*pb.InternalRaftRequest{
			putReq(a, 0), putReq(a, 0), // rev 3, version 2, created at 2
			txnReq([]*pb.Compare{{Key: []byte(a), Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 2}},
				{Key: []byte(a), Target: pb.Compare_VERSION, Result: pb.Compare_GREATER, TargetUnion: &pb.Compare_Version{Version: 1}}},
				[]*pb.RequestOp{opPut(b)}, nil), // rev 4
			txnReq([]*pb.Compare{{Key: []byte(c), Target: pb.Compare_VERSION, Result: pb.Compare_NOT_EQUAL, TargetUnion: &pb.Compare_Version{Version: 0}}},
				[]*pb.RequestOp{opPut(c)}, nil), // c is missing: version 0, fails
		}, wantRev: 4, applied: 3, failed: 1},
		{name: "a delete of a missing key fails and keeps the revision", reqs: []*pb.InternalRaftRequest{
			{DeleteRange: &pb.DeleteRangeRequest{Key: []byte(a)}}, putReq(a, 0),
		}, wantRev: 2, applied: 1, failed: 1},
		{name: "a range delete applies once", reqs: []*pb.InternalRaftRequest{
			putReq(a, 0), putReq(b, 0), putReq(c, 0), // rev 4
			{DeleteRange: &pb.DeleteRangeRequest{Key: []byte(a), RangeEnd: []byte(c)}}, // a and b: rev 5
			kubeUpdate(c, 4, opPut(c)), // rev 6
		}, wantRev: 6, applied: 5},
		{name: "leases: unknown lease fails, revoke deletes the lease's keys", reqs: []*pb.InternalRaftRequest{
			putReq(a, 7), // no lease 7: fails
			{LeaseGrant: &pb.LeaseGrantRequest{ID: 7, TTL: 60}},
			putReq(a, 7), putReq(b, 7), putReq(c, 0), // rev 4
			putReq(b, 0), // detaches b: rev 5
			{LeaseRevoke: &pb.LeaseRevokeRequest{ID: 7}}, // deletes a: rev 6
			kubeUpdate(a, 0, opPut(a)),                   // a is gone: rev 7
			{LeaseRevoke: &pb.LeaseRevokeRequest{ID: 7}}, // not found
			kubeUpdate(b, 5, opPut(b)),                   // b kept: rev 8
		}, wantRev: 8, applied: 6, failed: 1},
		{name: "failure branch writes", reqs: []*pb.InternalRaftRequest{
			txnReq([]*pb.Compare{modIs(a, 9)}, []*pb.RequestOp{opPut(b)}, []*pb.RequestOp{opPut(a)}), // rev 2 via failure
		}, wantRev: 2, failed: 1, failureW: 1},
		{name: "nested txn", reqs: []*pb.InternalRaftRequest{
			putReq(a, 0), // rev 2
			txnReq([]*pb.Compare{modIs(a, 2)}, []*pb.RequestOp{opPut(b),
				{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Compare: []*pb.Compare{modIs(b, 0)},
					Success: []*pb.RequestOp{opPut(c)}}}}}, nil), // b and c at rev 3: the nested compare sees b before the write
		}, wantRev: 3, applied: 3},
		{name: "a range at a compacted revision refuses the txn", reqs: []*pb.InternalRaftRequest{
			putReq(a, 0), putReq(a, 0), putReq(a, 0), // rev 4
			{Compaction: &pb.CompactionRequest{Revision: 3}},
			txnReq(nil, []*pb.RequestOp{opGet(a, 2), opPut(b)}, nil), // compacted: refused
			txnReq(nil, []*pb.RequestOp{opGet(a, 3), opPut(b)}, nil), // rev 5
		}, wantRev: 5, applied: 4, failed: 1},
		{name: "a value compare is not decided, nor what follows", reqs: []*pb.InternalRaftRequest{
			putReq(a, 0), // rev 2
			txnReq([]*pb.Compare{{Key: []byte(a), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("v")}}},
				[]*pb.RequestOp{opPut(b)}, nil),
			putReq(c, 0),
		}, ci: 1, wantRev: 2, applied: 1, undec: 2, wantWhy: "entry 2 compares a value"},
		{name: "not decided before the db's consistent index: nothing decided", reqs: []*pb.InternalRaftRequest{
			putReq(a, 0),
			txnReq([]*pb.Compare{{Key: []byte(a), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("v")}}},
				[]*pb.RequestOp{opPut(b)}, nil),
		}, dbRev: 3, undec: 2, wantWhy: "entry 2 compares a value: values are not kept; that is before the db's consistent index 2"},
		{name: "a missing entry: not decided from it on", reqs: []*pb.InternalRaftRequest{
			putReq(a, 0), putReq(b, 0), putReq(c, 0),
		}, skip: 2, ci: 1, wantRev: 2, applied: 1, undec: 2, wantWhy: "entry 3 follows entry 1"},
		{name: "a WAL that does not start at entry 1", reqs: []*pb.InternalRaftRequest{
			putReq(a, 0), putReq(b, 0),
		}, first: 5, undec: 2, wantWhy: "starts at entry 5"},
		{name: "a db at another revision: nothing decided", reqs: []*pb.InternalRaftRequest{
			kubeUpdate(a, 0, opPut(a)), kubeUpdate(a, 0, opPut(a)),
		}, dbRev: 9, undec: 2, wantWhy: "reaches revision 2 at the db's consistent index 2, the db is at revision 9"},
		{name: "range operations past the bound stop the replay", reqs: []*pb.InternalRaftRequest{
			putReq(a, 0), putReq(b, 0), // rev 3
			{DeleteRange: &pb.DeleteRangeRequest{Key: []byte(a), RangeEnd: []byte(b)}}, // visits 2 keys: rev 4
			{DeleteRange: &pb.DeleteRangeRequest{Key: []byte(a), RangeEnd: []byte{0}}}, // 1 more: past 2
		}, ci: 3, budget: 2, wantRev: 4, applied: 3, undec: 1, wantWhy: "entry 4: the range operations so far visited more than 2 keys"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := &Report{}
			agg := newAggregator(rep)
			if tc.budget > 0 {
				agg.rp.rangeBudget = tc.budget
			}
			idx := max(tc.first, 1)
			for _, req := range tc.reqs {
				if idx == tc.skip {
					idx++
				}
				data, err := proto.Marshal(req)
				if err != nil {
					t.Fatal(err)
				}
				agg.entry("seg", 0, &raftpb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(2), Data: data})
				idx++
			}
			agg.state(&raftpb.HardState{Term: proto.Uint64(2), Commit: proto.Uint64(idx - 1)})
			agg.applyPending()
			dbRev := tc.dbRev
			if dbRev == 0 {
				dbRev = tc.wantRev
			}
			ci := tc.ci
			if ci == 0 {
				ci = idx - 1
			}
			agg.settle("db", ci, dbRev, nil)
			agg.rows(Options{})
			tot, rp := rep.Total, rep.Replay
			for _, c := range []struct {
				name      string
				got, want int64
			}{
				{"applied", tot.AppliedWrites, tc.applied},
				{"failed", tot.FailedWrites, tc.failed},
				{"not decided", tot.NotDecidedWrites, tc.undec},
				{"requested", tot.RequestedWrites, tc.applied + tc.failed + tc.undec},
				{"failure-branch writes applied", rep.Txn.FailureWritesApplied, tc.failureW},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
				}
			}
			if tc.undec == 0 && rp.Revision != tc.wantRev {
				t.Errorf("revision: got %d, want %d", rp.Revision, tc.wantRev)
			}
			if !strings.Contains(rp.NotDecided, tc.wantWhy) || (tc.wantWhy == "") != (rp.NotDecided == "") {
				t.Errorf("got not decided %q, want %q", rp.NotDecided, tc.wantWhy)
			}
		})
	}
}

// TestReplayWithoutDB checks that outcomes are not decided without a db
// to check the replay against.
func TestReplayWithoutDB(t *testing.T) {
	rep := &Report{}
	agg := newAggregator(rep)
	data, err := proto.Marshal(putReq("/registry/pods/default/a", 0))
	if err != nil {
		t.Fatal(err)
	}
	agg.entry("seg", 0, &raftpb.Entry{Index: proto.Uint64(1), Term: proto.Uint64(2), Data: data})
	agg.state(&raftpb.HardState{Term: proto.Uint64(2), Commit: proto.Uint64(1)})
	agg.settle("db", 0, 0, fmt.Errorf("open db: %w", errors.ErrUnsupported))
	agg.rows(Options{})
	if rep.Total.NotDecidedWrites != 1 || !strings.Contains(rep.Replay.NotDecided, "cannot be checked against the db") {
		t.Errorf("got %d not decided, reason %q; want 1 and the db named", rep.Total.NotDecidedWrites, rep.Replay.NotDecided)
	}
}

// TestReadRunningMember reads the WAL of a member that is running: its db
// is locked, so Read waits at most dbLockTimeout for it and leaves the
// outcomes not decided, naming the lock.
func TestReadRunningMember(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	if _, err := c.Put(t.Context(), "/registry/pods/default/a", "v"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := Read(t.Context(), srv.Dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > dbLockTimeout+time.Second {
		t.Errorf("Read took %v, want at most %v more than the lock timeout", d, time.Second)
	}
	if rep.Total.AppliedWrites != 0 || rep.Total.NotDecidedWrites != rep.Total.RequestedWrites || !strings.Contains(rep.Replay.NotDecided, "locked") {
		t.Errorf("got %d applied, %d not decided of %d, reason %q; want none decided because the db is locked",
			rep.Total.AppliedWrites, rep.Total.NotDecidedWrites, rep.Total.RequestedWrites, rep.Replay.NotDecided)
	}
}
