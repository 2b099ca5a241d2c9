package command

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/embedetcd"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/report"
)

// existingCluster is a cluster lwbench's command under test did not
// start: a kube-apiserver over an embedded etcd, reached through a
// kubeconfig whose current context points elsewhere (--context test must
// choose), holding someone else's namespace with an idle configmap and a
// busy one that someone keeps updating until the test ends.
//
// No kube-controller-manager is built here, so the fixture plays the one
// part of it a namespace deletion needs (apiservertest.FinalizeNamespaces).
type existingCluster struct {
	kubeconfig string
	srv        *embedetcd.Server
	rc         *rest.Config
	cs         kubernetes.Interface
	theirs     *corev1.Namespace
	idle       *corev1.ConfigMap
	busyWrites atomic.Int64
}

func startExistingCluster(t *testing.T) *existingCluster {
	t.Helper()
	bin := apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithCancel(context.Background())
	cluster, err := apiserverproc.Start(ctx, apiserverproc.Config{BinDir: bin, Servers: 1, Dir: t.TempDir(), EtcdServers: srv.Endpoints,
		EtcdCompactionInterval: 2 * time.Second, DisableWatchCache: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	rc := cluster.RESTConfig()
	e := &existingCluster{kubeconfig: filepath.Join(t.TempDir(), "kubeconfig"), srv: srv, rc: rc}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthority: rc.CAFile}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "admin"}
	kc.CurrentContext = "elsewhere" // --context must choose
	if err := clientcmd.WriteToFile(*kc, e.kubeconfig); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	e.cs = cs
	if e.theirs, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if e.idle, err = cs.CoreV1().ConfigMaps("someone-else").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "idle"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	busy, err := cs.CoreV1().ConfigMaps("someone-else").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		cluster.Stop()
	})
	wg.Add(2)
	go func() { // someone else's writes during the run
		defer wg.Done()
		for ctx.Err() == nil {
			busy.Data["n"] = time.Now().String()
			if got, err := cs.CoreV1().ConfigMaps("someone-else").Update(ctx, busy, metav1.UpdateOptions{}); err == nil {
				busy = got
				e.busyWrites.Add(1)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	go func() { // the namespace controller's finalize
		defer wg.Done()
		apiservertest.FinalizeNamespaces(ctx, cs)
	}()
	return e
}

// checkLeftAlone reports, after a command ran on the cluster, what of
// someone else's it changed and which of the command's namespaces
// (cleanup's) or keys it left.
func (e *existingCluster) checkLeftAlone(t *testing.T, namespaces []string) {
	t.Helper()
	ctx := t.Context()
	if e.busyWrites.Load() == 0 {
		t.Errorf("someone else wrote nothing during the run; the test proves nothing")
	}
	ec := etcdtest.NewClient(t, e.srv)
	for _, ns := range namespaces {
		if !strings.HasPrefix(ns, "lwbench-") || !strings.Contains(ns, "-ns-") {
			t.Errorf("namespace %q is not one of the run's own", ns)
		}
		if _, err := e.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s: got %v, want it gone", ns, err)
		}
		for _, res := range []string{"pods", "configmaps", "events"} {
			p := "/registry/" + res + "/" + ns + "/"
			if resp, err := ec.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
				t.Errorf("%s: got %v keys (%v), want none", p, resp, err)
			}
		}
	}
	gotNS, err := e.cs.CoreV1().Namespaces().Get(ctx, "someone-else", metav1.GetOptions{})
	if err != nil || gotNS.ResourceVersion != e.theirs.ResourceVersion {
		t.Errorf("someone else's namespace: got %v (%v), want resourceVersion %s", gotNS, err, e.theirs.ResourceVersion)
	}
	gotCM, err := e.cs.CoreV1().ConfigMaps("someone-else").Get(ctx, "idle", metav1.GetOptions{})
	if err != nil || gotCM.ResourceVersion != e.idle.ResourceVersion {
		t.Errorf("someone else's configmap: got %v (%v), want resourceVersion %s", gotCM, err, e.idle.ResourceVersion)
	}
}

// TestRunThroughKubeconfig runs `lwbench run --kubeconfig` against an
// existing cluster (startExistingCluster). The run must lose nothing (the
// other writes are neither history nor events of its informers), leave
// the other namespace and the idle configmap at their resourceVersions,
// and delete its own namespaces and every key it wrote.
func TestRunThroughKubeconfig(t *testing.T) {
	e := startExistingCluster(t)
	kubeconfig, srv, rc := e.kubeconfig, e.srv, e.rc
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
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v", err)
	}
	if res.APIServer == nil || res.APIServer.Managed || res.APIServer.URL != rc.Host || res.APIServer.Version != "v1.37.2" {
		t.Errorf("got apiserver %+v, want an unmanaged v1.37.2 at %s", res.APIServer, rc.Host)
	}
	if !res.Validation.OK() || res.Validation.Lost != 0 || res.Validation.HistoryEvents == 0 || res.Writes.Completed == 0 {
		t.Errorf("got validation %+v after %d writes, want events recorded and nothing lost", res.Validation, res.Writes.Completed)
	}
	if res.Defrag != nil {
		t.Errorf("got a defragmentation %+v of a cluster lwbench does not own", res.Defrag)
	}
	c := res.Cleanup
	if c == nil || c.Error != "" || len(c.Namespaces) != 3 || len(c.NamespacesLeft) != 0 || c.ObjectsDeleted == 0 {
		t.Fatalf("got cleanup %+v, want 3 namespaces and their objects deleted", c)
	}
	e.checkLeftAlone(t, c.Namespaces)
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
		{"apiserver-arg", append(kc, "--apiserver-arg", "--disable-admission-plugins=LimitRanger"), "lwbench: --kubeconfig and --apiserver-arg cannot be used together: the cluster's kube-apiservers are configured by its operator\n"},
		{"count-etcd", append(kc, "--count-etcd"), "lwbench: --kubeconfig and --count-etcd cannot be used together: no counting proxy can be put between a cluster's kube-apiservers and its etcd\n"},
		{"allow-compaction", append(kc, "--allow-compaction"), "lwbench: --kubeconfig and --allow-compaction cannot be used together: lwbench never compacts a cluster it does not own; the cluster's kube-apiservers compact it\n"},
		{"allow-defrag", append(kc, "--allow-defrag"), "lwbench: --kubeconfig and --allow-defrag cannot be used together: lwbench never defragments a cluster it does not own\n"},
		{"reuse-prefix", append(kc, "--reuse-prefix"), "lwbench: --kubeconfig and --reuse-prefix cannot be used together: the run writes through the API, in namespaces of its own, never raw keys\n"},
		{"no endpoints", []string{"run", "--kubeconfig", "/nonexistent/kubeconfig"}, "lwbench: --kubeconfig needs --endpoints of the cluster's etcd (and --prefix, its --etcd-prefix): the informers' events are validated against etcd's history\n"},
		{"conformance", []string{"conformance", "--kubeconfig", "/nonexistent/kubeconfig"}, "lwbench: conformance starts kube-apiservers of its own: --kubeconfig cannot be used\n"},
		{"context alone", []string{"run", "--context", "test"}, "lwbench: --context needs --kubeconfig\n"},
		{"client gate", append(kc, "--client-feature-gates", "WatchList=true"), `lwbench: --client-feature-gates: Invalid value: "WatchList=true": give WatchListClient=true or WatchListClient=false` + "\n"},
		{"compaction-sweep", []string{"compaction-sweep", "--kubeconfig", "/nonexistent/kubeconfig", "--endpoints", "http://127.0.0.1:1", "--allow-maintenance"},
			"lwbench: --kubeconfig: compaction-sweep sets kube-apiserver's --etcd-compaction-interval, which on an existing cluster is its operator's; run it through kube-apiservers of lwbench's own (--kube-apiserver)\n"},
		{"defrag-stall", []string{"defrag-stall", "--kubeconfig", "/nonexistent/kubeconfig", "--endpoints", "http://127.0.0.1:1", "--allow-maintenance"},
			"lwbench: --kubeconfig: defrag-stall grows the cluster's etcd by hundreds of megabytes of keys it does not delete; run it through kube-apiservers of lwbench's own (--kube-apiserver)\n"},
		{"experiment without endpoints", []string{"relist-storm", "--kubeconfig", "/nonexistent/kubeconfig"}, "lwbench: --kubeconfig needs --endpoints of the cluster's etcd (and --prefix, its --etcd-prefix): the informers' events are validated against etcd's history\n"},
		{"experiment with kube-apiserver", []string{"catchup", "--kubeconfig", "/nonexistent/kubeconfig", "--endpoints", "http://127.0.0.1:1", "--allow-maintenance", "--kube-apiserver", "1.37"},
			"lwbench: --kubeconfig and --kube-apiserver cannot be used together: lwbench starts kube-apiservers with --kube-apiserver, and uses the cluster's with --kubeconfig\n"},
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

// TestExperimentsThroughKubeconfig runs relist-storm and catchup through
// an existing cluster's kube-apiserver (startExistingCluster): each load
// writes in namespaces of its own, the informers relist after the
// experiment's compaction (the cluster's watch cache is off), nothing is
// lost, and at the end exactly those namespaces are gone and someone
// else's objects are as they were.
func TestExperimentsThroughKubeconfig(t *testing.T) {
	e := startExistingCluster(t)
	common := []string{"--quick", "--kubeconfig", e.kubeconfig, "--context", "test", "--endpoints", e.srv.Endpoints[0], "--allow-maintenance",
		"--namespace-delete-timeout", "30s", "-w", "json"}
	run := func(args ...string) experiment.Result {
		t.Helper()
		var out, errOut bytes.Buffer
		root := NewRootCommand()
		root.SetOut(&out)
		root.SetErr(&errOut)
		if code := cli.Run(root, append(args, common...), &errOut); code != 0 {
			t.Fatalf("lwbench %s exit %d:\n%s", args[0], code, errOut.String())
		}
		var res experiment.Result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("result JSON: %v", err)
		}
		if a := res.APIServer; a == nil || a.Managed || a.URL != e.rc.Host || a.Version != "v1.37.2" {
			t.Errorf("%s: got apiserver %+v, want an unmanaged v1.37.2 at %s", args[0], a, e.rc.Host)
		}
		if len(res.NamespaceCleanup) == 0 {
			t.Fatalf("%s: no namespace cleanup", args[0])
		}
		var namespaces []string
		for _, c := range res.NamespaceCleanup {
			if c.Error != "" || len(c.NamespacesLeft) != 0 || len(c.Namespaces) == 0 {
				t.Errorf("%s: cleanup %+v, want its namespaces deleted", args[0], c)
			}
			namespaces = append(namespaces, c.Namespaces...)
		}
		e.checkLeftAlone(t, namespaces)
		return res
	}
	storm := run("relist-storm", "--objects", "60", "--no-control", "--client-feature-gates", "WatchListClient=false", "--page-sizes", "500")
	for _, c := range storm.RelistStorm.Cases {
		if c.Relists != c.Watchers || c.Validation.Lost != 0 || c.Validation.Others() != 0 {
			t.Errorf("relist-storm: %d relists of %d informers, validation %+v; want one each and nothing lost", c.Relists, c.Watchers, c.Validation)
		}
	}
	catchup := run("catchup", "--objects", "40", "--behind", "200")
	if c := catchup.Catchup.Cases[0]; c.Events != 200 || c.Missing != 0 || c.Unexpected != 0 || c.RelistObjects != 40 {
		t.Errorf("catchup: %d events (%d missing, %d unexpected), relist of %d objects; want the 200 updates and the 40 pods of the load alone",
			c.Events, c.Missing, c.Unexpected, c.RelistObjects)
	}
}

// TestKubeconfigFilesAreChecked runs `run` and an experiment with a
// --kubeconfig that is not a regular file of at most 16 MiB, or that names
// such a file as a certificate, key or token: each must fail within 2 s
// with one line that names the file and says what it is, before anything
// is connected to. Before, /dev/zero was read until the kernel killed
// lwbench (23.7 GB) and a FIFO blocked open(2) beyond SIGINT's reach.
func TestKubeconfigFilesAreChecked(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	large := filepath.Join(dir, "large")
	if f, err := os.Create(large); err != nil {
		t.Fatal(err)
	} else if err := f.Truncate(maxKubeconfigBytes + 1); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	// naming writes a kubeconfig whose cluster or user names file, relative
	// to the kubeconfig's directory as clientcmd resolves it.
	naming := func(name string, cluster clientcmdapi.Cluster, user clientcmdapi.AuthInfo) string {
		kc := clientcmdapi.NewConfig()
		cluster.Server = "https://127.0.0.1:1"
		kc.Clusters["c"] = &cluster
		kc.AuthInfos["u"] = &user
		kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		kc.CurrentContext = "x"
		p := filepath.Join(dir, name)
		if err := clientcmd.WriteToFile(*kc, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name       string
		kubeconfig string
		want       string
	}{
		{"fifo", fifo, fifo + ": is a FIFO, not a regular file"},
		{"dev zero", "/dev/zero", "/dev/zero: is a character device, not a regular file"},
		{"directory", dir, dir + ": is a directory, not a regular file"},
		{"too large", large, fmt.Sprintf("%s: %d bytes, larger than the limit of %d bytes", large, maxKubeconfigBytes+1, maxKubeconfigBytes)},
		{"missing", filepath.Join(dir, "missing"), "no such file or directory"},
		{"certificate-authority fifo", naming("ca-fifo", clientcmdapi.Cluster{CertificateAuthority: "fifo"}, clientcmdapi.AuthInfo{Token: "t"}),
			`cluster "c" certificate-authority: ` + fifo + ": is a FIFO, not a regular file"},
		{"certificate-authority dev zero", naming("ca-zero", clientcmdapi.Cluster{CertificateAuthority: "/dev/zero"}, clientcmdapi.AuthInfo{Token: "t"}),
			`cluster "c" certificate-authority: /dev/zero: is a character device, not a regular file`},
		{"client-certificate too large", naming("cert-large", clientcmdapi.Cluster{}, clientcmdapi.AuthInfo{ClientCertificate: large, ClientKey: fifo}),
			`user "u" client-certificate: ` + large + ": " + fmt.Sprint(maxKubeconfigBytes+1) + " bytes, larger than the limit"},
		{"client-key fifo", naming("key-fifo", clientcmdapi.Cluster{}, clientcmdapi.AuthInfo{ClientCertificate: "ca-zero", ClientKey: "fifo"}),
			`user "u" client-key: ` + fifo + ": is a FIFO, not a regular file"},
		{"token file dev zero", naming("token-zero", clientcmdapi.Cluster{}, clientcmdapi.AuthInfo{TokenFile: "/dev/zero"}),
			`user "u" tokenFile: /dev/zero: is a character device, not a regular file`},
	}
	for _, command := range [][]string{{"run"}, {"relist-storm", "--allow-maintenance", "--quick"}} {
		for _, tt := range tests {
			t.Run(command[0]+"/"+tt.name, func(t *testing.T) {
				args := append(slices.Clone(command), "--kubeconfig", tt.kubeconfig, "--endpoints", "http://127.0.0.1:1")
				var errOut bytes.Buffer
				done := make(chan int, 1)
				go func() { done <- cli.Run(NewRootCommand(), args, &errOut) }()
				select {
				case code := <-done:
					got := errOut.String()
					if code != cli.ExitError || strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "lwbench: --kubeconfig") || !strings.Contains(got, tt.want) {
						t.Errorf("got exit %d, stderr %q; want exit %d, one line beginning %q that says %q", code, got, cli.ExitError, "lwbench: --kubeconfig", tt.want)
					}
				case <-time.After(2 * time.Second):
					t.Fatalf("lwbench %s did not return within 2 s", strings.Join(args, " "))
				}
			})
		}
	}
}
