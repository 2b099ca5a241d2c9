package barrier_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// TestEtcdWaitsForEveryWorker: three workers arriving one after the
// other all leave the barrier only after the last arrives, with the same
// time, the last arrival's.
func TestEtcdWaitsForEveryWorker(t *testing.T) {
	c := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 3
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		got      = map[int]time.Time{}
		leftAt   = map[int]time.Time{}
		lastSent time.Time
	)
	for i := range n {
		b, err := barrier.NewEtcd(c, "/barrier-test/run1", shard.Shard{Index: i, Count: n})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		lastSent = time.Now()
		mu.Unlock()
		wg.Go(func() {
			at, err := b.Wait(ctx, "synced")
			if err != nil {
				t.Errorf("worker %d: %v", i, err)
				return
			}
			mu.Lock()
			got[i], leftAt[i] = at, time.Now()
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != n {
		t.Fatalf("%d workers left the barrier, want %d", len(got), n)
	}
	for i := range n {
		if !got[i].Equal(got[0]) {
			t.Errorf("worker %d got %v, worker 0 %v: want one time", i, got[i], got[0])
		}
		if leftAt[i].Before(lastSent) {
			t.Errorf("worker %d left at %v, before the last worker arrived (%v)", i, leftAt[i], lastSent)
		}
	}
	if got[0].Before(lastSent.Add(-time.Second)) || got[0].After(time.Now()) {
		t.Errorf("agreed time %v: want the last arrival, about %v", got[0], lastSent)
	}
	// Another point of the same barrier is a new meeting.
	b0, _ := barrier.NewEtcd(c, "/barrier-test/run1", shard.Shard{Index: 0, Count: n})
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if _, err := b0.Wait(short, "written"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("alone at a new point: got %v, want the deadline", err)
	}
}

// TestEtcdAbort: a worker's abort ends every wait, before and after it,
// with ErrAborted naming the worker and why.
func TestEtcdAbort(t *testing.T) {
	c := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b0, _ := barrier.NewEtcd(c, "/barrier-test/run2", shard.Shard{Index: 0, Count: 2})
	b1, _ := barrier.NewEtcd(c, "/barrier-test/run2", shard.Shard{Index: 1, Count: 2})
	errc := make(chan error, 1)
	go func() { _, err := b0.Wait(ctx, "seeded"); errc <- err }()
	time.Sleep(200 * time.Millisecond)
	if err := b1.Abort(ctx, "seed objects: etcdserver: mvcc: database space exceeded"); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if !errors.Is(err, barrier.ErrAborted) {
		t.Fatalf("waiting worker got %v, want ErrAborted", err)
	}
	if want := "worker 1: seed objects: etcdserver: mvcc: database space exceeded"; !contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if _, err := b0.Wait(ctx, "synced"); !errors.Is(err, barrier.ErrAborted) {
		t.Errorf("a later wait got %v, want ErrAborted", err)
	}
	if err := barrier.DeleteEtcd(ctx, c, "/barrier-test/run2"); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(ctx, "/barrier-test/run2/", withPrefix())
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("after DeleteEtcd: %d keys, %v", len(resp.Kvs), err)
	}
}

// TestEtcdRejects: bad shards, keys and points, and an arrival of a
// worker beyond the barrier's count.
func TestEtcdRejects(t *testing.T) {
	c := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	if _, err := barrier.NewEtcd(c, "/b", shard.Shard{Index: 2, Count: 2}); err == nil {
		t.Error("shard 2/2 accepted")
	}
	if _, err := barrier.NewEtcd(c, "/", shard.Shard{Index: 0, Count: 2}); err == nil {
		t.Error("an empty key accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, _ := barrier.NewEtcd(c, "/barrier-test/run3", shard.Shard{Index: 0, Count: 2})
	for _, p := range []string{"abort", "Synced", "a/b", ""} {
		if _, err := b.Wait(ctx, p); err == nil {
			t.Errorf("point %q accepted", p)
		}
	}
	wide, _ := barrier.NewEtcd(c, "/barrier-test/run3", shard.Shard{Index: 4, Count: 5})
	go wide.Wait(ctx, "seeded")
	if _, err := b.Wait(ctx, "seeded"); err == nil || !contains(err.Error(), "another load uses the same barrier") {
		t.Errorf("an arrival of worker 4 at a barrier of 2: got %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func withPrefix() clientv3.OpOption { return clientv3.WithPrefix() }

// TestFollowEtcd: a follower sees each point once, when its last worker
// arrives, in order, and stops with ErrAborted at an abort.
func TestFollowEtcd(t *testing.T) {
	c := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b0, _ := barrier.NewEtcd(c, "/barrier-test/follow", shard.Shard{Index: 0, Count: 2})
	b1, _ := barrier.NewEtcd(c, "/barrier-test/follow", shard.Shard{Index: 1, Count: 2})
	var mu sync.Mutex
	var met []string
	done := make(chan error, 1)
	go func() {
		done <- barrier.FollowEtcd(ctx, c, "/barrier-test/follow", 2, func(p string, _ time.Time) {
			mu.Lock()
			met = append(met, p)
			mu.Unlock()
		})
	}()
	for _, p := range []string{"seeded", "synced"} {
		var wg sync.WaitGroup
		for _, b := range []*barrier.Etcd{b0, b1} {
			wg.Go(func() {
				if _, err := b.Wait(ctx, p); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b0.Wait(ctx, "seeded") // again: not met twice
	if err := b1.Abort(ctx, "planted"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, barrier.ErrAborted) {
		t.Errorf("follower ended with %v, want ErrAborted", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"seeded", "synced"}; strings.Join(met, ",") != strings.Join(want, ",") {
		t.Errorf("met %v, want %v", met, want)
	}
}
