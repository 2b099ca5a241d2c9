package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/pkg/report"
)

func TestChurnPhase(t *testing.T) {
	for _, tc := range []struct {
		phase string
		want  bool
	}{
		{"seed", false},
		{"seed after compaction 1", false},
		{"sync", false},
		{"before", false},
		{"steady", true},
		{"steady after compaction 2", true},
		{"defrag", true},
		{"restart kube-apiserver after compaction 3", true},
		{"after restart", true},
		{"drain after compaction 4", false},
		{"stop", false},
	} {
		if got := churnPhase(tc.phase); got != tc.want {
			t.Errorf("churnPhase(%q): got %v, want %v", tc.phase, got, tc.want)
		}
	}
}

// TestRenderFailedCase: a case whose lwbench failed without a result is
// in the summary as failed, with the end of its log; a case never run is
// left out.
func TestRenderFailedCase(t *testing.T) {
	dir := t.TempDir()
	meta := `{"case":"quick-20","command":"lwbench run --nodes 20","exitCode":1,"logTail":"Error: the control plane did not start"}`
	if err := os.WriteFile(filepath.Join(dir, "quick-20.meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	md, err := render(options{out: dir}, cases(true))
	if err != nil {
		t.Fatal(err)
	}
	s := string(md)
	if !strings.Contains(s, "| quick-20 | - | - | failed: no result (exit 1): Error: the control plane did not start") {
		t.Errorf("got\n%s\nwant quick-20 failed with its log", s)
	}
	if strings.Contains(s, "quick-defrag") {
		t.Errorf("got\n%s\nwant no section of a case that never ran", s)
	}
}

// TestWritesLines: the resources with the most writes get lines of their
// own, most first, in writes per second of the interval; the rest are
// summed as "other".
func TestWritesLines(t *testing.T) {
	s := &report.EtcdWriteSeries{IntervalMs: 2000, Resources: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}}
	s.Samples = []report.EtcdWriteSample{
		{AtMs: 2000, Writes: []int64{2, 4, 6, 8, 10, 12, 14, 16, 18}},
		{AtMs: 4000, Writes: []int64{0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{AtMs: 6000, Writes: []int64{2, 1}}, // later resources had none yet
	}
	lines := writesLines(s)
	var names []string
	for _, l := range lines {
		names = append(names, l.Name)
	}
	if got, want := strings.Join(names, ","), "i,h,g,f,e,d,c,other"; got != want {
		t.Fatalf("got lines %s, want %s", got, want)
	}
	if got := lines[0].Points[0].Y; got != 9 {
		t.Errorf("i at 2 s: got %v writes/s, want 9 (18 in 2 s)", got)
	}
	other := lines[len(lines)-1].Points
	if other[0].Y != 3 || other[2].Y != 1.5 || other[2].X != 6 {
		t.Errorf("other: got %v, want 3 writes/s at 2 s (a and b: 6 in 2 s) and 1.5 at 6 s", other)
	}
}

// TestWritesLinesWindows: a long run's per-second samples are summed
// into about 100 windows, each point still in writes per second.
func TestWritesLinesWindows(t *testing.T) {
	s := &report.EtcdWriteSeries{IntervalMs: 1000, Resources: []string{"leases"}}
	for i := 1; i <= 300; i++ {
		s.Samples = append(s.Samples, report.EtcdWriteSample{AtMs: float64(i * 1000), Writes: []int64{int64(2 + i%2)}})
	}
	pts := writesLines(s)[0].Points
	if len(pts) != 100 {
		t.Fatalf("got %d points, want 100 windows of 3 s", len(pts))
	}
	for _, p := range pts {
		if p.Y < 2.3 || p.Y > 2.7 {
			t.Fatalf("got %v writes/s at %v s, want 2.33-2.67 (2 and 3 writes a second in turn)", p.Y, p.X)
		}
	}
}

func TestFits(t *testing.T) {
	for _, tt := range []struct {
		h    *report.NodeHealth
		want string
	}{
		{nil, "-"},
		{&report.NodeHealth{Nodes: 100, IntervalP99Ms: 10700}, "yes: Lease p99 10.7 s"},
		{&report.NodeHealth{Nodes: 1000, IntervalP99Ms: 50000, LeaseExpired: 1000}, "late: 1000 nodes past 40 s, Lease p99 50 s, none NotReady"},
		{&report.NodeHealth{Nodes: 5000, IntervalP99Ms: 256700, LeaseExpired: 5000, NotReady: 4142}, "no: 4142 of 5000 nodes NotReady, Lease p99 257 s"},
	} {
		if got := fits(tt.h); got != tt.want {
			t.Errorf("fits(%+v) = %q, want %q", tt.h, got, tt.want)
		}
	}
}
