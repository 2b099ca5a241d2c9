package command

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// hdrLatency returns the latency of the samples (µs) with its histogram
// kept, as a worker writes it.
func hdrLatency(t *testing.T, us ...int64) report.Latency {
	t.Helper()
	h := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	for _, v := range us {
		h.RecordValue(v)
	}
	l, err := report.LatencyWithHDR(h)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// workerRun returns worker i of a load of n shards: 100 writes planned,
// 100 - i completed, latencies of samples of its own.
func workerRun(t *testing.T, i, n int) *report.RunResult {
	t.Helper()
	sh := shard.Shard{Index: i, Count: n}
	base := int64(1000 * (i + 1))
	r := &report.RunResult{
		Kind: report.KindRun, SchemaVersion: report.RunSchemaVersion, Shard: &sh,
		StartedAt: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		Target:    report.Target{Endpoints: []string{"http://127.0.0.1:2379"}, EtcdVersion: "3.7.3"},
		Scenario: report.Scenario{Profile: "informer", Prefix: "/registry", Objects: 300, Namespaces: 3, Watchers: 3,
			WatchResources: []string{"pods"}, WriteRatePerSecond: 30, DurationMs: 10_000, Seed: 1},
		Writes: report.WriteStats{Planned: 100, Sent: 100, Completed: 100 - int64(i), Errors: int64(i), StartMs: 1500, DurationMs: 10_000,
			Latency: hdrLatency(t, base, base+10, base+20)},
		Delivery: report.DeliveryStats{Events: 300, TimedEvents: 100 - int64(i), UntimedEvents: 200 + int64(i), EventsPerSecond: 30,
			FromResponse: hdrLatency(t, base/2, base), FromSend: hdrLatency(t, base, 2*base)},
		InitialLists: report.ListSummary{Count: 1, Objects: 300, Latency: hdrLatency(t, 20_000+base)},
		Relists:      []report.Relist{},
		Compactions:  []report.Compaction{},
		Validation:   report.Validation{RecorderScope: "keyspace", HistoryEvents: 300},
		Final:        report.FinalState{Revision: 600, Objects: 300},
		Informers:    []report.InformerStats{{ID: i, Resource: "pods", Events: 300}},
		Intervals:    []report.Interval{{StartMs: 0, WritesScheduled: 10, WritesCompleted: 10, Events: 30}},
		Self:         report.SelfStats{WallMs: 12_000, CPUSeconds: 3, CPUCores: 0.25, NumCPU: 4},
	}
	if i == 0 {
		r.Compactions = []report.Compaction{{AtMs: 6000, Revision: 400}}
	}
	r.Verdict = report.RunVerdict(r)
	return r
}

// writeWorkers writes the results of a load of n workers into dir as
// worker-i.json, after edit, and returns their paths.
func writeWorkers(t *testing.T, dir string, n int, edit func(i int, r *report.RunResult)) []string {
	t.Helper()
	var paths []string
	for i := range n {
		r := workerRun(t, i, n)
		if edit != nil {
			edit(i, r)
		}
		paths = append(paths, writeJSON(t, dir, fmt.Sprintf("worker-%d.json", i), r))
	}
	return paths
}

// TestMergeCommand runs `lwbench merge` on three workers' results: the
// run summary of the whole load, the workers table, the verdict; -w json
// prints the merged result, with its workers; a worker's lost event fails
// the merge's exit code as it fails run's, after the figures.
func TestMergeCommand(t *testing.T) {
	dir := t.TempDir()
	paths := writeWorkers(t, dir, 3, nil)
	out, errOut, code := lwbench(t, append([]string{"merge"}, paths...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"writes completed / planned", "297 / 300", // summed
		"events delivered", "900 (",
		"| shard", "generator limited", "2/3 |", "98 / 100", "0.25 of 4",
		"PASS: every watch guarantee held"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "aligned by their index") {
		t.Errorf("output warns of index alignment though every worker recorded writes.startMs:\n%s", out)
	}

	out, errOut, code = lwbench(t, append([]string{"merge", "-w", "json"}, paths...)...)
	if code != 0 {
		t.Fatalf("-w json: exit %d: %s", code, errOut)
	}
	var m report.RunResult
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("-w json: %v", err)
	}
	if m.Shard != nil || len(m.Workers) != 3 || m.Writes.Latency.Count != 9 || m.Writes.Latency.HDR == "" ||
		m.Clocks == nil || m.Clocks.IntervalAlignment != "wall" || len(m.Compactions) != 1 {
		t.Errorf("-w json: shard %v, %d workers, write latency %+v, clocks %+v, compactions %v", m.Shard, len(m.Workers), m.Writes.Latency, m.Clocks, m.Compactions)
	}
	if !strings.HasPrefix(errOut, "PASS") {
		t.Errorf("-w json: stderr %q, want the verdict", errOut)
	}

	lost := writeWorkers(t, t.TempDir(), 3, func(i int, r *report.RunResult) {
		if i == 1 {
			r.Validation.Lost = 2
			r.Self.CPUCores, r.Self.NumCPU = 1.9, 2
		}
	})
	out, errOut, code = lwbench(t, append([]string{"merge"}, lost...)...)
	if code != cli.ExitError || !strings.Contains(out, "FAIL: 2 lost") || !strings.Contains(errOut, "2 lost") {
		t.Errorf("a lost event: exit %d, stderr %q; want exit 1 after the figures:\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "figures of worker 1 were limited by the generator") || !strings.Contains(out, "yes (the warnings)") {
		t.Errorf("a saturated worker not named:\n%s", out)
	}
}

// TestMergeCommandRefuses: files that are not one load's workers' results
// fail with exit 1 (2 without any) and one line naming the file, before
// anything is printed.
func TestMergeCommandRefuses(t *testing.T) {
	dir := t.TempDir()
	good := writeWorkers(t, dir, 2, nil)
	notJSON := filepath.Join(dir, "notjson.json")
	if err := os.WriteFile(notJSON, []byte("lwbench worker printed this\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	whole := workerRun(t, 0, 1)
	whole.Shard = nil
	wholePath := writeJSON(t, dir, "whole.json", whole)
	noHDR := writeWorkers(t, t.TempDir(), 2, func(i int, r *report.RunResult) {
		if i == 1 {
			r.Delivery.FromResponse.HDR = ""
		}
	})
	missing := filepath.Join(dir, "absent.json")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{"not JSON", []string{good[0], notJSON}, cli.ExitError, []string{notJSON, "not a JSON result"}},
		{"a directory", []string{good[0], dir}, cli.ExitError, []string{dir, "directory"}},
		{"a missing file", []string{good[0], missing}, cli.ExitError, []string{missing}},
		{"a whole load's run", []string{good[0], wholePath}, cli.ExitError, []string{wholePath, "not a worker's"}},
		{"a missing shard", []string{good[0]}, cli.ExitError, []string{"shard 1 of 2 missing", good[0] + " is shard 0/2"}},
		{"a shard twice", []string{good[0], good[1], good[1]}, cli.ExitError, []string{"shard 1 appears twice", good[1] + " is shard 1/2"}},
		{"no histogram", noHDR, cli.ExitError, []string{"delivery.fromResponse", "no histogram", noHDR[1] + " is shard 1/2"}},
		{"no file", nil, cli.ExitUsage, []string{"merge needs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := lwbench(t, append([]string{"merge"}, tt.args...)...)
			if code != tt.wantCode || out != "" {
				t.Errorf("exit %d, output %q; want exit %d and nothing printed", code, out, tt.wantCode)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error %q does not say %q", errOut, w)
				}
			}
			if tt.wantCode == cli.ExitError && strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("error %q: want one line", errOut)
			}
		})
	}
}
