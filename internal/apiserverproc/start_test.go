package apiserverproc_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

func podsRV(pods []corev1.Pod) []string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Namespace+"/"+p.Name+"@"+p.ResourceVersion)
	}
	return s
}

// TestKubeAPIServerStoresPodsInEtcd starts a real kube-apiserver in front
// of an embedded etcd, creates a namespace and a pod through client-go, and
// reads the pod's key from etcd directly: the value is kube-apiserver's
// protobuf envelope ("k8s\x00") and its mod_revision is the pod's
// resourceVersion. A list through the API must hold the pod at that
// resourceVersion and carry a list resourceVersion between the pod's and
// etcd's revision after the list.
func TestKubeAPIServerStoresPodsInEtcd(t *testing.T) {
	bin := apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	etcd := etcdtest.NewClient(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	began := time.Now()
	c, err := apiserverproc.Start(ctx, apiserverproc.Config{BinDir: bin, Dir: t.TempDir(), EtcdServers: srv.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver %s ready at %s after %v", apiserverproc.DefaultVersion, c.Servers[0].URL, time.Since(began).Round(time.Millisecond))
	t.Cleanup(c.Stop)
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	info, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if want := "v" + apiserverproc.DefaultVersion; info.GitVersion != want {
		t.Errorf("got server version %q, want %q", info.GitVersion, want)
	}

	const ns, name = "etcdkit-test", "p0"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}

	key := "/registry/pods/" + ns + "/" + name
	resp, err := etcd.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s from etcd: %v", key, err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("got %d keys %s in etcd, want 1", len(resp.Kvs), key)
	}
	kv := resp.Kvs[0]
	if !bytes.HasPrefix(kv.Value, []byte("k8s\x00")) {
		t.Errorf("got value of %s starting %q, want the protobuf envelope \"k8s\\x00\"", key, kv.Value[:min(8, len(kv.Value))])
	}
	if got, want := strconv.FormatInt(kv.ModRevision, 10), created.ResourceVersion; got != want {
		t.Errorf("got mod_revision %s of %s, want the pod's resourceVersion %s", got, key, want)
	}

	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	after, err := etcd.Get(ctx, "/registry/none")
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != name || list.Items[0].ResourceVersion != created.ResourceVersion {
		t.Errorf("got list items %v, want only %s at resourceVersion %s", podsRV(list.Items), name, created.ResourceVersion)
	}
	listRV, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("list resourceVersion %q: %v", list.ResourceVersion, err)
	}
	if listRV < kv.ModRevision || listRV > after.Header.Revision {
		t.Errorf("got list resourceVersion %d, want between the pod's %d and etcd's revision after the list %d",
			listRV, kv.ModRevision, after.Header.Revision)
	}

	s := c.Servers[0]
	if s.PID() == 0 {
		t.Fatalf("%s has no process while running", s.Name)
	}
	c.Stop()
	if pid := s.PID(); pid != 0 {
		t.Errorf("got PID %d after Stop, want 0", pid)
	}
	if _, err := cs.Discovery().ServerVersion(); err == nil {
		t.Errorf("%s still answers after Stop", s.URL)
	}
}

// TestKubeAPIServersOverEtcdTLS starts two kube-apiservers in front of an
// etcd process that requires client certificates: both must be ready with
// processes of their own, and an object written through one must be read
// through the other.
func TestKubeAPIServersOverEtcdTLS(t *testing.T) {
	bin := apiservertest.Binaries(t)
	etcdBin := etcdtest.EtcdBinaries(t, "3.7.3")
	dir := t.TempDir()
	files, err := etcdproc.GenerateTLS(dir, "kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	files.ClientCertAuth = true
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	etcd, err := etcdproc.Start(ctx, etcdproc.Config{BinDir: etcdBin, Dir: dir, TLS: &files, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)

	c, err := apiserverproc.Start(ctx, apiserverproc.Config{
		BinDir: bin, Servers: 2, Dir: t.TempDir(), EtcdServers: etcd.Endpoints(),
		EtcdCAFile: files.CA, EtcdCertFile: files.ClientCert, EtcdKeyFile: files.ClientKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if len(c.Servers) != 2 {
		t.Fatalf("got %d servers, want 2", len(c.Servers))
	}
	if p0, p1 := c.Servers[0].PID(), c.Servers[1].PID(); p0 == 0 || p0 == p1 {
		t.Errorf("got PIDs %d and %d, want two running processes", p0, p1)
	}
	if c.Servers[0].URL == c.Servers[1].URL {
		t.Errorf("both servers listen on %s", c.Servers[0].URL)
	}
	var clients []*kubernetes.Clientset
	for _, s := range c.Servers {
		cs, err := kubernetes.NewForConfig(s.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cs)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm0"}, Data: map[string]string{"k": "v"}}
	created, err := clients[1].CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap through %s: %v", c.Servers[1].Name, err)
	}
	// A quorum read (resourceVersion ""), so the other server's watch cache
	// cannot answer with an older state.
	got, err := clients[0].CoreV1().ConfigMaps("default").Get(ctx, "cm0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap through %s: %v", c.Servers[0].Name, err)
	}
	if got.ResourceVersion != created.ResourceVersion || got.Data["k"] != "v" {
		t.Errorf("got configmap %s data %v through %s, want %s data %v", got.ResourceVersion, got.Data, c.Servers[0].Name, created.ResourceVersion, cm.Data)
	}
}

// TestStartReportsTheLog starts a kube-apiserver with a flag it does not
// know: Start must fail at once with the end of the server's log, which
// names the flag.
func TestStartReportsTheLog(t *testing.T) {
	bin := apiservertest.Binaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := apiserverproc.Start(ctx, apiserverproc.Config{
		BinDir: bin, Dir: t.TempDir(), EtcdServers: []string{"http://127.0.0.1:1"},
		ExtraArgs: []string{"--no-such-flag-etcdkit"}, StartTimeout: 30 * time.Second,
	})
	if err == nil {
		t.Fatal("got no error from a kube-apiserver with an unknown flag")
	}
	t.Logf("error: %v", err)
	for _, want := range []string{"exited before it was ready", "no-such-flag-etcdkit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got error %q, want it to contain %q", err, want)
		}
	}
}
