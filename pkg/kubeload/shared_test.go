package kubeload_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/pkg/kubeload"
)

// TestSharedClusterOwnsItsNamespaces runs on one kube-apiserver treated
// as a cluster lwbench does not own (Stack.Shared): a run whose namespace
// exists already is refused before it writes anything, and leaves that
// namespace as it was; a run interrupted during its writes still deletes
// exactly the namespaces it created and every key it wrote in them.
func TestSharedClusterOwnsItsNamespaces(t *testing.T) {
	st := stack(t, apiserverproc.Config{DisableWatchCache: true})
	st.Shared = true
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(st.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	go apiservertest.FinalizeNamespaces(ctx, cs)

	t.Run("refused", func(t *testing.T) {
		taken, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lwbench-0000beef-ns-1"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = runAPI(ctx, st, smallLoad(t, 0), kubeload.Options{RunID: "0000beef"})
		if !errors.Is(err, kubeload.ErrNamespaceExists) {
			t.Fatalf("got error %v, want ErrNamespaceExists", err)
		}
		got, err := cs.CoreV1().Namespaces().Get(ctx, taken.Name, metav1.GetOptions{})
		if err != nil || got.ResourceVersion != taken.ResourceVersion || got.DeletionTimestamp != nil {
			t.Errorf("the existing namespace: got %v (%v), want it untouched at resourceVersion %s", got, err, taken.ResourceVersion)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "lwbench-0000beef-ns-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace lwbench-0000beef-ns-0: got %v, want none created", err)
		}
	})

	t.Run("interrupted", func(t *testing.T) {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		lo := smallLoad(t, 0)
		lo.Duration = time.Minute
		timer := time.AfterFunc(6*time.Second, cancel) // seeding and syncing take 1-3 s here
		defer timer.Stop()
		res, err := runAPI(rctx, st, lo, kubeload.Options{RunID: "0000cafe", NamespaceDeleteTimeout: 30 * time.Second})
		// The one script returns the result with the interruption, as
		// for the model.
		if !errors.Is(err, context.Canceled) || res == nil {
			t.Fatalf("got result %v, error %v; want a result and the interruption", res != nil, err)
		}
		if !res.Interrupted || res.Writes.Completed == 0 {
			t.Errorf("got interrupted %v after %d writes, want an interruption during the writes", res.Interrupted, res.Writes.Completed)
		}
		c := res.Cleanup
		want := []string{"lwbench-0000cafe-ns-0", "lwbench-0000cafe-ns-1"}
		if c == nil || c.Error != "" || len(c.NamespacesLeft) != 0 || len(c.Namespaces) != len(want) || c.Namespaces[0] != want[0] || c.Namespaces[1] != want[1] {
			t.Fatalf("got cleanup %+v, want namespaces %v deleted", c, want)
		}
		ec, err := st.Etcd.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer ec.Close()
		for _, ns := range want {
			if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("namespace %s: got %v, want it gone", ns, err)
			}
			resp, err := ec.Get(ctx, "/registry/pods/"+ns+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil || resp.Count != 0 {
				t.Errorf("pods of %s in etcd: got %v (%v), want none", ns, resp, err)
			}
		}
	})
}
