package command

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// TestManifestFlags: manifest's flags and the load's (after --) are
// checked before anything is printed, each error one line naming the
// flag, exit 2; good flags give the shard's size and memory.
func TestManifestFlags(t *testing.T) {
	load := []string{"--", "--endpoints", "http://etcd:2379"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "no shards", args: append([]string{"--shards", "0"}, load...), wantErr: "--shards 0: want at least 1"},
		{name: "bad name", args: append([]string{"--name", "Load_1"}, load...), wantErr: `--name "Load_1"`},
		{name: "long name", args: append([]string{"--name", strings.Repeat("a", 64)}, load...), wantErr: "--name"},
		{name: "bad namespace", args: append([]string{"--namespace", "a.b"}, load...), wantErr: `--namespace "a.b"`},
		{name: "no image", args: append([]string{"--image", ""}, load...), wantErr: "--image"},
		{name: "bad memory", args: append([]string{"--memory", "lots"}, load...), wantErr: `--memory "lots"`},
		{name: "bad secret", args: append([]string{"--etcd-tls-secret", "A"}, load...), wantErr: `--etcd-tls-secret "A"`},
		{name: "bad format", args: append([]string{"-w", "table"}, load...), wantErr: `"table" is not one of yaml|json`},
		{name: "argument before --", args: []string{"run", "--", "--endpoints", "http://etcd:2379"}, wantErr: `unexpected argument "run"`},
		{name: "no endpoints", args: []string{"--", "--watchers", "10"}, wantErr: "needs --endpoints"},
		{name: "unknown load flag", args: append(load, "--no-such-flag"), wantErr: "the load's flags (after --): unknown flag: --no-such-flag"},
		{name: "bad load value", args: append(load, "--watchers", "many"), wantErr: "--watchers"},
		{name: "shards in the load", args: append(load, "--shards", "2"), wantErr: "--shards cannot be among the load's flags"},
		{name: "output in the load", args: append(load, "-w", "table"), wantErr: "--write-out cannot be among the load's flags"},
		{name: "tls twice", args: append([]string{"--etcd-tls-secret", "etcd-client"}, append(load, "--cacert", "/ca.crt")...), wantErr: "--etcd-tls-secret and --cacert"},
		{name: "load too small for the shards", args: append([]string{"--shards", "4"}, append(load, "--namespaces", "3")...), wantErr: "--namespaces"},
		{name: "not a worker's target", args: append(load, "--kube-apiserver", "1.37"), wantErr: "not divided into shards yet"},
		{name: "through the API", args: append(load, "--kubeconfig", "/kubeconfig"), wantErr: "--kubeconfig cannot be among the load's flags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := NewRootCommand()
			root.SetOut(&out)
			code := cli.Run(root, append([]string{"manifest"}, tt.args...), &errOut)
			if code != cli.ExitUsage || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d mentioning %q", code, errOut.String(), cli.ExitUsage, tt.wantErr)
			}
			if strings.Count(strings.TrimSpace(errOut.String()), "\n") > 0 {
				t.Errorf("stderr %q: want one line", errOut.String())
			}
			if out.Len() > 0 {
				t.Errorf("printed %q before refusing", out.String())
			}
		})
	}

	var got *manifestOptions
	root := &cobra.Command{Use: "lwbench"}
	cli.PrepareRoot(root)
	root.AddCommand(newManifestCommand(func(_ *cobra.Command, o *manifestOptions) error { got = o; return nil }))
	var errOut bytes.Buffer
	if code := cli.Run(root, []string{"manifest", "--shards", "4", "--", "--endpoints", "http://etcd:2379", "--watchers", "1000", "--objects", "30000"}, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	// 250 informers a shard, each holding up to 30,000 pods:
	// 128 MiB + 250 x (256 KiB + 30,000 x 320 B), in MiB rounded up.
	wantMiB := int64((128<<20 + 250*(256<<10+30000*320) + 1<<20 - 1) >> 20)
	if got.informers != 250 || got.objects != 30000 || got.memoryRequest.Value() != wantMiB<<20 {
		t.Errorf("got %d informers, %d objects, memory %s; want 250, 30000, %dMi", got.informers, got.objects, got.memoryRequest.String(), wantMiB)
	}
}

// manifestObjects runs `lwbench manifest` with args and decodes what it
// prints (YAML documents, or with -w json a v1 List).
func manifestObjects(t *testing.T, args ...string) []runtime.Object {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	if code := cli.Run(root, append([]string{"manifest"}, args...), &errOut); code != 0 {
		t.Fatalf("lwbench manifest %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	dec := scheme.Codecs.UniversalDeserializer()
	var docs [][]byte
	if slices.Contains(args, "json") {
		var list corev1.List
		if _, _, err := dec.Decode(out.Bytes(), nil, &list); err != nil {
			t.Fatalf("decode the List: %v\n%s", err, out.String())
		}
		for _, it := range list.Items {
			docs = append(docs, it.Raw)
		}
	} else {
		for _, d := range strings.Split(out.String(), "\n---\n") {
			docs = append(docs, []byte(d))
		}
	}
	var objs []runtime.Object
	for i, d := range docs {
		obj, _, err := dec.Decode(d, nil, nil)
		if err != nil {
			t.Fatalf("decode object %d: %v\n%s", i, err, d)
		}
		objs = append(objs, obj)
	}
	return objs
}

// TestManifestObjects checks the objects' shape without a cluster: the
// Indexed Job of --shards pods running the load's flags, the least RBAC
// of the ConfigMap barrier, the TLS Secret mounted and passed, and the
// same objects in YAML and JSON.
func TestManifestObjects(t *testing.T) {
	args := []string{"--shards", "3", "--name", "load1", "--namespace", "bench", "--image", "registry.example/lwbench:v1",
		"--etcd-tls-secret", "etcd-client", "--", "--endpoints", "https://etcd:2379", "--watchers", "30", "--objects", "3000", "--duration", "2m"}
	objs := manifestObjects(t, args...)
	if js := manifestObjects(t, append([]string{"-w", "json"}, args...)...); !apiequality.Semantic.DeepEqual(objs, js) {
		t.Errorf("-w json printed other objects than YAML")
	}
	checkManifestShape(t, objs, "bench", "load1", 3, []string{"--endpoints", "https://etcd:2379", "--watchers", "30", "--objects", "3000", "--duration", "2m"})
	job := objs[4].(*batchv1.Job)
	c := job.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/lwbench:v1" {
		t.Errorf("image %q", c.Image)
	}
	if !slices.Equal(c.Args[len(c.Args)-6:], []string{"--cacert", "/etc/lwbench/etcd-tls/ca.crt", "--cert", "/etc/lwbench/etcd-tls/tls.crt", "--key", "/etc/lwbench/etcd-tls/tls.key"}) {
		t.Errorf("args %q: want the TLS files last", c.Args)
	}
	vols := job.Spec.Template.Spec.Volumes
	if len(vols) != 1 || vols[0].Secret == nil || vols[0].Secret.SecretName != "etcd-client" || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/lwbench/etcd-tls" {
		t.Errorf("volumes %+v, mounts %+v: want Secret etcd-client at /etc/lwbench/etcd-tls", vols, c.VolumeMounts)
	}
	// 10 informers a shard over at most 3,000 objects each.
	want := workerMemory(10, 3000)
	if got := c.Resources.Requests[corev1.ResourceMemory]; got.Cmp(want) != 0 {
		t.Errorf("memory request %s, want %s", got.String(), want.String())
	}
	if got, limit := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Limits[corev1.ResourceMemory]; got.Cmp(resource.MustParse("1")) != 0 || limit.Value() != 2*want.Value() {
		t.Errorf("cpu request %s, memory limit %s: want 1 and twice the request", got.String(), limit.String())
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("a CPU limit: throttling would add to the measured latencies")
	}
	sc := objs[9].(*batchv1.Job).Spec.Template.Spec
	if a := sc.Containers[0].Args; !slices.Equal(a[len(a)-6:], []string{"--cacert", "/etc/lwbench/etcd-tls/ca.crt", "--cert", "/etc/lwbench/etcd-tls/tls.crt", "--key", "/etc/lwbench/etcd-tls/tls.key"}) ||
		len(sc.Volumes) != 1 || len(sc.Containers[0].VolumeMounts) != 1 {
		t.Errorf("scrape args %q, volumes %+v: want the TLS Secret's files as the workers'", a, sc.Volumes)
	}
	if n := len(manifestObjects(t, append([]string{"--scrape=false"}, args...)...)); n != 5 {
		t.Errorf("--scrape=false: %d objects, want the workers' 5", n)
	}
}

// checkManifestShape checks the ten objects of a manifest: the workers'
// five, and lwbench scrape's (its one coordinator): its ServiceAccount,
// the barrier's Role bound to it, the ClusterRole and binding of
// kube-apiserver's /metrics, and its Job.
func checkManifestShape(t *testing.T, objs []runtime.Object, ns, name string, shards int32, loadArgs []string) {
	t.Helper()
	if len(objs) != 10 {
		t.Fatalf("%d objects, want 10", len(objs))
	}
	scrape, ok := objs[9].(*batchv1.Job)
	if !ok || scrape.Name != name+"-scrape" || scrape.Spec.CompletionMode != nil || scrape.Spec.Completions != nil {
		t.Fatalf("object 10 %T %+v: want the Job %s-scrape of one pod", objs[9], objs[9], name)
	}
	sc := scrape.Spec.Template.Spec.Containers[0]
	endpoints := ""
	if i := slices.Index(loadArgs, "--endpoints"); i >= 0 {
		endpoints = loadArgs[i+1]
	}
	wantScrape := []string{"scrape", "--shards", fmt.Sprint(shards), "--barrier-configmap", ns + "/" + name + "-barrier", "--log-result", "--endpoints", endpoints,
		"--apiserver-metrics"}
	if !slices.Equal(sc.Args[:len(wantScrape)], wantScrape) || scrape.Spec.Template.Spec.ServiceAccountName != name+"-scrape" {
		t.Errorf("scrape args %q as %s: want %q as its own ServiceAccount", sc.Args, scrape.Spec.Template.Spec.ServiceAccountName, wantScrape)
	}
	ssa, ok1 := objs[5].(*corev1.ServiceAccount)
	srb, ok2 := objs[6].(*rbacv1.RoleBinding)
	cr, ok3 := objs[7].(*rbacv1.ClusterRole)
	crb, ok4 := objs[8].(*rbacv1.ClusterRoleBinding)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		t.Fatalf("objects 6 to 9 %T %T %T %T: want ServiceAccount, RoleBinding, ClusterRole, ClusterRoleBinding", objs[5], objs[6], objs[7], objs[8])
	}
	scrapeSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name + "-scrape", Namespace: ns}}
	if ssa.Name != name+"-scrape" || srb.RoleRef.Name != name || !slices.Equal(srb.Subjects, scrapeSubject) {
		t.Errorf("scrape's ServiceAccount %s, role binding %+v: want %s-scrape bound to the barrier's Role", ssa.Name, srb, name)
	}
	if len(cr.Rules) != 1 || !slices.Equal(cr.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(cr.Rules[0].Verbs, []string{"get"}) ||
		len(cr.Rules[0].Resources) != 0 || crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != cr.Name || !slices.Equal(crb.Subjects, scrapeSubject) {
		t.Errorf("cluster role %+v, binding %+v: want get of /metrics alone, bound to %s-scrape", cr, crb, name)
	}
	sa, ok1 := objs[0].(*corev1.ServiceAccount)
	role, ok2 := objs[1].(*rbacv1.Role)
	rb, ok3 := objs[2].(*rbacv1.RoleBinding)
	cm, ok4 := objs[3].(*corev1.ConfigMap)
	job, ok5 := objs[4].(*batchv1.Job)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		t.Fatalf("objects %T %T %T %T %T: want ServiceAccount, Role, RoleBinding, ConfigMap, Job", objs[0], objs[1], objs[2], objs[3], objs[4])
	}
	for _, o := range objs {
		m := o.(metav1.Object)
		switch o.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			if m.GetNamespace() != "" {
				t.Errorf("%T %s in namespace %q, want none (cluster-scoped)", o, m.GetName(), m.GetNamespace())
			}
			continue
		}
		if m.GetNamespace() != ns {
			t.Errorf("%T %s in namespace %q, want %q", o, m.GetName(), m.GetNamespace(), ns)
		}
	}
	if sa.Name != name || role.Name != name || rb.Name != name || job.Name != name || cm.Name != name+"-barrier" {
		t.Errorf("names %s %s %s %s %s", sa.Name, role.Name, rb.Name, cm.Name, job.Name)
	}
	for _, r := range role.Rules {
		if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Resources, []string{"configmaps"}) {
			t.Errorf("rule %+v: want configmaps only", r)
		}
		if !slices.Equal(r.Verbs, []string{"create"}) && !slices.Equal(r.ResourceNames, []string{cm.Name}) {
			t.Errorf("rule %+v: want every verb but create confined to %s", r, cm.Name)
		}
	}
	if rb.RoleRef.Name != role.Name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != sa.Name || rb.Subjects[0].Namespace != ns {
		t.Errorf("role binding %+v", rb)
	}
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || s.Parallelism == nil || *s.Parallelism != shards ||
		s.Completions == nil || *s.Completions != shards || s.BackoffLimit == nil || *s.BackoffLimit != 0 {
		t.Errorf("job spec %+v: want Indexed, parallelism = completions = %d, backoffLimit 0", s, shards)
	}
	pod := s.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || pod.ServiceAccountName != sa.Name || len(pod.Containers) != 1 {
		t.Fatalf("pod spec %+v", pod)
	}
	c := pod.Containers[0]
	wantHead := []string{"worker", "--shards", fmt.Sprint(shards), "--barrier-configmap", ns + "/" + cm.Name, "--log-result"}
	if !slices.Equal(c.Args[:len(wantHead)], wantHead) || !slices.Equal(c.Args[len(wantHead):len(wantHead)+len(loadArgs)], loadArgs) {
		t.Errorf("args %q: want %q then the load's %q", c.Args, wantHead, loadArgs)
	}
	if !slices.Contains(c.Env, corev1.EnvVar{Name: "LWBENCH_SHARDS", Value: fmt.Sprint(shards)}) {
		t.Errorf("env %+v: want LWBENCH_SHARDS=%d", c.Env, shards)
	}
}

// TestManifestDryRun submits every object `lwbench manifest` prints to a
// real kube-apiserver with server-side dry-run (the API's validation and
// admission, nothing stored): any object refused fails the test. Then it
// creates the RBAC objects and the ConfigMap for real and runs two
// ConfigMap barrier workers as the manifest's ServiceAccount
// (impersonated): the Role is enough for the barrier, updating and
// re-creating its ConfigMap, and confines it to that ConfigMap.
func TestManifestDryRun(t *testing.T) {
	bin := apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cluster, err := apiserverproc.Start(ctx, apiserverproc.Config{BinDir: bin, Dir: t.TempDir(), EtcdServers: srv.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	cs, err := kubernetes.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "lwbench-load", "load1"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	loadArgs := []string{"--endpoints", "https://etcd-0.etcd:2379,https://etcd-1.etcd:2379", "--watchers", "1000", "--objects", "30000", "--duration", "5m"}
	objs := manifestObjects(t, append([]string{"--shards", "4", "--name", name, "--namespace", ns, "--etcd-tls-secret", "etcd-client", "--"}, loadArgs...)...)
	checkManifestShape(t, objs, ns, name, 4, loadArgs)

	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, obj := range objs {
		if err := createManifestObject(ctx, cs, obj, dryRun); err != nil {
			t.Errorf("dry-run create %T %s: %v", obj, obj.(metav1.Object).GetName(), err)
		}
	}
	// Nothing was stored.
	if _, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the dry-run, get the Job: %v, want NotFound", err)
	}
	if t.Failed() {
		return
	}

	// The RBAC and the ConfigMap for real (the Jobs left out); the
	// barrier as the workers' ServiceAccount.
	for _, obj := range objs {
		if _, job := obj.(*batchv1.Job); job {
			continue
		}
		if err := createManifestObject(ctx, cs, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	as := func(sa string) *kubernetes.Clientset {
		t.Helper()
		rc := cluster.RESTConfig()
		rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	asWorker, asScrape := as(name), as(name+"-scrape")
	// kube-apiserver's /metrics: the scrape pod's alone.
	if _, err := asScrape.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx); err != nil {
		t.Errorf("GET /metrics as the scrape pod's ServiceAccount: %v", err)
	}
	if _, err := asWorker.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx); !apierrors.IsForbidden(err) {
		t.Errorf("GET /metrics as the workers' ServiceAccount: %v, want Forbidden", err)
	}
	meet := func(point string) {
		t.Helper()
		errc := make(chan error, 2)
		for i := range 2 {
			b, err := barrier.NewConfigMap(asWorker, ns, name+"-barrier", shard.Shard{Index: i, Count: 2})
			if err != nil {
				t.Fatal(err)
			}
			go func() { _, err := b.Wait(ctx, point); errc <- err }()
		}
		for range 2 {
			if err := <-errc; err != nil {
				t.Errorf("a worker as the ServiceAccount at %s: %v", point, err)
			}
		}
	}
	meet("seeded")
	// Deleted (by someone else), the ConfigMap is created again by the
	// workers.
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, name+"-barrier", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The scrape pod, as its ServiceAccount, follows the barrier
	// (re-created after the deletion: only synced's arrivals are in it).
	fctx, stopFollow := context.WithTimeout(ctx, 30*time.Second)
	metPoints := make(chan string, 4)
	followed := make(chan error, 1)
	go func() {
		followed <- barrier.FollowConfigMap(fctx, asScrape, ns, name+"-barrier", 2, func(p string, _ time.Time) { metPoints <- p })
	}()
	meet("synced")
	select {
	case p := <-metPoints:
		if p != "synced" {
			t.Errorf("the follower saw %q, want synced", p)
		}
	case err := <-followed:
		t.Errorf("the follower as the scrape pod's ServiceAccount ended: %v", err)
	case <-fctx.Done():
		t.Error("the follower as the scrape pod's ServiceAccount saw no point")
	}
	stopFollow()
	// Nothing else: another ConfigMap, an unfiltered list, a Secret.
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := asWorker.CoreV1().ConfigMaps(ns).Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the ServiceAccount got another ConfigMap: %v, want Forbidden", err)
	}
	if _, err := asWorker.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the ServiceAccount listed every ConfigMap: %v, want Forbidden", err)
	}
	if _, err := asWorker.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the ServiceAccount listed Secrets: %v, want Forbidden", err)
	}
}
