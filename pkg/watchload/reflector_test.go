package watchload

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReflectorRelistsAfterCompaction(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	put := func(i int) int64 {
		resp, err := c.Put(ctx, fmt.Sprintf("/registry/pods/ns/p%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	var listed int64
	for i := range 7 {
		listed = put(i)
	}
	r := NewReflector(0, c, "/registry/pods/", 3, time.Now())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	<-r.Synced()
	if n := r.lists; n != 1 {
		t.Fatalf("lists = %d after sync, want 1", n)
	}
	rev := put(7)
	waitFor(t, "the event of the 8th put", func() bool { return r.LastRevision() >= rev })

	heldAt := r.Hold()
	var last int64
	for i := 8; i < 12; i++ {
		last = put(i)
	}
	if _, err := c.Compact(ctx, last, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	r.Release()
	waitFor(t, "the relist", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.relists) == 1
	})
	cancel()
	<-done

	rl := r.relists[0]
	if rl.reason != "compacted" || rl.from != heldAt+1 || rl.compactRev != last || rl.listRev < last {
		t.Errorf("relist %+v: want reason compacted, from %d, compact revision %d, list revision >= %d", rl, heldAt+1, last, last)
	}
	if rl.objects != 12 || rl.pages != 4 {
		t.Errorf("relist listed %d objects in %d pages, want 12 in 4 pages of 3", rl.objects, rl.pages)
	}
	if len(r.cache) != 12 {
		t.Errorf("cache holds %d keys, want 12", len(r.cache))
	}
	// The watch sessions: the first from the initial list, the resumed one
	// that etcd cancelled (it recorded nothing), then the one after the
	// relist.
	if len(r.sessions) < 2 || r.sessions[0].from != listed+1 {
		t.Errorf("%d sessions, the first from %d: want the first to start after the list, at %d", len(r.sessions), r.sessions[0].from, listed+1)
	}
	if r.viol.outOfOrder+r.viol.duplicated+r.viol.prevKV != 0 {
		t.Errorf("violations %+v", r.viol)
	}
}
