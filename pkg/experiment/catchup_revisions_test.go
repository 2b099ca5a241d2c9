package experiment_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestCatchupRevisionsDivided checks a catch-up case's revisions: the
// experiment's own writes in the span it covers (the updates and shard
// 0's probe), whatever else was written then. Divided between two
// workers in this process, on one member, shard 1's probe (200 a
// second) and the barrier write inside the span too: both workers must
// report the count of the updates' and shard 0's probe's revisions read
// back from etcd's history, below the span, as the merge; undivided on a
// member nothing else writes to, the count is the whole span.
func TestCatchupRevisionsDivided(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	srv := etcdtest.RunEtcd(t)
	dial := func(ctx context.Context) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	}
	target := func(context.Context, string) (watchload.Target, func(), error) {
		return watchload.Target{Endpoints: srv.Endpoints, Embedded: true, Dial: dial}, func() {}, nil
	}
	admin := etcdtest.NewClient(t, srv)
	options := func(prefix string, sh shard.Shard, b watchload.Barrier) experiment.CatchupOptions {
		c := experiment.Common{NewTarget: target, Quick: true, Logf: t.Logf, Prefix: prefix, Shard: sh, Barrier: b, RunID: "revisions-test"}
		c.Probe.RatePerSecond = 400 // 200 writes a second
		return experiment.CatchupOptions{Common: c, Behind: []int64{2000}, Objects: 100, Concurrency: 4, Watchers: 2}
	}

	results := make([]*experiment.Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		sh := shard.Shard{Index: i, Count: 2}
		b, err := barrier.NewEtcd(admin, "/lwbench-barrier/revisions-test", sh)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			results[i], errs[i] = experiment.Catchup(t.Context(), options("/registry/divided", sh, b))
			if errs[i] != nil {
				b.Abort(context.WithoutCancel(t.Context()), errs[i].Error())
			} else {
				results[i].Shard = &sh
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	c := results[0].Catchup.Cases[0]
	if c1 := results[1].Catchup.Cases[0]; c1.Revisions != c.Revisions || c1.FromRevision != c.FromRevision || c1.ToRevision != c.ToRevision {
		t.Errorf("worker 1: %d revisions from %d to %d, worker 0 %d from %d to %d", c1.Revisions, c1.FromRevision, c1.ToRevision, c.Revisions, c.FromRevision, c.ToRevision)
	}
	// What etcd's history holds in the span, by writer.
	own, others := 0, 0
	wctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for resp := range admin.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(c.FromRevision)) {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		done := false
		for _, ev := range resp.Events {
			if done = ev.Kv.ModRevision > c.ToRevision; done {
				break
			}
			switch key := string(ev.Kv.Key); {
			case strings.HasPrefix(key, "/registry/divided/catchup/pods/"), key == "/lwbench-probe/catchup/shard-0":
				own++
			default:
				others++
			}
			if done = ev.Kv.ModRevision == c.ToRevision; done {
				break
			}
		}
		if done {
			break
		}
	}
	cancel()
	span := c.ToRevision - c.FromRevision + 1
	if own+others != int(span) {
		t.Fatalf("history from %d to %d: %d writes, want one per revision (%d)", c.FromRevision, c.ToRevision, own+others, span)
	}
	if others == 0 {
		t.Fatalf("no other worker's write in the span %d-%d: the test proves nothing", c.FromRevision, c.ToRevision)
	}
	if c.Revisions != int64(own) {
		t.Errorf("divided: %d revisions, want the %d of the updates and shard 0's probe (the span %d holds %d others')", c.Revisions, own, span, others)
	}
	merged, err := experiment.Merge(results)
	if err != nil {
		t.Fatal(err)
	}
	if m := merged.Catchup.Cases[0]; m.Revisions != c.Revisions {
		t.Errorf("merged: %d revisions, the workers' %d", m.Revisions, c.Revisions)
	}

	// Undivided, on the member nothing else writes to now: the span.
	res, err := experiment.Catchup(t.Context(), options("/registry/whole", shard.Shard{}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Catchup.Cases[0]; u.Revisions != u.ToRevision-u.FromRevision+1 || u.Revisions <= u.Behind {
		t.Errorf("undivided: %d revisions from %d to %d (%d updates), want the span, probe writes included", u.Revisions, u.FromRevision, u.ToRevision, u.Behind)
	}
}
