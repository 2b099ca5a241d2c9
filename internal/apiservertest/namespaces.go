package apiservertest

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// FinalizeNamespaces does, every 300 ms until ctx ends, the last step of
// kube-controller-manager's namespace controller, which the tests do not
// run (k8s.io/kubernetes/pkg/controller/namespace/deletion
// namespaced_resources_deleter.go Delete, retryOnConflictError and
// finalizeNamespace): it finalizes every deleted namespace that holds no
// pod, configmap or event any more, so that it goes. It never deletes an
// object; a namespace that still holds one stays Terminating.
func FinalizeNamespaces(ctx context.Context, cs kubernetes.Interface) {
	for ctx.Err() == nil {
		if l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
			for _, ns := range l.Items {
				if ns.DeletionTimestamp == nil || len(ns.Spec.Finalizers) == 0 {
					continue
				}
				p, perr := cs.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
				c, cerr := cs.CoreV1().ConfigMaps(ns.Name).List(ctx, metav1.ListOptions{})
				e, eerr := cs.CoreV1().Events(ns.Name).List(ctx, metav1.ListOptions{})
				if perr != nil || cerr != nil || eerr != nil || len(p.Items)+len(c.Items)+len(e.Items) > 0 {
					continue
				}
				ns.Spec.Finalizers = nil
				_, _ = cs.CoreV1().Namespaces().Finalize(ctx, &ns, metav1.UpdateOptions{})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}
