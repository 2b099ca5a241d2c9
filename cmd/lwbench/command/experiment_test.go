package command

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// experimentCommand returns a maker of the subcommand of the experiment
// name, as root builds it, with its run replaced by runF.
func experimentCommand(name string, runF func(*cobra.Command, *experimentOptions) error) func() *cobra.Command {
	return func() *cobra.Command {
		e, ok := lookupExperiment(name)
		if !ok {
			panic("no experiment entry " + name)
		}
		return e.command(runF)
	}
}

func TestExperimentFlags(t *testing.T) {
	ok := func(*cobra.Command, *experimentOptions) error { return nil }
	tests := []struct {
		name    string
		sub     func() *cobra.Command
		args    []string
		wantErr string
	}{
		{name: "relist-storm defaults", sub: experimentCommand(experiment.NameRelistStorm, ok)},
		{name: "relist-storm quick", sub: experimentCommand(experiment.NameRelistStorm, ok), args: []string{"--quick"}},
		{name: "relist-storm bad page size", sub: experimentCommand(experiment.NameRelistStorm, ok), args: []string{"--page-sizes", "500,all"}, wantErr: "--page-sizes"},
		{name: "relist-storm descending objects", sub: experimentCommand(experiment.NameRelistStorm, ok), args: []string{"--objects", "100,10"}, wantErr: "ascending"},
		{name: "relist-storm endpoints need consent", sub: experimentCommand(experiment.NameRelistStorm, ok), args: []string{"--endpoints", "http://127.0.0.1:1"}, wantErr: "--allow-maintenance"},
		{name: "relist-storm endpoints with consent", sub: experimentCommand(experiment.NameRelistStorm, ok), args: []string{"--endpoints", "http://127.0.0.1:1", "--allow-maintenance"}},
		{name: "continuation defaults", sub: experimentCommand(experiment.NameContinuation, ok)},
		{name: "continuation unpaginated", sub: experimentCommand(experiment.NameContinuation, ok), args: []string{"--page-sizes", "none"}, wantErr: "--page-sizes"},
		{name: "continuation zero lists", sub: experimentCommand(experiment.NameContinuation, ok), args: []string{"--lists", "-1"}, wantErr: "lists"},
		{name: "compaction-sweep defaults", sub: experimentCommand(experiment.NameCompactionSweep, ok)},
		{name: "compaction-sweep never", sub: experimentCommand(experiment.NameCompactionSweep, ok), args: []string{"--intervals", "never,5s"}},
		{name: "compaction-sweep bad interval", sub: experimentCommand(experiment.NameCompactionSweep, ok), args: []string{"--intervals", "soon"}, wantErr: "--intervals"},
		{name: "compaction-sweep disconnect too long", sub: experimentCommand(experiment.NameCompactionSweep, ok), args: []string{"--disconnect", "20s"}, wantErr: "disconnect"},
		{name: "defrag-stall sizes", sub: experimentCommand(experiment.NameDefragStall, ok), args: []string{"--sizes", "100MB,0.5GB,1GB"}},
		{name: "defrag-stall bad size", sub: experimentCommand(experiment.NameDefragStall, ok), args: []string{"--sizes", "big"}, wantErr: "--sizes"},
		{name: "defrag-stall descending", sub: experimentCommand(experiment.NameDefragStall, ok), args: []string{"--sizes", "1GB,100MB"}, wantErr: "ascending"},
		{name: "catchup defaults", sub: experimentCommand(experiment.NameCatchup, ok)},
		{name: "catchup negative", sub: experimentCommand(experiment.NameCatchup, ok), args: []string{"--behind", "-5"}, wantErr: "--behind"},
		{name: "label with a slash", sub: experimentCommand(experiment.NameCatchup, ok), args: []string{"--label", "a/b"}, wantErr: "--label"},
		{name: "bad format", sub: experimentCommand(experiment.NameCatchup, ok), args: []string{"-w", "yaml"}, wantErr: "yaml"},
		{name: "report without files", sub: func() *cobra.Command {
			return newReportCommand(func(*cobra.Command, *reportOptions) error { return nil })
		}, wantErr: "RESULT.json"},
		{name: "report json format", sub: func() *cobra.Command {
			return newReportCommand(func(*cobra.Command, *reportOptions) error { return nil })
		}, args: []string{"-w", "json", "x.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, errOut := parse(t, tt.sub(), tt.args...)
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
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{{"100MB", 100e6}, {"1GB", 1e9}, {"0.5gb", 5e8}, {"2500000", 2500000}, {"64KB", 64e3}}
	for _, tt := range tests {
		if got, err := parseSize(tt.in); err != nil || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "MB", "-1MB", "ten"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded", bad)
		}
	}
}

// TestExperimentThenReport runs the catch-up experiment on an embedded
// member with --out (a directory it creates), then reports its JSON with
// another result and reads the comparison table back.
func TestExperimentThenReport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	dir := filepath.Join(t.TempDir(), "new", "out") // --out creates it
	run := func(args ...string) []byte {
		t.Helper()
		root := NewRootCommand()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		code := cli.Run(root, args, &errOut)
		if code != 0 {
			t.Fatalf("lwbench %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.Bytes()
	}
	out := run("catchup", "--quick", "--unsafe-no-fsync", "--behind", "300,1200", "--objects", "50", "--out", dir, "-w", "json")
	var res experiment.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("catchup -w json: %v", err)
	}
	if res.SchemaVersion != experiment.SchemaVersion || res.Experiment != experiment.NameCatchup || len(res.Cases) != 2 {
		t.Fatalf("result: schema %d, experiment %q, %d cases", res.SchemaVersion, res.Experiment, len(res.Cases))
	}
	for _, f := range []string{"catchup.json", "catchup.md", "catchup-latency.png", "catchup-catchup.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("--out did not write %s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "catchup.md"))
	if !strings.Contains(string(md), "| updates behind |") || !strings.Contains(string(md), "3.7") {
		t.Errorf("catchup.md lacks the table or the etcd version:\n%s", md)
	}
	// A second result under another label, then both in one report.
	run("catchup", "--quick", "--unsafe-no-fsync", "--behind", "300", "--objects", "50", "--label", "again", "--out", dir)
	plots := filepath.Join(t.TempDir(), "plots") // --plots creates it
	rows, err := csv.NewReader(bytes.NewReader(run("report", filepath.Join(dir, "catchup.json"), filepath.Join(dir, "again.json"), "-w", "csv", "--plots", plots))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || rows[0][0] != "result" || rows[1][0] != "catchup" || rows[3][0] != "again" || rows[3][2] != "behind=300" {
		t.Errorf("report rows = %q; want a header, catchup's two cases, then again's one", rows)
	}
	if figs, _ := filepath.Glob(filepath.Join(plots, "*.png")); len(figs) < 4 {
		t.Errorf("report --plots wrote %d figures, want each result's latency and catch-up plots", len(figs))
	}
	// A run result is one row; anything else is a clear error naming the
	// file.
	runJSON := filepath.Join(dir, "myrun.json")
	os.WriteFile(runJSON, []byte(`{"schemaVersion": 2, "scenario": {"profile": "informer", "watchers": 3},
		"relists": [{"objects": 10, "bytes": 100, "durationMs": 5, "backoffMs": 800}], "validation": {"lost": 0}}`), 0o644)
	rows, err = csv.NewReader(bytes.NewReader(run("report", runJSON, "-w", "csv"))).ReadAll()
	if err != nil || len(rows) != 2 || rows[1][0] != "myrun" || rows[1][1] != experiment.NameRun || rows[1][4] != "-" || rows[1][5] != "1" || rows[1][6] != "10" {
		t.Errorf("report of a run result = %q, %v; want one row named myrun, through no kube-apiserver, with 1 relist of 10 objects", rows, err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schemaVersion": 2, "scenario": {}}`), 0o644)
	root := NewRootCommand()
	var errOut bytes.Buffer
	if code := cli.Run(root, []string{"report", bad}, &errOut); code != cli.ExitError || !strings.Contains(errOut.String(), "bad.json") {
		t.Errorf("report of a run result: exit %d, %q; want 1 naming the file", code, errOut.String())
	}
}

func TestViolationsExitCode(t *testing.T) {
	clean := &experiment.Result{Cases: []experiment.CaseSummary{{Case: "a"}, {Case: "b"}}}
	if err := violations(clean); err != nil {
		t.Errorf("clean result: %v", err)
	}
	lost := &experiment.Result{Cases: []experiment.CaseSummary{{Case: "a"}, {Case: "b", LostEvents: 2, OtherViolations: 1}}}
	if err := violations(lost); !errors.Is(err, watchload.ErrViolations) || !strings.Contains(err.Error(), "2 lost") {
		t.Errorf("result with lost events: %v, want ErrViolations counting them", err)
	}
}
