package watchload_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// seedAndRecordPods seeds wl's objects with workers writers and starts
// the Session's recorder of the pods under prefix from the revision after
// the seeding, and returns the pods' prefix.
func seedAndRecordPods(t *testing.T, s *watchload.Session, admin *clientv3.Client, wl *watchload.KubernetesWorkload, prefix string, workers int) string {
	t.Helper()
	ctx := t.Context()
	if err := s.Seed(ctx, wl, workers); err != nil {
		t.Fatal(err)
	}
	podsPrefix := watchload.ResourcePrefix(prefix, watchload.ResourcePods)
	head, err := admin.Get(ctx, podsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRecorder(ctx, []string{podsPrefix}, "", head.Header.Revision+1); err != nil {
		t.Fatal(err)
	}
	return podsPrefix
}

// TestSessionCases runs cases one after another on one load, as an
// experiment runs its page sizes: each case's informers list the pods,
// see the case's writes, and validate clean against the one history, and
// each case's writes are its own.
func TestSessionCases(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	ctx := t.Context()
	s := watchload.NewSession(target(srv), time.Now(), t.Logf)
	defer s.Close()
	admin, err := s.DialAdmin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConnectWriters(ctx, 2, false); err != nil {
		t.Fatal(err)
	}
	const prefix, pods, writes = "/cases", 60, 100
	wl, err := watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{Prefix: prefix, Namespaces: 2, Pods: pods, Workers: 4, Seed: 1,
		Mix: watchload.Mix{CreatePercent: 10, UpdatePercent: 80, DeletePercent: 10}, ResourceMix: watchload.ResourceMix{PodsPercent: 100}})
	if err != nil {
		t.Fatal(err)
	}
	podsPrefix := seedAndRecordPods(t, s, admin, wl, prefix, 8)
	tests := []struct {
		name      string
		pageSize  int64
		wantPages int // of each informer's first list, at least
	}{
		{name: "pages of 10", pageSize: 10, wantPages: 5},
		{name: "unpaginated", pageSize: 0, wantPages: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counted := &countingWorkload{Workload: wl}
			c, err := s.StartCase(ctx, watchload.CaseOptions{Watchers: 3, Connections: 2, SyncTimeout: 30 * time.Second,
				RingCapacity: writes + 1024, Writers: 4, Workload: counted, ConfirmPeriod: 50 * time.Millisecond,
				Watcher: func(i int, st *watchload.Stream) watchload.ReflectorOptions {
					return watchload.ReflectorOptions{ID: i, Profile: watchload.ProfileInformer, Resource: watchload.ResourcePods,
						Prefix: podsPrefix, Stream: st, PageSize: tt.pageSize, Unpaginated: tt.pageSize == 0}
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, r := range c.Reflectors() {
				if l := r.Lists(); len(l) != 1 || l[0].Pages < tt.wantPages {
					t.Errorf("watcher %d: lists %+v, want one of at least %d pages", r.ID(), l, tt.wantPages)
				}
			}
			start, err := admin.Get(ctx, podsPrefix, clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Write(ctx, watchload.WriterOptions{Rate: 400, Total: writes, Workers: 4, Timeout: 10 * time.Second}); err != nil {
				t.Fatal(err)
			}
			// The writes are done once every op has returned (a pod's
			// delete commits three revisions, so the store's revision
			// does not count them).
			for deadline := time.Now().Add(30 * time.Second); counted.done.Load() < writes && time.Now().Before(deadline); {
				clockwait.SleepReal(ctx, 20*time.Millisecond)
			}
			resp, err := admin.Get(ctx, podsPrefix, clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			final := resp.Header.Revision
			if final < start.Header.Revision+writes {
				t.Errorf("the store moved from revision %d to %d, fewer than the %d writes", start.Header.Revision, final, writes)
			}
			ws := c.StopWrites()
			if ws.Completed != writes {
				t.Fatalf("case wrote %d, want %d", ws.Completed, writes)
			}
			if unsynced := c.Confirm(ctx, final, 30*time.Second); unsynced != 0 {
				t.Fatalf("%d watchers did not reach revision %d", unsynced, final)
			}
			v, err := c.Validate(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !v.OK() || v.HistoryEvents < writes {
				t.Errorf("validation %s, %d history events; want clean, at least the case's %d", v.Summary(), v.HistoryEvents, writes)
			}
			for _, r := range c.Reflectors() {
				if r.LastRevision() < final {
					t.Errorf("watcher %d stopped at revision %d, before %d", r.ID(), r.LastRevision(), final)
				}
			}
		})
	}
}

// countingWorkload counts the ops a workload has performed.
type countingWorkload struct {
	watchload.Workload
	done atomic.Int64
}

func (w *countingWorkload) Do(ctx context.Context, worker int, kv watchload.KV, op watchload.Op) (int64, bool, error) {
	defer w.done.Add(1)
	return w.Workload.Do(ctx, worker, kv, op)
}

// TestValidateQuietWatcherAfterCompaction: a watcher whose prefix saw no
// event since it listed is synced by the history (Recorder.Quiet) however
// far the store moved on; when etcd has since been compacted past its
// last revision, its cache is still compared (at the history's
// watermark, where its prefix is the same) instead of failing the case
// with ErrCompacted, as a kill-leader run once did.
func TestValidateQuietWatcherAfterCompaction(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	ctx := t.Context()
	s := watchload.NewSession(target(srv), time.Now(), t.Logf)
	defer s.Close()
	admin, err := s.DialAdmin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConnectWriters(ctx, 1, false); err != nil {
		t.Fatal(err)
	}
	const prefix = "/quiet"
	wl, err := watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{Prefix: prefix, Namespaces: 2, Pods: 20, Workers: 2, Seed: 1,
		ResourceMix: watchload.ResourceMix{PodsPercent: 100}})
	if err != nil {
		t.Fatal(err)
	}
	podsPrefix := seedAndRecordPods(t, s, admin, wl, prefix, 4)
	c, err := s.StartCase(ctx, watchload.CaseOptions{Watchers: 2, Connections: 1, SyncTimeout: 30 * time.Second, RingCapacity: 1024, Writers: 1,
		ConfirmPeriod: 50 * time.Millisecond,
		Watcher: func(i int, st *watchload.Stream) watchload.ReflectorOptions {
			return watchload.ReflectorOptions{ID: i, Profile: watchload.ProfileInformer, Resource: watchload.ResourcePods, Prefix: podsPrefix, Stream: st}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The store moves on elsewhere, and is compacted past the watchers.
	var last int64
	for i := range 20 {
		resp, err := admin.Put(ctx, fmt.Sprintf("/elsewhere/%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	for _, r := range c.Reflectors() {
		if r.LastRevision() >= last {
			t.Fatalf("watcher %d saw revision %d: the test needs it behind %d", r.ID(), r.LastRevision(), last)
		}
	}
	if _, err := admin.Compact(ctx, last, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if unsynced := c.Confirm(ctx, last, 30*time.Second); unsynced != 0 {
		t.Fatalf("%d quiet watchers not synced to revision %d", unsynced, last)
	}
	v, err := c.Validate(ctx, 0)
	if err != nil {
		t.Fatalf("validate after a compaction past quiet watchers: %v", err)
	}
	if !v.OK() {
		t.Errorf("validation %s, want clean", v.Summary())
	}
}
