package command

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestore/etcdkit/internal/cli"
)

// createManifestObject creates one object lwbench manifest prints, with
// opts (a server-side dry-run, or for real).
func createManifestObject(ctx context.Context, cs kubernetes.Interface, obj runtime.Object, opts metav1.CreateOptions) error {
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.Role:
		_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.ClusterRole:
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	case *corev1.ConfigMap:
		_, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, opts)
	case *batchv1.Job:
		_, err = cs.BatchV1().Jobs(o.Namespace).Create(ctx, o, opts)
	default:
		err = fmt.Errorf("no client for %T", obj)
	}
	return err
}

// TestManifestThroughAPI: `lwbench manifest --through-api` prints, after
// the barrier's RBAC, a ClusterRole and ClusterRoleBinding for the load,
// and workers running `lwbench worker --kubeconfig in-cluster`. Every
// object passes a real kube-apiserver's server-side dry-run. Then the
// RBAC is created for real and the Job's worker runs, with the Job's
// arguments, as the ServiceAccount (impersonated through a kubeconfig in
// place of the pod's in-cluster config): the whole load through the API,
// namespaces created, written, listed and watched, and deleted at the end,
// must succeed with every write validated, which it cannot if the
// ClusterRole lacks a verb the load uses. The ServiceAccount is refused
// what the load does not do: Secrets, Nodes, RBAC objects, updating a
// namespace, deleting an event, patching a pod, Deployments.
func TestManifestThroughAPI(t *testing.T) {
	e := startExistingCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const ns, name = "lwbench-load", "load1"
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	loadArgs := []string{"--endpoints", e.srv.Endpoints[0], "--objects", "60", "--namespaces", "2", "--watchers", "2",
		"--write-rate", "40", "--duration", "2s", "--namespace-delete-timeout", "30s"}
	objs := manifestObjects(t, append([]string{"--through-api", "--shards", "1", "--name", name, "--namespace", ns, "--scrape=false", "--"}, loadArgs...)...)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, fmt.Sprintf("%T", o))
	}
	wantKinds := []string{"*v1.ServiceAccount", "*v1.Role", "*v1.RoleBinding", "*v1.ClusterRole", "*v1.ClusterRoleBinding", "*v1.ConfigMap", "*v1.Job"}
	if !slices.Equal(kinds, wantKinds) {
		t.Fatalf("objects %v, want %v", kinds, wantKinds)
	}
	crb := objs[4].(*rbacv1.ClusterRoleBinding)
	if crb.Name != "lwbench:"+ns+":"+name || crb.RoleRef.Name != crb.Name || len(crb.Subjects) != 1 || crb.Subjects[0].Name != name || crb.Subjects[0].Namespace != ns {
		t.Errorf("ClusterRoleBinding %s to %s for %+v: want lwbench:%s:%s for ServiceAccount %s/%s", crb.Name, crb.RoleRef.Name, crb.Subjects, ns, name, ns, name)
	}
	job := objs[6].(*batchv1.Job)
	args := job.Spec.Template.Spec.Containers[0].Args
	if i := slices.Index(args, "--kubeconfig"); i < 0 || args[i+1] != inClusterKubeconfig {
		t.Fatalf("worker args %q: want --kubeconfig %s", args, inClusterKubeconfig)
	}

	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, obj := range objs {
		if err := createManifestObject(ctx, e.cs, obj, dryRun); err != nil {
			t.Errorf("dry-run create %T %s: %v", obj, obj.(metav1.Object).GetName(), err)
		}
	}
	if _, err := e.cs.RbacV1().ClusterRoles().Get(ctx, crb.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the dry-run, get the ClusterRole: %v, want NotFound", err)
	}
	if t.Failed() {
		return
	}
	for _, obj := range objs[:6] {
		if err := createManifestObject(ctx, e.cs, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}

	// The ServiceAccount's kubeconfig: the admin impersonating it.
	sa := "system:serviceaccount:" + ns + ":" + name
	asSA := impersonatingKubeconfig(t, e.rc, sa)
	// The Job's worker, as the pod would run it (index 0 of 1).
	wargs := slices.Clone(args)
	wargs[slices.Index(wargs, "--kubeconfig")+1] = asSA
	wargs = append(wargs, "--index", "0", "--barrier-kubeconfig", asSA)
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	if code := cli.Run(root, wargs, &errOut); code != 0 {
		t.Fatalf("the Job's worker as %s: exit %d:\n%s", sa, code, errOut.String())
	}
	res, err := decodeWorkerResult(out.Bytes())
	if err != nil {
		t.Fatalf("the worker's log: %v\n%s", err, out.String())
	}
	if res.Writes.Planned == 0 || res.Writes.Completed != res.Writes.Planned || res.Writes.Errors != 0 || !res.Validation.OK() {
		t.Errorf("the worker as the ServiceAccount: writes %d of %d, %d errors, validation %s\n%s", res.Writes.Completed, res.Writes.Planned, res.Writes.Errors, res.Validation.Summary(), strings.Join(res.Writes.ErrorSamples, "; "))
	}
	if res.Cleanup == nil || res.Cleanup.Error != "" || len(res.Cleanup.Namespaces) != 2 {
		t.Errorf("cleanup %+v: want the load's 2 namespaces deleted by the ServiceAccount", res.Cleanup)
	}

	// What the load does not do is refused.
	rc := rest.CopyConfig(e.rc)
	rc.Impersonate = rest.ImpersonationConfig{UserName: sa}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		do   func() error
	}{
		{"list secrets", func() error { _, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); return err }},
		{"get a secret", func() error { _, err := cs.CoreV1().Secrets(ns).Get(ctx, "x", metav1.GetOptions{}); return err }},
		{"list nodes", func() error { _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err }},
		{"create a clusterrole", func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "more"}}, metav1.CreateOptions{})
			return err
		}},
		{"update a namespace", func() error {
			_, err := cs.CoreV1().Namespaces().Update(ctx, e.theirs, metav1.UpdateOptions{})
			return err
		}},
		{"delete an event", func() error {
			return cs.CoreV1().Events(e.theirs.Name).Delete(ctx, "x", metav1.DeleteOptions{})
		}},
		{"patch a pod", func() error {
			_, err := cs.CoreV1().Pods(e.theirs.Name).Patch(ctx, "x", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
			return err
		}},
		{"list deployments", func() error {
			_, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
	} {
		if err := c.do(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as %s: %v, want Forbidden", c.what, sa, err)
		}
	}
	if !strings.Contains(errOut.String(), "through the cluster at") {
		t.Errorf("the worker's log does not say it ran through the cluster's API:\n%s", errOut.String())
	}
}

// TestKubeconfigInCluster: --kubeconfig in-cluster outside a pod is a
// one-line error naming it, and cannot go with --context.
func TestKubeconfigInCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	o := &kubeconfigOptions{path: inClusterKubeconfig}
	if _, err := o.restConfig(); err == nil || !strings.HasPrefix(err.Error(), "--kubeconfig in-cluster: ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("--kubeconfig in-cluster outside a pod: %v; want one line naming it", err)
	}
	var errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&errOut)
	root.SetErr(&errOut)
	code := cli.Run(root, []string{"worker", "--index", "0", "--shards", "1", "--barrier-etcd-key", "/b", "--endpoints", "http://127.0.0.1:2379",
		"--kubeconfig", inClusterKubeconfig, "--context", "x"}, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "--kubeconfig in-cluster and --context cannot be used together") {
		t.Errorf("worker --kubeconfig in-cluster --context x: exit %d, %q", code, errOut.String())
	}
}

// impersonatingKubeconfig writes a kubeconfig, in a temporary directory of
// t, that reaches rc's kube-apiserver with rc's token impersonating user
// (a ServiceAccount's "system:serviceaccount:NS:NAME"), as that user's
// pod would, and returns its path.
func impersonatingKubeconfig(t *testing.T, rc *rest.Config, user string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "impersonating.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthority: rc.CAFile}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken, Impersonate: user}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "user"}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
