package kubeload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// getMetricsText GETs host's /metrics with hc and returns the body; with
// $LWBENCH_DUMP_METRICS set it is also written to that directory, to
// read what a release exposes.
func getMetricsText(t *testing.T, hc *http.Client, host, name string) []byte {
	t.Helper()
	var body []byte
	err := getMetrics(t.Context(), hc, host, func(r io.Reader) (err error) {
		body, err = io.ReadAll(r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("LWBENCH_DUMP_METRICS"); dir != "" {
		os.WriteFile(dir+"/"+name, body, 0o644)
	}
	return body
}

// TestRealServerMetrics parses what a real embedded etcd 3.7 and a real
// kube-apiserver 1.37.2 serve on /metrics, scraped before and after a
// known number of requests: etcd's grpc_server_handled_total counts the
// test's Puts and Ranges by method with code OK, and kube-apiserver's
// apiserver_request_total its configmap creates (POST, 201), its
// apiserver_storage_objects the configmaps stored, its
// etcd_requests_total the creates it sent etcd.
func TestRealServerMetrics(t *testing.T) {
	bin := apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	cli := etcdtest.NewClient(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	before, err := parseEtcdMetrics(bytes.NewReader(getMetricsText(t, http.DefaultClient, srv.Endpoints[0], "etcd-before.txt")))
	if err != nil {
		t.Fatal(err)
	}
	const puts, ranges = 40, 25
	for i := range puts {
		if _, err := cli.Put(ctx, fmt.Sprintf("/test/k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ranges {
		if _, err := cli.Get(ctx, fmt.Sprintf("/test/k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	after, err := parseEtcdMetrics(bytes.NewReader(getMetricsText(t, http.DefaultClient, srv.Endpoints[0], "etcd-after.txt")))
	if err != nil {
		t.Fatal(err)
	}
	handled := func(method, code string) float64 {
		k := rpcCode{"etcdserverpb.KV", method, code}
		return after.handled[k] - before.handled[k]
	}
	if got := handled("Put", "OK"); got != puts {
		t.Errorf("etcd handled %v Put OK, want the test's %d", got, puts)
	}
	if got := handled("Range", "OK"); got != ranges {
		t.Errorf("etcd handled %v Range OK, want the test's %d", got, ranges)
	}
	if got := after.values[etcdPuts] - before.values[etcdPuts]; got != puts {
		t.Errorf("etcd_mvcc_put_total rose by %v, want %d", got, puts)
	}

	c, err := apiserverproc.Start(ctx, apiserverproc.Config{BinDir: bin, Dir: t.TempDir(), EtcdServers: srv.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	rc := c.RESTConfig()
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ns := "metrics-test"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kbefore, err := parseMetrics(bytes.NewReader(getMetricsText(t, hc, rc.Host, "kube-apiserver-before.txt")))
	if err != nil {
		t.Fatal(err)
	}
	const creates = 12
	for i := range creates {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i)}, Data: map[string]string{"k": "v"}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kafter, err := parseMetrics(bytes.NewReader(getMetricsText(t, hc, rc.Host, "kube-apiserver-after.txt")))
	if err != nil {
		t.Fatal(err)
	}
	increase := func(key string) float64 { return kafter.values[key] - kbefore.values[key] }
	if got := increase("apiserver_request_total\x00verb=POST\x00resource=configmaps\x00code=201"); got != creates {
		t.Errorf("apiserver_request_total POST configmaps 201 rose by %v, want the test's %d creates", got, creates)
	}
	if got := increase("etcd_requests_total\x00operation=create\x00resource=configmaps"); got != creates {
		t.Errorf("etcd_requests_total create configmaps rose by %v, want %d", got, creates)
	}
	const objects = "apiserver_resource_objects\x00resource=configmaps"
	if v, ok := kafter.values[objects]; !ok || !kafter.gauges[objects] || v < 0 {
		t.Errorf("apiserver_resource_objects of configmaps: %v (present %v, gauge %v): want a gauge of 0 or more", v, ok, kafter.gauges[objects])
	}
	if kafter.values[metricCPUSeconds] <= kbefore.values[metricCPUSeconds] || kafter.values[metricRSSBytes] <= 0 {
		t.Errorf("process CPU %v -> %v s, resident %v bytes: want CPU used and a resident set", kbefore.values[metricCPUSeconds],
			kafter.values[metricCPUSeconds], kafter.values[metricRSSBytes])
	}
}
