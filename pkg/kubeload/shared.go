package kubeload

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// RunLabel is the label every namespace and object of a run on a shared
// cluster (Stack.Shared) carries, its value the run's random id; the
// informers select on it.
const RunLabel = "lwbench.etcdkit.kubestore.io/run"

// DefaultNamespaceDeleteTimeout bounds how long a run on a shared cluster
// waits for its namespaces to be gone at the end.
const DefaultNamespaceDeleteTimeout = 2 * time.Minute

// ErrNamespaceExists is returned when a namespace a run on a shared
// cluster would create exists already: the run writes only in namespaces
// of its own.
var ErrNamespaceExists = errors.New("namespace exists already")

// sharedScope is what a run on a shared cluster confines itself to.
type sharedScope struct {
	id        string   // the run's random id, RunLabel's value
	selector  string   // RunLabel=id
	keyScopes []string // the etcd prefixes of the run's (resource, namespace) pairs
}

// newSharedScope returns the scope of plan's namespaces under prefix.
func newSharedScope(id, prefix string, plan *watchload.KubernetesWorkload) sharedScope {
	sc := sharedScope{id: id, selector: RunLabel + "=" + id}
	for _, res := range watchload.Resources {
		for _, ns := range plan.Namespaces() {
			sc.keyScopes = append(sc.keyScopes, watchload.ResourcePrefix(prefix, res)+ns+"/")
		}
	}
	return sc
}

// within returns the scopes under resPrefix (one resource's).
func (sc sharedScope) within(resPrefix string) []string {
	var out []string
	for _, p := range sc.keyScopes {
		if len(p) > len(resPrefix) && p[:len(resPrefix)] == resPrefix {
			out = append(out, p)
		}
	}
	return out
}

// refuseExisting returns ErrNamespaceExists, naming them, if any of names
// exists on the cluster cfg reaches.
func refuseExisting(ctx context.Context, cfg *rest.Config, names []string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var found []string
	for _, ns := range names {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case err == nil:
			found = append(found, ns)
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("check namespace %s: %w", ns, err)
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %v; the run writes only in namespaces of its own", ErrNamespaceExists, found)
	}
	return nil
}

// deleteNamespaces ends a run on a shared cluster: in each of names (the
// namespaces the run created) it deletes the pods (grace period 0: no
// kubelet runs them), configmaps and events carrying selector, then the
// namespace itself, and waits until every one is gone or timeout passes.
// The cluster's namespace controller
// (k8s.io/kubernetes/pkg/controller/namespace/deletion) finalizes a
// deleted namespace once it is empty; lwbench never bypasses it. Errors
// are recorded in the result.
func deleteNamespaces(ctx context.Context, cfg *rest.Config, names []string, selector string, timeout time.Duration, logf func(string, ...any)) *report.Cleanup {
	start := time.Now()
	res := &report.Cleanup{Namespaces: names}
	defer func() { res.DurationMs = report.Ms(time.Since(start)) }()
	fail := func(err error) {
		if res.Error == "" {
			res.Error = err.Error()
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(err)
		return res
	}
	zero := int64(0)
	list := metav1.ListOptions{LabelSelector: selector}
	for _, ns := range names {
		core := cs.CoreV1()
		if l, err := core.Pods(ns).List(ctx, list); err == nil {
			res.ObjectsDeleted += len(l.Items)
		}
		if err := core.Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, list); err != nil {
			fail(fmt.Errorf("delete the pods of %s: %w", ns, err))
		}
		if l, err := core.ConfigMaps(ns).List(ctx, list); err == nil {
			res.ObjectsDeleted += len(l.Items)
		}
		if err := core.ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, list); err != nil {
			fail(fmt.Errorf("delete the configmaps of %s: %w", ns, err))
		}
		if l, err := core.Events(ns).List(ctx, list); err == nil {
			res.ObjectsDeleted += len(l.Items)
		}
		if err := core.Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, list); err != nil {
			fail(fmt.Errorf("delete the events of %s: %w", ns, err))
		}
		if err := core.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			fail(fmt.Errorf("delete namespace %s: %w", ns, err))
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		res.NamespacesLeft = nil
		for _, ns := range names {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				res.NamespacesLeft = append(res.NamespacesLeft, ns)
			}
		}
		if len(res.NamespacesLeft) == 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		_ = clockwait.SleepReal(ctx, 500*time.Millisecond)
	}
	if len(res.NamespacesLeft) > 0 {
		fail(fmt.Errorf("namespaces %v still present %v after their deletion (the cluster's namespace controller finalizes them)", res.NamespacesLeft, timeout))
	}
	logf("cleanup: deleted %d objects and the %d namespaces the run created; %d still present", res.ObjectsDeleted, len(names), len(res.NamespacesLeft))
	return res
}
