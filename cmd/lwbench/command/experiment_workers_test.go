package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
// what one process gives: every informer relisted exactly once after the
// compaction and none in the control, counts the workers' sums, quantiles
// those of the workers' samples together, nothing lost.
func TestRelistStormWorkers(t *testing.T) {
	res := runDividedExperiment(t, "relist-storm", "--workers", "2", "--quick", "--unsafe-no-fsync", "--objects", "100",
		"--page-sizes", "500", "--watchers", "4", "--write-rate", "50")
	checkWorkers(t, res, 2)
	rs := res.RelistStorm
	if rs == nil || len(rs.Cases) != 2 {
		t.Fatalf("relist storm part %+v: want a compacted case and a control", rs)
	}
	for k, c := range rs.Cases {
		if c.Watchers != 4 {
			t.Errorf("case %d: %d informers merged, want 4", k, c.Watchers)
		}
		switch {
		case c.Compacted && (c.Relists != 4 || c.CompactRevision <= c.HeldRevision):
			t.Errorf("compacted case: %d relists of 4 informers (compacted to %d, held at %d): want each once", c.Relists, c.CompactRevision, c.HeldRevision)
		case !c.Compacted && c.Relists != 0:
			t.Errorf("control: %d relists without a compaction", c.Relists)
		}
		if c.Validation.Lost != 0 || c.Validation.Others() != 0 {
			t.Errorf("case %d: watch violations %+v", k, c.Validation)
		}
		var relists, objects, watchers int
		var resync []float64
		for i, w := range res.Workers {
			wc := w.RelistStorm.Cases[k]
			if wc.Watchers != 2 {
				t.Errorf("case %d: worker %d ran %d informers, want its block of 2", k, i, wc.Watchers)
			}
			if i > 0 && wc.Writes.Planned != 0 {
				t.Errorf("case %d: worker %d wrote %d: shard 0 alone writes", k, i, wc.Writes.Planned)
			}
			relists += wc.Relists
			objects += int(wc.RelistObjects)
			watchers += wc.Watchers
			resync = append(resync, wc.ResyncMs...)
		}
		if relists != c.Relists || int64(objects) != c.RelistObjects || watchers != c.Watchers {
			t.Errorf("case %d: merged %d relists, %d objects, %d informers; the workers' sums %d, %d, %d", k, c.Relists, c.RelistObjects,
				c.Watchers, relists, objects, watchers)
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
// revision, and the merged result has both watchers, each update's event
// once per watcher (no missing or unexpected revision), counts the
// workers' sums.
func TestCatchupWorkers(t *testing.T) {
	res := runDividedExperiment(t, "catchup", "--workers", "2", "--quick", "--unsafe-no-fsync", "--objects", "100", "--behind", "300,600")
	checkWorkers(t, res, 2)
	cr := res.Catchup
	if cr == nil || len(cr.Cases) != 2 {
		t.Fatalf("catchup part %+v: want two distances", cr)
	}
	for k, c := range cr.Cases {
		if c.Watchers != 2 || len(c.WatcherCatchupMs) != 2 {
			t.Errorf("behind %d: %d watchers, %d catch-up times: want 2", c.Behind, c.Watchers, len(c.WatcherCatchupMs))
		}
		if c.Missing != 0 || c.Unexpected != 0 || c.Events != 2*c.Behind {
			t.Errorf("behind %d: %d missing, %d unexpected, %d events: want none, none and %d", c.Behind, c.Missing, c.Unexpected, c.Events, 2*c.Behind)
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
		if c.CatchupMs != max(c.WatcherCatchupMs[0], c.WatcherCatchupMs[1]) {
			t.Errorf("behind %d: catch-up %v ms, the slowest watcher's %v", c.Behind, c.CatchupMs, c.WatcherCatchupMs)
		}
		if c.RelistObjects != 100 {
			t.Errorf("behind %d: the relist read %d objects, want the 100 pods", c.Behind, c.RelistObjects)
		}
	}
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
