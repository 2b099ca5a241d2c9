package controlplane

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/internal/parallel"
)

// The annotation KWOK selects the nodes it manages by (Start passes
// --manage-nodes-with-annotation-selector NodeAnnotation=NodeAnnotationValue),
// and the label and taint that keep other pods off them, as kwokctl's
// examples and the KWOK docs' "fake node" make them.
const (
	NodeAnnotation      = "kwok.x-k8s.io/node"
	NodeAnnotationValue = "fake"
	// NodeTypeLabel = NodeTypeValue selects KWOK's nodes (NodeSelector).
	NodeTypeLabel = "type"
	NodeTypeValue = "kwok"
)

// NodeTaint is the taint of every KWOK node: pods without the toleration
// (Tolerations) are not scheduled on them.
var NodeTaint = corev1.Taint{Key: NodeAnnotation, Value: NodeAnnotationValue, Effect: corev1.TaintEffectNoSchedule}

// NodeName returns the name of KWOK node i: kwok-node-I.
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// NewNode returns a Node for KWOK to manage, shaped like a real one at
// creation: the annotation KWOK selects, node.alpha.kubernetes.io/ttl 0,
// labels type=kwok and the kubernetes.io/{os,arch,hostname,role} ones
// kubelets set, the NoSchedule taint NodeTaint, and a status of 32 CPUs,
// 256 GiB and 110 pods (capacity and allocatable), phase Running. KWOK's
// node-initialize stage then adds the Ready condition, addresses and
// daemon endpoints, and its lease controller the node's Lease.
func NewNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				NodeAnnotation:                 NodeAnnotationValue,
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				NodeTypeLabel:                   NodeTypeValue,
				"beta.kubernetes.io/arch":       "amd64",
				"beta.kubernetes.io/os":         "linux",
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/os":              "linux",
				"kubernetes.io/hostname":        name,
				"kubernetes.io/role":            "agent",
				"node-role.kubernetes.io/agent": "",
			},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{NodeTaint}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:     "amd64",
				OperatingSystem:  "linux",
				KubeletVersion:   "fake",
				KubeProxyVersion: "fake",
			},
		},
	}
}

// CreateNodes creates the Nodes NewNode(NodeName(i)) for i in [first,
// first+n) through cs with workers concurrent creates (at least 1), at the
// rate cs's rate limiter allows. A node that exists already is an error.
// It returns the first error, after the creates in flight ended; ctx ends
// the creates.
func CreateNodes(ctx context.Context, cs kubernetes.Interface, first, n, workers int) error {
	return parallel.Each(ctx, max(workers, 1), n, func(ctx context.Context, _, i int) error {
		name := NodeName(first + i)
		if _, err := cs.CoreV1().Nodes().Create(ctx, NewNode(name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		return nil
	})
}

// NodeSelector selects KWOK's nodes (type=kwok); with Tolerations it puts a
// pod template on them (the nodes' taint keeps other pods off).
func NodeSelector() map[string]string { return map[string]string{NodeTypeLabel: NodeTypeValue} }

// Tolerations tolerate NodeTaint.
func Tolerations() []corev1.Toleration {
	return []corev1.Toleration{{Key: NodeTaint.Key, Operator: corev1.TolerationOpEqual, Value: NodeTaint.Value, Effect: NodeTaint.Effect}}
}

// NodeReady reports whether node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitNodesReady lists KWOK's nodes (NodeSelector) every interval until at
// least n of them are Ready, and returns nil then; otherwise, when ctx
// ends, an error wrapping ctx.Err() with the last count. The lists are
// served from kube-apiserver's watch cache (resourceVersion "0"), so
// waiting adds no reads at etcd; each still costs kube-apiserver a copy of
// every node (some KB each).
func WaitNodesReady(ctx context.Context, cs kubernetes.Interface, n int, interval time.Duration) error {
	last := "not listed yet"
	for {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeTypeLabel + "=" + NodeTypeValue, ResourceVersion: "0"})
		if err == nil {
			ready := 0
			for i := range l.Items {
				if NodeReady(&l.Items[i]) {
					ready++
				}
			}
			if ready >= n {
				return nil
			}
			last = fmt.Sprintf("%d of %d KWOK nodes Ready, want %d", ready, len(l.Items), n)
		} else if ctx.Err() == nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d nodes Ready (%s): %w", n, last, ctx.Err())
		case <-time.After(interval):
		}
	}
}
