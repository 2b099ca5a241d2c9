package kubeload_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/pkg/kubeload"
)

// The sizes of BenchmarkKubeletWatches, overridable from the environment.
const (
	benchNodesEnv       = "LWBENCH_BENCH_NODES"
	benchPodsPerNodeEnv = "LWBENCH_BENCH_PODS_PER_NODE"
)

// createConcurrently calls create(i) for i in [0, n) on 16 workers and
// returns the first error.
func createConcurrently(n int, create func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ferr error
	)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := create(i); err != nil {
					mu.Lock()
					ferr = cmpOr(ferr, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return ferr
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// BenchmarkKubeletWatches measures what lwbench's kubelet-shaped watches
// (StartKubeletWatches, issue 21 item 6: under 1 GB for 1,000 nodes) cost
// this process: through one real kube-apiserver (watch cache on, as
// kubelets are served), LWBENCH_BENCH_NODES Nodes (1,000) with
// LWBENCH_BENCH_PODS_PER_NODE pods each (3; spec.nodeName set, as the
// scheduler binds them, each mounting one ConfigMap) are created directly
// through the API, then the watches of every node start (its pods, its
// Node, the Services, and the ConfigMap its pods mount: 4 reflectors a
// node, each node on a connection of its own) and run until every node's
// objects have arrived. It reports the Go heap in use after a GC
// (heap-B), the resident set's growth (rss-B), the highest heap while they
// started, garbage included (peak-heap-B), each also per node, and the
// CPU time to start them (cpu-s). The embedded etcd is in the process,
// outside the deltas.
//
// Run it with
//
//	go test ./pkg/kubeload -run '^$' -bench KubeletWatches -benchtime 1x
func BenchmarkKubeletWatches(b *testing.B) {
	nodes := envInt(b, benchNodesEnv, 1000)
	perNode := envInt(b, benchPodsPerNodeEnv, 3)
	st := stack(b, apiserverproc.Config{})
	ctx := b.Context()
	cfg := rest.CopyConfig(st.RESTConfig)
	cfg.QPS, cfg.Burst = -1, 0 // the objects are made as fast as kube-apiserver takes them
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	const ns = "default"
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-bench"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("bench-node-%04d", i)
	}
	t0 := time.Now()
	if err := createConcurrently(nodes, func(i int) error {
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("create nodes: %v", err)
	}
	if err := createConcurrently(nodes*perNode, func(i int) error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-pod-%05d", i)}, Spec: corev1.PodSpec{
			NodeName:   names[i%nodes],
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			Volumes: []corev1.Volume{{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kubelet-bench"}}}}}}}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("create pods: %v", err)
	}
	b.Logf("created %d nodes and %d pods in %v", nodes, nodes*perNode, time.Since(t0))
	services, err := cs.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// Per node: its pods, its Node, every Service, the ConfigMap.
	wantEvents := int64(nodes * (perNode + 1 + len(services.Items) + 1))

	for b.Loop() {
		before := sampleProcess(b)
		stopPeak := make(chan struct{})
		peak := make(chan float64)
		go func() { peak <- peakHeap(stopPeak) }()
		start := time.Now()
		w, err := kubeload.StartKubeletWatches(ctx, st.Connections, names)
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		for w.Reflectors.Load() < int64(4*nodes) || w.Events.Load() < wantEvents {
			if wctx.Err() != nil {
				cancel()
				w.Stop()
				b.Fatalf("after 5m: %d reflectors (want %d), %d objects (want %d)", w.Reflectors.Load(), 4*nodes, w.Events.Load(), wantEvents)
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		started := time.Since(start)
		close(stopPeak)
		peakBytes := <-peak
		cpu := cpuSeconds(b)
		held := sampleProcess(b)
		b.Logf("%d nodes' kubelet watches (%d reflectors, %d objects) started in %v", nodes, w.Reflectors.Load(), w.Events.Load(), started)
		w.Stop()
		heap, rss := held.heap-before.heap, held.rss-before.rss
		b.ReportMetric(heap, "heap-B")
		b.ReportMetric(rss, "rss-B")
		b.ReportMetric(peakBytes-before.heap, "peak-heap-B")
		b.ReportMetric(heap/float64(nodes), "heap-B/node")
		b.ReportMetric(rss/float64(nodes), "rss-B/node")
		b.ReportMetric(cpu-before.cpu, "cpu-s")
		b.ReportMetric(float64(nodes), "nodes")
	}
}
