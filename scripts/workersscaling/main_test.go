package main

import (
	"strings"
	"testing"
	"time"
)

// pt is a point on 2 CPUs with its steady-phase CPU measured.
func pt(workers int, offered, writes, workerCores, etcdCores, load float64, limited int, commitMs float64) point {
	return point{Workers: workers, OfferedPerSecond: offered, WritesPerSecond: writes, NumCPU: 2, SteadyMeasured: true,
		SteadyWorkersCPUCores: workerCores, SteadyEtcdCPUCores: etcdCores, LoadAverageMax: load, GeneratorLimited: limited,
		EtcdCommitP99Ms: commitMs}
}

// TestDecide: each rule, in order, on constructed figures.
func TestDecide(t *testing.T) {
	base := pt(1, 1000, 1000, 0.3, 0.5, 1.0, 0, 4)
	tests := []struct {
		name    string
		p       point
		base    *point
		want    string
		wantWhy string
	}{
		{"kept up, idle", pt(1, 1000, 995, 0.3, 0.5, 1.0, 0, 4), &base, satNone, "100% of the offered"},
		{"kept up, busy CPUs: none", pt(2, 2000, 1900, 0.9, 1.0, 2.5, 0, 5), &base, satNone, "95%"},
		{"behind, etcd alone at 90%", pt(4, 4000, 2000, 0.1, 1.85, 2.5, 0, 5), &base, satEtcd, "etcd alone used 1.85 of 2 cores"},
		{"behind, CPUs busy", pt(4, 4000, 2500, 0.8, 1.0, 1.5, 2, 5), &base, satMachine, "workers 0.80 + etcd 1.00 cores of 2"},
		{"behind, load average above the CPUs", pt(8, 8000, 2500, 0.5, 0.7, 3.4, 0, 5), &base, satMachine, "load average up to 3.4"},
		{"behind, a worker limited, CPU to spare", pt(4, 4000, 2500, 0.5, 0.7, 1.2, 1, 5), &base, satGenerator, "1 of 4 workers limited"},
		{"behind, CPU to spare, none limited", pt(4, 4000, 2500, 0.5, 0.7, 1.2, 0, 5), &base, satEtcd, "serial path"},
		{"kept up, commit p99 doubled", pt(2, 2000, 2000, 0.5, 0.7, 1.2, 0, 12), &base, satEtcd, "grew from 4.0 to 12.0 ms"},
		{"kept up, commit doubled but under 10 ms", pt(2, 2000, 2000, 0.5, 0.7, 1.2, 0, 9), &base, satNone, ""},
		{"kept up, commit grew less than 2x", pt(2, 2000, 2000, 0.5, 0.7, 1.2, 0, 7.9), &base, satNone, ""},
		{"kept up, no base", pt(2, 2000, 2000, 0.5, 0.7, 1.2, 0, 50), nil, satNone, ""},
		{"kept up, a worker limited", pt(2, 2000, 2000, 0.5, 0.7, 1.2, 1, 5), &base, satGenerator, "waiting for a CPU"},
		{"exactly 90% is not behind", pt(2, 2000, 1800, 0.9, 1.0, 2.5, 0, 5), &base, satNone, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := decide(tc.p, tc.base)
			if got != tc.want || !strings.Contains(why, tc.wantWhy) {
				t.Errorf("got %q (%s), want %q (with %q)", got, why, tc.want, tc.wantWhy)
			}
		})
	}
}

// TestDecideResultFigures: without the steady phase's /proc figures, the
// results' own CPU figures decide.
func TestDecideResultFigures(t *testing.T) {
	p := point{Workers: 4, OfferedPerSecond: 4000, WritesPerSecond: 2000, NumCPU: 2, ResultWorkersCPUCores: 1.0, ResultEtcdCPUCores: 0.9,
		SteadyWorkersCPUCores: 0.1, SteadyEtcdCPUCores: 0.1}
	if got, why := decide(p, nil); got != satMachine {
		t.Errorf("got %q (%s), want %q", got, why, satMachine)
	}
}

// TestKnee: the largest N up to which every step grew by 10 %.
func TestKnee(t *testing.T) {
	at := func(ws ...float64) []point {
		var ps []point
		for i, w := range ws {
			ps = append(ps, point{Workers: 1 << i, WritesPerSecond: w, Saturated: satMachine, Why: "why"})
		}
		return ps
	}
	tests := []struct {
		name     string
		points   []point
		want     int
		wantText string
	}{
		{"none", nil, 0, ""},
		{"one", at(1000), 1, "Only 1 worker measured"},
		{"grows throughout", at(1000, 2000, 3000, 3400), 8, "No knee up to 8 workers"},
		{"knee at 2", at(1000, 1900, 2000, 1800), 2, "The knee is at 2 workers (1900 writes/s"},
		{"flat from the start", at(1000, 1050, 3000, 4000), 1, "The knee is at 1 worker ("},
		{"exactly 10 %", at(1000, 1100, 1150), 2, "from 2 to 4 workers write throughput changed by +5%"},
		{"nothing saturated", func() []point { ps := at(1000, 2000); ps[1].Saturated = satNone; return ps }(), 2, "at 2 workers nothing saturated (why)."},
		{"falls", at(1000, 2000, 1000), 2, "changed by -50% (to 1000 writes/s), less than +10%; at 4 workers what saturated was machine (why)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, text := knee(tc.points)
			if got != tc.want || !strings.Contains(text, tc.wantText) {
				t.Errorf("got %d (%q), want %d (with %q)", got, text, tc.want, tc.wantText)
			}
		})
	}
}

// TestParseStat: a command name with spaces and parentheses, and the
// fields after it.
func TestParseStat(t *testing.T) {
	line := "1234 (lw (bench) x) S 99 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	comm, ppid, cpu, err := parseStat(line)
	if err != nil || comm != "lw (bench) x" || ppid != 99 || cpu != 3 {
		t.Errorf("got %q, ppid %d, %.2f s, %v; want \"lw (bench) x\", 99, 3.00 s", comm, ppid, cpu, err)
	}
	if _, _, _, err := parseStat("1 (x) S 0"); err == nil {
		t.Error("got no error for a short line")
	}
}

// TestSamplerCores: CPU per class between the samples around the
// window; a process that starts inside counts from 0, one that ends
// counts to its last sample.
func TestSamplerCores(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	s := &treeSampler{root: 1, class: map[int]string{1: classCoordinator, 2: classWorker, 3: classWorker, 4: classEtcd}}
	s.samples = []treeSample{
		{at(0), map[int]float64{1: 1, 2: 1}},
		{at(1), map[int]float64{1: 2, 2: 2, 4: 0.5}},
		{at(2), map[int]float64{1: 3, 2: 3, 3: 1, 4: 1}},
		{at(3), map[int]float64{1: 4, 3: 2, 4: 1.5}},
		{at(4), map[int]float64{1: 5, 3: 3, 4: 2}},
	}
	got, ok := s.cores(at(1.2), at(3.5))
	if !ok {
		t.Fatal("got no figures for a covered window")
	}
	// Samples 1 (at 1 s) to 4 (at 4 s): 3 s. Coordinator 5-2; workers:
	// pid 2 3-2 (ended), pid 3 3-0 (started); etcd 2-0.5.
	want := map[string]float64{classCoordinator: 1, classWorker: 4.0 / 3, classEtcd: 0.5}
	for k, w := range want {
		if d := got[k] - w; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: got %.3f cores, want %.3f", k, got[k], w)
		}
	}
	if _, ok := s.cores(at(-1), at(2)); ok {
		t.Error("got figures for a window starting before the first sample")
	}
	// lwbench exited just before the window's end: the last sample, at
	// 4 s, covers 3 of 3.5 s (86 %); of a window to 6 s, 3 of 5 s (60 %).
	if got, ok := s.cores(at(1), at(4.5)); !ok || got[classCoordinator] != 1 {
		t.Errorf("got %v, %v for a window 86%% covered, want the figures to the last sample", got, ok)
	}
	if _, ok := s.cores(at(1), at(6)); ok {
		t.Error("got figures for a window 60% covered")
	}
}

// TestClassify: workers by their command line, whatever the binary's
// name; etcd by its name.
func TestClassify(t *testing.T) {
	tests := []struct {
		root bool
		comm string
		args []string
		want string
	}{
		{true, "lwbench", []string{"/tmp/lwbench", "run", "--workers", "2"}, classCoordinator},
		{false, "lwbench-fixed", []string{"/tmp/lwbench-fixed", "worker", "--index", "0"}, classWorker},
		{false, "etcd", []string{"/cache/etcd", "--name", "m0"}, classEtcd},
		{false, "ip", []string{"ip", "netns", "exec", "x", "etcd"}, classOther},
		{false, "lwbench", nil, classOther},
	}
	for _, tc := range tests {
		if got := classify(tc.root, tc.comm, tc.args); got != tc.want {
			t.Errorf("classify(%v, %q, %q): got %q, want %q", tc.root, tc.comm, tc.args, got, tc.want)
		}
	}
}

// TestMarkdown: the table, the knee sentence and the quick label come
// from the figures.
func TestMarkdown(t *testing.T) {
	pts := []point{pt(1, 1000, 990, 0.3, 0.5, 1, 0, 4), pt(2, 2000, 1500, 0.9, 1.0, 2.5, 1, 5)}
	pts[0].EtcdVersion, pts[1].EtcdVersion = "3.7.3", "3.7.3"
	for i := range pts {
		pts[i].Saturated, pts[i].Why = decide(pts[i], &pts[0])
	}
	k, sentence := knee(pts)
	res := results{Quick: true, NumCPU: 2, Commit: "abc", GoVersion: "go1.26", Points: pts, Knees: []kneeResult{{0, k, sentence}}}
	got := markdown(res, time.Minute)
	for _, w := range []string{
		"QUICK RUN", "workers-scaling.sh --quick", "etcd 3.7.3; go1.26; etcdkit commit abc", "## Against lwbench's embedded member",
		"**No knee up to 2 workers: write throughput grew by at least 10% at every step, to 1500 writes/s; at 2 workers what saturated was machine (75% of the offered writes; CPUs busy",
		"| 1 | 1000 | 990 | 99% | 0 | 0.0 | 0.0 | 0.30 | 0.50 | 0 | 4.0 | 1.00 | 0 of 1 | none | 99% of the offered writes |",
		"| 2 | 2000 | 1500 | 75% | ", "| 1 of 2 | machine | 75% of the offered writes; CPUs busy",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("got no %q in:\n%s", w, got)
		}
	}
}
