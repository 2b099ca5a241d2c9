package command

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/experiment"
)

// TestGatherFlags: gather needs the workers' Job and takes no argument.
func TestGatherFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "--job: give the workers' Job"},
		{[]string{"--job", "load1", "--wait", "-1s"}, "--wait -1s: want 0 or more"},
		{[]string{"--job", "load1", "extra"}, `unknown command "extra"`},
	} {
		root := NewRootCommand()
		var errOut bytes.Buffer
		root.SetOut(&errOut)
		root.SetErr(&errOut)
		code := cli.Run(root, append([]string{"gather"}, tt.args...), &errOut)
		if code != 2 && code != 1 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("gather %v: exit %d, %q; want a usage error with %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// TestGatherThroughKubeletAPI runs two real workers and lwbench scrape
// (workerLogs), then serves their logs as the logs of the pods of an
// Indexed Job on a real kube-apiserver: KWOK's kubelet API serves each
// pod's containerLogs from a file (a Logs object of its configuration,
// the log in the CRI format a kubelet keeps), on loopback, at the port the
// pods' Node reports as its kubeletEndpoint, and kube-apiserver's pods/log
// reaches it there as it reaches a kubelet. The Job is created suspended
// (no kube-controller-manager runs: the test makes the Job's pods itself,
// with the Job's labels and completion-index annotation, bound to the
// Node, and sets their phase). gather's merged result must be byte for
// byte lwbench merge's of the same logs; then a missing index, a failed
// pod and a running one each give their one-line error, exit 1, --wait
// returns at once on a failed pod, a cancelled context ends it, and it
// gathers once a running pod succeeds.
func TestGatherThroughKubeletAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, kube-apiserver, kwok and two worker processes; skipped under -short")
	}
	logs, scrapeLog := workerLogs(t)
	expLogs := experimentWorkerLogs(t)
	bins := apiservertest.ControlPlaneBinaries(t)
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cluster, err := apiserverproc.Start(ctx, apiserverproc.Config{BinDir: bins.KubeAPIServer, Dir: filepath.Join(dir, "apiserver"), EtcdServers: srv.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	cs, err := kubernetes.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeAdminKubeconfig(t, cluster.RESTConfig(), filepath.Join(dir, "admin.kubeconfig"))

	const ns, job, scrapeJob, expJob = "lwbench-load", "load1", "load1-scrape", "exp1"
	podName := func(j string, i int) string { return fmt.Sprintf("%s-%d-x%d", j, i, i) }
	// The kubelet's log files (CRI format) and KWOK's Logs naming them.
	var logsConf strings.Builder
	records := 0 // the most records of one line
	addLog := func(pod, container, src string) {
		dst := filepath.Join(dir, pod+".log")
		records = max(records, criLog(t, src, dst))
		fmt.Fprintf(&logsConf, "---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: Logs\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  logs:\n  - containers: [%s]\n    logsFile: %s\n",
			pod, ns, container, dst)
	}
	for i, l := range logs {
		addLog(podName(job, i), "worker", l)
	}
	addLog(podName(scrapeJob, 0), "scrape", scrapeLog)
	for i, l := range expLogs {
		addLog(podName(expJob, i), "worker", l)
	}
	// A worker's pod whose log holds no result line.
	addLog(job+"-0-noresult", "worker", scrapeLog)
	if records < 2 {
		t.Errorf("no result line took more than one CRI record: the partial records are not tested")
	}
	t.Logf("the longest log line took %d CRI records", records)
	port := startKWOK(t, ctx, bins.KWOK, kubeconfig, logsConf.String(), filepath.Join(dir, "kwok"))

	// A node whose kubelet is KWOK's server: kube-apiserver reaches a
	// pod's log at the node's preferred address and kubeletEndpoint
	// (k8s.io/kubernetes pkg/kubelet/client/kubelet_client.go
	// GetConnectionInfo), over TLS without verifying it (no
	// --kubelet-certificate-authority).
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gather-node"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The manifest's Jobs, suspended: nothing would run their pods.
	var jobs []*batchv1.Job
	for _, obj := range manifestObjects(t, "--shards", "2", "--name", job, "--namespace", ns, "--", "--endpoints", "http://etcd:2379") {
		if j, ok := obj.(*batchv1.Job); ok {
			j.Spec.Suspend = ptr.To(true)
			got, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create job %s: %v", j.Name, err)
			}
			jobs = append(jobs, got)
		}
	}
	if len(jobs) != 2 || jobs[0].Name != job || jobs[1].Name != scrapeJob {
		t.Fatalf("the manifest's Jobs: %d, want %s and %s", len(jobs), job, scrapeJob)
	}
	// makePod creates pod index i of j as the Job controller would (the
	// template's labels, which hold the Job's selector, and the
	// completion index), bound to the node, in phase.
	makePod := func(j *batchv1.Job, name string, i int, phase corev1.PodPhase) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: j.Spec.Template.Labels, Annotations: map[string]string{}},
			Spec:       *j.Spec.Template.Spec.DeepCopy(),
		}
		if j.Spec.CompletionMode != nil {
			p.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(i)
		}
		p.Spec.NodeName = node.Name
		got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		got.Status.Phase = phase
		if phase == corev1.PodFailed {
			got.Status.Reason = "Error"
			got.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
		}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pod %s phase %s: %v", name, phase, err)
		}
	}
	for i := range logs {
		makePod(jobs[0], podName(job, i), i, corev1.PodSucceeded)
	}
	makePod(jobs[1], podName(scrapeJob, 0), 0, corev1.PodSucceeded)

	gather := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		root := NewRootCommand()
		root.SetOut(&out)
		root.SetErr(&errOut)
		code := cli.Run(root, append([]string{"gather", "--kubeconfig", kubeconfig, "--namespace", ns}, args...), &errOut)
		return out.String(), errOut.String(), code
	}
	got, errOut, code := gather("--job", job, "--scrape-job", scrapeJob, "-w", "json")
	if code != 0 {
		t.Fatalf("lwbench gather: exit %d: %s", code, errOut)
	}
	var mergeOut, mergeErr bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&mergeOut)
	root.SetErr(&mergeErr)
	if code := cli.Run(root, append([]string{"merge", "-w", "json", "--etcd-metrics", scrapeLog}, logs...), &mergeErr); code != 0 {
		t.Fatalf("lwbench merge: exit %d: %s", code, mergeErr.String())
	}
	if got != mergeOut.String() {
		t.Errorf("gather's result differs from merge's of the same logs:\ngather: %.2000s\nmerge:  %.2000s", got, mergeOut.String())
	}
	// Table output too (the workers table).
	if out, errOut, code := gather("--job", job); code != 0 || !strings.Contains(out, "generator limited") {
		t.Errorf("gather -w table: exit %d, %s\n%s", code, errOut, out)
	}

	// An experiment's Job (manifest --experiment): merged as its
	// --workers merges, the same as merge's of the same logs.
	for _, obj := range manifestObjects(t, "--experiment", "catchup", "--shards", "2", "--name", expJob, "--namespace", ns, "--",
		"--endpoints", "http://etcd:2379", "--allow-maintenance") {
		if j, ok := obj.(*batchv1.Job); ok {
			j.Spec.Suspend = ptr.To(true)
			got, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create job %s: %v", j.Name, err)
			}
			for i := range expLogs {
				makePod(got, podName(expJob, i), i, corev1.PodSucceeded)
			}
		}
	}
	expOut, errOut, code := gather("--job", expJob, "-w", "json")
	if code != 0 {
		t.Fatalf("lwbench gather --job %s: exit %d: %s", expJob, code, errOut)
	}
	var expMerged, expMergeErr bytes.Buffer
	root = NewRootCommand()
	root.SetOut(&expMerged)
	if code := cli.Run(root, append([]string{"merge", "-w", "json"}, expLogs...), &expMergeErr); code != 0 {
		t.Fatalf("lwbench merge of the experiment's logs: exit %d: %s", code, expMergeErr.String())
	}
	if expOut != expMerged.String() {
		t.Errorf("gather's experiment result differs from merge's of the same logs:\ngather: %.2000s\nmerge:  %.2000s", expOut, expMerged.String())
	}
	expRes, err := experiment.Decode([]byte(expOut))
	if err != nil {
		t.Fatalf("gather's experiment result: %v", err)
	}
	checkCatchupWorkers(t, expRes, 2, 30, []int64{100})
	if _, errOut, code := gather("--job", expJob, "--scrape-job", scrapeJob); code != cli.ExitUsage || !strings.Contains(errOut, "--scrape-job") {
		t.Errorf("gather an experiment's Job with --scrape-job: exit %d, %s; want a usage error naming it", code, errOut)
	}

	// A log over the bound, and one without a result line.
	o := &gatherOptions{kubeconfig: kubeconfig, namespace: ns, job: job, maxLogBytes: 1000}
	o.out.format = "json"
	if err := runGather(ctx, o, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "pod "+ns+"/"+podName(job, 0)+": the last 10000 lines of its log are more than 1000 bytes") {
		t.Errorf("gather with logs over a 1000-byte bound: %v", err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, podName(job, 0), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	makePod(jobs[0], job+"-0-noresult", 0, corev1.PodSucceeded)
	wantErr := func(want string, args ...string) {
		t.Helper()
		out, errOut, code := gather(args...)
		if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, want) || out != "" {
			t.Errorf("gather %v: exit %d, stderr %q, stdout %d bytes; want exit 1 and one line with %q", args, code, errOut, len(out), want)
		}
	}
	wantErr("job "+ns+"/"+job+" pod "+job+"-0-noresult (index 0): not a JSON result, nor a log with a \"lwbench-result\" line", "--job", job)

	// Index 1 gone: named.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, podName(job, 1), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	wantErr("job "+ns+"/"+job+" (--wait DURATION waits for them): index 1: no pod", "--job", job)
	// Index 1 failed.
	makePod(jobs[0], job+"-1-failed", 1, corev1.PodFailed)
	// (--wait does not wait: the load failed.)
	began := time.Now()
	wantErr("job "+ns+"/"+job+": index 1: pod "+job+"-1-failed failed (Error: container worker exit code 1 Error)", "--job", job, "--wait", "1h")
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("gather --wait 1h with a failed pod took %v: want the failure at once", d)
	}
	// Index 1 failed, retried and running: a wait that the context ends.
	makePod(jobs[0], job+"-1-running", 1, corev1.PodRunning)
	wantErr("index 1: pod "+job+"-1-running is Running", "--job", job)
	o = &gatherOptions{kubeconfig: kubeconfig, namespace: ns, job: job, wait: time.Hour}
	o.out.format = "json"
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	defer ccancel()
	began = time.Now()
	err = runGather(cctx, o, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "is Running") || time.Since(began) > 10*time.Second {
		t.Errorf("gather --wait 1h, context ended after 3s: %v after %v; want the context's error naming the running pod, at once", err, time.Since(began))
	}
	// --wait waits for a running pod that then succeeds.
	for _, p := range []string{job + "-0-noresult", job + "-1-failed", job + "-1-running"} {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	makePod(jobs[0], podName(job, 0), 0, corev1.PodSucceeded)
	makePod(jobs[0], podName(job, 1), 1, corev1.PodRunning)
	type gathered struct {
		out, errOut string
		code        int
	}
	done := make(chan gathered, 1)
	go func() {
		out, errOut, code := gather("--job", job, "--scrape-job", scrapeJob, "-w", "json", "--wait", "1m")
		done <- gathered{out, errOut, code}
	}()
	select {
	case g := <-done:
		t.Fatalf("gather --wait 1m ended with index 1 running: exit %d, %s", g.code, g.errOut)
	case <-time.After(3 * time.Second):
	}
	p1, err := cs.CoreV1().Pods(ns).Get(ctx, podName(job, 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1.Status.Phase = corev1.PodSucceeded
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-done:
		if g.code != 0 || g.out != mergeOut.String() {
			t.Errorf("gather --wait after index 1 succeeded: exit %d, %s; same result as merge's: %v", g.code, g.errOut, g.out == mergeOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gather --wait 1m did not end 30 s after the last pod succeeded")
	}

	// A Job that is not Indexed is not the workers'.
	wantErr("job "+ns+"/"+scrapeJob+" is not an Indexed Job", "--job", scrapeJob)
	wantErr("job "+ns+"/nosuch not found", "--job", "nosuch")
}

// writeAdminKubeconfig writes a kubeconfig of rc (server, CA, bearer
// token) to path and returns path.
func writeAdminKubeconfig(t *testing.T, rc *rest.Config, path string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData, CertificateAuthority: rc.CAFile}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken, ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// criMaxRecordBytes is the longest record of criLog's files: a longer line
// is kept as partial records, as containerd keeps a line longer than its
// max_container_log_line_size (16 KiB by default); 1 KiB here so that the
// small result lines of this test's workers are split too.
const criMaxRecordBytes = 1 << 10

// criLog writes the lines of the log at src to dst as a node keeps a
// container's log (the CRI format: time, stream, tag, content; a line
// longer than criMaxRecordBytes as partial records, tag P, then the rest,
// tag F), which KWOK's containerLogs reads and joins again
// (k8s.io/cri-client pkg/logs). It returns the most records one line
// took.
func criLog(t *testing.T, src, dst string) int {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var b bytes.Buffer
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, maxResultLineBytes)
	now := time.Now().UTC()
	most := 0
	for sc.Scan() {
		line := sc.Bytes()
		most = max(most, (len(line)+criMaxRecordBytes-1)/criMaxRecordBytes)
		for len(line) > criMaxRecordBytes {
			fmt.Fprintf(&b, "%s stdout P %s\n", now.Format(time.RFC3339Nano), line[:criMaxRecordBytes])
			line = line[criMaxRecordBytes:]
		}
		fmt.Fprintf(&b, "%s stdout F %s\n", now.Format(time.RFC3339Nano), line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return most
}

// startKWOK starts kwok from binDir (its default stages, which it needs to
// start, managing no node: none has its annotation) with logsConf (its
// Logs) and its kubelet server on a free loopback port, which it returns
// once /healthz answers there. The process is stopped by the test's
// cleanup.
func startKWOK(t *testing.T, ctx context.Context, binDir, kubeconfig, logsConf, dir string) int {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "logs.yaml")
	if err := os.WriteFile(conf, []byte(logsConf), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{"--kubeconfig=" + kubeconfig, "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(port), "--config=" + conf}
	for _, f := range apiserverproc.KWOKStageFiles {
		args = append(args, "--config="+filepath.Join(binDir, f))
	}
	p, err := apiserverproc.StartProcess("kwok", filepath.Join(binDir, "kwok"), args, []string{"PATH=/usr/bin:/bin", "HOME=" + dir}, dir,
		filepath.Join(dir, "kwok.log"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return port
			}
		}
		select {
		case <-p.Done():
			t.Fatalf("kwok exited: %s: %s", p.ExitStatus(), p.LogTail(10))
		case <-ctx.Done():
			t.Fatalf("kwok /healthz at %s: %v: %s", url, ctx.Err(), p.LogTail(10))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
