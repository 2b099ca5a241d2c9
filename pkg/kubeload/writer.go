package kubeload

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/kubestore/etcdkit/internal/parallel"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/revision"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// APIWorkload performs a watchload.KubernetesWorkload's plan (the same
// objects, schedule and mix as the etcd-direct writers) through
// kube-apiserver with real client-go clients, as Kubernetes' own
// components write:
//   - pods are created, updated through the status subresource (the
//     kubelet's status manager: k8s.io/kubernetes/pkg/kubelet/status) and
//     deleted gracefully: a DELETE that sets deletionTimestamp (the pods
//     are bound to a node, so kube-apiserver does not delete them at once:
//     pkg/registry/core/pod/strategy.go CheckGracefulDelete), then a DELETE
//     with gracePeriodSeconds 0 and the pod's UID as precondition, as the
//     kubelet sends once the containers are gone;
//   - configmaps are created, updated and deleted;
//   - events are created and their repeats patched (count and
//     lastTimestamp), and created again when the patch finds them gone,
//     as client-go's recorder does (k8s.io/client-go/tools/record/event.go).
//
// Each request names the field manager of the component it stands for, as
// the generated objects' managedFields do (keyspace.PodCreatorManager,
// PodStatusManager, ConfigMapManager, an event's recording component), so
// that kube-apiserver stores the managedFields the etcd-direct model
// writes. Updates conflicting with another writer are retried on a fresh
// read with client-go's retry.RetryOnConflict. Do's revision is the
// resourceVersion kube-apiserver returned (the write's mod_revision). A
// pod's delete commits three revisions (pkg/registry/core/pod/strategy.go,
// k8s.io/apiserver/pkg/registry/generic/registry/store.go Delete): the
// first DELETE's update setting deletionTimestamp, which goes to the
// commit observer (watchload.CommitObserver), the second DELETE's update
// to grace period 0, whose revision is the deleted pod's resourceVersion
// in its response and is Do's, and the removal, whose revision no API
// response carries (its event goes untimed). Do ignores its etcd
// connection: pass NewWriters any one-element slice.
type APIWorkload struct {
	plan     *watchload.KubernetesWorkload
	clients  []kubernetes.Interface // per worker
	gens     []*keyspace.Generator  // per worker
	seed     uint64
	observer func(worker int, rev int64) // ObserveCommits'; nil: none

	mu     sync.Mutex              // guards states and created during Seed
	states []map[string]*apiObject // per worker, by key

	seeded  []watchload.Op    // the creates Seed performed, in order
	labels  map[string]string // put on every object and namespace; nil: none
	owned   bool              // a namespace that exists already is an error
	created []string          // the namespaces Seed created, in order
}

// apiObject is a worker's last view of one object it owns.
type apiObject struct {
	generation int
	pod        *corev1.Pod
	cm         *corev1.ConfigMap
}

var (
	_ watchload.Workload        = (*APIWorkload)(nil)
	_ watchload.CommitObserver  = (*APIWorkload)(nil)
	_ watchload.ShardedWorkload = (*APIWorkload)(nil)
)

// Shard implements watchload.ShardedWorkload: the part of the load the
// plan writes (watchload.KubernetesWorkloadOptions.Shard).
func (w *APIWorkload) Shard() shard.Shard { return w.plan.Shard() }

// Owns implements watchload.ShardedWorkload: op is in one of the shard's
// namespaces (watchload.KubernetesWorkload.Owns).
func (w *APIWorkload) Owns(op watchload.Op) bool { return w.plan.Owns(op) }

// ObserveCommits implements watchload.CommitObserver: f gets the revision
// of a pod delete's first update (deletionTimestamp set) as soon as it
// has committed. Call it before the writers start.
func (w *APIWorkload) ObserveCommits(f func(worker int, rev int64)) { w.observer = f }

// NewAPIWorkload returns the workload of plan (made with Workers workers
// and a Prefix equal to kube-apiserver's --etcd-prefix) on workers
// clientsets from conns (a connection each, or conns' shared one); seed
// is plan's seed (the objects' content).
func NewAPIWorkload(conns *Connections, plan *watchload.KubernetesWorkload, workers int, seed uint64) (*APIWorkload, error) {
	w := &APIWorkload{plan: plan, seed: seed}
	for i := range workers {
		cs, err := conns.NewClientset()
		if err != nil {
			return nil, fmt.Errorf("writer %d: %w", i, err)
		}
		w.clients = append(w.clients, cs)
		w.gens = append(w.gens, keyspace.NewGenerator(seed))
		w.states = append(w.states, map[string]*apiObject{})
	}
	return w, nil
}

// OwnNamespaces makes the workload fit a cluster lwbench does not own:
// every namespace and object it creates carries labels (an informer's
// label selector then sees the run's objects only), and Seed fails if one
// of the plan's namespaces exists already instead of writing into it.
// Call it before Seed.
func (w *APIWorkload) OwnNamespaces(labels map[string]string) {
	w.labels, w.owned = labels, true
}

// CreatedNamespaces returns the namespaces Seed created, in order (also
// after Seed failed part way): exactly those a cleanup may delete.
func (w *APIWorkload) CreatedNamespaces() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.created...)
}

// label puts the workload's labels on m.
func (w *APIWorkload) label(m *metav1.ObjectMeta) {
	if len(w.labels) == 0 {
		return
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	for k, v := range w.labels {
		m.Labels[k] = v
	}
}

// Next implements watchload.Workload: the plan's op i.
func (w *APIWorkload) Next(i int64) watchload.Op { return w.plan.Next(i) }

// Seed creates the plan's namespaces, then its seeded objects
// (KubernetesWorkload.PlanSeed) with concurrency parallel creates, and
// returns how many objects of each resource it created. A plan divided
// into shards (Shard) creates only the namespaces its shard owns and the
// objects in them; every shard plans them all.
func (w *APIWorkload) Seed(ctx context.Context, concurrency int) (map[string]int, error) {
	cs := w.clients[0]
	for _, ns := range w.plan.Namespaces() {
		if !w.plan.Owns(watchload.Op{Namespace: ns}) {
			continue // another shard's
		}
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		w.label(&obj.ObjectMeta)
		_, err := cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{})
		if err == nil {
			w.mu.Lock()
			w.created = append(w.created, ns)
			w.mu.Unlock()
			continue
		}
		if w.owned && apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create namespace %s: %w: %v", ns, ErrNamespaceExists, err)
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	ops := slices.DeleteFunc(w.plan.PlanSeed(), func(op watchload.Op) bool { return !w.plan.Owns(op) })
	w.seeded = ops
	counts := map[string]int{}
	for _, op := range ops {
		counts[op.Resource]++
	}
	concurrency = max(min(concurrency, len(w.clients)), 1)
	err := parallel.Each(ctx, concurrency, len(ops), func(ctx context.Context, c, i int) error {
		op := ops[i]
		st := &apiObject{}
		if _, _, err := w.write(ctx, c, op, st); err != nil {
			return fmt.Errorf("seed %s: %w", op.Key, err)
		}
		w.mu.Lock()
		w.states[op.Shard][op.Key] = st
		w.mu.Unlock()
		return nil
	})
	return counts, err
}

// Do implements watchload.Workload; kv is not used.
func (w *APIWorkload) Do(ctx context.Context, worker int, _ watchload.KV, op watchload.Op) (int64, bool, error) {
	st := w.states[worker][op.Key]
	if st == nil {
		st = &apiObject{}
		w.states[worker][op.Key] = st
	}
	return w.write(ctx, worker, op, st)
}

// write performs op with worker's client and generator.
func (w *APIWorkload) write(ctx context.Context, worker int, op watchload.Op, st *apiObject) (rev int64, conflict bool, err error) {
	cs, gen := w.clients[worker], w.gens[worker]
	switch op.Resource {
	case watchload.ResourcePods:
		return w.writePod(ctx, worker, cs.CoreV1().Pods(op.Namespace), cs.CoreV1().RESTClient(), gen, op, st)
	case watchload.ResourceConfigMaps:
		return w.writeConfigMap(ctx, cs.CoreV1().ConfigMaps(op.Namespace), gen, op, st)
	case watchload.ResourceEvents:
		return w.writeEvent(ctx, cs, gen, op, st)
	}
	return 0, false, fmt.Errorf("%s %s: not a resource the API writers know", op.Kind, op.Key)
}

// fresh clears what kube-apiserver sets on create (generateName, which a
// ReplicaSet's pods carry beside their name, stays), and returns the
// field manager of the object's first managedFields entry, the one its
// create makes.
func fresh(m *metav1.ObjectMeta) (manager string) {
	if len(m.ManagedFields) > 0 {
		manager = m.ManagedFields[0].Manager
	}
	m.UID, m.ResourceVersion, m.CreationTimestamp, m.ManagedFields, m.Generation = "", "", metav1.Time{}, nil, 0
	return manager
}

func (w *APIWorkload) writePod(ctx context.Context, worker int, pods podClient, rc rest.Interface, gen *keyspace.Generator, op watchload.Op, st *apiObject) (int64, bool, error) {
	switch op.Kind {
	case watchload.OpCreate:
		p := gen.Pod(op.Namespace, op.Name, 0)
		manager := fresh(&p.ObjectMeta)
		w.label(&p.ObjectMeta)
		got, err := pods.Create(ctx, p, metav1.CreateOptions{FieldManager: manager})
		if err != nil {
			return 0, false, apiError(op, err)
		}
		st.pod, st.generation = got, 0
		return revisionOf(got.ResourceVersion), false, nil
	case watchload.OpUpdate:
		conflicts := 0
		var got *corev1.Pod
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if st.pod == nil || conflicts > 0 {
				cur, err := pods.Get(ctx, op.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				st.pod = cur
			}
			p := st.pod.DeepCopy()
			p.Status = gen.Pod(op.Namespace, op.Name, st.generation+1).Status
			var err error
			got, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: keyspace.PodStatusManager})
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		})
		if err != nil {
			return 0, conflicts > 0, apiError(op, err)
		}
		st.pod = got
		st.generation++
		return revisionOf(got.ResourceVersion), conflicts > 0, nil
	case watchload.OpDelete:
		var pre *metav1.Preconditions
		if st.pod != nil {
			pre = &metav1.Preconditions{UID: &st.pod.UID}
		}
		// The graceful DELETE: kube-apiserver sets deletionTimestamp and
		// returns the pod with it (an update); the typed client drops
		// that response, so the REST client rc sends it.
		cur := &corev1.Pod{}
		err := rc.Delete().Namespace(op.Namespace).Resource("pods").Name(op.Name).
			Body(&metav1.DeleteOptions{Preconditions: pre}).Do(ctx).Into(cur)
		if err != nil {
			return 0, false, apiError(op, err)
		}
		rev := revisionOf(cur.ResourceVersion)
		if w.observer != nil && worker >= 0 {
			w.observer(worker, rev)
		}
		if cur.UID != "" {
			uid := cur.UID
			pre = &metav1.Preconditions{UID: &uid}
		}
		// The DELETE with grace period 0 updates the pod once more, then
		// removes it; the response is the removed pod, whose
		// resourceVersion is that last update's revision.
		zero := int64(0)
		gone := &corev1.Pod{}
		err = rc.Delete().Namespace(op.Namespace).Resource("pods").Name(op.Name).
			Body(&metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: pre}).Do(ctx).Into(gone)
		if err != nil && !apierrors.IsNotFound(err) {
			return rev, false, apiError(op, err)
		}
		if r := revisionOf(gone.ResourceVersion); err == nil && r > rev {
			rev = r
		}
		st.pod = nil
		return rev, false, nil
	}
	return 0, false, fmt.Errorf("%s %s: not a pod write", op.Kind, op.Key)
}

func (w *APIWorkload) writeConfigMap(ctx context.Context, cms configMapClient, gen *keyspace.Generator, op watchload.Op, st *apiObject) (int64, bool, error) {
	size := gen.ConfigMapDataBytes(op.Namespace, op.Name)
	switch op.Kind {
	case watchload.OpCreate:
		c := gen.ConfigMap(op.Namespace, op.Name, 0, size)
		manager := fresh(&c.ObjectMeta)
		w.label(&c.ObjectMeta)
		got, err := cms.Create(ctx, c, metav1.CreateOptions{FieldManager: manager})
		if err != nil {
			return 0, false, apiError(op, err)
		}
		st.cm, st.generation = got, 0
		return revisionOf(got.ResourceVersion), false, nil
	case watchload.OpUpdate:
		conflicts := 0
		var got *corev1.ConfigMap
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if st.cm == nil || conflicts > 0 {
				cur, err := cms.Get(ctx, op.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				st.cm = cur
			}
			c := st.cm.DeepCopy()
			c.Data = gen.ConfigMap(op.Namespace, op.Name, st.generation+1, size).Data
			var err error
			got, err = cms.Update(ctx, c, metav1.UpdateOptions{FieldManager: keyspace.ConfigMapManager})
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		})
		if err != nil {
			return 0, conflicts > 0, apiError(op, err)
		}
		st.cm = got
		st.generation++
		return revisionOf(got.ResourceVersion), conflicts > 0, nil
	case watchload.OpDelete:
		if err := cms.Delete(ctx, op.Name, metav1.DeleteOptions{}); err != nil {
			return 0, false, apiError(op, err)
		}
		st.cm = nil
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("%s %s: not a configmap write", op.Kind, op.Key)
}

func (w *APIWorkload) writeEvent(ctx context.Context, cs kubernetes.Interface, gen *keyspace.Generator, op watchload.Op, st *apiObject) (int64, bool, error) {
	events := cs.CoreV1().Events(op.Namespace)
	owner := strings.SplitN(op.Name, ".", 2)[0]
	create := func() (int64, error) {
		e := gen.Event(op.Namespace, op.Name, owner, 1)
		manager := fresh(&e.ObjectMeta)
		w.label(&e.ObjectMeta)
		got, err := events.Create(ctx, e, metav1.CreateOptions{FieldManager: manager})
		if err != nil {
			return 0, apiError(op, err)
		}
		st.generation = 1
		return revisionOf(got.ResourceVersion), nil
	}
	if op.Kind == watchload.OpCreate {
		rev, err := create()
		return rev, false, err
	}
	// A repeat: client-go's recorder patches count and lastTimestamp.
	next := gen.Event(op.Namespace, op.Name, owner, st.generation+1)
	patch, err := json.Marshal(map[string]any{"count": next.Count, "lastTimestamp": next.LastTimestamp, "message": next.Message})
	if err != nil {
		return 0, false, err
	}
	got, err := events.Patch(ctx, op.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: next.ManagedFields[0].Manager})
	if apierrors.IsNotFound(err) {
		// The event's lease expired (--event-ttl): the recorder creates
		// it again.
		rev, err := create()
		return rev, true, err
	}
	if err != nil {
		return 0, false, apiError(op, err)
	}
	st.generation++
	return revisionOf(got.ResourceVersion), false, nil
}

// podClient and configMapClient are what the writers use of client-go's
// typed clients.
type podClient interface {
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error)
}

type configMapClient interface {
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// apiError wraps err with the op, mapping 409 AlreadyExists and 404
// NotFound to watchload's ErrObjectExists and ErrObjectNotFound.
func apiError(op watchload.Op, err error) error {
	switch {
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%s %s: %w: %v", op.Kind, op.Key, watchload.ErrObjectExists, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s %s: %w: %v", op.Kind, op.Key, watchload.ErrObjectNotFound, err)
	}
	return fmt.Errorf("%s %s: %w", op.Kind, op.Key, err)
}

// revisionOf parses a resourceVersion kube-apiserver returned (0 if it
// is not one).
func revisionOf(rv string) int64 {
	r, _ := revision.ParseResourceVersion(rv)
	return r
}
