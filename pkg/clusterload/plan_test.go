package clusterload

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubestore/etcdkit/internal/controlplane"
)

// TestPlanShapes checks the plans against CL2's load test per namespace
// (3,000 pods in 3 big, 25 medium and 300 small Deployments at the
// defaults; (n+1)/2 Services per size; 90 % immutable ConfigMaps and
// Secrets) and small clusters' one namespace.
func TestPlanShapes(t *testing.T) {
	for _, c := range []struct {
		nodes, podsPerNode                 int
		namespaces, deployments, pods, svc int
	}{
		{nodes: 100, namespaces: 1, deployments: 328, pods: 3000, svc: 165},
		{nodes: 1000, namespaces: 10, deployments: 3280, pods: 30000, svc: 1650},
		{nodes: 250, namespaces: 2, deployments: 656, pods: 6000, svc: 330},
		// 300 pods: no big group, 2 medium (60), 30 small (150).
		{nodes: 10, namespaces: 1, deployments: 32, pods: 210, svc: 16},
		{nodes: 10, podsPerNode: 100, namespaces: 1, deployments: 1 + 8 + 100, pods: 250 + 240 + 500, svc: 1 + 4 + 50},
	} {
		p, err := NewPlan(Options{Nodes: c.nodes, PodsPerNode: c.podsPerNode})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Namespaces) != c.namespaces || len(p.Deployments) != c.deployments || p.Pods() != c.pods || p.Services() != c.svc {
			t.Errorf("%d nodes x %d: got %d namespaces, %d deployments, %d pods, %d services; want %d, %d, %d, %d", c.nodes, c.podsPerNode,
				len(p.Namespaces), len(p.Deployments), p.Pods(), p.Services(), c.namespaces, c.deployments, c.pods, c.svc)
		}
		immutable := 0
		for _, d := range p.Deployments {
			if d.Immutable {
				immutable++
			}
		}
		if got := immutable * 100 / len(p.Deployments); got < 85 || got > 95 {
			t.Errorf("%d nodes: %d %% immutable, want about %d %%", c.nodes, got, ImmutablePercent)
		}
	}
	for _, o := range []Options{{}, {Nodes: -1}, {Nodes: 1, PodsPerNode: -1}} {
		if _, err := NewPlan(o); err == nil {
			t.Errorf("%+v: got no error", o)
		}
	}
}

// TestObjectSizes checks that nodes and pods come out at about the sizes
// asked for (protobuf encoding, as etcd holds them).
func TestObjectSizes(t *testing.T) {
	for _, size := range []int{DefaultNodeSize, 30 << 10} {
		if got := Node(7, size).Size(); got < size || got > size+300 {
			t.Errorf("node of %d bytes: got %d", size, got)
		}
	}
	p, err := NewPlan(Options{Nodes: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{DefaultPodSize, 10 << 10, 20 << 10} {
		o := p.Deployments[0].Build(size)
		tpl := o.Deployment.Spec.Template
		// A pod as the control plane makes it: named, bound, Running.
		pod := corev1.Pod{ObjectMeta: tpl.ObjectMeta, Spec: tpl.Spec}
		pod.Name, pod.Namespace, pod.GenerateName = "big-0-7d9f8b6c5d-x2v4q", "load-0", "big-0-7d9f8b6c5d-"
		pod.UID = "0b4f6f38-8c0a-4f1e-9d3e-3c1f1a2b3c4d"
		pod.Spec.NodeName = controlplane.NodeName(42)
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.64.0.17", HostIP: "10.255.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
		if got := pod.Size(); got < size*8/10 || got > size*12/10 {
			t.Errorf("pod of %d bytes: got %d", size, got)
		}
		if o.Service == nil || o.ConfigMap.Name != o.Deployment.Name || o.Secret.Name != o.Deployment.Name {
			t.Errorf("deployment %s: got service %v, configmap %s, secret %s", o.Deployment.Name, o.Service != nil, o.ConfigMap.Name, o.Secret.Name)
		}
	}
}
