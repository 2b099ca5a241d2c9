package watchload_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestRunShards runs one load as three workers against one etcd, at
// once, meeting at an etcd barrier: together they write the whole plan
// once, start each informer once with its ID in the whole load, and
// every informer sees every shard's writes (validated against the full
// history); only shard 0 compacts, holds back and defragments; each
// worker times only its own writes' events and keeps its totals'
// histograms.
func TestRunShards(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const n = 3
	results := make([]*report.RunResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		sh := shard.Shard{Index: i, Count: n}
		b, err := barrier.NewEtcd(c, "/lwbench-barrier/test-shards", sh)
		if err != nil {
			t.Fatal(err)
		}
		o := smallRun(watchload.ProfileInformer)
		o.Shard, o.Barrier = sh, b
		wg.Go(func() { results[i], errs[i] = watchload.Run(ctx, target(srv), o) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
	}
	o := smallRun(watchload.ProfileInformer)
	var planned, completed int64
	var ids []int
	for i, res := range results {
		if !res.Validation.OK() {
			t.Errorf("shard %d: validation failed: %s", i, res.Validation.Summary())
		}
		if res.Writes.Completed != res.Writes.Planned || res.Writes.Errors != 0 || res.Writes.Planned == 0 {
			t.Errorf("shard %d: %d of %d writes completed, %d errors", i, res.Writes.Completed, res.Writes.Planned, res.Writes.Errors)
		}
		planned += res.Writes.Planned
		completed += res.Writes.Completed
		for _, inf := range res.Informers {
			ids = append(ids, inf.ID)
		}
		if res.Writes.Latency.HDR == "" || res.Delivery.FromResponse.HDR == "" || res.InitialLists.Latency.HDR == "" {
			t.Errorf("shard %d: totals without their histograms", i)
		}
		// Each worker times the events of its own writes and counts the
		// others' untimed.
		if res.Delivery.TimedEvents == 0 || res.Delivery.UntimedEvents == 0 {
			t.Errorf("shard %d: %d timed and %d untimed events: want both", i, res.Delivery.TimedEvents, res.Delivery.UntimedEvents)
		}
		if i == 0 {
			if len(res.Compactions) == 0 || res.Defrag == nil || len(res.Relists) == 0 {
				t.Errorf("shard 0: %d compactions, defrag %v, %d relists: want shard 0 to compact, defragment and hold back informer 0",
					len(res.Compactions), res.Defrag, len(res.Relists))
			}
		} else if len(res.Compactions) != 0 || res.Defrag != nil || len(res.Relists) != 0 {
			t.Errorf("shard %d: %d compactions, defrag %v, %d relists: only shard 0 maintains", i, len(res.Compactions), res.Defrag, len(res.Relists))
		}
		if res.Final.Objects != results[0].Final.Objects {
			t.Errorf("shard %d saw %d objects at the end, shard 0 %d", i, res.Final.Objects, results[0].Final.Objects)
		}
	}
	if want := int64(o.WriteRate * o.Duration.Seconds()); planned != want || completed != want {
		t.Errorf("shards planned %d and completed %d writes, want the whole plan's %d", planned, completed, want)
	}
	slices.Sort(ids)
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(ids, want) {
		t.Errorf("informer IDs %v, want %v: each once", ids, want)
	}
}

// TestRunShardAbort: a worker of a divided load whose peer aborted stops
// with ErrAborted instead of waiting, and one whose options are not
// divisible is refused.
func TestRunShardAbort(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b0, _ := barrier.NewEtcd(c, "/lwbench-barrier/test-abort", shard.Shard{Index: 0, Count: 2})
	b1, _ := barrier.NewEtcd(c, "/lwbench-barrier/test-abort", shard.Shard{Index: 1, Count: 2})
	o := smallRun(watchload.ProfileInformer)
	o.Shard, o.Barrier = shard.Shard{Index: 0, Count: 2}, b0
	go func() {
		time.Sleep(500 * time.Millisecond)
		b1.Abort(ctx, "seed objects: planted failure")
	}()
	start := time.Now()
	_, err := watchload.Run(ctx, target(srv), o)
	if !errors.Is(err, barrier.ErrAborted) {
		t.Fatalf("got %v, want ErrAborted", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("stopped after %v", took)
	}

	for _, tc := range []struct {
		edit func(*watchload.Options)
		want string
	}{
		{func(o *watchload.Options) { o.Barrier = nil }, "needs a barrier"},
		{func(o *watchload.Options) { o.Namespaces = 1 }, "namespaces"},
		{func(o *watchload.Options) { o.Watchers = 1; o.HoldBack = 0 }, "informers"},
		{func(o *watchload.Options) { o.Watchers = 4; o.HoldBack = 3 }, "shard 0 holds the held-back informers and has 2"},
		{func(o *watchload.Options) { o.Shard = shard.Shard{Index: 2, Count: 2} }, "shard index 2"},
	} {
		o := smallRun(watchload.ProfileInformer)
		o.Shard, o.Barrier = shard.Shard{Index: 1, Count: 2}, b1
		tc.edit(&o)
		err := o.Defaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error saying %q", err, tc.want)
		}
	}
}
