package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/internal/quantile"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// runDividedExperiment runs `lwbench ARGS` with this test binary as the
// workers' lwbench and returns the merged result it printed (-w json).
func runDividedExperiment(t *testing.T, args ...string) *experiment.Result {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an embedded etcd and worker processes; skipped under -short")
	}
	t.Setenv(subprocessEnv, "1") // the workers: this binary as lwbench
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	if code := cli.Run(root, append(args, "-w", "json"), &errOut); code != 0 {
		t.Fatalf("lwbench %v: exit %d:\n%s", args, code, errOut.String())
	}
	var res experiment.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v\n%s", err, out.String())
	}
	return &res
}

// checkWorkers checks the merged result's per-worker part: n workers by
// shard index, each with its own process's figures.
func checkWorkers(t *testing.T, res *experiment.Result, n int) {
	t.Helper()
	if res.Shard != nil {
		t.Errorf("merged result has shard %v, want none", res.Shard)
	}
	if len(res.Workers) != n {
		t.Fatalf("%d workers in the result, want %d", len(res.Workers), n)
	}
	for i, w := range res.Workers {
		if w.Shard.Index != i || w.Shard.Count != n {
			t.Errorf("worker %d is shard %v", i, w.Shard)
		}
		if w.Self == nil || w.Self.CPUSeconds <= 0 || w.Self.NumCPU == 0 {
			t.Errorf("worker %d: self stats %+v, want its CPU measured", i, w.Self)
		}
	}
	if res.Self == nil {
		t.Fatal("merged result has no self stats")
	}
	var cpu float64
	for _, w := range res.Workers {
		cpu += w.Self.CPUSeconds
	}
	if res.Self.CPUSeconds != cpu {
		t.Errorf("merged CPU %.3f s, the workers' sum %.3f s", res.Self.CPUSeconds, cpu)
	}
}

// TestRelistStormWorkers runs `lwbench relist-storm --workers 2` against
// its embedded member: the two worker processes hold their blocks of the
// four informers, shard 0 compacts past them, and the merged result is
// what one process gives (checkRelistStormWorkers).
func TestRelistStormWorkers(t *testing.T) {
	res := runDividedExperiment(t, "relist-storm", "--workers", "2", "--quick", "--unsafe-no-fsync", "--objects", "100",
		"--page-sizes", "500", "--watchers", "4", "--write-rate", "50")
	checkRelistStormWorkers(t, res, 2, 4, []int{100}, true)
}

// checkRelistStormWorkers checks a relist storm divided among n workers
// with watchers informers, one page size, each count of objects: the
// merged result is what one process gives: every informer relisted
// exactly once after the compaction, reading the load's pods alone (the
// count seeded, give or take the case's creates and deletes), and none
// in the control (if control); counts the workers' sums, quantiles those
// of the workers' samples together, nothing lost, shard 0 alone writing.
func checkRelistStormWorkers(t *testing.T, res *experiment.Result, n, watchers int, objects []int, control bool) {
	t.Helper()
	checkWorkers(t, res, n)
	rs := res.RelistStorm
	perLoad := 1 + map[bool]int{true: 1}[control]
	if rs == nil || len(rs.Cases) != perLoad*len(objects) {
		t.Fatalf("relist storm part %+v: want per count of %v a compacted case and, if any, a control", rs, objects)
	}
	for k, c := range rs.Cases {
		if c.Watchers != watchers || c.Objects != objects[k/perLoad] {
			t.Errorf("case %d: %d informers merged over %d pods, want %d over %d", k, c.Watchers, c.Objects, watchers, objects[k/perLoad])
		}
		switch lo, hi := int64(c.Relists)*(int64(c.Objects)-c.Writes.Deletes), int64(c.Relists)*(int64(c.Objects)+c.Writes.Creates); {
		case c.Compacted && (c.Relists != watchers || c.CompactRevision <= c.HeldRevision):
			t.Errorf("compacted case: %d relists of %d informers (compacted to %d, held at %d): want each once", c.Relists, watchers, c.CompactRevision, c.HeldRevision)
		case c.Compacted && (c.RelistObjects < lo || c.RelistObjects > hi):
			t.Errorf("compacted case of %d pods: %d relists read %d objects, want %d to %d (the case created %d, deleted %d)", c.Objects, c.Relists, c.RelistObjects,
				lo, hi, c.Writes.Creates, c.Writes.Deletes)
		case !c.Compacted && c.Relists != 0:
			t.Errorf("control: %d relists without a compaction", c.Relists)
		}
		if c.Validation.Lost != 0 || c.Validation.Others() != 0 {
			t.Errorf("case %d: watch violations %+v", k, c.Validation)
		}
		var relists, objects, watchersSum int
		var resync []float64
		for i, w := range res.Workers {
			wc := w.RelistStorm.Cases[k]
			if from, to := experiment.WatcherBlock(w.Shard, watchers); wc.Watchers != to-from {
				t.Errorf("case %d: worker %d ran %d informers, want its block of %d", k, i, wc.Watchers, to-from)
			}
			if i > 0 && wc.Writes.Planned != 0 {
				t.Errorf("case %d: worker %d wrote %d: shard 0 alone writes", k, i, wc.Writes.Planned)
			}
			relists += wc.Relists
			objects += int(wc.RelistObjects)
			watchersSum += wc.Watchers
			resync = append(resync, wc.ResyncMs...)
		}
		if relists != c.Relists || int64(objects) != c.RelistObjects || watchersSum != c.Watchers {
			t.Errorf("case %d: merged %d relists, %d objects, %d informers; the workers' sums %d, %d, %d", k, c.Relists, c.RelistObjects,
				c.Watchers, relists, objects, watchersSum)
		}
		slices.Sort(resync)
		if want := quantile.NearestRank(resync, 0.5); c.ResyncP50Ms != want || c.ResyncMaxMs != resync[len(resync)-1] {
			t.Errorf("case %d: merged resync p50 %v max %v, the workers' samples give %v and %v", k, c.ResyncP50Ms, c.ResyncMaxMs, want, resync[len(resync)-1])
		}
		if res.Cases[k].Relists != int64(c.Relists) {
			t.Errorf("case %d: summary %d relists, case %d", k, res.Cases[k].Relists, c.Relists)
		}
	}
}

// TestCatchupWorkers runs `lwbench catchup --workers 2`: shard 0 lays
// down the updates once, each worker resumes its watcher from the same
// revision (checkCatchupWorkers).
func TestCatchupWorkers(t *testing.T) {
	res := runDividedExperiment(t, "catchup", "--workers", "2", "--quick", "--unsafe-no-fsync", "--objects", "100", "--behind", "300,600")
	checkCatchupWorkers(t, res, 2, 100, []int64{300, 600})
}

// checkCatchupWorkers checks a catch-up divided among n workers, one
// watcher each, over objects pods for each of behind: the merged result
// has every watcher, each update's event once per watcher (no missing or
// unexpected revision), counts the workers' sums, the slowest watcher's
// time, shard 0's relist of the load's pods alone.
func checkCatchupWorkers(t *testing.T, res *experiment.Result, n int, objects int64, behind []int64) {
	t.Helper()
	checkWorkers(t, res, n)
	cr := res.Catchup
	if cr == nil || len(cr.Cases) != len(behind) {
		t.Fatalf("catchup part %+v: want distances %v", cr, behind)
	}
	for k, c := range cr.Cases {
		if c.Behind != behind[k] || c.Watchers != n || len(c.WatcherCatchupMs) != n {
			t.Errorf("case %d: %d behind, %d watchers, %d catch-up times: want %d behind and %d", k, c.Behind, c.Watchers, len(c.WatcherCatchupMs), behind[k], n)
		}
		if c.Expired || c.Missing != 0 || c.Unexpected != 0 || c.Events != int64(n)*c.Behind {
			t.Errorf("behind %d: expired %v, %d missing, %d unexpected, %d events: want none, none and %d", c.Behind, c.Expired, c.Missing, c.Unexpected, c.Events, int64(n)*c.Behind)
		}
		var events, responses int64
		for i, w := range res.Workers {
			wc := w.Catchup.Cases[k]
			if wc.FromRevision != c.FromRevision || wc.ToRevision != c.ToRevision {
				t.Errorf("behind %d: worker %d resumed from %d to %d, the merged case %d to %d", c.Behind, i, wc.FromRevision, wc.ToRevision, c.FromRevision, c.ToRevision)
			}
			if i > 0 && wc.RelistObjects != 0 {
				t.Errorf("behind %d: worker %d relisted: shard 0 alone does", c.Behind, i)
			}
			events += wc.Events
			responses += wc.Responses
		}
		if events != c.Events || responses != c.Responses {
			t.Errorf("behind %d: merged %d events, %d responses; the workers' sums %d, %d", c.Behind, c.Events, c.Responses, events, responses)
		}
		if c.CatchupMs != slices.Max(c.WatcherCatchupMs) {
			t.Errorf("behind %d: catch-up %v ms, the slowest watcher's %v", c.Behind, c.CatchupMs, c.WatcherCatchupMs)
		}
		if c.RelistObjects != objects {
			t.Errorf("behind %d: the relist read %d objects, want the %d pods", c.Behind, c.RelistObjects, objects)
		}
	}
}

// TestExperimentWorkersThroughKubeAPIServer runs relist-storm and catchup
// --workers 2 --kube-apiserver: the coordinator starts kube-apiserver
// 1.37 in front of its embedded member, and the two worker processes
// (this test binary as lwbench), client-go processes through it
// (--kubeconfig --apiservers-owned), divide the informers and watchers;
// the merged results hold the same invariants as through etcd directly,
// name the kube-apiserver the coordinator started, and count the relists'
// LISTs that reached etcd through its counting proxy.
func TestExperimentWorkersThroughKubeAPIServer(t *testing.T) {
	apiservertest.Binaries(t)
	checkAPI := func(t *testing.T, res *experiment.Result) {
		t.Helper()
		if a := res.APIServer; a == nil || !a.Managed || a.Version != "v1.37.2" || a.ClientWatchList != "off" {
			t.Errorf("result's kube-apiserver %+v, want the coordinator's v1.37.2, informers with WatchListClient off", a)
		}
	}
	t.Run("relist-storm", func(t *testing.T) {
		// Two loads on the one kube-apiserver: the second's relists must
		// read its own pods alone, the first's deleted (DeletePods).
		res := runDividedExperiment(t, "relist-storm", "--workers", "2", "--kube-apiserver", "1.37", "--quick", "--unsafe-no-fsync", "--objects", "100,200",
			"--page-sizes", "500", "--watchers", "4", "--write-rate", "20", "--client-feature-gates", "WatchListClient=false")
		checkRelistStormWorkers(t, res, 2, 4, []int{100, 200}, true)
		checkAPI(t, res)
		// The coordinator's counting proxy, its phases the barrier's
		// points: each relist's LIST at the latest revision reached etcd
		// (no watch cache).
		for _, c := range res.RelistStorm.Cases {
			if c.Compacted && (c.EtcdRanges < int64(c.Relists) || c.EtcdRangeBytes == 0) {
				t.Errorf("%d pods: etcd received %d LISTs (%d bytes) during %d relists", c.Objects, c.EtcdRanges, c.EtcdRangeBytes, c.Relists)
			}
		}
	})
	t.Run("catchup", func(t *testing.T) {
		res := runDividedExperiment(t, "catchup", "--workers", "2", "--kube-apiserver", "1.37", "--quick", "--unsafe-no-fsync", "--objects", "60",
			"--behind", "200,400", "--client-feature-gates", "WatchListClient=false")
		checkCatchupWorkers(t, res, 2, 60, []int64{200, 400})
		checkAPI(t, res)
	})
}

// TestAbortLost checks what the coordinator does for a worker process
// that exited with an error: one that wrote no result is aborted on the
// barrier in its name, so a worker waiting there stops with
// barrier.ErrAborted naming it; one that wrote its result is not (the
// others may still be meeting at the last points).
func TestAbortLost(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	admin := etcdtest.NewClient(t, srv)
	con := newConsole(io.Discard)
	defer con.Done()
	dir := t.TempDir()
	for _, tt := range []struct {
		name      string
		result    string // the worker's result file
		wantAbort bool
	}{
		{"no result", "", true},
		{"a result", `{"kind":"experiment"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := "/lwbench-barrier/test-" + strings.ReplaceAll(tt.name, " ", "-")
			path := filepath.Join(dir, tt.name+".json")
			if err := os.WriteFile(path, []byte(tt.result), 0o644); err != nil {
				t.Fatal(err)
			}
			lost := &workerProc{resultPath: path, exitErr: errors.New("signal: killed")}
			abortLost(t.Context(), admin, key, shard.Shard{Index: 1, Count: 2}, lost, con)
			b, err := barrier.NewEtcd(admin, key, shard.Shard{Index: 0, Count: 2})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			_, err = b.Wait(ctx, "resynced")
			switch {
			case tt.wantAbort && (!errors.Is(err, barrier.ErrAborted) || !strings.Contains(err.Error(), "worker 1: its process exited: signal: killed")):
				t.Errorf("waiting worker got %v, want worker 1's abort", err)
			case !tt.wantAbort && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("waiting worker got %v, want to be still waiting", err)
			}
		})
	}
}

// TestExperimentWorkersThroughKubeconfig runs relist-storm and catchup
// --workers 2 --kubeconfig on an existing cluster (startExistingCluster):
// the workers share each load's namespaces (named from the barrier),
// shard 0 alone creates them and deletes them once every worker is done,
// the invariants hold as through etcd directly, and someone else's
// objects are left alone.
func TestExperimentWorkersThroughKubeconfig(t *testing.T) {
	e := startExistingCluster(t)
	common := []string{"--workers", "2", "--quick", "--kubeconfig", e.kubeconfig, "--context", "test", "--endpoints", e.srv.Endpoints[0],
		"--allow-maintenance", "--namespace-delete-timeout", "30s", "--client-feature-gates", "WatchListClient=false"}
	checkCleanup := func(t *testing.T, res *experiment.Result, loads int) {
		t.Helper()
		if a := res.APIServer; a == nil || a.Managed || a.URL != e.rc.Host {
			t.Errorf("result's kube-apiserver %+v, want the cluster's at %s", a, e.rc.Host)
		}
		if len(res.NamespaceCleanup) != loads {
			t.Fatalf("namespace cleanups %+v: want shard 0's of each of the %d loads", res.NamespaceCleanup, loads)
		}
		var namespaces []string
		for _, c := range res.NamespaceCleanup {
			if c.Error != "" || len(c.NamespacesLeft) != 0 || len(c.Namespaces) == 0 {
				t.Errorf("cleanup %+v, want its namespaces deleted", c)
			}
			namespaces = append(namespaces, c.Namespaces...)
		}
		e.checkLeftAlone(t, namespaces)
	}
	t.Run("relist-storm", func(t *testing.T) {
		res := runDividedExperiment(t, append([]string{"relist-storm", "--objects", "60,120", "--page-sizes", "500", "--watchers", "4", "--write-rate", "20"}, common...)...)
		checkRelistStormWorkers(t, res, 2, 4, []int{60, 120}, true)
		checkCleanup(t, res, 2)
	})
	t.Run("catchup", func(t *testing.T) {
		res := runDividedExperiment(t, append([]string{"catchup", "--objects", "40", "--behind", "200"}, common...)...)
		checkCatchupWorkers(t, res, 2, 40, []int64{200})
		checkCleanup(t, res, 1)
	})
}

// TestExperimentWorkersKubeFlags: an experiment's --workers goes through
// kube-apiserver (--kube-apiserver, --kubeconfig) and a --cluster-size
// cluster; the coordinator of --kube-apiserver keeps its apiservers'
// flags and hands its workers a kubeconfig of its own apiservers; what a
// divided experiment cannot do yet, or a worker must not be given, is a
// usage error naming the flag.
func TestExperimentWorkersKubeFlags(t *testing.T) {
	var got *experimentOptions
	keep := func(_ *cobra.Command, o *experimentOptions) error { got = o; return nil }
	for _, tt := range []struct {
		name    string
		exp     string
		args    []string
		wantErr string
	}{
		{"kube-apiserver", experiment.NameRelistStorm, []string{"--workers", "2", "--kube-apiserver", "1.37", "--watchers", "4"}, ""},
		{"kubeconfig", experiment.NameCatchup, []string{"--workers", "2", "--kubeconfig", "/nonexistent", "--endpoints", "http://127.0.0.1:1", "--allow-maintenance"}, ""},
		{"cluster-size", experiment.NameCatchup, []string{"--workers", "2", "--cluster-size", "3"}, ""},
		{"count-etcd", experiment.NameRelistStorm, []string{"--workers", "2", "--kube-apiserver", "1.37", "--watchers", "4", "--count-etcd"}, ""},
		{"worker with kube-apiserver", experiment.NameCatchup, []string{"--index", "0", "--shards", "2", "--barrier-etcd-key", "/b", "--endpoints", "http://127.0.0.1:1",
			"--allow-maintenance", "--kube-apiserver", "1.37"}, "--kubeconfig"},
		{"apiservers-owned without kubeconfig", experiment.NameCatchup, []string{"--index", "0", "--shards", "2", "--barrier-etcd-key", "/b", "--endpoints", "http://127.0.0.1:1",
			"--allow-maintenance", "--apiservers-owned"}, "--apiservers-owned"},
		{"not divisible", experiment.NameContinuation, []string{"--workers", "2"}, "unknown flag: --workers"},
		{"two barriers", experiment.NameCatchup, []string{"--shards", "2", "--barrier-etcd-key", "/b", "--barrier-configmap", "default/b", "--endpoints", "http://127.0.0.1:1",
			"--allow-maintenance"}, "cannot be used together"},
		{"bad configmap", experiment.NameCatchup, []string{"--shards", "2", "--barrier-configmap", "nonamespace", "--endpoints", "http://127.0.0.1:1",
			"--allow-maintenance"}, "--barrier-configmap"},
		{"log-result undivided", experiment.NameCatchup, []string{"--log-result"}, "need --shards"},
		{"coordinator with a barrier", experiment.NameCatchup, []string{"--workers", "2", "--barrier-configmap", "default/b"}, "the coordinator gives its workers theirs"},
		{"log-result with out", experiment.NameCatchup, []string{"--shards", "2", "--barrier-configmap", "default/b", "--endpoints", "http://127.0.0.1:1",
			"--allow-maintenance", "--log-result", "--out", "/tmp/x"}, "--log-result"},
		{"configmap barrier", experiment.NameCatchup, []string{"--shards", "2", "--barrier-configmap", "default/b", "--endpoints", "http://127.0.0.1:1",
			"--allow-maintenance", "--log-result"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, errOut := parse(t, experimentCommand(tt.exp, keep)(), tt.args...)
			if tt.wantErr == "" {
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				return
			}
			if code != cli.ExitUsage || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want %d mentioning %q", code, errOut, cli.ExitUsage, tt.wantErr)
			}
		})
	}

	// The coordinator's kube-apiserver flags stay its own.
	if code, errOut := parse(t, experimentCommand(experiment.NameRelistStorm, keep)(), "--workers", "2", "--kube-apiserver", "1.37", "--watch-cache",
		"--apiservers", "2", "--watchers", "4", "--client-feature-gates", "WatchListClient=false"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	args := strings.Join(experimentWorkerArgs(got.flags, experiment.NameRelistStorm, 1, 2, "/k", []string{"http://127.0.0.1:1"}, "/registry", "/tmp/kc"), " ")
	for _, want := range []string{"--kubeconfig /tmp/kc --apiservers-owned", "--watchers=4", "--client-feature-gates=WatchListClient=false", "--index 1 --shards 2"} {
		if !strings.Contains(args, want) {
			t.Errorf("worker args %q: want %q", args, want)
		}
	}
	for _, not := range []string{"--kube-apiserver", "--watch-cache", "--apiservers="} {
		if strings.Contains(args, not) {
			t.Errorf("worker args %q: want no %s (the coordinator's)", args, not)
		}
	}
	// Its workers name their namespaces alike from the barrier.
	ids := map[string]bool{}
	for i := range 2 {
		if code, errOut := parse(t, experimentCommand(experiment.NameCatchup, keep)(), "--index", strconv.Itoa(i), "--shards", "2", "--barrier-etcd-key", "/lwbench-barrier/x",
			"--endpoints", "http://127.0.0.1:1", "--allow-maintenance", "--kubeconfig", "/tmp/kc", "--apiservers-owned"); code != 0 {
			t.Fatalf("worker %d: exit %d: %s", i, code, errOut)
		}
		ids[got.common(nil).RunID] = true
	}
	if len(ids) != 1 || ids[""] {
		t.Errorf("run IDs %v: want one, the same for both workers", ids)
	}
}

// TestExperimentWorkersConfigMapBarrier runs the two workers of a divided
// catch-up as a Kubernetes Job's pods would run them: processes of this
// test binary as lwbench, each given only --shards, its index in
// $JOB_COMPLETION_INDEX, a ConfigMap barrier of a real kube-apiserver and
// --log-result; each prints its result as one line of its log, and those
// lines merged hold the invariants of a divided catch-up.
func TestExperimentWorkersConfigMapBarrier(t *testing.T) {
	e := startExistingCluster(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(kubeconfig, e.rc); err != nil {
		t.Fatal(err)
	}
	var results []*experiment.Result
	procs := make([]*exec.Cmd, 2)
	logs := make([]*bytes.Buffer, 2)
	for i := range procs {
		logs[i] = &bytes.Buffer{}
		procs[i] = exec.Command(os.Args[0], "catchup", "--shards", "2", "--barrier-configmap", "default/catchup-barrier", "--barrier-kubeconfig", kubeconfig,
			"--log-result", "--endpoints", e.srv.Endpoints[0], "--allow-maintenance", "--prefix", "/lwbench-test/cm", "--quick", "--objects", "50", "--behind", "200")
		procs[i].Env = append(os.Environ(), subprocessEnv+"=1", envCompletionIndex+"="+strconv.Itoa(i))
		procs[i].Stdout, procs[i].Stderr = logs[i], logs[i] // a pod's log holds both
		if err := procs[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, logs[i])
		}
		line, ok := loggedResult(logs[i].Bytes())
		if !ok {
			t.Fatalf("worker %d: no result line in its log:\n%s", i, logs[i])
		}
		r, err := experiment.Decode(line)
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		results = append(results, r)
	}
	merged, err := experiment.Merge(results)
	if err != nil {
		t.Fatal(err)
	}
	checkCatchupWorkers(t, merged, 2, 50, []int64{200})
	cm, err := e.cs.CoreV1().ConfigMaps("default").Get(t.Context(), "catchup-barrier", metav1.GetOptions{})
	if err != nil || len(cm.Data) == 0 {
		t.Errorf("barrier ConfigMap: %v (%v), want the workers' arrivals in it", cm, err)
	}
}

// experimentWorkerLogs runs the two workers of a divided catch-up (30
// pods, 100 behind) as processes of this test binary meeting under an
// etcd key of an embedded member, each printing its result as a log line
// (--log-result), and returns the paths of their logs (standard output
// and error together, as a pod's log).
func experimentWorkerLogs(t *testing.T) []string {
	t.Helper()
	srv := etcdtest.RunEtcd(t)
	dir := t.TempDir()
	logs := runLoggedProcesses(t, dir, "catchup", 2, func(i int) []string {
		return []string{"catchup", "--index", strconv.Itoa(i), "--shards", "2", "--barrier-etcd-key", "/lwbench-barrier/catchup-logs",
			"--endpoints", strings.Join(srv.Endpoints, ","), "--allow-maintenance", "--log-result", "--quick", "--objects", "30", "--behind", "100"}
	})
	return logs
}
