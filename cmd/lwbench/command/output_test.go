package command

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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
	b, err := json.Marshal(syntheticRun())
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
