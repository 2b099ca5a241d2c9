package kubeload_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/revision"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestCaseConfirmsAWriteThatCommitsLate: a write whose request was
// cancelled when the writes stopped may still commit at kube-apiserver
// after the final revision was read; the informers then hold a newer
// state than etcd's at that revision. Confirm moves to the revision the
// store settled in instead of reporting the informers' caches as wrong,
// and validation stays clean.
func TestCaseConfirmsAWriteThatCommitsLate(t *testing.T) {
	st := stack(t, apiserverproc.Config{DisableWatchCache: true})
	ctx := t.Context()
	s := watchload.NewSession(st.Etcd, time.Now(), t.Logf)
	defer s.Close()
	l, err := kubeload.NewLoad(ctx, s, st, kubeload.LoadOptions{Pods: 20, Namespaces: 2, Workers: 2, RunID: "late", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.StartCase(ctx, kubeload.CaseOptions{Informers: 2, SyncTimeout: time.Minute, RingCapacity: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	final := l.SeededAt()
	// The late write, after final was read.
	cs, err := kubernetes.NewForConfig(st.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods("lwbench-late-0").Patch(ctx, "seed-0", types.MergePatchType, []byte(`{"status":{"message":"late"}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	late, err := revision.ParseResourceVersion(pod.ResourceVersion)
	if err != nil || late <= final {
		t.Fatalf("late write at resourceVersion %s (%v), want one after %d", pod.ResourceVersion, err, final)
	}
	for i := range c.Set().Informers {
		for deadline := time.Now().Add(30 * time.Second); c.Set().Cache(i)["/registry/pods/lwbench-late-0/seed-0"] != late; {
			if time.Now().After(deadline) {
				t.Fatalf("informer %d did not see the late write at revision %d", i, late)
			}
			clockwait.SleepReal(ctx, 20*time.Millisecond)
		}
	}
	if unsynced := c.Confirm(ctx, final, 30*time.Second); unsynced != 0 {
		t.Fatalf("%d informers unsynced: their caches hold the late write, which etcd holds too", unsynced)
	}
	if v, _ := c.Validate(ctx, 0); !v.OK() {
		t.Errorf("validation %s, want clean", v.Summary())
	}
}

// TestConfirmWhileTheStoreMoves: a cluster's store goes on moving after
// the load's writes end (its controllers settle, Leases renew). Confirm
// holds each informer's cache against etcd at the revision the informer
// has reached, so it confirms them while a pod is written back to back
// throughout by several writers; against etcd's head (what it did
// before), the pods' caches were always writes behind the state read and
// never confirmed.
func TestConfirmWhileTheStoreMoves(t *testing.T) {
	st := stack(t, apiserverproc.Config{})
	ctx := t.Context()
	s := watchload.NewSession(st.Etcd, time.Now(), t.Logf)
	defer s.Close()
	l, err := kubeload.NewLoad(ctx, s, st, kubeload.LoadOptions{Pods: 20, Namespaces: 2, Workers: 2, RunID: "moving", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.StartCase(ctx, kubeload.CaseOptions{Informers: 3, SyncTimeout: time.Minute, RingCapacity: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	final := l.SeededAt()
	cfg := rest.CopyConfig(st.RESTConfig)
	cfg.QPS = -1 // no client-side limit: client-go's default, 5/s, would not move the store
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods("lwbench-moving-0").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) < 4 {
		t.Fatalf("listed %v pods (%v), want the seeded ones", len(pods.Items), err)
	}
	// Writers back to back on several pods: the store moves faster than
	// a watch delivers, so etcd's head is always ahead of the caches.
	wctx, stop := context.WithCancel(ctx)
	var writes atomic.Int64
	const writers = 32
	done := make(chan error, writers)
	for w := range writers {
		name := pods.Items[w%len(pods.Items)].Name
		go func() {
			for i := 0; wctx.Err() == nil; i++ {
				patch := fmt.Sprintf(`{"status":{"message":"writer %d write %d"}}`, w, i)
				if _, err := cs.CoreV1().Pods("lwbench-moving-0").Patch(wctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
					if wctx.Err() == nil && !apierrors.IsConflict(err) {
						done <- err
						return
					}
					continue
				}
				writes.Add(1)
			}
			done <- nil
		}()
	}
	clockwait.SleepReal(ctx, time.Second) // the store is moving past final before Confirm starts
	before := writes.Load()
	began := time.Now()
	unsynced := c.Confirm(ctx, final, 20*time.Second)
	during := writes.Load() - before
	t.Logf("Confirm took %v; %d writes before it, %d during", time.Since(began).Round(time.Millisecond), before, during)
	stop()
	for range writers {
		if err := <-done; err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	if before == 0 {
		t.Fatal("no write committed before Confirm: the test did not move the store")
	}
	if unsynced != 0 {
		t.Fatalf("%d informers unconfirmed while the store moved (%d writes before Confirm, %d during)", unsynced, before, during)
	}
	if v, _ := c.Validate(ctx, 0); !v.OK() {
		t.Errorf("validation %s, want clean", v.Summary())
	}
}
