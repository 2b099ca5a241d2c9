package watchload_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

func TestRunForcesRelistAndLosesNothing(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	writer := etcdtest.NewClient(t, srv)
	watch := etcdtest.NewClient(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := watchload.Run(ctx, watchload.Target{Writer: writer, Watch: watch, Endpoints: srv.Endpoints, Embedded: true}, watchload.Options{
		Objects:            120,
		Namespaces:         3,
		Watchers:           3,
		WriteRate:          150,
		Duration:           3 * time.Second,
		PageSize:           50, // several pages per list
		CompactionInterval: time.Second,
		PhysicalCompaction: true,
		HoldBack:           1,
		Defragment:         true,
		Seed:               3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Writes.Completed != res.Writes.Planned || res.Writes.Errors != 0 {
		t.Errorf("writes: %d of %d completed, %d errors %v", res.Writes.Completed, res.Writes.Planned, res.Writes.Errors, res.Writes.ErrorSamples)
	}
	if len(res.Relists) == 0 {
		t.Fatalf("no relist although watcher 0 was held back across a compaction; compactions: %+v", res.Compaction)
	}
	rl := res.Relists[0]
	if rl.Watcher != 0 || rl.Reason != "compacted" || rl.CompactRevision <= rl.FromRevision || rl.Objects == 0 || rl.Pages < 2 {
		t.Errorf("relist %+v: want watcher 0, reason compacted, compact revision above the watch's, several pages", rl)
	}
	for _, r := range res.Relists[1:] {
		if r.Watcher != 0 {
			t.Errorf("watcher %d relisted; only the held-back watcher should have", r.Watcher)
		}
	}
	if !res.Validation.OK() {
		t.Errorf("validation failed: %+v", res.Validation)
	}
	// Every watcher that was not held back saw every write.
	for _, w := range res.Watchers[1:] {
		if w.Events != res.Writes.Completed {
			t.Errorf("watcher %d got %d events, want %d", w.ID, w.Events, res.Writes.Completed)
		}
	}
	if res.Delivery.FromCommit.Count == 0 || res.Delivery.FromSend.P50Ms < res.Delivery.FromCommit.P50Ms {
		t.Errorf("delivery latencies: from commit %+v, from send %+v", res.Delivery.FromCommit, res.Delivery.FromSend)
	}
	if res.Defrag == nil || res.Defrag.Error != "" || res.DBSize.AfterDefragBytes == 0 || res.DBSize.AfterDefragBytes > res.DBSize.AfterCompactionBytes {
		t.Errorf("defrag %+v, sizes %+v: want a defrag that did not grow the file", res.Defrag, res.DBSize)
	}
	got, err := writer.Get(ctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != res.Final.Objects {
		t.Errorf("final objects %d, etcd holds %d", res.Final.Objects, got.Count)
	}
}
