package clusterload

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubestore/etcdkit/internal/controlplane"
)

// Constants of the load's objects.
const (
	// PayloadAnnotation carries a pod's padding up to its payload size:
	// lwbench's choice; CL2 pads its pods in the template too
	// (CL2_DEPLOYMENT_POD_PAYLOAD_SIZE).
	PayloadAnnotation = "lwbench.kubestore.io/payload"
	// podOverhead estimates what the control plane adds to a pod made
	// from a template (its name, uid, ownerReferences, nodeName, status
	// with conditions and IPs), in bytes of its protobuf encoding.
	podOverhead = 900
)

// Node returns KWOK node i as controlplane.NewNode makes it (annotated
// for KWOK, labelled type=kwok, tainted so that only the load's pods run
// on it, a real node's capacity), with status.images padding it to about
// size bytes: a real node's object is 10-30 KB, mostly the images its
// kubelet reports (KEP-589).
func Node(i, size int) *corev1.Node {
	n := controlplane.NewNode(controlplane.NodeName(i))
	for j := 0; n.Size() < size; j++ {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.k8s.io/lwbench/image-%d@sha256:%064x", j, j+1), fmt.Sprintf("registry.k8s.io/lwbench/image-%d:v1.%d", j, j)},
			SizeBytes: int64(10<<20 + j*4096),
		})
	}
	return n
}

// podSpec is the load's pod: on a KWOK node (nodeSelector, toleration),
// one container requesting 10m and 16Mi (CL2's), mounting the
// Deployment's ConfigMap and Secret (so that a kubelet would watch them).
func podSpec(configMap, secret string) corev1.PodSpec {
	s := corev1.PodSpec{
		NodeSelector: controlplane.NodeSelector(),
		Tolerations:  controlplane.Tolerations(),
		Containers: []corev1.Container{{Name: "fake", Image: "fake-image",
			Ports:     []corev1.ContainerPort{{ContainerPort: 8080}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
	}
	if configMap != "" {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}})
		s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "config", MountPath: "/etc/config"})
	}
	if secret != "" {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}})
		s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "secret", MountPath: "/etc/secret"})
	}
	return s
}

// template returns the pod template of labels with spec, padded by
// PayloadAnnotation so that a pod made from it is about podSize bytes in
// etcd (its protobuf encoding, podOverhead added).
func template(labels map[string]string, spec corev1.PodSpec, podSize int) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
	pod := corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	if pad := podSize - pod.Size() - podOverhead; pad > 0 {
		t.Annotations = map[string]string{PayloadAnnotation: strings.Repeat("x", pad)}
	}
	return t
}

// Objects are a Deployment's objects, in the order they are created: its
// ConfigMap and Secret (the pods mount them), its Service, if any, then
// the Deployment.
type Objects struct {
	ConfigMap  *corev1.ConfigMap
	Secret     *corev1.Secret
	Service    *corev1.Service // nil without one
	Deployment *appsv1.Deployment
}

// Build returns d's objects with pods of about podSize bytes; the
// ConfigMap and Secret hold 1 KiB of data each (CL2's are small too).
func (d Deployment) Build(podSize int) Objects {
	labels := map[string]string{"app": d.Name, "group": "load"}
	meta := metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name, Labels: labels}
	data := strings.Repeat("d", 1024)
	o := Objects{
		ConfigMap: &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"data": data}, Immutable: ptr.To(d.Immutable)},
		Secret:    &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"data": []byte(data)}, Type: corev1.SecretTypeOpaque, Immutable: ptr.To(d.Immutable)},
		Deployment: &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(d.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.Name}},
			Template: template(labels, podSpec(d.Name, d.Name), podSize),
		}},
	}
	if d.Service {
		o.Service = &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": d.Name},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	}
	return o
}

// DaemonSet returns the Plan's DaemonSet "daemon": one pod on every KWOK
// node, of about podSize bytes, as CL2's load test runs one.
func (p *Plan) DaemonSet(podSize int) *appsv1.DaemonSet {
	labels := map[string]string{"app": "daemon", "group": "load"}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: p.DaemonSetNamespace, Name: "daemon", Labels: labels},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "daemon"}},
			Template: template(labels, podSpec("", ""), podSize)}}
}
