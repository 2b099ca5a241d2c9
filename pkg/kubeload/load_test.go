package kubeload_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

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
