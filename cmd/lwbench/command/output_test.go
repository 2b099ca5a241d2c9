package command

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/report"
)

// lwbench runs the command line args and returns stdout, stderr and the
// exit code; it fails the test after a minute.
func lwbench(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := NewRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	done := make(chan int, 1)
	go func() { done <- cli.Run(root, args, &errOut) }()
	select {
	case code := <-done:
		return out.String(), errOut.String(), code
	case <-time.After(time.Minute):
		t.Fatalf("lwbench %s still running after a minute", strings.Join(args, " "))
		return "", "", 0
	}
}

// writeRun writes the synthetic run result as JSON into dir.
func writeRun(t *testing.T, dir, name string) string {
	t.Helper()
	return writeJSON(t, dir, name, syntheticRun())
}

// writeJSON writes v as JSON into dir/name and returns the path.
func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReportRefusesOtherDocuments checks that report names the kind of
// every JSON scripts/ write, and refuses what is not a regular file or is
// too large, at once.
func TestReportRefusesOtherDocuments(t *testing.T) {
	results := filepath.Join("..", "..", "..", "results")
	for _, tt := range []struct{ file, want string }{
		{"faults.json", report.KindFaultRuns},
		{"version-matrix.json", report.KindVersionMatrix},
		{"experiments/provenance.json", report.KindSuiteProvenance},
		{"lwbench-vs-benchmark.json", report.KindBenchmarkComparison},
		{"inspect-bench.json", report.KindInspectBench},
	} {
		path := filepath.Join(results, tt.file)
		_, errOut, code := lwbench(t, "report", path)
		if code != cli.ExitError || !strings.Contains(errOut, path) || !strings.Contains(errOut, "a "+tt.want+" document") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("report %s: exit %d, %q; want exit 1 and one line naming the file and %s", tt.file, code, errOut, tt.want)
		}
	}
	_, errOut, code := lwbench(t, "report", "/dev/zero")
	if code != cli.ExitError || !strings.Contains(errOut, "not a regular file") {
		t.Errorf("report /dev/zero: exit %d, %q; want 1, not a regular file", code, errOut)
	}
}

// TestReportJSONAndPlotDir checks -w json (a Comparison whose run shows
// what it measured) and that --plots creates a missing directory.
func TestReportJSONAndPlotDir(t *testing.T) {
	dir := t.TempDir()
	run := writeRun(t, dir, "myrun.json")
	catchup := filepath.Join("..", "..", "..", "results", "experiments", "catchup.json")
	plots := filepath.Join(dir, "new", "plots")
	out, errOut, code := lwbench(t, "report", catchup, run, "-w", "json", "--plots", plots)
	if code != 0 {
		t.Fatalf("report -w json: exit %d: %s", code, errOut)
	}
	var c experiment.Comparison
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("report -w json: %v:\n%s", err, out)
	}
	if c.Kind != report.KindComparison || c.SchemaVersion != experiment.ComparisonSchemaVersion || len(c.Results) != 2 ||
		c.Results[1].Name != "myrun" || c.Results[1].Experiment != experiment.NameRun || len(c.Results[1].Cases) != 1 {
		t.Fatalf("comparison %+v; want the catchup result, then myrun's one case", c)
	}
	for _, f := range c.Results[1].Figures {
		if f == experiment.FigureProbe {
			t.Errorf("a run's figures include the probe, which a run does not have")
		}
	}
	if figs, _ := filepath.Glob(filepath.Join(plots, "*.png")); len(figs) == 0 {
		t.Errorf("report --plots %s (missing before) holds no figure", plots)
	}
	// A run without a probe prints "-" for the probe, not 0.
	out, _, _ = lwbench(t, "report", run, "-w", "csv")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	head, row := strings.Split(rows[0], ","), strings.Split(rows[1], ",")
	for i, h := range head {
		if strings.HasPrefix(h, "probe") && row[i] != "-" {
			t.Errorf("column %q of a run = %q, want -", h, row[i])
		}
	}
}

// TestReportReadsKubeRun checks that report compares a run through
// kube-apiserver with a run of the etcd-direct model: one case each, the
// kube-apiserver column naming the apiservers ("-" for the model), the
// relist's failed LIST counted as a LIST restart, and no db size or probe
// for the run through kube-apiserver, which samples neither.
func TestReportReadsKubeRun(t *testing.T) {
	dir := t.TempDir()
	run := writeRun(t, dir, "model.json")
	kube := writeJSON(t, dir, "real.json", syntheticKubeRun())
	out, errOut, code := lwbench(t, "report", run, kube, "-w", "json")
	if code != 0 {
		t.Fatalf("report -w json: exit %d: %s", code, errOut)
	}
	var c experiment.Comparison
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("report -w json: %v:\n%s", err, out)
	}
	if len(c.Results) != 2 || c.Results[0].APIServer != nil {
		t.Fatalf("comparison %+v; want the model's run (no apiServer), then the kube run", c)
	}
	k := c.Results[1]
	if k.Name != "real" || k.Experiment != experiment.NameKubeRun || k.APIServer == nil || k.APIServer.Version != "v1.37.2" || len(k.Cases) != 1 {
		t.Fatalf("kube run compared as %+v; want real, %s, apiServer v1.37.2, one case", k, experiment.NameKubeRun)
	}
	if kc := k.Cases[0]; kc.Relists != 1 || kc.ListRestarts != 1 || kc.RelistObjects != 1000 || kc.ResyncMaxMs != 1050 || kc.Compactions != 2 || kc.Defrags != 1 {
		t.Errorf("kube run's case %+v; want 1 relist after 1 failed LIST, 1000 objects, 250+800 ms, 2 compactions, 1 defrag", kc)
	}
	out, _, _ = lwbench(t, "report", run, kube, "-w", "csv")
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("report -w csv: %d rows (%v), want a header and 2 rows:\n%s", len(rows), err, out)
	}
	head, model, real := rows[0], rows[1], rows[2]
	for i, h := range head {
		switch {
		case h == "kube-apiserver":
			if model[i] != "-" || !strings.HasPrefix(real[i], "v1.37.2") {
				t.Errorf("kube-apiserver column: model %q, real %q; want - and v1.37.2...", model[i], real[i])
			}
		case strings.HasPrefix(h, "db ") || strings.HasPrefix(h, "probe"):
			if real[i] != "-" {
				t.Errorf("column %q of the kube run = %q, want -", h, real[i])
			}
		}
	}
}

// TestReportReadsVersion3 checks that report reads runs written one
// schema version back (a RunResult 3 and a KubeRunResult 3, as lwbench
// wrote them at 315dcdb: pkg/report/testdata/v3) beside a new one, and
// shows each one's delivery latency: before, report dropped it for both
// kinds of run.
func TestReportReadsVersion3(t *testing.T) {
	dir := t.TempDir()
	model := "../../../pkg/report/testdata/v3/run.json"
	real := "../../../pkg/report/testdata/v3/kube-run.json"
	now := writeJSON(t, dir, "now.json", judged(syntheticKubeRun()))
	out, errOut, code := lwbench(t, "report", model, real, now, "-w", "csv")
	if code != 0 {
		t.Fatalf("report -w csv: exit %d: %s", code, errOut)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 4 {
		t.Fatalf("report -w csv: %d rows (%v), want a header and 3 rows:\n%s", len(rows), err, out)
	}
	col := slices.Index(rows[0], "delivery p99 ms")
	if col < 0 {
		t.Fatalf("no delivery p99 ms column in %q", rows[0])
	}
	// The synthetic runs' p99 is 4 x their p50: 0.5 ms (the model's
	// fromCommit), 2 ms (the kube run's fromCommit), 2 ms (fromResponse).
	for i, want := range []string{"2.0", "8.0", "8.0"} {
		if got := rows[i+1][col]; got != want {
			t.Errorf("row %d (%s): delivery p99 ms %q, want %q", i+1, rows[i+1][0], got, want)
		}
	}
}

// TestOutputPathsCheckedBeforeRun checks that an output path that cannot
// be written fails at once, naming the flag, before any member starts.
func TestOutputPathsCheckedBeforeRun(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	under := filepath.Join(file, "x") // a path under a regular file
	for _, args := range [][]string{
		{"run", "--interval-csv", under},
		{"run", "--benchstat", under},
		{"put", "--benchstat", under},
		{"watch", "--interval-csv", under},
		{"list", "--benchstat", under},
		{"catchup", "--out", under},
		{"report", writeRun(t, dir, "r.json"), "--plots", under},
	} {
		flag := args[len(args)-2]
		start := time.Now()
		_, errOut, code := lwbench(t, args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, flag) || strings.Contains(errOut, "seeding") {
			t.Errorf("lwbench %s: exit %d, %q; want exit 2 naming %s before the run", strings.Join(args, " "), code, errOut, flag)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("lwbench %s took %v to fail; want before the run", strings.Join(args, " "), d)
		}
	}
}

// TestFailedSnapshotKeepsResult runs a short run whose --snapshot cannot
// be written at the end: the result is printed all the same, then the
// command fails naming --snapshot.
func TestFailedSnapshotKeepsResult(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	// /proc exists, so the flag is accepted, but no file can be created
	// in it, not even by root.
	out, errOut, code := lwbench(t, "run", "--unsafe-no-fsync", "--objects", "50", "--watchers", "2", "--write-rate", "50",
		"--duration", "1s", "--snapshot", "/proc/lwbench-snapshot.db", "-w", "json")
	if code != cli.ExitError || !strings.Contains(errOut, "--snapshot /proc/lwbench-snapshot.db") {
		t.Errorf("exit %d, stderr %q; want 1 naming --snapshot", code, errOut)
	}
	var res report.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Kind != report.KindRun || res.Writes.Completed == 0 {
		t.Errorf("stdout is not the run's result (%v): %.200q", err, out)
	}
}
