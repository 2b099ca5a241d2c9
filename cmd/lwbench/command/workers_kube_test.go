package command

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/report"
)

// TestWorkerKubeconfigFlags: a worker drives a cluster's API with
// --kubeconfig, its namespaces named from the barrier alike in every
// worker; a worker's own kube-apiservers and a cluster's load are
// refused; the coordinator of --kube-apiserver keeps its apiservers' flags
// and hands its workers a kubeconfig.
func TestWorkerKubeconfigFlags(t *testing.T) {
	for _, k := range []string{envCompletionIndex, envShards} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	common := []string{"--shards", "3", "--endpoints", "http://127.0.0.1:2379", "--kubeconfig", "/nonexistent/kubeconfig"}
	parse := func(args ...string) (*workerOptions, int, string) {
		t.Helper()
		var got *workerOptions
		root := &cobra.Command{Use: "lwbench"}
		cli.PrepareRoot(root)
		root.AddCommand(newWorkerCommand(func(_ *cobra.Command, o *workerOptions) error { got = o; return nil }))
		var errOut bytes.Buffer
		code := cli.Run(root, append([]string{"worker"}, args...), &errOut)
		return got, code, errOut.String()
	}
	ids := map[string]bool{}
	for i := range 3 {
		o, code, stderr := parse(append(slices.Clone(common), "--index", string(rune('0'+i)), "--barrier-etcd-key", "/lwbench-barrier/a")...)
		if code != 0 {
			t.Fatalf("worker %d with --kubeconfig: exit %d: %s", i, code, stderr)
		}
		if !o.kubeconfig.enabled() || o.runID == "" || o.apiserversOwned {
			t.Errorf("worker %d: kubeconfig %q, run ID %q, apiservers owned %v: want the cluster's API, an ID, a cluster not the coordinator's", i, o.kubeconfig.path, o.runID, o.apiserversOwned)
		}
		ids[o.runID] = true
	}
	if len(ids) != 1 {
		t.Errorf("run IDs %v: want one for every worker of a barrier", ids)
	}
	o, code, stderr := parse(append(slices.Clone(common), "--barrier-etcd-key", "/lwbench-barrier/b")...)
	if code != 0 || ids[o.runID] {
		t.Errorf("another barrier: exit %d (%s), run IDs %v: want another ID", code, stderr, ids)
	}
	if o, code, stderr := parse(append(slices.Clone(common), "--barrier-etcd-key", "/lwbench-barrier/a", "--apiservers-owned", "--target-owned")...); code != 0 || !o.apiserversOwned {
		t.Errorf("--apiservers-owned: exit %d: %s", code, stderr)
	}
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"own kube-apiserver", []string{"--shards", "2", "--endpoints", "http://127.0.0.1:2379", "--barrier-etcd-key", "/b", "--kube-apiserver", "1.37"}, "share one cluster's"},
		{"nodes", append(slices.Clone(common), "--barrier-etcd-key", "/b", "--nodes", "10"), "--nodes"},
		{"apiservers owned without kubeconfig", []string{"--shards", "2", "--endpoints", "http://127.0.0.1:2379", "--barrier-etcd-key", "/b", "--apiservers-owned"}, "--apiservers-owned needs --kubeconfig"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, code, stderr := parse(tt.args...); code != cli.ExitUsage || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d mentioning %q", code, stderr, cli.ExitUsage, tt.wantErr)
			}
		})
	}

	// The coordinator: its kube-apiserver flags are its own, the workers
	// get the kubeconfig and the compaction interval.
	var ro *runOptions
	root := &cobra.Command{Use: "lwbench"}
	cli.PrepareRoot(root)
	root.AddCommand(newRunCommand(func(_ *cobra.Command, o *runOptions) error { ro = o; return nil }))
	var errOut bytes.Buffer
	if code := cli.Run(root, []string{"run", "--workers", "3", "--kube-apiserver", "1.37", "--watch-cache", "--apiservers", "2", "--watchers", "6", "--namespaces", "6"}, &errOut); code != 0 {
		t.Fatalf("run --workers 3 --kube-apiserver: exit %d: %s", code, errOut.String())
	}
	args := strings.Join(workerArgs(ro.flags, 1, 3, "/k", []string{"http://127.0.0.1:1"}, true, "/registry", &workerAPI{kubeconfig: "/tmp/kc", interval: 7e9}), " ")
	for _, want := range []string{"--kubeconfig /tmp/kc --apiservers-owned", "--compaction-interval 7s", "--watchers=6", "--target-owned"} {
		if !strings.Contains(args, want) {
			t.Errorf("worker args %q: want %q", args, want)
		}
	}
	for _, not := range []string{"--kube-apiserver", "--watch-cache", "--apiservers="} {
		if strings.Contains(args, not) {
			t.Errorf("worker args %q: want no %s (the coordinator's)", args, not)
		}
	}
	errOut.Reset()
	if code := cli.Run(root, []string{"run", "--workers", "2", "--nodes", "10", "--kube-apiserver", "1.37", "--events-etcd"}, &errOut); code != cli.ExitUsage || !strings.Contains(errOut.String(), "--events-etcd") {
		t.Errorf("run --workers --nodes --events-etcd: exit %d, stderr %q; want a usage error naming --events-etcd", code, errOut.String())
	}
}

// TestRunWorkersThroughKubeAPIServer runs `lwbench run --workers 3
// --kube-apiserver`: the coordinator starts kube-apiserver in front of its
// embedded member and three worker processes (this test binary as
// lwbench), each a client-go process through it (--kubeconfig), divide the
// load; the merged result accounts for every shard's writes and events,
// nothing lost, with counts that are the sums of the workers', informers
// 0 to 5 each once, and the apiserver the coordinator started.
func TestRunWorkersThroughKubeAPIServer(t *testing.T) {
	apiservertest.Binaries(t)
	t.Setenv(subprocessEnv, "1") // the workers: this binary as lwbench
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, []string{"run", "--workers", "3", "--kube-apiserver", "1.37", "--unsafe-no-fsync", "--objects", "300", "--namespaces", "6",
		"--watchers", "6", "--write-rate", "100", "--duration", "3s", "--compaction-interval", "1s", "-w", "json"}, &errOut)
	if code != 0 {
		t.Fatalf("lwbench run --workers 3 --kube-apiserver: exit %d:\n%s", code, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v\n%s", err, out.String())
	}
	checkMergedWorkers(t, &res, 3, 300, 6)
	if res.APIServer == nil || !res.APIServer.Managed || res.APIServer.Version != "v1.37.2" || res.APIServer.ClientConnections == 0 {
		t.Errorf("apiserver %+v: want the one the coordinator started, v1.37.2, with the workers' connections", res.APIServer)
	}
	steady := false
	for _, e := range res.Etcd {
		steady = steady || (e.Phase == "steady" && e.Requests > 0)
	}
	if !steady {
		t.Errorf("no request of kube-apiserver to etcd counted in phase steady: %+v", res.Etcd)
	}
	// kube-apiserver's own /metrics per phase, read by the coordinator
	// at each barrier point: the 300 pods seeded are its POSTs of pods,
	// every write of the workers one of its POSTs, PUTs, PATCHes (events)
	// or DELETEs, and its CPU and memory per phase. It counts a request
	// once its handler has returned, the client maybe answered already
	// (k8s.io/apiserver/pkg/endpoints/metrics MonitorRequest, deferred):
	// a phase's last requests may count in the next one (seed's in sync,
	// steady's in drain, which do not write); and the coordinator sees
	// the point begin after the workers go on seeding, so the seeding's
	// first requests may count in start.
	if len(res.APIServers) != 1 || len(res.APIServerMetrics) == 0 {
		t.Fatalf("apiservers %+v, %d series of their /metrics: want the one the coordinator started, its /metrics per phase", res.APIServers, len(res.APIServerMetrics))
	}
	requests := map[string]float64{} // phase, verb, resource, code
	for _, m := range res.APIServerMetrics {
		if m.Name == "apiserver_request_total" {
			requests[m.Phase+" "+m.Labels["verb"]+" "+m.Labels["resource"]+" "+m.Labels["code"]] += m.Value
		}
	}
	if got := requests["start POST pods 201"] + requests["seed POST pods 201"] + requests["sync POST pods 201"]; got != 300 {
		t.Errorf("kube-apiserver counted %v pod creates in seed, want the 300 seeded; by phase: %v", got, requests)
	}
	var writes float64
	for k, v := range requests {
		f := strings.Fields(k)
		if (f[0] == "steady" || f[0] == "drain") && slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE"}, f[1]) && strings.HasPrefix(f[3], "2") {
			writes += v
		}
	}
	if writes < float64(res.Writes.Completed) {
		t.Errorf("kube-apiserver counted %v successful writes in steady and drain, fewer than the workers' %d; by phase, verb, resource and code: %v", writes, res.Writes.Completed, requests)
	}
	phases := map[string]report.APIServerPhaseUsage{}
	for _, p := range res.APIServers[0].Phases {
		phases[p.Phase] = p
	}
	if s := phases["steady"]; s.CPUSeconds <= 0 || s.DurationMs <= 0 || s.PeakResidentMemoryBytes <= 0 {
		t.Errorf("apiserver's steady phase %+v: want CPU used over a duration and a resident set", s)
	}
	if m := res.EtcdMetrics; m == nil || handledRPCs(m, "Txn")["start"]+handledRPCs(m, "Txn")["seed"] < 300 {
		t.Errorf("etcd's metrics %+v: want the seeding's Txns (300 pods and more) handled in start and seed", m)
	}
	said := map[string]bool{}
	for _, line := range strings.Split(errOut.String(), "\n") {
		if w, rest, ok := strings.Cut(line, ": "); ok && strings.Contains(rest, "running through the kube-apiservers the coordinator started") {
			said[w[strings.LastIndex(w, " ")+1:]] = true
		}
	}
	for i := range 3 {
		if !said[string(rune('0'+i))] {
			t.Errorf("worker %d did not say it runs through the coordinator's kube-apiserver", i)
		}
	}
}

// checkMergedWorkers checks a divided load's merged result: n workers,
// each with its share of the writes, all completed, and events, among
// them its own timed; writes planned, completed and events the sums of
// the workers'; one write latency sample per write; informers 0 to
// watchers-1 each once; nothing lost.
func checkMergedWorkers(t *testing.T, res *report.RunResult, n int, wantPlanned int64, watchers int) {
	t.Helper()
	if !res.Validation.OK() || res.Validation.Lost != 0 || res.Validation.UnsyncedWatchers != 0 {
		t.Errorf("merged validation %+v, verdict %q: want nothing lost", res.Validation, res.Verdict)
	}
	if len(res.Workers) != n {
		t.Fatalf("%d workers in the result, want %d", len(res.Workers), n)
	}
	var planned, completed, events int64
	for i, w := range res.Workers {
		if w.Shard.Index != i || w.Shard.Count != n {
			t.Errorf("worker %d is shard %v", i, w.Shard)
		}
		if w.Writes.Planned == 0 || w.Writes.Completed != w.Writes.Planned || w.Events == 0 || w.TimedEvents == 0 {
			t.Errorf("worker %d: writes %+v, %d events (%d timed): want its share of the writes, all completed, and events of them", i, w.Writes, w.Events, w.TimedEvents)
		}
		planned += w.Writes.Planned
		completed += w.Writes.Completed
		events += w.Events
	}
	if planned != wantPlanned || res.Writes.Planned != wantPlanned || res.Writes.Completed != completed {
		t.Errorf("planned %d by the workers, %d merged, %d completed merged (%d by the workers): want %d", planned, res.Writes.Planned,
			res.Writes.Completed, completed, wantPlanned)
	}
	if res.Delivery.Events != events {
		t.Errorf("%d events merged, the workers' sum is %d", res.Delivery.Events, events)
	}
	if res.Writes.Latency.Count != res.Writes.Completed+res.Writes.Errors {
		t.Errorf("merged write latency holds %d samples, want one per write (%d)", res.Writes.Latency.Count, res.Writes.Completed)
	}
	ids := make([]int, 0, len(res.Informers))
	for _, inf := range res.Informers {
		ids = append(ids, inf.ID)
	}
	want := make([]int, watchers)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(ids, want) {
		t.Errorf("informers %v: want 0 to %d, each once", ids, watchers-1)
	}
}

// TestRunWorkersThroughExistingCluster runs `lwbench run --workers 2
// --kubeconfig` on a cluster lwbench does not own: each worker process
// creates, writes and at the end deletes its own namespaces through the
// API, while its informers see both workers' objects; nothing lost, the
// counts the workers' sums, and the cluster left as it was found.
func TestRunWorkersThroughExistingCluster(t *testing.T) {
	e := startExistingCluster(t)
	t.Setenv(subprocessEnv, "1") // the workers: this binary as lwbench
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, []string{"run", "--workers", "2", "--kubeconfig", e.kubeconfig, "--context", "test", "--endpoints", e.srv.Endpoints[0],
		"--objects", "60", "--namespaces", "4", "--watchers", "4", "--write-rate", "40", "--duration", "3s",
		"--compaction-interval", "2s", "--namespace-delete-timeout", "30s", "-w", "json"}, &errOut)
	if code != 0 {
		t.Fatalf("lwbench run --workers 2 --kubeconfig: exit %d:\n%s", code, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v\n%s", err, out.String())
	}
	checkMergedWorkers(t, &res, 2, 120, 4)
	if res.Cleanup == nil || res.Cleanup.Error != "" {
		t.Fatalf("cleanup %+v: want every worker's namespaces deleted", res.Cleanup)
	}
	ns := slices.Sorted(slices.Values(res.Cleanup.Namespaces))
	if len(ns) != 4 || len(slices.Compact(slices.Clone(ns))) != 4 {
		t.Errorf("namespaces deleted %v: want the load's 4, each by the one worker that created it", ns)
	}
	e.checkLeftAlone(t, ns)
}

// TestScrapeKubeconfigMerge runs a load of two `lwbench worker
// --kubeconfig` processes through a real kube-apiserver, as on a cluster,
// with `lwbench scrape --kubeconfig` following their barrier: scrape reads
// the member's and the apiserver's own /metrics per phase, and `lwbench
// merge --etcd-metrics` sets both beside the merged result: the
// apiserver's pod creates in seed are the 60 pods the workers seeded, and
// its successful writes in steady (and drain, where its last ones may
// count) at least the workers' writes.
func TestScrapeKubeconfigMerge(t *testing.T) {
	bin := apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := apiserverproc.Start(ctx, apiserverproc.Config{BinDir: bin, Dir: t.TempDir(), EtcdServers: srv.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	go apiservertest.FinalizeNamespaces(ctx, cs) // the workers' namespaces go at their cleanup
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, c.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	const key = "/lwbench-barrier/scrape-kubeconfig"
	endpoints := strings.Join(srv.Endpoints, ",")
	scrapeOut := filepath.Join(dir, "scrape.json")
	scraped := make(chan string, 1)
	go func() {
		var out, errOut bytes.Buffer
		root := NewRootCommand()
		root.SetOut(&out)
		root.SetErr(&errOut)
		code := cli.Run(root, []string{"scrape", "--shards", "2", "--barrier-etcd-key", key, "--endpoints", endpoints, "--kubeconfig", kubeconfig, "-w", "json"}, &errOut)
		os.WriteFile(scrapeOut, out.Bytes(), 0o644)
		msg := ""
		if code != 0 {
			msg = fmt.Sprintf("exit %d: %s", code, errOut.String())
		}
		scraped <- msg
	}()
	logs := runLoggedProcesses(t, dir, "worker", 2, func(i int) []string {
		return []string{"worker", "--index", strconv.Itoa(i), "--shards", "2", "--barrier-etcd-key", key, "--endpoints", endpoints,
			"--kubeconfig", kubeconfig, "--log-result", "--objects", "60", "--namespaces", "2", "--watchers", "2", "--write-rate", "40", "--duration", "2s"}
	})
	select {
	case msg := <-scraped:
		if msg != "" {
			t.Fatalf("lwbench scrape --kubeconfig: %s", msg)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("lwbench scrape did not end after the workers")
	}
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	if code := cli.Run(root, append([]string{"merge", "-w", "json", "--etcd-metrics", scrapeOut}, logs...), &errOut); code != 0 {
		t.Fatalf("lwbench merge --etcd-metrics: exit %d: %s", code, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Workers) != 2 || res.Writes.Completed == 0 || !res.Validation.OK() {
		t.Fatalf("merged %d workers, %d writes, validation %s", len(res.Workers), res.Writes.Completed, res.Validation.Summary())
	}
	if res.EtcdMetrics == nil || len(res.EtcdMetrics.Phases) == 0 || len(res.APIServers) != 1 || len(res.APIServerMetrics) == 0 {
		t.Fatalf("etcd metrics %+v, apiservers %+v, %d apiserver series: want scrape's figures of both", res.EtcdMetrics, res.APIServers, len(res.APIServerMetrics))
	}
	requests := map[string]float64{} // phase, verb, resource, code
	for _, m := range res.APIServerMetrics {
		if m.Name == "apiserver_request_total" {
			requests[m.Phase+" "+m.Labels["verb"]+" "+m.Labels["resource"]+" "+m.Labels["code"]] += m.Value
		}
	}
	if got := requests["start POST pods 201"] + requests["seed POST pods 201"] + requests["sync POST pods 201"]; got != 60 {
		t.Errorf("kube-apiserver counted %v pod creates in seed, want the 60 seeded; by phase, verb, resource and code: %v", got, requests)
	}
	var writes float64
	for k, v := range requests {
		f := strings.Fields(k)
		if (f[0] == "steady" || f[0] == "drain") && slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE"}, f[1]) && strings.HasPrefix(f[3], "2") {
			writes += v
		}
	}
	if writes < float64(res.Writes.Completed) {
		t.Errorf("kube-apiserver counted %v successful writes in steady and drain, fewer than the workers' %d; by phase, verb, resource and code: %v",
			writes, res.Writes.Completed, requests)
	}
	// The table merge prints shows both.
	out.Reset()
	root = NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	if code := cli.Run(root, append([]string{"merge", "--etcd-metrics", scrapeOut}, logs...), &errOut); code != 0 {
		t.Fatalf("lwbench merge --etcd-metrics -w table: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"| etcd phase (/metrics) ", "| etcd phase (RPCs handled) ", "| apiserver phase "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("merge's table has no %q:\n%s", want, out.String())
		}
	}
}
