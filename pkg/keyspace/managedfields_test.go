package keyspace_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// fieldManagers runs k8s.io/apimachinery's field manager, as
// kube-apiserver runs it before storing a non-apply write
// (k8s.io/apiserver/pkg/endpoints/handlers/create.go, update.go), for
// core/v1 kinds: main resources with their strategy's reset fields, and
// the pod status subresource.
type fieldManagers struct {
	t      *testing.T
	scheme *runtime.Scheme
	tc     managedfields.TypeConverter
}

func newFieldManagers(t *testing.T) fieldManagers {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fieldManagers{t: t, scheme: scheme, tc: applyconfigurations.NewTypeConverter(scheme)}
}

// update records manager's write of newObj over liveObj (an empty object
// for a create). resetFields are the strategy's GetResetFields paths
// (k8s.io/kubernetes/pkg/registry/core/pod/strategy.go: status on the
// main resource; spec, metadata.deletionTimestamp and
// metadata.ownerReferences on pods/status).
func (m fieldManagers) update(kind, subresource string, reset []fieldpath.Path, liveObj, newObj runtime.Object, manager string) runtime.Object {
	m.t.Helper()
	var resetFields map[fieldpath.APIVersion]fieldpath.Filter
	if len(reset) > 0 {
		resetFields = fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{"v1": fieldpath.NewSet(reset...)})
	}
	fm, err := managedfields.NewDefaultFieldManager(m.tc, m.scheme, m.scheme, m.scheme,
		corev1.SchemeGroupVersion.WithKind(kind), corev1.SchemeGroupVersion, subresource, resetFields)
	if err != nil {
		m.t.Fatal(err)
	}
	out, err := fm.Update(liveObj, newObj, manager)
	if err != nil {
		m.t.Fatalf("field manager %s %s: %v", kind, subresource, err)
	}
	return out
}

// sameEntries fails unless got's entries match want's, but for their times
// (now in the field manager's).
func sameEntries(t *testing.T, what string, got, want []metav1.ManagedFieldsEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d managedFields entries, the field manager's %d: %v", what, len(want), len(got), got)
	}
	for i := range got {
		g, w := got[i], want[i]
		g.Time, w.Time = nil, nil
		gr, wr := string(g.FieldsV1.Raw), string(w.FieldsV1.Raw)
		g.FieldsV1, w.FieldsV1 = nil, nil
		if g != w {
			t.Errorf("%s: entry %d is %+v, the field manager's %+v", what, i, w, g)
		}
		if gr != wr {
			t.Errorf("%s: entry %d (%s) fieldsV1\n generated %s\n field manager %s", what, i, g.Manager, wr, gr)
		}
	}
}

// TestManagedFieldsMatchFieldManager: the managedFields the generator
// puts on its pods, configmaps and events are those kube-apiserver's field
// manager records for the writes that make them: a pod's create by
// kube-controller-manager and the kubelet's status updates, a configmap's
// create and update, an event's create and the patch of a repeat.
func TestManagedFieldsMatchFieldManager(t *testing.T) {
	m := newFieldManagers(t)
	gen := keyspace.NewGenerator(5)
	status := []fieldpath.Path{fieldpath.MakePathOrDie("status")}
	podStatusReset := []fieldpath.Path{fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata", "deletionTimestamp"),
		fieldpath.MakePathOrDie("metadata", "ownerReferences")}
	sent := func(o metav1.Object) { o.SetManagedFields(nil) } // what a client sends: no managedFields

	for i := range 24 { // every app several times
		ns, name := fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("pod-%d", i)
		p := gen.Pod(ns, name, 0)
		sent(p)
		live := m.update("Pod", "", status, &corev1.Pod{}, p, keyspace.PodCreatorManager).(*corev1.Pod)
		sameEntries(t, name+" create", live.ManagedFields, gen.Pod(ns, name, 0).ManagedFields)
		for g := 1; g <= 3; g++ {
			next := live.DeepCopy()
			next.Status = gen.Pod(ns, name, g).Status
			live = m.update("Pod", "status", podStatusReset, live, next, keyspace.PodStatusManager).(*corev1.Pod)
			sameEntries(t, fmt.Sprintf("%s status update %d", name, g), live.ManagedFields, gen.Pod(ns, name, g).ManagedFields)
		}
	}
	for i := range 6 {
		ns, name := "ns-0", fmt.Sprintf("cm-%d", i)
		size := gen.ConfigMapDataBytes(ns, name) * (1 + i)
		c := gen.ConfigMap(ns, name, 0, size)
		sent(c)
		live := m.update("ConfigMap", "", nil, &corev1.ConfigMap{}, c, keyspace.ConfigMapManager).(*corev1.ConfigMap)
		sameEntries(t, name+" create", live.ManagedFields, gen.ConfigMap(ns, name, 0, size).ManagedFields)
		next := live.DeepCopy()
		next.Data = gen.ConfigMap(ns, name, 1, size).Data
		live = m.update("ConfigMap", "", nil, live, next, keyspace.ConfigMapManager).(*corev1.ConfigMap)
		sameEntries(t, name+" update", live.ManagedFields, gen.ConfigMap(ns, name, 1, size).ManagedFields)
	}
	reasons := map[string]bool{}
	for i := range 40 { // every reason, the scheduler's without a host
		ns, name := "ns-1", fmt.Sprintf("pod-%d.%x", i, i)
		e := gen.Event(ns, name, fmt.Sprintf("pod-%d", i), 1)
		reasons[e.Reason] = true
		manager := e.ManagedFields[0].Manager
		sent(e)
		live := m.update("Event", "", nil, &corev1.Event{}, e, manager).(*corev1.Event)
		sameEntries(t, name+" create", live.ManagedFields, gen.Event(ns, name, fmt.Sprintf("pod-%d", i), 1).ManagedFields)
		repeat := gen.Event(ns, name, fmt.Sprintf("pod-%d", i), 2)
		next := live.DeepCopy()
		next.Count, next.LastTimestamp, next.Message = repeat.Count, repeat.LastTimestamp, repeat.Message
		live = m.update("Event", "", nil, live, next, manager).(*corev1.Event)
		sameEntries(t, name+" patch", live.ManagedFields, repeat.ManagedFields)
	}
	if len(reasons) < 6 {
		t.Errorf("only reasons %v were generated", reasons)
	}
}
