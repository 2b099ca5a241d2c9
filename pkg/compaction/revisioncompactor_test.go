package compaction_test

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/compaction"
)

func TestRevisionCompactor(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	put := func(n int) int64 {
		var rev int64
		for range n {
			resp, err := c.Put(ctx, "/registry/pods/ns/p", "v")
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	rc := compaction.NewRevisionCompactor(c, 10)
	rc.Physical = true
	rev := put(15) // revision 16: 16-10 = 6 < 0+10
	tick, err := rc.Tick(ctx)
	if err != nil || tick.Compacted != 0 || tick.HeaderRevision != rev {
		t.Fatalf("tick at revision %d = %+v, %v; want no compaction", rev, tick, err)
	}
	rev = put(5) // 21: target 11 >= 10
	tick, err = rc.Tick(ctx)
	if err != nil || tick.Compacted != rev-10 {
		t.Fatalf("tick at revision %d = %+v, %v; want a compaction to %d", rev, tick, err, rev-10)
	}
	if _, err := c.Get(ctx, "/registry/pods/ns/p", withRev(rev-11)...); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("read below the compact revision: %v, want ErrCompacted", err)
	}
	// The empty transaction that reads the revision does not move it.
	if tick, _ := rc.Tick(ctx); tick.HeaderRevision != rev || tick.Compacted != 0 {
		t.Errorf("third tick = %+v: want revision %d unchanged and no compaction (fewer than 10 revisions since)", tick, rev)
	}
	put(10)
	if tick, err := rc.Tick(ctx); err != nil || tick.Compacted != rev {
		t.Errorf("after 10 more revisions: %+v, %v; want a compaction to %d", tick, err, rev)
	}
	if _, err := compaction.NewRevisionCompactor(c, 0).Tick(ctx); !errors.Is(err, compaction.ErrNoRevisionInterval) {
		t.Errorf("every 0 revisions: %v, want ErrNoRevisionInterval", err)
	}
}
