package command

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/report"
)

// TestRunThroughKubeconfig runs `lwbench run --kubeconfig` against an
// existing cluster: a kube-apiserver lwbench's run did not start, over an
// embedded etcd, which holds someone else's namespace and configmaps, one
// of which that someone keeps updating during the run. The run must lose
// nothing (the other writes are neither history nor events of its
// informers), leave the other namespace and the idle configmap at their
// resourceVersions, and delete its own namespaces and every key it wrote.
//
// No kube-controller-manager is built here, so the test plays the one
// part of it a namespace deletion needs (apiservertest.FinalizeNamespaces).
func TestRunThroughKubeconfig(t *testing.T) {
	bin := apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, err := apiserverproc.Start(ctx, apiserverproc.Config{BinDir: bin, Servers: 1, Dir: t.TempDir(), EtcdServers: srv.Endpoints,
		EtcdCompactionInterval: 2 * time.Second, DisableWatchCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	rc := cluster.RESTConfig()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthority: rc.CAFile}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "admin"}
	kc.CurrentContext = "elsewhere" // --context must choose
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	idle, err := cs.CoreV1().ConfigMaps("someone-else").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "idle"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	busy, err := cs.CoreV1().ConfigMaps("someone-else").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	var busyWrites atomic.Int64
	go func() { // someone else's writes during the run
		defer wg.Done()
		for ctx.Err() == nil {
			busy.Data["n"] = time.Now().String()
			if got, err := cs.CoreV1().ConfigMaps("someone-else").Update(ctx, busy, metav1.UpdateOptions{}); err == nil {
				busy = got
				busyWrites.Add(1)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	go func() { // the namespace controller's finalize
		defer wg.Done()
		apiservertest.FinalizeNamespaces(ctx, cs)
	}()

	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, []string{"run", "--kubeconfig", kubeconfig, "--context", "test", "--endpoints", srv.Endpoints[0],
		"--objects", "60", "--namespaces", "3", "--watchers", "3", "--write-rate", "30", "--duration", "8s",
		"--compaction-interval", "2s", "--namespace-delete-timeout", "30s", "-w", "json"}, &errOut)
	if code != 0 {
		t.Fatalf("lwbench run --kubeconfig exit %d:\n%s", code, errOut.String())
	}
	var res report.KubeRunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v", err)
	}
	if res.APIServer.Managed || res.APIServer.URL != rc.Host || res.APIServer.Version != "v1.37.2" {
		t.Errorf("got apiserver %+v, want an unmanaged v1.37.2 at %s", res.APIServer, rc.Host)
	}
	if !res.Validation.OK() || res.Validation.Lost != 0 || res.Validation.HistoryEvents == 0 || res.Writes.Completed == 0 {
		t.Errorf("got validation %+v after %d writes, want events recorded and nothing lost", res.Validation, res.Writes.Completed)
	}
	if res.Defrag != nil {
		t.Errorf("got a defragmentation %+v of a cluster lwbench does not own", res.Defrag)
	}
	if busyWrites.Load() == 0 {
		t.Errorf("someone else wrote nothing during the run; the test proves nothing")
	}
	c := res.Cleanup
	if c == nil || c.Error != "" || len(c.Namespaces) != 3 || len(c.Left) != 0 || c.ObjectsDeleted == 0 {
		t.Fatalf("got cleanup %+v, want 3 namespaces and their objects deleted", c)
	}
	ec := etcdtest.NewClient(t, srv)
	for _, ns := range c.Namespaces {
		if !strings.HasPrefix(ns, "lwbench-") || !strings.Contains(ns, "-ns-") {
			t.Errorf("namespace %q is not one of the run's own", ns)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s: got %v, want it gone", ns, err)
		}
		for _, res := range []string{"pods", "configmaps", "events"} {
			p := "/registry/" + res + "/" + ns + "/"
			if resp, err := ec.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
				t.Errorf("%s: got %v keys (%v), want none", p, resp, err)
			}
		}
	}
	gotNS, err := cs.CoreV1().Namespaces().Get(ctx, "someone-else", metav1.GetOptions{})
	if err != nil || gotNS.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("someone else's namespace: got %v (%v), want resourceVersion %s", gotNS, err, theirs.ResourceVersion)
	}
	gotCM, err := cs.CoreV1().ConfigMaps("someone-else").Get(ctx, "idle", metav1.GetOptions{})
	if err != nil || gotCM.ResourceVersion != idle.ResourceVersion {
		t.Errorf("someone else's configmap: got %v (%v), want resourceVersion %s", gotCM, err, idle.ResourceVersion)
	}
	t.Log(errOut.String())
	if !strings.Contains(errOut.String(), "lwbench starts, compacts and defragments nothing there") {
		t.Errorf("log %q does not say lwbench leaves the cluster's maintenance alone", errOut.String())
	}
}

// TestKubeconfigFlagErrors: what --kubeconfig cannot be combined with is
// refused in one line, exit 2, before anything is opened.
func TestKubeconfigFlagErrors(t *testing.T) {
	kc := []string{"run", "--kubeconfig", "/nonexistent/kubeconfig", "--endpoints", "http://127.0.0.1:1"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"kube-apiserver", append(kc, "--kube-apiserver", "1.37"), "lwbench: --kubeconfig and --kube-apiserver cannot be used together: lwbench starts kube-apiservers with --kube-apiserver, and uses the cluster's with --kubeconfig\n"},
		{"apiservers", append(kc, "--apiservers", "2"), "lwbench: --kubeconfig and --apiservers cannot be used together: the cluster's kube-apiservers are its operator's\n"},
		{"watch-cache", append(kc, "--watch-cache"), "lwbench: --kubeconfig and --watch-cache cannot be used together: the cluster's kube-apiservers are configured by its operator\n"},
		{"apiserver-feature-gates", append(kc, "--apiserver-feature-gates", "WatchList=false"), "lwbench: --kubeconfig and --apiserver-feature-gates cannot be used together: the cluster's kube-apiservers are configured by its operator\n"},
		{"count-etcd", append(kc, "--count-etcd"), "lwbench: --kubeconfig and --count-etcd cannot be used together: no counting proxy can be put between a cluster's kube-apiservers and its etcd\n"},
		{"allow-compaction", append(kc, "--allow-compaction"), "lwbench: --kubeconfig and --allow-compaction cannot be used together: lwbench never compacts a cluster it does not own; the cluster's kube-apiservers compact it\n"},
		{"allow-defrag", append(kc, "--allow-defrag"), "lwbench: --kubeconfig and --allow-defrag cannot be used together: lwbench never defragments a cluster it does not own\n"},
		{"reuse-prefix", append(kc, "--reuse-prefix"), "lwbench: --kubeconfig and --reuse-prefix cannot be used together: the run writes through the API, in namespaces of its own, never raw keys\n"},
		{"no endpoints", []string{"run", "--kubeconfig", "/nonexistent/kubeconfig"}, "lwbench: --kubeconfig needs --endpoints of the cluster's etcd (and --prefix, its --etcd-prefix): the informers' events are validated against etcd's history\n"},
		{"conformance", []string{"conformance", "--kubeconfig", "/nonexistent/kubeconfig"}, "lwbench: conformance starts kube-apiservers of its own: --kubeconfig cannot be used\n"},
		{"context alone", []string{"run", "--context", "test"}, "lwbench: --context needs --kubeconfig\n"},
		{"client gate", append(kc, "--client-feature-gates", "WatchList=true"), `lwbench: --client-feature-gates: Invalid value: "WatchList=true": give WatchListClient=true or WatchListClient=false` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := NewRootCommand()
			root.SetOut(&out)
			root.SetErr(&errOut)
			if code := cli.Run(root, tt.args, &errOut); code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, errOut.String())
			}
			if errOut.String() != tt.want {
				t.Errorf("stderr:\n got %q\nwant %q", errOut.String(), tt.want)
			}
		})
	}
}
