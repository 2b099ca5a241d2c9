package controlplane

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// TestNewNodeIsKWOKs: a node NewNode makes is one KWOK manages (its
// annotation matches the selector Start passes), NodeSelector selects it,
// its taint keeps pods without Tolerations off and lets those with them on,
// and it offers what a pod requests (capacity and allocatable).
func TestNewNodeIsKWOKs(t *testing.T) {
	n := NewNode(NodeName(7))
	if n.Name != "kwok-node-7" || n.Labels["kubernetes.io/hostname"] != n.Name {
		t.Errorf("got node %q hostname label %q, want kwok-node-7 for both", n.Name, n.Labels["kubernetes.io/hostname"])
	}
	if got := n.Annotations[NodeAnnotation]; got != NodeAnnotationValue {
		t.Errorf("got annotation %s=%q, want %q (KWOK's --manage-nodes-with-annotation-selector)", NodeAnnotation, got, NodeAnnotationValue)
	}
	if !labels.SelectorFromSet(NodeSelector()).Matches(labels.Set(n.Labels)) {
		t.Errorf("NodeSelector %v does not select labels %v", NodeSelector(), n.Labels)
	}
	if len(n.Spec.Taints) != 1 {
		t.Fatalf("got taints %v, want NodeTaint only", n.Spec.Taints)
	}
	taint := n.Spec.Taints[0]
	tol := Tolerations()
	if !tol[0].ToleratesTaint(klog.Background(), &taint, false) {
		t.Errorf("Tolerations %v do not tolerate the node's taint %v", tol, taint)
	}
	other := corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}
	if other.ToleratesTaint(klog.Background(), &taint, false) {
		t.Errorf("an unrelated toleration tolerates the node's taint %v", taint)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		c, a := n.Status.Capacity[r], n.Status.Allocatable[r]
		if c.IsZero() || c.Cmp(a) != 0 {
			t.Errorf("got %s capacity %v allocatable %v, want both set and equal", r, c.String(), a.String())
		}
	}
	if NodeReady(n) {
		t.Error("a new node is Ready before KWOK's node-initialize stage ran")
	}
}
