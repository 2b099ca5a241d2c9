package compaction_test

import (
	"context"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/compaction"
)

func TestCompactThenDefragment(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	val := string(make([]byte, 256))
	fill := func() int64 {
		var rev int64
		for i := range 3000 {
			resp, err := c.Put(ctx, "/registry/configmaps/ns/cm-"+itoa(int64(i%1000)), val)
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	rev := fill()
	r, err := compaction.CompactThenDefragment(ctx, c, c, srv.Endpoints[0], rev, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Overlap != 0 || r.DefragSpan.Start.Before(r.Compaction.End) {
		t.Errorf("in turn: overlap %v, defrag started %v before the compaction ended", r.Overlap, r.Compaction.End.Sub(r.DefragSpan.Start))
	}
	if r.Defrag.After.Bytes > r.Defrag.Before.Bytes {
		t.Errorf("defrag grew the file: %d -> %d", r.Defrag.Before.Bytes, r.Defrag.After.Bytes)
	}
	// 3,000 revisions are deleted in three batches 10 ms apart: a
	// defragmentation started right after the request overlaps them.
	rev = fill()
	r, err = compaction.CompactThenDefragment(ctx, c, c, srv.Endpoints[0], rev, true, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Overlap <= 0 || r.Overlap > r.Compaction.Duration() || r.Overlap > r.DefragSpan.Duration() {
		t.Errorf("overlapping: overlap %v of compaction %v and defrag %v", r.Overlap, r.Compaction.Duration(), r.DefragSpan.Duration())
	}
}

func TestGateSerialises(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	var g compaction.Gate
	slow := tickerFunc(func(ctx context.Context) (compaction.TickResult, error) {
		time.Sleep(200 * time.Millisecond)
		return compaction.TickResult{}, nil
	})
	done := make(chan time.Time, 1)
	go func() {
		g.Tick(ctx, slow)
		done <- time.Now()
	}()
	time.Sleep(20 * time.Millisecond) // the tick holds the gate
	if _, err := g.DefragmentAll(ctx, c, srv.Endpoints); err != nil {
		t.Fatal(err)
	}
	defragEnd := time.Now()
	if tickEnd := <-done; defragEnd.Before(tickEnd) {
		t.Errorf("defragmentation ended %v before the tick holding the gate", tickEnd.Sub(defragEnd))
	}
}

type tickerFunc func(ctx context.Context) (compaction.TickResult, error)

func (f tickerFunc) Tick(ctx context.Context) (compaction.TickResult, error) { return f(ctx) }
