package keyspace

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file gives the generated objects the managedFields kube-apiserver's
// field manager records for them, so that they carry the bytes a real
// object carries. kube-apiserver runs the field manager on every create,
// update and patch that is not an apply (k8s.io/apiserver/pkg/endpoints/
// handlers/create.go, update.go, patch.go: FieldManager.UpdateNoErrors,
// before mutating admission): the manager named by the request's
// fieldManager (else its user agent up to the first "/") comes to own
// every field the request added or changed, with operation Update
// (sigs.k8s.io/structured-merge-diff/v6/merge/update.go Updater.Update:
// the old set, minus the removed fields, plus the modified and added
// ones), less the fields the resource's strategy resets (a pod's status
// on the main resource, its spec on the status subresource:
// k8s.io/kubernetes/pkg/registry/core/pod/strategy.go GetResetFields).
// The set is stored as FieldsV1 JSON (fieldpath.Set.ToJSON): "f:<field>"
// for a field, "k:<key fields>" for an element of a keyed list, and "."
// for a map, struct or list element that the request created, which is
// why the lists and structs a new object has anyway (a pod's containers,
// an event's source) own no ".".
//
// The sets are built from the object's own fields (the shapes Generator
// makes); TestManagedFieldsMatchFieldManager holds them against
// k8s.io/apimachinery's field manager, and kubeload's
// TestModelStoresWhatKubeAPIServerStores against a real kube-apiserver.

// The field managers of the generated objects: the components that write
// such objects in a cluster. kube-controller-manager's ReplicaSet
// controller creates the pods and the kubelet's status manager updates
// their status (k8s.io/kubernetes/pkg/kubelet/status); a client's default
// manager is its binary's name (k8s.io/apiserver/pkg/endpoints/handlers/
// create.go managerOrUserAgent). Helm creates and upgrades configmaps as
// "helm" (helm pkg/kube/client.go getManagedFieldsManager). Events keep
// the manager of the component that records them (eventReasons).
const (
	PodCreatorManager = "kube-controller-manager" // field manager of a pod's create
	PodStatusManager  = "kubelet"                 // field manager of a pod's status updates
	ConfigMapManager  = "helm"                    // field manager of a configmap's creates and updates
)

// fieldSet is a FieldsV1 set under construction: a tree of path
// elements, "f:<name>" for a field and "k:<key>" for an item of a keyed
// list. It encodes as fieldpath.Set.ToJSON does
// (sigs.k8s.io/structured-merge-diff/v6/fieldpath/serialize.go): a node's
// children after "." when the node is itself a member, fields before keys
// and each kind in order (fieldpath/element.go PathElement.Compare).
// Building a fieldpath.Set instead costs four times the rest of a pod's
// generation and encoding; the tests hold this tree's bytes against the
// field manager's.
type fieldSet struct {
	member bool // the path is itself in the set: "." once it has children
	kids   []fieldElem
}

// fieldElem is a child: kind 'f' (a field) or 'k' (a list item, name its
// key object as keyOf writes it).
type fieldElem struct {
	kind byte
	name string
	set  *fieldSet
}

// child returns the child kind:name, added if new.
func (f *fieldSet) child(kind byte, name string) *fieldSet {
	for _, e := range f.kids {
		if e.kind == kind && e.name == name {
			return e.set
		}
	}
	c := &fieldSet{}
	f.kids = append(f.kids, fieldElem{kind, name, c})
	return c
}

// field returns the field name (not made a member).
func (f *fieldSet) field(name string) *fieldSet { return f.child('f', name) }

// item returns the list item with key k (not made a member).
func (f *fieldSet) item(k string) *fieldSet { return f.child('k', k) }

// mark makes f a member and returns it.
func (f *fieldSet) mark() *fieldSet {
	f.member = true
	return f
}

// leaves makes each field a member.
func (f *fieldSet) leaves(names ...string) {
	for _, n := range names {
		f.field(n).member = true
	}
}

// keys makes the map field name a member with each of m's keys: labels,
// annotations, a configmap's data. An empty map is left out.
func (f *fieldSet) keys(name string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	c := f.field(name).mark()
	for k := range m {
		c.field(k).member = true
	}
}

// keyOf returns the key object of the list item whose key fields have
// these names and values (strings or int64, in order of name), as
// fieldpath.KeyByFields names it: {"name":"value"}. Values are plain
// ASCII (Kubernetes names, IPs, paths): only quotes and backslashes are
// escaped.
func keyOf(nameValues ...any) string {
	b := []byte{'{'}
	for i := 0; i+1 < len(nameValues); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, "", nameValues[i].(string))
		b = append(b, ':')
		switch v := nameValues[i+1].(type) {
		case string:
			b = appendQuoted(b, "", v)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		}
	}
	return string(append(b, '}'))
}

// appendQuoted appends prefix+s as a JSON string.
func appendQuoted(b []byte, prefix, s string) []byte {
	b = append(b, '"')
	b = append(b, prefix...)
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// appendJSON appends the set's FieldsV1 object.
func (f *fieldSet) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if f.member && len(f.kids) > 0 {
		b = append(b, `".":{}`...)
	}
	slices.SortFunc(f.kids, func(x, y fieldElem) int {
		return cmp.Or(cmp.Compare(x.kind, y.kind), strings.Compare(x.name, y.name))
	})
	for i, e := range f.kids {
		if i > 0 || f.member {
			b = append(b, ',')
		}
		b = appendQuoted(b, string([]byte{e.kind, ':'}), e.name)
		b = append(b, ':')
		b = e.set.appendJSON(b)
	}
	return append(b, '}')
}

// entry encodes the set as a managedFields entry of manager, operation
// Update, at t; subresource is "" or "status".
func (f *fieldSet) entry(manager, subresource string, t time.Time) metav1.ManagedFieldsEntry {
	at := metav1.NewTime(t)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: f.appendJSON(make([]byte, 0, 2048))}, Subresource: subresource}
}

// podCreateFields returns the fields a pod's creator owns: every field of
// metadata (but those kube-apiserver sets) and spec it sent; not status,
// which the pod strategy resets on the main resource.
func podCreateFields(pod *corev1.Pod) *fieldSet {
	f := &fieldSet{}
	m, meta := &pod.ObjectMeta, f.field("metadata")
	meta.keys("annotations", m.Annotations)
	meta.keys("labels", m.Labels)
	if m.GenerateName != "" {
		meta.leaves("generateName")
	}
	if len(m.OwnerReferences) > 0 {
		refs := meta.field("ownerReferences").mark()
		for _, o := range m.OwnerReferences {
			refs.item(keyOf("uid", string(o.UID))).mark() // an atomic item
		}
	}
	s, spec := &pod.Spec, f.field("spec")
	for _, c := range s.Containers {
		cf := spec.field("containers").item(keyOf("name", c.Name)).mark()
		cf.leaves("name", "image", "imagePullPolicy", "terminationMessagePath", "terminationMessagePolicy")
		if len(c.Env) > 0 {
			env := cf.field("env").mark()
			for _, e := range c.Env {
				ef := env.item(keyOf("name", e.Name)).mark()
				ef.leaves("name")
				if e.Value != "" {
					ef.leaves("value")
				}
				if e.ValueFrom != nil {
					vf := ef.field("valueFrom").mark()
					if e.ValueFrom.FieldRef != nil {
						vf.leaves("fieldRef")
					}
				}
			}
		}
		if len(c.Ports) > 0 {
			ports := cf.field("ports").mark()
			for _, p := range c.Ports {
				pf := ports.item(keyOf("containerPort", int64(p.ContainerPort), "protocol", string(p.Protocol))).mark()
				pf.leaves("containerPort", "protocol")
				if p.Name != "" {
					pf.leaves("name")
				}
			}
		}
		probe := func(name string, p *corev1.Probe) {
			if p == nil {
				return
			}
			pf := cf.field(name).mark()
			pf.leaves("failureThreshold", "initialDelaySeconds", "periodSeconds", "successThreshold", "timeoutSeconds")
			if p.HTTPGet != nil {
				pf.field("httpGet").mark().leaves("path", "port", "scheme")
			}
		}
		probe("livenessProbe", c.LivenessProbe)
		probe("readinessProbe", c.ReadinessProbe)
		if len(c.Resources.Requests)+len(c.Resources.Limits) > 0 {
			rf := cf.field("resources").mark()
			for name, l := range map[string]corev1.ResourceList{"requests": c.Resources.Requests, "limits": c.Resources.Limits} {
				if len(l) > 0 {
					lf := rf.field(name).mark()
					for r := range l {
						lf.leaves(string(r))
					}
				}
			}
		}
		if len(c.VolumeMounts) > 0 {
			mounts := cf.field("volumeMounts").mark()
			for _, v := range c.VolumeMounts {
				vf := mounts.item(keyOf("mountPath", v.MountPath)).mark()
				vf.leaves("mountPath", "name")
				if v.ReadOnly {
					vf.leaves("readOnly")
				}
			}
		}
	}
	for _, x := range []struct {
		name string
		set  bool
	}{
		{"dnsPolicy", s.DNSPolicy != ""}, {"enableServiceLinks", s.EnableServiceLinks != nil}, {"nodeName", s.NodeName != ""},
		{"preemptionPolicy", s.PreemptionPolicy != nil}, {"priority", s.Priority != nil}, {"restartPolicy", s.RestartPolicy != ""},
		{"schedulerName", s.SchedulerName != ""}, {"securityContext", s.SecurityContext != nil},
		{"serviceAccount", s.DeprecatedServiceAccount != ""}, {"serviceAccountName", s.ServiceAccountName != ""},
		{"terminationGracePeriodSeconds", s.TerminationGracePeriodSeconds != nil}, {"tolerations", len(s.Tolerations) > 0}, // an atomic list
	} {
		if x.set {
			spec.leaves(x.name)
		}
	}
	if len(s.Volumes) > 0 {
		vols := spec.field("volumes").mark()
		for _, v := range s.Volumes {
			vf := vols.item(keyOf("name", v.Name)).mark()
			vf.leaves("name")
			if p := v.Projected; p != nil {
				pf := vf.field("projected").mark()
				if p.DefaultMode != nil {
					pf.leaves("defaultMode")
				}
				if len(p.Sources) > 0 {
					pf.leaves("sources") // an atomic list
				}
			}
		}
	}
	return f
}

// podStatusFields returns the fields the kubelet owns after its status
// updates of a pod created Pending: everything its first update added or
// changed (all conditions, the IPs, the phase, start time and container
// statuses; hostIPs and containerStatuses are atomic lists), not
// qosClass, which kube-apiserver set on create and no update changes.
func podStatusFields(st *corev1.PodStatus) *fieldSet {
	f := &fieldSet{}
	sf := f.field("status")
	if len(st.Conditions) > 0 {
		conds := sf.field("conditions").mark()
		types := make([]string, 0, len(st.Conditions))
		for _, c := range st.Conditions {
			types = append(types, string(c.Type))
		}
		sort.Strings(types)
		for _, t := range types {
			conds.item(keyOf("type", t)).mark().leaves("lastProbeTime", "lastTransitionTime", "status", "type")
		}
	}
	for _, x := range []struct {
		name string
		set  bool
	}{
		{"containerStatuses", len(st.ContainerStatuses) > 0}, {"hostIP", st.HostIP != ""}, {"hostIPs", len(st.HostIPs) > 0},
		{"phase", st.Phase != corev1.PodPending}, {"podIP", st.PodIP != ""}, {"startTime", st.StartTime != nil},
	} {
		if x.set {
			sf.leaves(x.name)
		}
	}
	if len(st.PodIPs) > 0 {
		ips := sf.field("podIPs").mark()
		for _, ip := range st.PodIPs {
			ips.item(keyOf("ip", ip.IP)).mark().leaves("ip")
		}
	}
	return f
}

// configMapFields returns the fields a configmap's writer owns: its
// labels, annotations and data.
func configMapFields(cm *corev1.ConfigMap) *fieldSet {
	f := &fieldSet{}
	f.field("metadata").keys("labels", cm.Labels)
	f.field("metadata").keys("annotations", cm.Annotations)
	f.keys("data", cm.Data)
	return f
}

// eventFields returns the fields an event's recorder owns: those it set
// to something other than an empty Event's value. An event's
// involvedObject (an atomic struct) and source exist in an empty Event
// too, so they own no "."; eventTime stays null, and an empty
// reportingInstance (the scheduler's) is no change either.
func eventFields(e *corev1.Event) *fieldSet {
	f := &fieldSet{}
	if len(e.Labels) > 0 {
		f.field("metadata").keys("labels", e.Labels)
	}
	for _, x := range []struct {
		name string
		set  bool
	}{
		{"count", e.Count != 0}, {"firstTimestamp", !e.FirstTimestamp.IsZero()},
		{"involvedObject", e.InvolvedObject != (corev1.ObjectReference{})}, {"lastTimestamp", !e.LastTimestamp.IsZero()},
		{"message", e.Message != ""}, {"reason", e.Reason != ""}, {"reportingComponent", e.ReportingController != ""},
		{"reportingInstance", e.ReportingInstance != ""}, {"type", e.Type != ""},
	} {
		if x.set {
			f.leaves(x.name)
		}
	}
	if e.Source.Component != "" {
		f.field("source").leaves("component")
	}
	if e.Source.Host != "" {
		f.field("source").leaves("host")
	}
	return f
}
