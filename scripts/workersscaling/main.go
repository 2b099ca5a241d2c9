// Command workersscaling measures how `lwbench run --workers N` scales on
// this machine, for scripts/workers-scaling.sh, and writes the table to
// -out (results/workers-scaling.md) and the raw figures beside it
// (results/workers-scaling.json).
//
// For each target (-cluster-sizes: 0 is lwbench's embedded member, 3 a
// cluster of three real etcd processes) and each worker count (-workers),
// it runs `lwbench run --workers N -w json` with a load that grows with N:
// N x -rate-per-worker writes per second and N x -watchers-per-worker
// informers, over a fixed data set (-objects pods in -namespaces
// namespaces, at least one namespace per worker), without compaction or
// defragmentation so that nothing but the load stalls the writes. While
// lwbench runs, the CPU time of its process tree (/proc/<pid>/stat: the
// coordinator, which holds the embedded member and no load, the worker
// processes and the etcd processes) is sampled every 250 ms, so that
// each one's CPU over the write phase alone can be told apart.
//
// Per N it records the merged result's figures and decides what
// saturated (decide) and, per target, the knee (knee).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	machineinfo "github.com/kubestore/etcdkit/internal/machine"
	"github.com/kubestore/etcdkit/pkg/report"
)

// clockTicksPerSecond is USER_HZ, the unit of /proc/<pid>/stat's utime
// and stime: 100 on every Linux architecture Go supports.
const clockTicksPerSecond = 100

// Thresholds of decide, knee and treeSampler.cores.
const (
	// behindShare: writes below this share of the offered rate fell
	// behind their schedule.
	behindShare = 0.9
	// busyShare: CPU use at or above this share of the machine's CPUs
	// left nothing to spare.
	busyShare = 0.9
	// commitGrowth and commitFloorMs: etcd's backend commit p99 grew when
	// it reached this multiple of the one-worker run's and at least this
	// many ms.
	commitGrowth  = 2.0
	commitFloorMs = 10.0
	// kneeGrowth: a step of N still scaled when throughput grew by at
	// least this factor.
	kneeGrowth = 1.10
	// minCovered: the share of the write phase the CPU samples must
	// cover at least (treeSampler.cores).
	minCovered = 0.8
)

type options struct {
	lwbench           string
	out               string
	workers           []int
	clusterSizes      []int
	ratePerWorker     float64
	watchersPerWorker int
	objects           int
	namespaces        int
	duration          time.Duration
	noFsync           bool
	commit            string
	quick             bool
}

func main() {
	var o options
	flag.StringVar(&o.lwbench, "lwbench", "", "lwbench binary")
	flag.StringVar(&o.out, "out", "results/workers-scaling.md", "where to write the table (the JSON goes beside it, .json)")
	workers := flag.String("workers", "1,2,4,8", "worker process counts, comma-separated")
	sizes := flag.String("cluster-sizes", "0,3", "targets, comma-separated: 0 the embedded member, 3 three etcd processes")
	flag.Float64Var(&o.ratePerWorker, "rate-per-worker", 1000, "writes per second offered per worker (the load offers N times this)")
	flag.IntVar(&o.watchersPerWorker, "watchers-per-worker", 5, "informers per worker")
	flag.IntVar(&o.objects, "objects", 2000, "pods seeded (the same for every N)")
	flag.IntVar(&o.namespaces, "namespaces", 16, "namespaces (at least the largest N, so every shard has one)")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "length of each run's write phase")
	flag.BoolVar(&o.noFsync, "unsafe-no-fsync", false, "run etcd without fsync")
	flag.StringVar(&o.commit, "commit", "", "git commit measured")
	flag.BoolVar(&o.quick, "quick", false, "label the output a quick run (a check of the script, not the published figures)")
	flag.Parse()
	var err error
	if o.workers, err = ints(*workers); err != nil {
		log.Fatalf("workersscaling: -workers: %v", err)
	}
	if o.clusterSizes, err = ints(*sizes); err != nil {
		log.Fatalf("workersscaling: -cluster-sizes: %v", err)
	}
	if o.lwbench == "" {
		log.Fatal("workersscaling: -lwbench is required")
	}
	if o.namespaces < slices.Max(o.workers) {
		log.Fatalf("workersscaling: -namespaces %d: want at least the largest -workers, %d", o.namespaces, slices.Max(o.workers))
	}
	if err := run(o); err != nil {
		log.Fatalf("workersscaling: %v", err)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: want non-negative numbers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// point is one run's figures: N workers against one target.
type point struct {
	// ClusterSize is 0 for the embedded member, else the etcd processes.
	ClusterSize int `json:"clusterSize"`
	Workers     int `json:"workers"`
	Watchers    int `json:"watchers"`
	// OfferedPerSecond is the writes per second scheduled (--write-rate).
	OfferedPerSecond float64 `json:"offeredWritesPerSecond"`
	// WritesPerSecond is the merged writes.throughputPerSecond.
	WritesPerSecond float64 `json:"writesPerSecond"`
	WriteErrors     int64   `json:"writeErrors"`
	EventsPerSecond float64 `json:"eventsPerSecond"` // delivery.eventsPerSecond
	WriteP99Ms      float64 `json:"writeP99Ms"`      // writes.latency.p99Ms, from schedule
	DeliveryP99Ms   float64 `json:"deliveryP99Ms"`   // delivery.fromResponse.p99Ms
	// ResultWorkersCPUCores is the sum of workers[].self.cpuCores and
	// ResultEtcdCPUCores the first worker's self.etcd.cpuCores (the
	// member it read: for the embedded one, the coordinator's process),
	// each over its whole run: seeding, sync and drain included.
	ResultWorkersCPUCores float64 `json:"resultWorkersCpuCores"`
	ResultEtcdCPUCores    float64 `json:"resultEtcdCpuCores"`
	// Steady* are from /proc over the write phase alone; SteadyMeasured
	// is false when the samples did not cover it.
	SteadyMeasured            bool    `json:"steadyMeasured"`
	SteadyWorkersCPUCores     float64 `json:"steadyWorkersCpuCores"`
	SteadyEtcdCPUCores        float64 `json:"steadyEtcdCpuCores"`        // the etcd processes, or the embedded member's coordinator
	SteadyCoordinatorCPUCores float64 `json:"steadyCoordinatorCpuCores"` // with an embedded member, the same as SteadyEtcdCPUCores
	// EtcdPutsPerSecond and EtcdCommitP99Ms are etcd's own /metrics over
	// the steady phase (etcdMetrics): etcd_mvcc_put_total over the
	// phase's duration (one member's: every member applies every write)
	// and etcd_disk_backend_commit_duration_seconds' p99 (of the members'
	// buckets summed).
	EtcdPutsPerSecond float64 `json:"etcdPutsPerSecond"`
	EtcdCommitP99Ms   float64 `json:"etcdCommitP99Ms"`
	LoadAverageMax    float64 `json:"loadAverageMax"`
	NumCPU            int     `json:"numCPU"`
	// GeneratorLimited counts the workers limited by the generator;
	// GeneratorLimitedWhy says why, one line per such worker.
	GeneratorLimited    int      `json:"generatorLimited"`
	GeneratorLimitedWhy []string `json:"generatorLimitedWhy,omitempty"`
	EtcdVersion         string   `json:"etcdVersion"`
	Verdict             string   `json:"verdict"` // lwbench's own
	// Saturated is decide's answer: machine, etcd, generator or none;
	// Why its reason.
	Saturated string `json:"saturated"`
	Why       string `json:"why"`
}

// workerCores is the workers' CPU, over the write phase when measured.
func (p point) workerCores() float64 {
	if p.SteadyMeasured {
		return p.SteadyWorkersCPUCores
	}
	return p.ResultWorkersCPUCores
}

// etcdCores is etcd's CPU, over the write phase when measured.
func (p point) etcdCores() float64 {
	if p.SteadyMeasured {
		return p.SteadyEtcdCPUCores
	}
	return p.ResultEtcdCPUCores
}

// Saturation verdicts.
const (
	satMachine   = "machine"
	satEtcd      = "etcd"
	satGenerator = "generator"
	satNone      = "none"
)

// decide says what saturated in p, given base, the one-worker run on the
// same target (nil when there is none; p itself may be base). The rules,
// first match wins:
//
//  1. the writes fell behind (throughput below 90 % of offered) and etcd
//     alone used 90 % of the machine's CPUs: etcd;
//  2. behind, and the workers and etcd together used 90 % of the CPUs,
//     or the load average exceeded them: the machine;
//  3. behind, and a worker was limited by the generator: the generator;
//  4. behind with CPU to spare and no worker limited: etcd (its serial
//     path: apply, commit, fsync);
//  5. kept up, but etcd's backend commit p99 at least doubled from the
//     one-worker run's and reached 10 ms: etcd;
//  6. kept up, but a worker was limited by the generator: the generator
//     (its latencies include waiting for a CPU);
//  7. none.
func decide(p point, base *point) (saturated, why string) {
	cpus := float64(p.NumCPU)
	used := p.workerCores() + p.etcdCores()
	share := 0.0
	if p.OfferedPerSecond > 0 {
		share = p.WritesPerSecond / p.OfferedPerSecond
	}
	behind := share < behindShare
	kept := fmt.Sprintf("%.0f%% of the offered writes", share*100)
	split := fmt.Sprintf("workers %.2f + etcd %.2f cores of %d", p.workerCores(), p.etcdCores(), p.NumCPU)
	busy := cpus > 0 && (used >= busyShare*cpus || p.LoadAverageMax > cpus)
	limited := fmt.Sprintf("%d of %d workers limited by the generator", p.GeneratorLimited, p.Workers)
	switch {
	case behind && cpus > 0 && p.etcdCores() >= busyShare*cpus:
		return satEtcd, fmt.Sprintf("%s; etcd alone used %.2f of %d cores", kept, p.etcdCores(), p.NumCPU)
	case behind && busy:
		return satMachine, fmt.Sprintf("%s; CPUs busy: %s, load average up to %.1f", kept, split, p.LoadAverageMax)
	case behind && p.GeneratorLimited > 0:
		return satGenerator, fmt.Sprintf("%s; %s with CPU to spare (%s)", kept, limited, split)
	case behind:
		return satEtcd, fmt.Sprintf("%s with CPU to spare (%s) and no worker limited: etcd's serial path (apply, commit, fsync)", kept, split)
	}
	if base != nil && base.EtcdCommitP99Ms > 0 && p.EtcdCommitP99Ms >= commitFloorMs && p.EtcdCommitP99Ms >= commitGrowth*base.EtcdCommitP99Ms {
		return satEtcd, fmt.Sprintf("%s, but etcd's commit p99 grew from %.1f to %.1f ms", kept, base.EtcdCommitP99Ms, p.EtcdCommitP99Ms)
	}
	if p.GeneratorLimited > 0 {
		return satGenerator, fmt.Sprintf("%s, but %s: its latencies include waiting for a CPU", kept, limited)
	}
	return satNone, kept
}

// knee returns the largest worker count up to which every step's write
// throughput grew by at least 10 % over the previous one, and a sentence
// saying so, for points of one target in increasing Workers. It returns
// 0 and an empty sentence without points.
func knee(points []point) (int, string) {
	if len(points) == 0 {
		return 0, ""
	}
	k := 0
	for i := 1; i < len(points); i++ {
		if points[i].WritesPerSecond < kneeGrowth*points[i-1].WritesPerSecond {
			break
		}
		k = i
	}
	at := points[k]
	if k == len(points)-1 {
		if len(points) == 1 {
			return at.Workers, fmt.Sprintf("Only %d worker measured (%.0f writes/s): no knee to state.", at.Workers, at.WritesPerSecond)
		}
		return at.Workers, fmt.Sprintf("No knee up to %d workers: write throughput grew by at least 10%% at every step, to %.0f writes/s; at %d workers %s.",
			at.Workers, at.WritesPerSecond, at.Workers, saturatedPhrase(at))
	}
	next := points[k+1]
	growth := 0.0
	if at.WritesPerSecond > 0 {
		growth = (next.WritesPerSecond/at.WritesPerSecond - 1) * 100
	}
	return at.Workers, fmt.Sprintf("The knee is at %d worker%s (%.0f writes/s, %.0f events/s): from %d to %d workers write throughput changed by %+.0f%% (to %.0f writes/s), "+
		"less than +10%%; at %d workers %s.",
		at.Workers, plural(at.Workers), at.WritesPerSecond, at.EventsPerSecond, at.Workers, next.Workers, growth, next.WritesPerSecond,
		next.Workers, saturatedPhrase(next))
}

// saturatedPhrase says what saturated in p, with why.
func saturatedPhrase(p point) string {
	if p.Saturated == satNone {
		return fmt.Sprintf("nothing saturated (%s)", p.Why)
	}
	return fmt.Sprintf("what saturated was %s (%s)", p.Saturated, p.Why)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// results is what the JSON file holds.
type results struct {
	Kind        string    `json:"kind"`
	Quick       bool      `json:"quick"`
	StartedAt   time.Time `json:"startedAt"`
	Commit      string    `json:"commit"`
	GoVersion   string    `json:"goVersion"`
	CPUModel    string    `json:"cpuModel"`
	NumCPU      int       `json:"numCPU"`
	MemoryBytes int64     `json:"memoryBytes"`
	LoadBefore  string    `json:"loadAverageBefore"`
	Settings    settings  `json:"settings"`
	Points      []point   `json:"points"`
	// Knees are per target: its cluster size and the knee's workers.
	Knees []kneeResult `json:"knees"`
}

type settings struct {
	RatePerWorker     float64 `json:"writeRatePerWorker"`
	WatchersPerWorker int     `json:"watchersPerWorker"`
	Objects           int     `json:"objects"`
	Namespaces        int     `json:"namespaces"`
	DurationMs        float64 `json:"durationMs"`
	Fsync             bool    `json:"fsync"`
	Args              string  `json:"args"` // lwbench run's flags beside --workers, --write-rate, --watchers
}

type kneeResult struct {
	ClusterSize int    `json:"clusterSize"`
	Workers     int    `json:"workers"`
	Sentence    string `json:"sentence"`
}

func run(o options) error {
	ctx := context.Background()
	start := time.Now().UTC()
	model, cpus, mem := machine()
	res := results{Kind: "workersScaling", Quick: o.quick, StartedAt: start, Commit: o.commit, GoVersion: runtime.Version(),
		CPUModel: model, NumCPU: cpus, MemoryBytes: mem, LoadBefore: readFile("/proc/loadavg"),
		Settings: settings{RatePerWorker: o.ratePerWorker, WatchersPerWorker: o.watchersPerWorker, Objects: o.objects,
			Namespaces: o.namespaces, DurationMs: report.Ms(o.duration), Fsync: !o.noFsync, Args: strings.Join(fixedArgs(o), " ")}}
	for _, size := range o.clusterSizes {
		var pts []point
		for _, n := range o.workers {
			p, err := measure(ctx, o, size, n)
			if err != nil {
				return fmt.Errorf("%s, %d workers: %w", targetName(size), n, err)
			}
			pts = append(pts, p)
		}
		slices.SortFunc(pts, func(a, b point) int { return a.Workers - b.Workers })
		var base *point
		if len(pts) > 0 && pts[0].Workers == 1 {
			base = &pts[0]
		}
		for i := range pts {
			pts[i].Saturated, pts[i].Why = decide(pts[i], base)
			log.Printf("%s, %d workers: saturated: %s (%s)", targetName(size), pts[i].Workers, pts[i].Saturated, pts[i].Why)
		}
		k, sentence := knee(pts)
		res.Knees = append(res.Knees, kneeResult{ClusterSize: size, Workers: k, Sentence: sentence})
		res.Points = append(res.Points, pts...)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath(o.out), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(o.out, []byte(markdown(res, time.Since(start))), 0o644)
}

func jsonPath(md string) string { return strings.TrimSuffix(md, filepath.Ext(md)) + ".json" }

func targetName(size int) string {
	if size == 0 {
		return "embedded member"
	}
	return fmt.Sprintf("%d etcd processes", size)
}

// fixedArgs are lwbench run's flags that do not change with N: the data
// set, the length, and no compaction, defragmentation or held-back
// informer, whose stalls are not the load's.
func fixedArgs(o options) []string {
	args := []string{"--objects", strconv.Itoa(o.objects), "--namespaces", strconv.Itoa(o.namespaces),
		"--duration", o.duration.String(), "--compaction-interval", "-1s", "--no-defrag", "--hold-back", "0"}
	if o.noFsync {
		args = append(args, "--unsafe-no-fsync")
	}
	return args
}

// measure runs `lwbench run --workers n` against the target of size and
// returns its figures, Saturated and Why unset.
func measure(ctx context.Context, o options, size, n int) (point, error) {
	rate := o.ratePerWorker * float64(n)
	watchers := o.watchersPerWorker * n
	args := append([]string{"run", "--workers", strconv.Itoa(n), "--write-rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--watchers", strconv.Itoa(watchers), "-w", "json"}, fixedArgs(o)...)
	if size > 0 {
		args = append(args, "--cluster-size", strconv.Itoa(size))
	}
	log.Printf("%s, %d workers: lwbench %s", targetName(size), n, strings.Join(args, " "))
	rctx, cancel := context.WithTimeout(ctx, o.duration+10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(rctx, o.lwbench, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return point{}, err
	}
	s := &treeSampler{root: cmd.Process.Pid}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s.run(stop, 250*time.Millisecond)
	}()
	werr := cmd.Wait()
	close(stop)
	<-sampled
	if werr != nil {
		return point{}, fmt.Errorf("lwbench run: %w: %s", werr, lastLine(stderr.String()))
	}
	_, v, err := report.Decode(stdout.Bytes())
	if err != nil {
		return point{}, fmt.Errorf("lwbench run's JSON: %w", err)
	}
	r, ok := v.(*report.RunResult)
	if !ok {
		return point{}, fmt.Errorf("lwbench run printed a %T, not a run's result", v)
	}
	p := fromResult(r, size, n, rate, watchers)
	if r.Writes.StartMs > 0 && r.Writes.DurationMs > 0 {
		from := r.StartedAt.Add(time.Duration(r.Writes.StartMs * float64(time.Millisecond)))
		to := from.Add(time.Duration(r.Writes.DurationMs * float64(time.Millisecond)))
		if c, ok := s.cores(from, to); ok {
			p.SteadyMeasured = true
			p.SteadyWorkersCPUCores = c[classWorker]
			p.SteadyCoordinatorCPUCores = c[classCoordinator]
			p.SteadyEtcdCPUCores = c[classEtcd]
			if size == 0 {
				p.SteadyEtcdCPUCores = c[classCoordinator]
			}
		}
	}
	log.Printf("%s, %d workers: %.0f of %.0f writes/s, %.0f events/s, write p99 %.1f ms, workers %.2f cores, etcd %.2f cores; %s",
		targetName(size), n, p.WritesPerSecond, p.OfferedPerSecond, p.EventsPerSecond, p.WriteP99Ms, p.workerCores(), p.etcdCores(), firstLine(p.Verdict))
	return p, nil
}

// fromResult takes a point's figures from lwbench's merged result.
func fromResult(r *report.RunResult, size, n int, rate float64, watchers int) point {
	p := point{ClusterSize: size, Workers: n, Watchers: watchers, OfferedPerSecond: rate,
		WritesPerSecond: r.Writes.ThroughputPerSecond, WriteErrors: r.Writes.Errors,
		EventsPerSecond: r.Delivery.EventsPerSecond, WriteP99Ms: r.Writes.Latency.P99Ms, DeliveryP99Ms: r.Delivery.FromResponse.P99Ms,
		LoadAverageMax: r.Self.LoadAverageMax, NumCPU: r.Self.NumCPU, EtcdVersion: r.Target.EtcdVersion, Verdict: r.Verdict}
	if p.NumCPU == 0 {
		p.NumCPU = runtime.NumCPU()
	}
	for _, w := range r.Workers {
		p.ResultWorkersCPUCores += w.Self.CPUCores
		p.LoadAverageMax = max(p.LoadAverageMax, w.Self.LoadAverageMax)
		if w.Self.Etcd != nil && p.ResultEtcdCPUCores == 0 {
			p.ResultEtcdCPUCores = w.Self.Etcd.CPUCores
		}
		if w.GeneratorLimited {
			p.GeneratorLimited++
			p.GeneratorLimitedWhy = append(p.GeneratorLimitedWhy, fmt.Sprintf("worker %d: %s", w.Shard.Index, w.GeneratorLimitedWhy))
		}
	}
	if r.Self.Etcd != nil && p.ResultEtcdCPUCores == 0 {
		p.ResultEtcdCPUCores = r.Self.Etcd.CPUCores
	}
	if r.EtcdMetrics != nil {
		// With several members the phases are their sums, and every
		// member applies every write: the cluster's puts are one
		// member's (the first's). The commit p99 is of the members'
		// buckets summed.
		puts := r.EtcdMetrics.Phases
		if len(r.EtcdMetrics.Members) > 0 {
			puts = r.EtcdMetrics.Members[0].Phases
		}
		for _, ph := range puts {
			if ph.Phase == "steady" && ph.DurationMs > 0 {
				p.EtcdPutsPerSecond = float64(ph.Puts) / (ph.DurationMs / 1000)
			}
		}
		for _, ph := range r.EtcdMetrics.Phases {
			if ph.Phase == "steady" && ph.DurationMs > 0 {
				p.EtcdCommitP99Ms = ph.BackendCommitP99Ms
			}
		}
	}
	return p
}

// Process classes of lwbench's process tree.
const (
	classCoordinator = "coordinator" // lwbench run itself (and an embedded member)
	classWorker      = "worker"      // lwbench worker processes
	classEtcd        = "etcd"        // etcd processes (--cluster-size)
	classOther       = "other"
)

// treeSample is the cumulative CPU seconds of each process of the tree
// at one time.
type treeSample struct {
	at  time.Time
	cpu map[int]float64
}

// treeSampler samples the CPU time of root and its descendants.
type treeSampler struct {
	root    int
	mu      sync.Mutex
	samples []treeSample
	class   map[int]string
}

func (s *treeSampler) run(stop <-chan struct{}, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// sample reads /proc/<pid>/stat of every process and keeps those under
// root.
func (s *treeSampler) sample() {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	type proc struct {
		ppid int
		comm string
		cpu  float64
	}
	procs := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, ppid, cpu, err := procStat(pid)
		if err != nil {
			continue
		}
		procs[pid] = proc{ppid, comm, cpu}
	}
	now := time.Now()
	in := map[int]bool{}
	var under func(pid int) bool
	under = func(pid int) bool {
		for depth := 0; pid > 1 && depth < 64; depth++ {
			if pid == s.root || in[pid] {
				return true
			}
			p, ok := procs[pid]
			if !ok {
				return false
			}
			pid = p.ppid
		}
		return false
	}
	sm := treeSample{at: now, cpu: map[int]float64{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.class == nil {
		s.class = map[int]string{}
	}
	for pid, p := range procs {
		if !under(pid) {
			continue
		}
		in[pid] = true
		sm.cpu[pid] = p.cpu
		if _, ok := s.class[pid]; !ok {
			s.class[pid] = classify(pid == s.root, p.comm, readArgs(pid))
		}
	}
	s.samples = append(s.samples, sm)
}

// classify names the class of a process of the tree: root is the
// coordinator; a worker is lwbench started as `lwbench worker` (whatever
// the binary's name); etcd processes are named etcd.
func classify(root bool, comm string, args []string) string {
	switch {
	case root:
		return classCoordinator
	case len(args) > 1 && args[1] == "worker":
		return classWorker
	case comm == "etcd":
		return classEtcd
	}
	return classOther
}

// readArgs reads process pid's command line; nil when it cannot.
func readArgs(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// cores returns each class's CPU cores between the last sample at or
// before from and the first at or after to, or, when lwbench exited
// before a sample after to (a short drain), the last sample if it covers
// at least minCovered of the window; false when the samples do not
// cover it so. A process that started in the window counts from 0, one
// that ended counts to its last sample.
func (s *treeSampler) cores(from, to time.Time) (map[string]float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i0, i1 := -1, -1
	for i, sm := range s.samples {
		if !sm.at.After(from) {
			i0 = i
		}
		if i1 < 0 && !sm.at.Before(to) {
			i1 = i
		}
	}
	if i1 < 0 && len(s.samples) > 0 {
		last := len(s.samples) - 1
		if s.samples[last].at.Sub(from) >= time.Duration(minCovered*float64(to.Sub(from))) {
			i1 = last
		}
	}
	if i0 < 0 || i1 < 0 || i1 <= i0 {
		return nil, false
	}
	last := map[int]float64{}
	for _, sm := range s.samples[i0 : i1+1] {
		for pid, c := range sm.cpu {
			last[pid] = c
		}
	}
	wall := s.samples[i1].at.Sub(s.samples[i0].at).Seconds()
	out := map[string]float64{}
	for pid, c := range last {
		out[s.class[pid]] += (c - s.samples[i0].cpu[pid]) / wall
	}
	return out, true
}

// procStat reads process pid's command name, parent and user plus
// system CPU seconds from /proc/<pid>/stat (fields 2, 4, 14 and 15).
func procStat(pid int) (comm string, ppid int, cpu float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, err
	}
	return parseStat(string(b))
}

func parseStat(s string) (comm string, ppid int, cpu float64, err error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, 0, fmt.Errorf("stat %q: no command name", s)
	}
	comm = s[open+1 : end]
	fields := strings.Fields(s[end+1:])
	// fields[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(fields) < 13 {
		return "", 0, 0, fmt.Errorf("stat: %d fields after the command name", len(fields))
	}
	ppid, err1 := strconv.Atoi(fields[1])
	u, err2 := strconv.ParseInt(fields[11], 10, 64)
	st, err3 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", 0, 0, fmt.Errorf("stat: ppid %q, utime %q, stime %q", fields[1], fields[11], fields[12])
	}
	return comm, ppid, float64(u+st) / clockTicksPerSecond, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// machine describes the machine: CPU model, logical CPUs, memory bytes
// (internal/machine).
func machine() (model string, cpus int, memoryBytes int64) {
	model = machineinfo.CPUModel()
	if model == "" {
		model = "unknown"
	}
	memoryBytes, _ = machineinfo.MemTotalBytes()
	return model, runtime.NumCPU(), memoryBytes
}

// tableHeader and tableRows are one target's table.
var tableHeader = []string{"workers", "offered writes/s", "writes/s", "of offered", "events/s", "write p99 (ms)", "delivery p99 (ms)",
	"workers CPU (cores)", "etcd CPU (cores)", "etcd puts/s", "etcd commit p99 (ms)", "load avg max", "generator-limited", "saturated", "why"}

func tableRows(pts []point) [][]string {
	var rows [][]string
	for _, p := range pts {
		of := 0.0
		if p.OfferedPerSecond > 0 {
			of = p.WritesPerSecond / p.OfferedPerSecond * 100
		}
		rows = append(rows, []string{strconv.Itoa(p.Workers), fmt.Sprintf("%.0f", p.OfferedPerSecond), fmt.Sprintf("%.0f", p.WritesPerSecond),
			fmt.Sprintf("%.0f%%", of), fmt.Sprintf("%.0f", p.EventsPerSecond), fmt.Sprintf("%.1f", p.WriteP99Ms), fmt.Sprintf("%.1f", p.DeliveryP99Ms),
			fmt.Sprintf("%.2f", p.workerCores()), fmt.Sprintf("%.2f", p.etcdCores()), fmt.Sprintf("%.0f", p.EtcdPutsPerSecond),
			fmt.Sprintf("%.1f", p.EtcdCommitP99Ms), fmt.Sprintf("%.2f", p.LoadAverageMax), fmt.Sprintf("%d of %d", p.GeneratorLimited, p.Workers),
			p.Saturated, p.Why})
	}
	return rows
}

func markdown(res results, took time.Duration) string {
	var b strings.Builder
	title := "# Workers scaling: `lwbench run --workers N` on one machine"
	flagQuick := ""
	if res.Quick {
		title += " (QUICK RUN: small loads, a check of the script, not the published figures)"
		flagQuick = " --quick"
	}
	fmt.Fprintf(&b, "%s\n\nGenerated by `scripts/workers-scaling.sh%s` (scripts/workersscaling). Do not edit.\n\n", title, flagQuick)
	fmt.Fprintf(&b, "- Date: %s (took %s)\n", res.StartedAt.Format(time.RFC3339), took.Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s, %d CPUs, %.1f GiB memory; load average before: %s (the machine may be shared)\n",
		res.CPUModel, res.NumCPU, float64(res.MemoryBytes)/(1<<30), res.LoadBefore)
	var versions []string
	for _, p := range res.Points {
		if p.EtcdVersion != "" && !slices.Contains(versions, p.EtcdVersion) {
			versions = append(versions, p.EtcdVersion)
		}
	}
	fmt.Fprintf(&b, "- Versions: etcd %s; %s; etcdkit commit %s\n", strings.Join(versions, ", "), res.GoVersion, res.Commit)
	s := res.Settings
	fsync := "on"
	if !s.Fsync {
		fsync = "off"
	}
	fmt.Fprintf(&b, "- Load per N: `lwbench run --workers N --write-rate N×%g --watchers N×%d %s` (fsync %s): the offered writes and the informers "+
		"grow with N, the data set (%d pods in %d namespaces, every shard at least one) does not; no compaction or defragmentation.\n",
		s.RatePerWorker, s.WatchersPerWorker, s.Args, fsync, s.Objects, s.Namespaces)
	sizes := []int{}
	for _, p := range res.Points {
		if !slices.Contains(sizes, p.ClusterSize) {
			sizes = append(sizes, p.ClusterSize)
		}
	}
	for _, size := range sizes {
		var pts []point
		for _, p := range res.Points {
			if p.ClusterSize == size {
				pts = append(pts, p)
			}
		}
		fmt.Fprintf(&b, "\n## Against %s\n\n", map[bool]string{true: "lwbench's embedded member", false: fmt.Sprintf("%d etcd processes", size)}[size == 0])
		for _, k := range res.Knees {
			if k.ClusterSize == size {
				fmt.Fprintf(&b, "**%s**\n\n", k.Sentence)
			}
		}
		b.WriteString("| " + strings.Join(tableHeader, " | ") + " |\n|")
		for i := range tableHeader {
			b.WriteString(map[bool]string{true: "---|", false: "--:|"}[i >= len(tableHeader)-2])
		}
		b.WriteString("\n")
		for _, r := range tableRows(pts) {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
	}
	b.WriteString(`
How to read it: writes/s is the merged result's write throughput (completed writes over the time from the first scheduled
write to the last one's end), events/s every informer's events over the same span; the p99s are merged bucket by bucket
from the workers' histograms (write latency from each write's scheduled time, delivery from the writer's response). The
CPU columns are each process's user plus system time over the write phase alone, read from /proc every 250 ms: the
workers' sum, and etcd's (the coordinator's process, which holds the embedded member and no load, or the etcd processes);
the JSON also has each result's own whole-run figures. etcd puts/s and commit p99 are etcd's own /metrics over the steady
phase. Load avg max is the highest one-minute load average a worker saw; a generator-limited worker used 90 % of the CPUs
or waited more than 5 ms (p99) for one.

Saturated, first rule that matches: writes below 90 % of offered and etcd alone at 90 % of the CPUs: etcd; below 90 % and
the workers and etcd together at 90 % of the CPUs, or a load average above them: machine; below 90 % and a worker
generator-limited: generator; below 90 % with CPU to spare: etcd (its serial apply, commit and fsync path); kept up but
etcd's backend commit p99 at least doubled from one worker's and at 10 ms or more: etcd; kept up but a worker
generator-limited: generator; else none. The knee is the largest N up to which every step raised write throughput by at
least 10 %.
`)
	return b.String()
}
