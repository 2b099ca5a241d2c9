package kubeload_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/pkg/kubeload"
)

// TestKubeletWatches runs the kubelet watches of two nodes through a real
// kube-apiserver: each node's pods, Node and Services (3 reflectors
// each), plus, for node a, one watch per ConfigMap and Secret its pod
// mounts: the mutable ConfigMap's stays, the immutable Secret's ends once
// seen, and the ConfigMap's ends when the pod goes. Every object reaches
// the counting stores.
func TestKubeletWatches(t *testing.T) {
	st := stack(t, apiserverproc.Config{})
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(st.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := "default"
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Immutable: ptr.To(true)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := kubeload.StartKubeletWatches(ctx, st.Connections, []string{"node-a", "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: got %d reflectors, %d objects", what, w.Reflectors.Load(), w.Events.Load())
			}
			clockwait.SleepReal(ctx, 100*time.Millisecond)
		}
	}
	waitFor("6 reflectors", func() bool { return w.Reflectors.Load() == 6 })
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "node-a",
		Containers: []corev1.Container{{Name: "c", Image: "i"}},
		Volumes: []corev1.Volume{
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}}}}}
	before := w.Events.Load()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pod, then the ConfigMap's and the Secret's initial lists: 3
	// objects; the Secret's watch ends once it has seen it immutable.
	waitFor("the ConfigMap's watch alone", func() bool { return w.Events.Load() >= before+3 && w.Reflectors.Load() == 7 })
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitFor("no mount watch once the pod is gone", func() bool { return w.Reflectors.Load() == 6 })
	w.Stop()
	if n := w.Reflectors.Load(); n != 0 {
		t.Errorf("got %d reflectors after Stop, want 0", n)
	}
}
