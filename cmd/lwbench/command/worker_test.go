package command

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// TestWorkerFlags: the shard from the flags or an Indexed Job's
// environment, a barrier, --endpoints, and what a worker cannot do.
func TestWorkerFlags(t *testing.T) {
	ep := []string{"--endpoints", "http://127.0.0.1:2379"}
	key := []string{"--barrier-etcd-key", "/lwbench-barrier/t"}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		want    shard.Shard
	}{
		{name: "flags", args: slices.Concat([]string{"--index", "1", "--shards", "3"}, ep, key), want: shard.Shard{Index: 1, Count: 3}},
		{name: "indexed job", args: slices.Concat(ep, key), env: map[string]string{envCompletionIndex: "2", envShards: "4"}, want: shard.Shard{Index: 2, Count: 4}},
		{name: "flag over env", args: slices.Concat([]string{"--index", "0"}, ep, key), env: map[string]string{envCompletionIndex: "2", envShards: "4"}, want: shard.Shard{Index: 0, Count: 4}},
		{name: "no shards", args: slices.Concat(ep, key), wantErr: "--shards: give the number of shards"},
		{name: "index out of range", args: slices.Concat([]string{"--index", "3", "--shards", "3"}, ep, key), wantErr: "shard index 3"},
		{name: "bad env", args: slices.Concat(ep, key), env: map[string]string{envCompletionIndex: "x", envShards: "2"}, wantErr: "$JOB_COMPLETION_INDEX is \"x\""},
		{name: "no barrier", args: slices.Concat([]string{"--shards", "2"}, ep), wantErr: "needs a barrier"},
		{name: "two barriers", args: slices.Concat([]string{"--shards", "2", "--barrier-configmap", "ns/b"}, ep, key), wantErr: "cannot be used together"},
		{name: "bad configmap", args: slices.Concat([]string{"--shards", "2", "--barrier-configmap", "b"}, ep), wantErr: "want NAMESPACE/NAME"},
		{name: "no endpoints", args: slices.Concat([]string{"--shards", "2"}, key), wantErr: "needs --endpoints"},
		{name: "kube", args: slices.Concat([]string{"--shards", "2", "--kube-apiserver", "1.37"}, ep, key), wantErr: "not divided into shards yet"},
		{name: "too few namespaces", args: slices.Concat([]string{"--shards", "4", "--namespaces", "3"}, ep, key), wantErr: "--namespaces"},
		{name: "cluster model", args: slices.Concat([]string{"--index", "1", "--shards", "2", "--nodes", "2", "--cluster-model"}, ep, key), want: shard.Shard{Index: 1, Count: 2}},
		{name: "real control plane's cluster", args: slices.Concat([]string{"--shards", "2", "--nodes", "10"}, ep, key), wantErr: "is divided only among the workers of lwbench run --workers N --nodes K"},
		{name: "more shards than nodes", args: slices.Concat([]string{"--shards", "3", "--nodes", "2", "--cluster-model"}, ep, key), wantErr: "--shards 3 with --nodes 2: each worker drives a block of the nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{envCompletionIndex, envShards} {
				v, ok := tt.env[k]
				if !ok {
					t.Setenv(k, "")
					os.Unsetenv(k)
					continue
				}
				t.Setenv(k, v)
			}
			var got *workerOptions
			root := &cobra.Command{Use: "lwbench"}
			cli.PrepareRoot(root)
			root.AddCommand(newWorkerCommand(func(_ *cobra.Command, o *workerOptions) error { got = o; return nil }))
			var errOut bytes.Buffer
			code := cli.Run(root, append([]string{"worker"}, tt.args...), &errOut)
			if tt.wantErr != "" {
				if code != cli.ExitUsage || !strings.Contains(errOut.String(), tt.wantErr) {
					t.Fatalf("exit %d, stderr %q; want %d mentioning %q", code, errOut.String(), cli.ExitUsage, tt.wantErr)
				}
				return
			}
			if code != 0 || got == nil {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			if got.load.Shard != tt.want {
				t.Errorf("shard %v, want %v", got.load.Shard, tt.want)
			}
			if got.out.format != "json" {
				t.Errorf("output %q, want json by default", got.out.format)
			}
			// --endpoints is a cluster lwbench does not own: the run
			// cleans up after itself and leaves maintenance alone.
			if !got.load.Cleanup || got.load.CompactionInterval >= 0 {
				t.Errorf("cleanup %v, compaction interval %v: want an external target's rules", got.load.Cleanup, got.load.CompactionInterval)
			}
		})
	}
}

// TestRunWorkers runs `lwbench run --workers 3` against its embedded
// member: three worker processes (this test binary as lwbench) divide the
// load, and the merged result accounts for every shard's writes and
// events, nothing lost, with counts that are the sums of the workers'.
func TestRunWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd and three worker processes; skipped under -short")
	}
	t.Setenv(subprocessEnv, "1") // the workers: this binary as lwbench
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, []string{"run", "--workers", "3", "--unsafe-no-fsync", "--objects", "300", "--namespaces", "6", "--watchers", "6",
		"--write-rate", "150", "--duration", "3s", "--compaction-interval", "1s", "-w", "json"}, &errOut)
	if code != 0 {
		t.Fatalf("lwbench run --workers 3: exit %d:\n%s", code, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v\n%s", err, out.String())
	}
	if !res.Validation.OK() || res.Validation.Lost != 0 || !strings.HasPrefix(res.Verdict, "PASS") {
		t.Fatalf("merged validation %+v, verdict %q", res.Validation, res.Verdict)
	}
	if len(res.Workers) != 3 {
		t.Fatalf("%d workers in the result, want 3", len(res.Workers))
	}
	var planned, completed, events int64
	for i, w := range res.Workers {
		if w.Shard.Index != i || w.Shard.Count != 3 {
			t.Errorf("worker %d is shard %v", i, w.Shard)
		}
		if w.Writes.Planned == 0 || w.Writes.Completed != w.Writes.Planned || w.Events == 0 {
			t.Errorf("worker %d: writes %+v, %d events: want its share of the writes, all completed, and events", i, w.Writes, w.Events)
		}
		planned += w.Writes.Planned
		completed += w.Writes.Completed
		events += w.Events
	}
	if want := int64(150 * 3); planned != want || res.Writes.Planned != want || res.Writes.Completed != completed {
		t.Errorf("planned %d by the workers, %d merged, %d completed merged (%d by the workers): want %d", planned, res.Writes.Planned,
			res.Writes.Completed, completed, want)
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
	if !slices.Equal(ids, []int{0, 1, 2, 3, 4, 5}) {
		t.Errorf("informers %v: want 0 to 5, each once", ids)
	}
	if len(res.Compactions) == 0 {
		t.Error("no compaction: shard 0 compacts")
	}
	// etcd's own counters per phase, the phases followed on the barrier:
	// the seeding's puts in seed (300 pods, 60 configmaps, 150 events),
	// the writes' in steady.
	if res.EtcdMetrics == nil {
		t.Fatal("no etcd metrics beside the merged figures")
	}
	puts := map[string]int64{}
	for _, p := range res.EtcdMetrics.Phases {
		puts[p.Phase] = p.Puts
	}
	if seeded := puts["start"] + puts["seed"]; seeded < 510 || seeded > 530 || puts["steady"] < res.Writes.Creates+res.Writes.Updates {
		t.Errorf("etcd's puts by phase %v: want the 510 seeded in start and seed (the coordinator sees begin after the workers go on seeding) and the %d creates and updates in steady", puts, res.Writes.Creates+res.Writes.Updates)
	}
	// The RPCs etcd handled: the seeding's 510 creates, each a Txn, in
	// seed (or start: the coordinator sees a point every worker reached
	// after the workers go on, and seeding follows begin at once; the
	// writes start at a time the barrier agrees on later), and at least
	// the workers' completed writes in steady.
	if txns := handledRPCs(res.EtcdMetrics, "Txn"); txns["start"]+txns["seed"] < 510 || txns["steady"] < res.Writes.Completed {
		t.Errorf("Txns etcd handled by phase %v: want 510 or more in start and seed, the workers' %d writes or more in steady", txns, res.Writes.Completed)
	}
	for i := range 3 {
		if !strings.Contains(errOut.String(), "worker "+string(rune('0'+i))+": ") {
			t.Errorf("no log line of worker %d on stderr", i)
		}
	}
}

// handledRPCs sums m's RPCs of method (every code) by phase.
func handledRPCs(m *report.EtcdMetrics, method string) map[string]int64 {
	n := map[string]int64{}
	for _, p := range m.Phases {
		for _, r := range p.HandledRPCs {
			if r.Method == method {
				n[p.Phase] += r.Count
			}
		}
	}
	return n
}

// TestRunWorkersCluster runs `lwbench run --workers 2 --cluster-size 3`:
// the coordinator reads each of the three etcd processes' own /metrics per
// phase. Every member applies the seeding's creates; the result's
// phases are the members' sums (puts three times the cluster's, ranges
// and RPCs as each member served them), and its p99s come from the
// members' buckets summed, so they lie between the members' own.
func TestRunWorkersCluster(t *testing.T) {
	etcdtest.EtcdBinaries(t, "3.7.3")
	t.Setenv(subprocessEnv, "1") // the workers: this binary as lwbench
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, []string{"run", "--workers", "2", "--cluster-size", "3", "--unsafe-no-fsync", "--objects", "200", "--namespaces", "4",
		"--watchers", "4", "--write-rate", "100", "--duration", "3s", "--compaction-interval", "1s", "-w", "json"}, &errOut)
	if code != 0 {
		t.Fatalf("lwbench run --workers 2 --cluster-size 3: exit %d:\n%s", code, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v\n%s", err, out.String())
	}
	m := res.EtcdMetrics
	if m == nil || len(m.Members) != 3 || m.Errors != 0 {
		t.Fatalf("etcd metrics %+v: want three members' and no failed scrape", m)
	}
	endpoints := map[string]bool{}
	sums := map[string]report.EtcdMetricsPhase{}
	for i, mm := range m.Members {
		endpoints[mm.Endpoint] = true
		// The seeding's creates (200 pods, 40 configmaps, 100 events)
		// in seed, or in start: the coordinator sees the point begin
		// after the workers go on.
		var seeded, db int64
		for _, p := range mm.Phases {
			s := sums[p.Phase]
			s.Puts, s.Ranges, s.Watchers = s.Puts+p.Puts, s.Ranges+p.Ranges, s.Watchers+p.Watchers
			sums[p.Phase] = s
			if p.Phase == "start" || p.Phase == "seed" {
				seeded += p.Puts
			}
			if p.Phase == "seed" {
				db = p.DBSizeBytes
			}
		}
		if seeded < 340 || seeded > 360 || db == 0 {
			t.Errorf("member %d applied %d puts in start and seed, db size %d in seed: want the 340 seeded and a db size", i, seeded, db)
		}
	}
	if len(endpoints) != 3 || m.Endpoint != m.Members[0].Endpoint {
		t.Errorf("members %v, first %s: want three endpoints, the first the result's", endpoints, m.Endpoint)
	}
	for _, p := range m.Phases {
		s := sums[p.Phase]
		if p.Puts != s.Puts || p.Ranges != s.Ranges || p.Watchers != s.Watchers {
			t.Errorf("phase %s: puts %d, ranges %d, watchers %d; want the members' sums %d, %d, %d", p.Phase, p.Puts, p.Ranges, p.Watchers, s.Puts, s.Ranges, s.Watchers)
		}
		lo, hi := math.Inf(1), 0.0
		for _, mm := range m.Members {
			for _, q := range mm.Phases {
				if q.Phase == p.Phase && q.BackendCommits > 0 {
					lo, hi = min(lo, q.BackendCommitP99Ms), max(hi, q.BackendCommitP99Ms)
				}
			}
		}
		if p.BackendCommits > 0 && (p.BackendCommitP99Ms < lo || p.BackendCommitP99Ms > hi) {
			t.Errorf("phase %s: commit p99 %.3f ms of the summed buckets, outside the members' %.3f to %.3f", p.Phase, p.BackendCommitP99Ms, lo, hi)
		}
	}
	if txns := handledRPCs(m, "Txn"); txns["start"]+txns["seed"] < 340 || txns["steady"] < res.Writes.Completed {
		t.Errorf("Txns the members handled by phase %v: want 340 or more in start and seed, the workers' %d writes or more in steady", txns, res.Writes.Completed)
	}
}

// TestWorkerLogsMerge runs two `lwbench worker --log-result` processes
// against one etcd, each with standard output and error in one file as a
// pod's log reads (kubectl logs), and merges the two logs: merge finds
// each result line among the log lines.
func TestWorkerLogsMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd and two worker processes; skipped under -short")
	}
	logs, scrapeLog := workerLogs(t)
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	if code := cli.Run(root, append([]string{"merge", "-w", "json", "--etcd-metrics", scrapeLog}, logs...), &errOut); code != 0 {
		t.Fatalf("lwbench merge of the logs: exit %d: %s", code, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	checkMergedLogs(t, &res)
}

// workerLogs runs two `lwbench worker --log-result` processes (shards 0
// and 1 of 2: 100 objects in 2 namespaces, 2 informers, 100 writes/s for
// 2 s) against one embedded etcd, each with standard output and error in
// one file as a pod's log holds them, and `lwbench scrape --log-result`
// following their barrier; it returns the two workers' log files, by
// shard, and scrape's.
func workerLogs(t *testing.T) (logs []string, scrapeLog string) {
	t.Helper()
	srv := etcdtest.RunEtcd(t)
	dir := t.TempDir()
	// lwbench scrape follows the same barrier, as a load's coordinator
	// on a cluster, and prints its figures as one line of its log.
	scrapeLog = filepath.Join(dir, "scrape.log")
	scraped := make(chan int, 1)
	go func() {
		var out, errOut bytes.Buffer
		root := NewRootCommand()
		root.SetOut(&out)
		root.SetErr(&errOut)
		code := cli.Run(root, []string{"scrape", "--shards", "2", "--barrier-etcd-key", "/lwbench-barrier/logs",
			"--endpoints", strings.Join(srv.Endpoints, ","), "--log-result"}, &errOut)
		os.WriteFile(scrapeLog, append(errOut.Bytes(), out.Bytes()...), 0o644)
		scraped <- code
	}()
	logs = runLoggedProcesses(t, dir, "worker", 2, func(i int) []string {
		return []string{"worker", "--index", strconv.Itoa(i), "--shards", "2", "--barrier-etcd-key", "/lwbench-barrier/logs",
			"--endpoints", strings.Join(srv.Endpoints, ","), "--log-result", "--objects", "100", "--namespaces", "2", "--watchers", "2",
			"--write-rate", "100", "--duration", "2s"}
	})
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		if n := strings.Count(string(b), "\n"+resultLinePrefix); n != 1 || !strings.Contains(string(b), "writes done at revision") {
			t.Fatalf("%s: %d result lines, want one among the worker's log lines:\n%s", p, n, b)
		}
	}
	select {
	case code := <-scraped:
		if code != 0 {
			b, _ := os.ReadFile(scrapeLog)
			t.Fatalf("lwbench scrape: exit %d:\n%s", code, b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("lwbench scrape did not end after the workers")
	}
	return logs, scrapeLog
}

// checkMergedLogs checks the merge of workerLogs' logs: both workers,
// every write, validation passed, and etcd's puts by phase as scrape read
// them.
func checkMergedLogs(t *testing.T, res *report.RunResult) {
	t.Helper()
	if len(res.Workers) != 2 || res.Writes.Planned != 200 || res.Writes.Completed != 200 || !res.Validation.OK() {
		t.Errorf("merged %d workers, writes %d of %d, validation %s", len(res.Workers), res.Writes.Completed, res.Writes.Planned, res.Validation.Summary())
	}
	// etcd's puts by phase, as scrape read them: the 170 seeded objects
	// (100 pods, 20 configmaps, 50 events) in seed, the writes in steady.
	if res.EtcdMetrics == nil {
		t.Fatal("no etcd metrics in the merged result")
	}
	puts := map[string]int64{}
	for _, p := range res.EtcdMetrics.Phases {
		puts[p.Phase] = p.Puts
	}
	if seeded := puts["start"] + puts["seed"]; seeded < 170 || seeded > 180 || puts["steady"] < res.Writes.Creates+res.Writes.Updates {
		t.Errorf("etcd's puts by phase %v: want the 170 seeded in start and seed and the %d creates and updates in steady", puts, res.Writes.Creates+res.Writes.Updates)
	}
	if txns := handledRPCs(res.EtcdMetrics, "Txn"); txns["start"]+txns["seed"] < 170 || txns["steady"] < res.Writes.Completed {
		t.Errorf("Txns etcd handled by phase %v, as scrape read them: want the 170 seeded or more in start and seed, the %d writes or more in steady", txns, res.Writes.Completed)
	}
}

// TestScrapeFlags: scrape needs the load's shards, the member and one
// barrier.
func TestScrapeFlags(t *testing.T) {
	t.Setenv(envShards, "")
	os.Unsetenv(envShards)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--endpoints", "http://127.0.0.1:2379", "--barrier-etcd-key", "/b"}, "--shards: give the load's number of shards"},
		{[]string{"--shards", "2", "--barrier-etcd-key", "/b"}, "--endpoints: give the client URL"},
		{[]string{"--shards", "2", "--endpoints", "http://127.0.0.1:2379"}, "give one of --barrier-etcd-key and --barrier-configmap"},
		{[]string{"--shards", "2", "--endpoints", "http://127.0.0.1:2379", "--barrier-configmap", "x"}, "want NAMESPACE/NAME"},
		{[]string{"--shards", "2", "--endpoints", "http://127.0.0.1:2379", "--barrier-etcd-key", "/b", "--log-result", "-w", "table"}, "--log-result prints JSON"},
		{[]string{"--shards", "2", "--kubeconfig", "/k", "--barrier-etcd-key", "/b"}, "--barrier-etcd-key needs --endpoints"},
	} {
		root := &cobra.Command{Use: "lwbench"}
		cli.PrepareRoot(root)
		ran := false
		root.AddCommand(newScrapeCommand(func(*cobra.Command, *scrapeOptions) error { ran = true; return nil }))
		var errOut bytes.Buffer
		if code := cli.Run(root, append([]string{"scrape"}, tt.args...), &errOut); code != cli.ExitUsage || ran || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%q: exit %d, ran %v, stderr %q; want %d mentioning %q", tt.args, code, ran, errOut.String(), cli.ExitUsage, tt.want)
		}
	}
	// kube-apiserver's /metrics alone, in a pod: no member needed.
	root := &cobra.Command{Use: "lwbench"}
	cli.PrepareRoot(root)
	var got *scrapeOptions
	root.AddCommand(newScrapeCommand(func(_ *cobra.Command, o *scrapeOptions) error { got = o; return nil }))
	var errOut bytes.Buffer
	if code := cli.Run(root, []string{"scrape", "--shards", "2", "--barrier-configmap", "ns/b", "--apiserver-metrics"}, &errOut); code != 0 || got == nil || !got.apiserverMetricsWanted() {
		t.Errorf("scrape --apiserver-metrics without --endpoints: exit %d, stderr %q; want it to run, reading kube-apiserver's", code, errOut.String())
	}
}
