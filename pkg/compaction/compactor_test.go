package compaction_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/keyspace"
)

func TestCompactorFollowsKubeAPIServer(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	put := func() int64 {
		resp, err := c.Put(ctx, "/registry/pods/ns/p", "v")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	put()
	a := compaction.NewCompactor(c)
	a.Physical = true
	b := compaction.NewCompactor(c) // a second kube-apiserver

	// Tick 1: bootstrap, nothing compacted.
	t1, err := a.Tick(ctx)
	if err != nil || !t1.Won || t1.Compacted != 0 {
		t.Fatalf("first tick = %+v, %v; want won, nothing compacted", t1, err)
	}
	put()
	put()
	// The other apiserver's first tick loses: compact_rev_key has version 1.
	tb, err := b.Tick(ctx)
	if err != nil || tb.Won || tb.Compacted != 0 {
		t.Fatalf("second compactor's tick = %+v, %v; want lost", tb, err)
	}
	// Tick 2 compacts to the revision tick 1 saw.
	t2, err := a.Tick(ctx)
	if err != nil || !t2.Won || t2.Compacted != t1.HeaderRevision {
		t.Fatalf("second tick = %+v, %v; want compaction to %d", t2, err, t1.HeaderRevision)
	}
	if _, err := c.Get(ctx, "/registry/pods/ns/p", withRev(t1.HeaderRevision-1)...); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("read below the compact revision: %v, want ErrCompacted", err)
	}
	if _, err := c.Get(ctx, "/registry/pods/ns/p", withRev(t1.HeaderRevision)...); err != nil {
		t.Errorf("read at the compact revision: %v", err)
	}
	// compact_rev_key holds the compacted revision and counts ticks won.
	got, err := c.Get(ctx, keyspace.CompactRevKey)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("get compact_rev_key: %v", err)
	}
	if kv := got.Kvs[0]; kv.Version != 2 || string(kv.Value) != itoa(t1.HeaderRevision) {
		t.Errorf("compact_rev_key = %q version %d, want %d version 2", kv.Value, kv.Version, t1.HeaderRevision)
	}
	// The second compactor adopted version 1 when it lost; the first has
	// since moved the key to version 2, so it loses once more, adopts 2,
	// and wins the tick after.
	tb, err = b.Tick(ctx)
	if err != nil || tb.Won {
		t.Fatalf("second compactor's tick after a compaction = %+v, %v; want lost", tb, err)
	}
	tb, err = b.Tick(ctx)
	if err != nil || !tb.Won {
		t.Fatalf("second compactor, now in step = %+v, %v; want won", tb, err)
	}
}

func TestDefragmentShrinksAfterCompaction(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	val := string(make([]byte, 8192))
	var last int64
	for i := range 600 {
		resp, err := c.Put(ctx, "/registry/configmaps/ns/big", val+itoa(int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	if _, err := c.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	// A physical compaction cannot be requested twice; wait by asking for
	// a hash at the compacted revision, which etcd serves after deleting.
	if _, err := c.HashKV(ctx, srv.Endpoints[0], last); err != nil {
		t.Fatal(err)
	}
	res, err := compaction.Defragment(ctx, c, srv.Endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.After.Bytes >= res.Before.Bytes || res.Duration <= 0 {
		t.Errorf("defrag %+v: want a smaller file after", res)
	}
}

func TestDefragmentAllLeaderLast(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	// A single member is its own leader: it goes last, after an endpoint
	// that does not answer.
	dead := "http://127.0.0.1:1"
	order, leader := compaction.LeaderLast(ctx, c, []string{srv.Endpoints[0], dead}, time.Second)
	if len(order) != 2 || order[0] != dead || order[1] != srv.Endpoints[0] || leader != srv.Endpoints[0] {
		t.Fatalf("LeaderLast = %v, leader %q; want the dead endpoint first and the leader %s last", order, leader, srv.Endpoints[0])
	}
	start := time.Now()
	res, err := compaction.DefragmentAll(ctx, c, []string{srv.Endpoints[0]})
	if err != nil || len(res) != 1 || res[0].Endpoint != srv.Endpoints[0] || res[0].Duration <= 0 {
		t.Fatalf("DefragmentAll = %+v, %v", res, err)
	}
	if res[0].Start.Before(start) || time.Since(res[0].Start) < res[0].Duration {
		t.Errorf("defragmentation started at %v, want between the call at %v and its Duration %v before now", res[0].Start, start, res[0].Duration)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err = compaction.DefragmentAll(tctx, c, []string{srv.Endpoints[0], dead, srv.Endpoints[0]})
	if err == nil || len(res) != 2 {
		t.Fatalf("DefragmentAll past a dead member = %d results, %v; want it to stop at the second with an error", len(res), err)
	}
}
