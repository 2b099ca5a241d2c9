package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestFlagValue(t *testing.T) {
	args := []string{"--sync-timeout", "10m", "--start-concurrency", "8", "--x=3"}
	for name, want := range map[string]string{"--start-concurrency": "8", "--x": "3", "--missing": ""} {
		if got := flagValue(args, name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}

func TestBenchMetrics(t *testing.T) {
	out := `goos: linux
BenchmarkKubeletWatches-2   	       1	2595421986 ns/op	         0.7908 cpu-s	  29317336 heap-B	       100.0 nodes
--- BENCH: BenchmarkKubeletWatches-2
    kubelet_bench_test.go:117: created 100 nodes
BenchmarkOther-2 1 5 ns/op 3 x
BenchmarkRepeated-2 1 9 ns/op 1.30 cpu-ratio
BenchmarkRepeated-2 1 7 ns/op 0.95 cpu-ratio
BenchmarkRepeated-2 1 8 ns/op 1.02 cpu-ratio
BenchmarkEven-2 1 4 ns/op
BenchmarkEven-2 1 2 ns/op
PASS
`
	tests := []struct {
		name string
		want map[string]float64
	}{
		{"BenchmarkKubeletWatches", map[string]float64{"ns/op": 2595421986, "cpu-s": 0.7908, "heap-B": 29317336, "nodes": 100}},
		{"BenchmarkMissing", map[string]float64{}},
		// Three runs: each unit's median, so the disturbed 1.30 does not
		// decide; an even count takes the lower middle.
		{"BenchmarkRepeated", map[string]float64{"ns/op": 8, "cpu-ratio": 1.02}},
		{"BenchmarkEven", map[string]float64{"ns/op": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := benchMetrics(out, tt.name); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWriteRuns: the runs' table holds each run's figures, the variants'
// flags and why, and a run that did not finish says so.
func TestWriteRuns(t *testing.T) {
	var b strings.Builder
	writeRuns(&b, []*RunCost{
		{OK: true, MaxRSSBytes: 5.4e9, PeakHeapBytes: 5.1e9, CPUSeconds: 519, WallSeconds: 1091, Relists: 112, WritesScheduledMs: 20000, WritesTookMs: 65000,
			Verdict: "PASS: every watch guarantee held", Warnings: []string{"the target could not keep the write rate"}},
		{Variant: runVariants[0].Name, OK: true, MaxRSSBytes: 1.2e9, Verdict: "FAIL: 2 unsynced informers"},
		{Variant: runVariants[1].Name, Error: "exit signal: killed"},
	}, &BareRunCost{Metrics: map[string]float64{"synced-informers": 300, "caught-up-informers": 200, "sync-s": 100, "writes-s": 60,
		"cpu-s": 500, "peak-rss-B": 3e9, "pod-rangestreams": 900}}, 300)
	for _, want := range []string{
		"| the target's command | 5400.0 MB | 5100.0 MB | 519 | 1091 | 112 | 65.0 s (20.0 s) | PASS |",
		"| etcd in a process of its own | 1200.0 MB |",
		"| kube-apiserver's 5-minute compaction | did not finish: exit signal: killed |",
		"- the target's command: PASS: every watch guarantee held; warning: the target could not keep the write rate",
		"- etcd in a process of its own (`--cluster-size 1`: lwbench's peak RSS without the embedded etcd's): FAIL: 2 unsynced informers",
		"| bare client-go informers, the same load | 3000.0 MB | - | 500 | 160 | - | 60.0 s (20.0 s) | FAIL: 300 of 300 synced, 200 caught up |",
		"300 of 300 synced in 100 s, 200 caught up with a marker written after the writes; kube-apiserver streamed the pods' state from etcd 900 times for 100 pod informers",
		"  - the target's command above (lwbench's informers, the same load and stack) peaked at 5400.0 MB, 1.80 of the bare set's 3000.0 MB",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("got:\n%s\nwant a line with %q", b.String(), want)
		}
	}
}

// TestRerender rewrites the table from a JSON written before Watchers,
// Objects and TookSeconds were kept: the flags' sizes stand in, the took
// clause is left out rather than made up.
func TestRerender(t *testing.T) {
	dir := t.TempDir()
	old := `{"date":"2026-12-06T21:16:10Z","commit":"d4a422c","machine":"AMD EPYC, 2 cores","go":"go1.26.8","quick":false,"informers":[],"kubeletWatches":null,` +
		`"run":{"command":"lwbench run --kube-apiserver 1.37 --watchers 300 --objects 3000 -w json","ok":true,"maxRSSBytes":3191431168,"verdict":"PASS: nothing lost"},` +
		`"variants":[{"variant":"a 2 GiB soft memory limit","ok":true,"maxRSSBytes":2225600000,"verdict":"FAIL: 80 unsynced watchers"}]}`
	if err := os.WriteFile(filepath.Join(dir, "cost.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rerender(options{out: filepath.Join(dir, "cost.md"), watchers: 300, objects: 3000}, false, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cost.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{"- Date: 2026-12-06T21:16:10Z\n", "etcdkit commit d4a422c", "| lwbench run: 300 informers x 3000 pods sync and finish, lwbench at most 2.5 GB | peak RSS 3191.4 MB",
		"## The lwbench run: the target's command and its variants", "| a 2 GiB soft memory limit | 2225.6 MB |"} {
		if !strings.Contains(md, want) {
			t.Errorf("rendered table lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "(took ") {
		t.Errorf("a took clause made up:\n%s", md)
	}
}

// TestVerdictRows: the target's row fails a run that finished under 2.5 GB
// with informers unsynced, and the harness-alone rows judge its memory and
// its sync apart.
func TestVerdictRows(t *testing.T) {
	md := report(Result{Watchers: 300, Objects: 3000,
		Run:      &RunCost{OK: true, MaxRSSBytes: 2.0e9, PeakHeapBytes: 1.8e9, Verdict: "FAIL: 100 unsynced watchers; latencies distorted"},
		Variants: []*RunCost{{Variant: runVariants[0].Name, OK: true, MaxRSSBytes: 2.1e9, PeakHeapBytes: 1.9e9, Verdict: "FAIL: 159 unsynced watchers; more"}}})
	for _, want := range []string{
		"| lwbench run: 300 informers x 3000 pods sync and finish, lwbench at most 2.5 GB | peak RSS 2000.0 MB, peak heap 1800.0 MB, 0 CPU s, 0 s; FAIL: 100 unsynced watchers | FAIL |",
		"| the harness alone (etcd in a process of its own): lwbench at most 2.5 GB | peak RSS 2100.0 MB, peak heap 1900.0 MB | pass |",
		"| the harness alone (etcd in a process of its own): 300 informers x 3000 pods sync and finish | FAIL: 159 unsynced watchers | FAIL |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	md = report(Result{Watchers: 300, Objects: 3000, Run: &RunCost{OK: true, MaxRSSBytes: 2.4e9, Verdict: "PASS: nothing lost"}})
	if !strings.Contains(md, "| lwbench run: 300 informers x 3000 pods sync and finish, lwbench at most 2.5 GB | peak RSS 2400.0 MB, peak heap 0.0 MB, 0 CPU s, 0 s | pass |") {
		t.Errorf("a passing run under 2.5 GB not passed:\n%s", md)
	}
	if strings.Contains(md, "the harness alone") {
		t.Errorf("harness-alone rows without the variant:\n%s", md)
	}
}
