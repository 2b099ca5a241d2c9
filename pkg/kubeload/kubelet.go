package kubeload

import (
	"context"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// KubeletWatches are the watches kubelets open, for a set of nodes, run
// by client-go's Reflector unchanged with a store that keeps nothing: per
// node, its pods (spec.nodeName=<node>,
// k8s.io/kubernetes/pkg/kubelet/config/apiserver.go NewSourceApiserver),
// its own Node (metadata.name=<node>, pkg/kubelet/kubelet.go), the
// Services (pkg/kubelet/kubelet.go's service informer), and one watch per
// ConfigMap and Secret its pods mount, while a pod mounts it and until it
// is seen immutable (pkg/kubelet/util/manager/watch_based_manager.go:
// the ConfigMapAndSecretChangeDetectionStrategy Watch, the default). A
// node's watches share its connection, as a kubelet's do. They count what
// they receive; nothing is validated (a field-selected watch sees a
// subset of each resource's history).
type KubeletWatches struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	nodes  []*kubeletNode
	// Reflectors counts the reflectors running now; Events the objects
	// their stores received (initial lists' included).
	Reflectors, Events atomic.Int64
}

// kubeletNode is one node's watches.
type kubeletNode struct {
	w    *KubeletWatches
	name string
	cs   kubernetes.Interface
	ctx  context.Context
	mu   sync.Mutex
	// mounts counts, per ConfigMap or Secret, the node's pods that mount
	// it, and stops are their watches' ends.
	mounts map[objectRef]int
	stops  map[objectRef]context.CancelFunc
	pods   map[string][]objectRef // the refs of each pod, by namespace/name
}

// objectRef names a ConfigMap or Secret a pod mounts.
type objectRef struct {
	secret          bool
	namespace, name string
}

// StartKubeletWatches starts the kubelet watches of nodes, each node's on
// a clientset of conns of its own. Stop ends them.
func StartKubeletWatches(ctx context.Context, conns *Connections, nodes []string) (*KubeletWatches, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &KubeletWatches{cancel: cancel}
	for _, name := range nodes {
		cs, err := conns.NewClientset()
		if err != nil {
			w.Stop()
			return nil, err
		}
		n := &kubeletNode{w: w, name: name, cs: cs, ctx: ctx, mounts: map[objectRef]int{}, stops: map[objectRef]context.CancelFunc{}, pods: map[string][]objectRef{}}
		w.nodes = append(w.nodes, n)
		core := cs.CoreV1().RESTClient()
		w.run(ctx, cache.NewListWatchFromClient(core, "pods", metav1.NamespaceAll, fields.OneTermEqualSelector("spec.nodeName", name)), &corev1.Pod{}, n.podStore())
		w.run(ctx, cache.NewListWatchFromClient(core, "nodes", metav1.NamespaceAll, fields.OneTermEqualSelector(metav1.ObjectNameField, name)), &corev1.Node{}, w.counter(nil))
		w.run(ctx, cache.NewListWatchFromClient(core, "services", metav1.NamespaceAll, fields.Everything()), &corev1.Service{}, w.counter(nil))
	}
	return w, nil
}

// run runs one Reflector of lw into store until ctx ends.
func (w *KubeletWatches) run(ctx context.Context, lw cache.ListerWatcher, obj runtime.Object, store cache.Store) {
	r := cache.NewReflectorWithOptions(lw, obj, store, cache.ReflectorOptions{Name: "lwbench kubelet"})
	w.wg.Add(1)
	w.Reflectors.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.Reflectors.Add(-1)
		r.RunWithContext(ctx)
	}()
}

// Stop ends every watch and waits for them.
func (w *KubeletWatches) Stop() {
	w.cancel()
	w.wg.Wait()
}

// podStore counts the node's pods and starts and stops the watches of
// what they mount.
func (n *kubeletNode) podStore() cache.Store {
	return n.w.counter(func(obj any, deleted bool) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		var refs []objectRef
		if !deleted && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			for _, v := range pod.Spec.Volumes {
				switch {
				case v.ConfigMap != nil:
					refs = append(refs, objectRef{namespace: pod.Namespace, name: v.ConfigMap.Name})
				case v.Secret != nil:
					refs = append(refs, objectRef{secret: true, namespace: pod.Namespace, name: v.Secret.SecretName})
				}
			}
		}
		n.setMounts(pod.Namespace+"/"+pod.Name, refs)
	})
}

// setMounts makes pod's mounts refs: a ConfigMap or Secret no pod mounts
// any more has its watch stopped, one newly mounted gets one.
func (n *kubeletNode) setMounts(pod string, refs []objectRef) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range n.pods[pod] {
		if n.mounts[r]--; n.mounts[r] <= 0 {
			delete(n.mounts, r)
			if stop := n.stops[r]; stop != nil {
				stop()
				delete(n.stops, r)
			}
		}
	}
	if len(refs) == 0 {
		delete(n.pods, pod)
		return
	}
	n.pods[pod] = refs
	for _, r := range refs {
		if n.mounts[r]++; n.mounts[r] == 1 {
			n.watchObject(r)
		}
	}
}

// watchObject starts the watch of one mounted ConfigMap or Secret (a
// field selector on its name), ended once the object is seen immutable.
func (n *kubeletNode) watchObject(r objectRef) {
	ctx, stop := context.WithCancel(n.ctx)
	n.stops[r] = stop
	resource, obj := "configmaps", runtime.Object(&corev1.ConfigMap{})
	if r.secret {
		resource, obj = "secrets", &corev1.Secret{}
	}
	lw := cache.NewListWatchFromClient(n.cs.CoreV1().RESTClient(), resource, r.namespace, fields.OneTermEqualSelector(metav1.ObjectNameField, r.name))
	n.w.run(ctx, lw, obj, n.w.counter(func(o any, _ bool) {
		if immutable(o) {
			stop()
		}
	}))
}

// immutable reports whether o is a ConfigMap or Secret marked immutable.
func immutable(o any) bool {
	switch v := o.(type) {
	case *corev1.ConfigMap:
		return v.Immutable != nil && *v.Immutable
	case *corev1.Secret:
		return v.Immutable != nil && *v.Immutable
	}
	return false
}

// counter is a cache.Store that keeps nothing: it counts every object it
// is given into w.Events and passes it to seen (nil: nothing), deleted
// for a Delete.
func (w *KubeletWatches) counter(seen func(obj any, deleted bool)) cache.Store {
	return &countingStore{w: w, seen: seen}
}

type countingStore struct {
	w    *KubeletWatches
	seen func(obj any, deleted bool)
	rv   atomic.Pointer[string] // the newest resourceVersion seen
}

func (s *countingStore) note(obj any, deleted bool) error {
	s.w.Events.Add(1)
	if m, err := meta.Accessor(obj); err == nil {
		rv := m.GetResourceVersion()
		s.rv.Store(&rv)
	}
	if s.seen != nil {
		s.seen(obj, deleted)
	}
	return nil
}

func (s *countingStore) Add(obj any) error    { return s.note(obj, false) }
func (s *countingStore) Update(obj any) error { return s.note(obj, false) }
func (s *countingStore) Delete(obj any) error { return s.note(obj, true) }

// Replace is a (re)list: each object is counted and seen.
func (s *countingStore) Replace(list []any, rv string) error {
	for _, o := range list {
		_ = s.note(o, false)
	}
	s.rv.Store(&rv)
	return nil
}

// Bookmark notes a bookmark's resourceVersion.
func (s *countingStore) Bookmark(rv string) { s.rv.Store(&rv) }

// LastStoreSyncResourceVersion is the newest resourceVersion seen.
func (s *countingStore) LastStoreSyncResourceVersion() string {
	if rv := s.rv.Load(); rv != nil {
		return *rv
	}
	return ""
}

func (s *countingStore) List() []any                        { return nil }
func (s *countingStore) ListKeys() []string                 { return nil }
func (s *countingStore) Get(any) (any, bool, error)         { return nil, false, nil }
func (s *countingStore) GetByKey(string) (any, bool, error) { return nil, false, nil }
func (s *countingStore) Resync() error                      { return nil }

var _ cache.Store = (*countingStore)(nil)
