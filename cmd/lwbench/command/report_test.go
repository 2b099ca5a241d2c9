package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/report"
)

// TestReportRefusesIncompleteResults checks that a result without the
// fields its kind requires, or of an experiment or kind this lwbench does
// not know, fails with exit 1 and a line naming the file and the field or
// value, instead of an empty table (exit 0) or a complaint about the
// schema version.
func TestReportRefusesIncompleteResults(t *testing.T) {
	valid := func(edit func(r *experiment.Result)) string {
		r := *syntheticExperiments()[3] // defrag-stall
		edit(&r)
		b, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name string
		doc  string
		want []string // in the error, besides the file
	}{
		{"experiment alone", `{"experiment":"defrag-stall"}`, []string{`missing required field "cases"`}},
		{"cases null", `{"kind":"ExperimentResult","schemaVersion":1,"experiment":"defrag-stall","cases":null}`, []string{`"cases"`}},
		{"cases empty", `{"kind":"ExperimentResult","schemaVersion":1,"experiment":"defrag-stall","cases":[]}`, []string{`"cases"`}},
		{"empty case", `{"kind":"ExperimentResult","schemaVersion":1,"experiment":"defrag-stall","cases":[{}]}`, []string{`"cases[0].experiment"`}},
		{"case without name", valid(func(r *experiment.Result) {
			r.Cases = append([]experiment.CaseSummary(nil), r.Cases...)
			r.Cases[1].Case = ""
		}), []string{`"cases[1].case"`}},
		{"case of another experiment", valid(func(r *experiment.Result) {
			r.Cases = append([]experiment.CaseSummary(nil), r.Cases...)
			r.Cases[0].Experiment = experiment.NameCatchup
		}), []string{`cases[0].experiment is "catchup"`}},
		{"without its part", valid(func(r *experiment.Result) { r.DefragStall = nil }), []string{`"defragStall.cases"`}},
		{"unknown experiment", `{"kind":"ExperimentResult","schemaVersion":1,"experiment":"defrag-stal","cases":[{"experiment":"defrag-stal","case":"a"}]}`,
			[]string{`unknown experiment "defrag-stal"`}},
		{"unknown experiment without kind", `{"experiment":"x"}`, []string{`unknown experiment "x"`}},
		{"unknown kind", `{"kind":"RelistResult","schemaVersion":1}`, []string{`unknown kind "RelistResult"`}},
		{"run without scenario", `{"kind":"RunResult","schemaVersion":2}`, []string{`missing required field "scenario.profile"`}},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			if err := os.WriteFile(path, []byte(tt.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := lwbench(t, "report", path)
			if code != cli.ExitError || out != "" {
				t.Errorf("exit %d, output %q; want exit 1 and no table", code, out)
			}
			for _, w := range append(tt.want, path) {
				if !strings.Contains(errOut, w) {
					t.Errorf("error %q does not say %q", errOut, w)
				}
			}
			if strings.Contains(errOut, "newer") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("error %q: want one line, not blaming the schema version", errOut)
			}
		})
	}
}

// largeResult returns a compaction-sweep result whose timelines hold
// about size bytes of JSON: a probe series of that many intervals.
func largeResult(t *testing.T, size int) []byte {
	t.Helper()
	r := *syntheticExperiments()[2] // compaction-sweep
	iv := compaction.ProbeInterval{StartMs: 100, Ops: 10, P50Ms: 1.5, MaxMs: 3.25}
	one, _ := json.Marshal(iv)
	series := make([]compaction.ProbeInterval, size/(len(one)+1))
	for i := range series {
		series[i] = iv
		series[i].StartMs = float64(i) * 250
	}
	r.Timelines = []experiment.Timeline{{Name: "interval=2s", Probe: compaction.ProbeResult{SeriesIntervalMs: 250, Series: series}}}
	b, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReportMemoryDoesNotAddUpAcrossFiles reads six results of 4 MB each
// and checks that what report keeps of them is a small part of their
// size: a summary per result, not every result whole, so that memory
// does not add up with the number of files (six files of 60 MB each
// exhausted memory).
func TestReportMemoryDoesNotAddUpAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	b := largeResult(t, 4<<20)
	var paths []string
	var total int
	for i := range 6 {
		p := filepath.Join(dir, strings.Repeat("r", i+1)+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		total += len(b)
	}
	b = nil
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	results, pngs, err := readResults(paths, false)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if len(results) != 6 || len(pngs) != 0 || len(results[5].Cases) != 2 {
		t.Fatalf("read %d results, %d figures; want 6 results of 2 cases, no figure", len(results), len(pngs))
	}
	if kept > int64(total)/20 {
		t.Errorf("report keeps %d bytes of heap after reading %d bytes of results; want at most 5%% of them", kept, total)
	}
	runtime.KeepAlive(results)
}

// TestReportTotalSizeLimit checks that files over the total
// report.MaxTotalDocumentBytes, each within its own limit, are refused
// before any is read, with an error naming the limit.
func TestReportTotalSizeLimit(t *testing.T) {
	dir := t.TempDir()
	var args []string
	for i := range 6 {
		p := filepath.Join(dir, strings.Repeat("r", i+1)+".json")
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 60<<20); err != nil { // sparse: 60 MB of zeros, never read
			t.Fatal(err)
		}
		args = append(args, p)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, errOut, code := lwbench(t, append([]string{"report"}, args...)...)
	runtime.ReadMemStats(&after)
	if code != cli.ExitError || !strings.Contains(errOut, "across all files") || !strings.Contains(errOut, "268435456") || !strings.Contains(errOut, args[4]) {
		t.Errorf("report of six 60 MB files: exit %d, %q; want exit 1 naming the fifth file and the total limit of %d bytes", code, errOut, report.MaxTotalDocumentBytes)
	}
	if read := after.TotalAlloc - before.TotalAlloc; read > 16<<20 {
		t.Errorf("report allocated %d bytes before refusing; want the files unread", read)
	}
}

// TestBenchstatOnReportAndExperiments checks that report writes a
// benchstat line per case of every result with --benchstat, and that
// every experiment takes the flag and checks its path before running.
func TestBenchstatOnReportAndExperiments(t *testing.T) {
	dir := t.TempDir()
	var args []string
	cases := 0
	for _, r := range syntheticExperiments() {
		args = append(args, writeJSON(t, dir, r.Experiment+".json", r))
		cases += len(r.Cases)
	}
	bench := filepath.Join(dir, "bench.txt")
	if _, errOut, code := lwbench(t, append(append([]string{"report"}, args...), "--benchstat", bench)...); code != 0 {
		t.Fatalf("report --benchstat: exit %d, %s", code, errOut)
	}
	b, err := os.ReadFile(bench)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			lines = append(lines, l)
		}
	}
	if len(lines) != cases {
		t.Errorf("report --benchstat wrote %d benchmark lines, want one per case (%d):\n%s", len(lines), cases, b)
	}
	for _, want := range []string{"BenchmarkLwbenchRelistStorm/objects=1000/pageSize=500-", "p50-backoff-ms", "p50-resync-ms",
		"BenchmarkLwbenchDefragStall/size=100MB/overlapping-", "defrag-ms"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("benchstat lines lack %q:\n%s", want, b)
		}
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	under := filepath.Join(file, "x") // a path under a regular file
	for _, name := range append([]string{"report"}, experiment.Names...) {
		a := []string{name, "--benchstat", under}
		if name == "report" {
			a = append(a, args[0])
		}
		_, errOut, code := lwbench(t, a...)
		if code != cli.ExitUsage || !strings.Contains(errOut, "--benchstat") || strings.Contains(errOut, "seeding") {
			t.Errorf("lwbench %s: exit %d, %q; want exit 2 naming --benchstat before the run", strings.Join(a, " "), code, errOut)
		}
	}
}
