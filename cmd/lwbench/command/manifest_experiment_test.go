package command

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/experiment"
)

// TestManifestExperiment: `lwbench manifest --experiment` prints an
// Indexed Job whose pods run the experiment's shards (lwbench EXPERIMENT
// --shards N --barrier-configmap ... --log-result), with no scrape Job,
// and with --through-api a ClusterRole that also grants pods/status
// patch. Every object, for relist-storm and for catchup, passes a real
// kube-apiserver's server-side dry-run. Then the catch-up's RBAC is
// created for real and its two pods run as processes of this test binary
// with the Job's arguments, as the ServiceAccount (impersonated), each
// its index in $JOB_COMPLETION_INDEX: their log lines merged hold the
// invariants of a divided catch-up, and the ServiceAccount deleted the
// load's namespaces. What an experiment's Job cannot take is refused.
func TestManifestExperiment(t *testing.T) {
	e := startExistingCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const ns, name = "lwbench-exp", "exp1"
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	storm := manifestObjects(t, "--experiment", "relist-storm", "--shards", "3", "--name", "storm", "--namespace", ns, "--etcd-tls-secret", "etcd-client", "--",
		"--endpoints", "https://etcd-0.etcd:2379", "--allow-maintenance", "--watchers", "30", "--objects", "1000,10000")
	for _, obj := range storm {
		if err := createManifestObject(ctx, e.cs, obj, dryRun); err != nil {
			t.Errorf("relist-storm: dry-run create %T %s: %v", obj, obj.(metav1.Object).GetName(), err)
		}
	}
	sjob := storm[len(storm)-1].(*batchv1.Job)
	sargs := sjob.Spec.Template.Spec.Containers[0].Args
	if sargs[0] != "relist-storm" || !slices.Contains(sargs, "--log-result") || !slices.Contains(sargs, ns+"/storm-barrier") || !slices.Contains(sargs, etcdTLSDir+"/ca.crt") {
		t.Errorf("relist-storm worker args %q: want relist-storm, its barrier, --log-result and the TLS files", sargs)
	}
	// 30 watchers over 3 shards: 10 informers of up to 10,000 pods.
	if got, want := sjob.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory], workerMemory(10, 10000); got.Cmp(want) != 0 {
		t.Errorf("relist-storm memory request %s, want %s", got.String(), want.String())
	}

	objs := manifestObjects(t, "--experiment", "catchup", "--through-api", "--shards", "2", "--name", name, "--namespace", ns, "--",
		"--endpoints", e.srv.Endpoints[0], "--allow-maintenance", "--quick", "--objects", "40", "--behind", "200",
		"--namespace-delete-timeout", "30s", "--client-feature-gates", "WatchListClient=false")
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, fmt.Sprintf("%T", o))
	}
	wantKinds := []string{"*v1.ServiceAccount", "*v1.Role", "*v1.RoleBinding", "*v1.ClusterRole", "*v1.ClusterRoleBinding", "*v1.ConfigMap", "*v1.Job"}
	if !slices.Equal(kinds, wantKinds) {
		t.Fatalf("objects %v, want %v (no scrape Job)", kinds, wantKinds)
	}
	if cr := objs[3].(*rbacv1.ClusterRole); !slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Equal(r.Resources, []string{"pods/status"}) && slices.Contains(r.Verbs, "patch")
	}) {
		t.Errorf("ClusterRole rules %+v: want pods/status patch", cr.Rules)
	}
	for _, obj := range objs {
		if err := createManifestObject(ctx, e.cs, obj, dryRun); err != nil {
			t.Errorf("catchup: dry-run create %T %s: %v", obj, obj.(metav1.Object).GetName(), err)
		}
	}
	if t.Failed() {
		return
	}
	for _, obj := range objs[:6] {
		if err := createManifestObject(ctx, e.cs, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	sa := "system:serviceaccount:" + ns + ":" + name
	asSA := impersonatingKubeconfig(t, e.rc, sa)
	container := objs[6].(*batchv1.Job).Spec.Template.Spec.Containers[0]
	args := slices.Clone(container.Args)
	if args[0] != "catchup" || !slices.Contains(args, "--log-result") || slices.Index(args, "--kubeconfig") < 0 {
		t.Fatalf("catchup worker args %q: want catchup, --log-result and --kubeconfig", args)
	}
	args[slices.Index(args, "--kubeconfig")+1] = asSA
	args = append(args, "--barrier-kubeconfig", asSA)
	procs := make([]*exec.Cmd, 2)
	logs := make([]*bytes.Buffer, 2)
	for i := range procs {
		logs[i] = &bytes.Buffer{}
		procs[i] = exec.Command(os.Args[0], args...)
		procs[i].Env = append(os.Environ(), subprocessEnv+"=1", envCompletionIndex+"="+strconv.Itoa(i))
		for _, ev := range container.Env {
			if ev.Name != "GOMEMLIMIT" {
				procs[i].Env = append(procs[i].Env, ev.Name+"="+ev.Value)
			}
		}
		procs[i].Stdout, procs[i].Stderr = logs[i], logs[i]
		if err := procs[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var results []*experiment.Result
	for i, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("pod %d as %s: %v\n%s", i, sa, err, logs[i])
		}
		line, ok := loggedResult(logs[i].Bytes())
		if !ok {
			t.Fatalf("pod %d: no result line in its log:\n%s", i, logs[i])
		}
		r, err := experiment.Decode(line)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	merged, err := experiment.Merge(results)
	if err != nil {
		t.Fatal(err)
	}
	checkCatchupWorkers(t, merged, 2, 40, []int64{200})
	if len(merged.NamespaceCleanup) != 1 || merged.NamespaceCleanup[0].Error != "" || len(merged.NamespaceCleanup[0].NamespacesLeft) != 0 {
		t.Errorf("cleanup %+v: want shard 0 to have deleted the load's namespaces as the ServiceAccount", merged.NamespaceCleanup)
	}

	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"not divisible", []string{"--experiment", "continuation", "--", "--endpoints", "http://e:2379", "--allow-maintenance"}, "--experiment"},
		{"scrape", []string{"--experiment", "catchup", "--scrape", "--", "--endpoints", "http://e:2379", "--allow-maintenance"}, "--scrape"},
		{"workers", []string{"--experiment", "catchup", "--", "--endpoints", "http://e:2379", "--allow-maintenance", "--workers", "2"}, "--workers"},
		{"a load's flag", []string{"--experiment", "catchup", "--", "--endpoints", "http://e:2379", "--allow-maintenance", "--duration", "5s"}, "--duration"},
		{"no consent", []string{"--experiment", "relist-storm", "--", "--endpoints", "http://e:2379"}, "--allow-maintenance"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var errOut bytes.Buffer
			code := cli.Run(NewRootCommand(), append([]string{"manifest"}, tt.args...), &errOut)
			if code != cli.ExitUsage || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d mentioning %q", code, errOut.String(), cli.ExitUsage, tt.wantErr)
			}
		})
	}
}
