package clustermodel

import (
	"fmt"
	"hash/fnv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// key returns the etcd key of a namespaced object of group/resource.
func key(prefix, group, resource, ns, name string) string {
	return keyspace.Build(keyspace.Key{Prefix: prefix, Group: group, Resource: resource, Namespace: ns, Name: name})
}

func nodeKey(prefix string, i int) string {
	return key(prefix, "", "nodes", "", controlplane.NodeName(i))
}

// uid is a stable UID for a name.
func uid(parts ...string) types.UID {
	h := fnv.New128a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	b := h.Sum(nil)
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}

// owner is an ownerReference to a controller.
func owner(kind, name string, id types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: id, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

// replicaSet is a Deployment's ReplicaSet of revision rev, named as the
// Deployment controller names it (<deployment>-<hash of the template>:
// pkg/controller/deployment/sync.go getNewReplicaSet).
func replicaSet(d *appsv1.Deployment, rev, replicas int) *appsv1.ReplicaSet {
	hash := rand.SafeEncodeString(fmt.Sprint(fnv32(fmt.Sprintf("%s/%s/%d", d.Namespace, d.Name, rev))))
	name := d.Name + "-" + hash
	tmpl := *d.Spec.Template.DeepCopy()
	tmpl.Labels = map[string]string{"pod-template-hash": hash}
	for k, v := range d.Spec.Template.Labels {
		tmpl.Labels[k] = v
	}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: name, Labels: tmpl.Labels, UID: uid(d.Namespace, name),
			CreationTimestamp: metav1.Now(), OwnerReferences: owner("Deployment", d.Name, uid(d.Namespace, d.Name)),
			Annotations: map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(rev + 1),
				"deployment.kubernetes.io/desired-replicas": fmt.Sprint(replicas), "deployment.kubernetes.io/max-replicas": fmt.Sprint(replicas + 2)}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// pod is a pod of rs (owner kind ReplicaSet or DaemonSet) named name, as
// the controller creates it from the template: not yet bound.
func pod(tmpl corev1.PodTemplateSpec, ns, name, ownerKind, ownerName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, GenerateName: ownerName + "-", Labels: tmpl.Labels,
			Annotations: tmpl.Annotations, UID: uid(ns, name), CreationTimestamp: metav1.Now(),
			OwnerReferences: owner(ownerKind, ownerName, uid(ns, ownerName))},
		Spec:   *tmpl.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable},
	}
}

// bound is p bound to node (the Binding subresource sets spec.nodeName
// and the PodScheduled condition).
func bound(p *corev1.Pod, node string) {
	p.Spec.NodeName = node
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
}

// running is p as KWOK's pod-ready stage patches its status
// (kustomize/stage/pod/fast/pod-ready.yaml: conditions, container
// statuses, IPs, phase Running).
func running(p *corev1.Pod, ip string) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.PodIP = "10.0.0.1", ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	p.Status.StartTime = &now
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
}

// terminating is p with deletionTimestamp and grace period set.
func terminating(p *corev1.Pod, grace int64) {
	t := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second))
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &t, ptr.To(grace)
}

// endpoints is a Service's Endpoints with ips ready.
func endpoints(ns, name string, ips []string) *corev1.Endpoints {
	e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid(ns, "endpoints", name)}}
	if len(ips) > 0 {
		s := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Port: 8080, Protocol: corev1.ProtocolTCP}}}
		for _, ip := range ips {
			s.Addresses = append(s.Addresses, corev1.EndpointAddress{IP: ip, NodeName: ptr.To(controlplane.NodeName(0))})
		}
		e.Subsets = []corev1.EndpointSubset{s}
	}
	return e
}

// endpointSlice is a Service's EndpointSlice with ips ready.
func endpointSlice(ns, svc string, ips []string) *discoveryv1.EndpointSlice {
	name := svc + "-" + rand.SafeEncodeString(fmt.Sprint(fnv32(ns + svc)))[:5]
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid(ns, "slice", name),
		Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}}}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(controlplane.NodeName(0))})
	}
	return s
}

// deploymentObjects returns a planned Deployment's objects.
func deploymentObjects(d clusterload.Deployment, podSize int) clusterload.Objects {
	o := d.Build(podSize)
	o.Deployment.UID = uid(d.Namespace, d.Name)
	return o
}
