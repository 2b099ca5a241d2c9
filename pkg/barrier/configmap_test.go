package barrier_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// startKubeAPIServer starts a kube-apiserver over an embedded etcd and
// returns an admin client and a namespace created for the test. It skips
// when kube-apiserver is not cached (apiservertest.Binaries).
func startKubeAPIServer(t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	bin := apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := apiserverproc.Start(ctx, apiserverproc.Config{BinDir: bin, Dir: t.TempDir(), EtcdServers: srv.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	rc := c.RESTConfig()
	rc.QPS, rc.Burst = -1, 0 // the workers of a load have a client each; here they share one
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	return cs
}

// TestConfigMap runs the ConfigMap barrier against a real kube-apiserver:
// workers arriving together (their updates conflict) and one after the
// other all leave with one time, the last arrival's, and create the
// ConfigMap themselves; an abort ends every wait, before and after it;
// bad shards, names and points and a wider load's arrival are refused; a
// deletion of the ConfigMap ends a wait.
func TestConfigMap(t *testing.T) {
	const ns = "barrier-test"
	cs := startKubeAPIServer(t, ns)

	t.Run("waits for every worker", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		const n = 6
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			got      = map[int]time.Time{}
			leftAt   = map[int]time.Time{}
			lastSent time.Time
		)
		for i := range n {
			b, err := barrier.NewConfigMap(cs, ns, "run1", shard.Shard{Index: i, Count: n})
			if err != nil {
				t.Fatal(err)
			}
			if i >= n/2 { // the first half together, then one by one
				time.Sleep(150 * time.Millisecond)
			}
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
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "run1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cm.Data) != n || cm.Data["synced.5"] == "" {
			t.Errorf("configmap data %v: want synced.0 to synced.5", cm.Data)
		}
		// Another point of the same barrier is a new meeting.
		b0, _ := barrier.NewConfigMap(cs, ns, "run1", shard.Shard{Index: 0, Count: n})
		short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancelShort()
		if _, err := b0.Wait(short, "written"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("alone at a new point: got %v, want the deadline", err)
		}
		if err := barrier.DeleteConfigMap(ctx, cs, ns, "run1"); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "run1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after DeleteConfigMap: got %v, want NotFound", err)
		}
		if err := barrier.DeleteConfigMap(ctx, cs, ns, "run1"); err != nil {
			t.Errorf("DeleteConfigMap of a deleted ConfigMap: %v", err)
		}
	})

	t.Run("abort", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		b0, _ := barrier.NewConfigMap(cs, ns, "run2", shard.Shard{Index: 0, Count: 2})
		b1, _ := barrier.NewConfigMap(cs, ns, "run2", shard.Shard{Index: 1, Count: 2})
		errc := make(chan error, 1)
		go func() { _, err := b0.Wait(ctx, "seeded"); errc <- err }()
		time.Sleep(300 * time.Millisecond)
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
	})

	t.Run("rejects", func(t *testing.T) {
		if _, err := barrier.NewConfigMap(cs, ns, "b", shard.Shard{Index: 2, Count: 2}); err == nil {
			t.Error("shard 2/2 accepted")
		}
		for _, nn := range [][2]string{{"", "b"}, {"Upper", "b"}, {ns, ""}, {ns, "a/b"}, {ns, "UP"}} {
			if _, err := barrier.NewConfigMap(cs, nn[0], nn[1], shard.Shard{Index: 0, Count: 2}); err == nil {
				t.Errorf("configmap %s/%s accepted", nn[0], nn[1])
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		b, _ := barrier.NewConfigMap(cs, ns, "run3", shard.Shard{Index: 0, Count: 2})
		for _, p := range []string{"abort", "Synced", "a.b", ""} {
			if _, err := b.Wait(ctx, p); err == nil {
				t.Errorf("point %q accepted", p)
			}
		}
		wide, _ := barrier.NewConfigMap(cs, ns, "run3", shard.Shard{Index: 4, Count: 5})
		go wide.Wait(ctx, "seeded")
		if _, err := b.Wait(ctx, "seeded"); err == nil || !contains(err.Error(), "another load uses the same barrier") {
			t.Errorf("an arrival of worker 4 at a barrier of 2: got %v", err)
		}
	})

	t.Run("deleted while waiting", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		b, _ := barrier.NewConfigMap(cs, ns, "run4", shard.Shard{Index: 0, Count: 2})
		errc := make(chan error, 1)
		go func() { _, err := b.Wait(ctx, "seeded"); errc <- err }()
		time.Sleep(300 * time.Millisecond)
		if err := barrier.DeleteConfigMap(ctx, cs, ns, "run4"); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err == nil || !contains(err.Error(), "deleted while waiting") {
			t.Errorf("got %v, want the deletion", err)
		}
	})
}

// TestConfigMapRelistsAfterGone: a watch that ends with 410 Gone (its
// resourceVersion compacted) is followed by a new list, which sees the
// arrival the dead watch never delivered.
func TestConfigMapRelistsAfterGone(t *testing.T) {
	cs := fake.NewClientset()
	dead := watch.NewFake()
	var watches atomic.Int32
	watched := make(chan struct{}, 4)
	cs.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		watched <- struct{}{}
		if watches.Add(1) == 1 {
			return true, dead, nil
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b0, _ := barrier.NewConfigMap(cs, "ns", "run", shard.Shard{Index: 0, Count: 2})
	b1, _ := barrier.NewConfigMap(cs, "ns", "run", shard.Shard{Index: 1, Count: 2})
	type result struct {
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	go func() { at, err := b0.Wait(ctx, "seeded"); done <- result{at, err} }()
	<-watched
	// Worker 1 arrives; worker 0's watch never tells it.
	at1, err := b1.Wait(ctx, "seeded")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("worker 0 left before its watch ended: %v, %v", r.at, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	gone := apierrors.NewResourceExpired("too old resource version: 1 (5)")
	dead.Error(&gone.ErrStatus)
	r := <-done
	if r.err != nil || !r.at.Equal(at1) {
		t.Errorf("worker 0 got %v, %v; want %v as worker 1", r.at, r.err, at1)
	}
	if got := watches.Load(); got != 1 {
		t.Errorf("%d watches, want 1: the relist saw every arrival", got)
	}
}

// TestFollowConfigMap: a follower started before the ConfigMap exists
// sees each point once, when its last worker arrives, in order, and stops
// with ErrAborted at an abort.
func TestFollowConfigMap(t *testing.T) {
	const ns = "follow-test"
	cs := startKubeAPIServer(t, ns)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var met []string
	done := make(chan error, 1)
	go func() {
		done <- barrier.FollowConfigMap(ctx, cs, ns, "load", 2, func(p string, _ time.Time) {
			mu.Lock()
			met = append(met, p)
			mu.Unlock()
		})
	}()
	time.Sleep(300 * time.Millisecond) // the follower lists before the ConfigMap exists
	b0, _ := barrier.NewConfigMap(cs, ns, "load", shard.Shard{Index: 0, Count: 2})
	b1, _ := barrier.NewConfigMap(cs, ns, "load", shard.Shard{Index: 1, Count: 2})
	for _, p := range []string{"seeded", "synced"} {
		var wg sync.WaitGroup
		for _, b := range []*barrier.ConfigMap{b0, b1} {
			wg.Go(func() {
				if _, err := b.Wait(ctx, p); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if err := b1.Abort(ctx, "planted"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, barrier.ErrAborted) {
			t.Errorf("follower ended with %v, want ErrAborted", err)
		}
	case <-ctx.Done():
		t.Fatal("the follower did not see the abort")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(met) != 2 || met[0] != "seeded" || met[1] != "synced" {
		t.Errorf("met %v, want [seeded synced]", met)
	}
}
