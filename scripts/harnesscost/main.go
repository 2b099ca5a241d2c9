// Command harnesscost measures what lwbench's own client-go clients cost
// it against the targets of issue 21 item 6 ("a harness no heavier than
// client-go"), for scripts/harness-cost.sh, and writes -out
// (results/harness-cost.md) and the same figures as JSON beside it.
//
// It runs, one at a time, each with its exact command in the output:
//
//   - BenchmarkInformerMemory (pkg/kubeload, -test binary) at each size of
//     -sizes (INFORMERSxPODS): lwbench's InformerSet against a bare
//     client-go informer set doing the same through one real
//     kube-apiserver; heap, RSS and CPU per informer, and their ratios
//     (target: at most 1.2);
//   - BenchmarkKubeletWatches with -nodes nodes: lwbench's kubelet-shaped
//     watches' heap and RSS (target: under 1 GB);
//   - `lwbench run --kube-apiserver 1.37 --watchers 300 --objects 3000`
//     (-run-args adds flags): it must sync and finish, with lwbench's
//     peak resident set (the result's self.maxRSSBytes) at most 2.5 GB;
//     then the same run four other ways (runVariants), to tell the
//     harness's memory from the embedded etcd's and a saturated stack's
//     relists from the harness's own cost;
//   - BenchmarkBareInformerRun: the run's load with bare client-go
//     informers in place of lwbench's, to tell what the stack does to
//     any client from what lwbench adds.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"time"
)

// The targets of issue 21 item 6.
const (
	maxRatio        = 1.2
	maxRunRSSBytes  = 2.5e9
	maxKubeletBytes = 1e9
)

type options struct {
	lwbench, testBinary, testDir string
	sizes                        []size
	nodes, watchers, objects     int
	runArgs                      []string
	out, commit                  string
	quick                        bool
}

// size is one BenchmarkInformerMemory case.
type size struct{ Informers, Pods int }

func main() {
	var o options
	flag.StringVar(&o.lwbench, "lwbench", "", "lwbench binary")
	flag.StringVar(&o.testBinary, "test-binary", "", "pkg/kubeload's test binary (go test -c)")
	flag.StringVar(&o.testDir, "test-dir", "pkg/kubeload", "directory the test binary runs in")
	sizes := flag.String("sizes", "30x1000,100x1000", "BenchmarkInformerMemory sizes, INFORMERSxPODS, comma-separated")
	flag.IntVar(&o.nodes, "nodes", 1000, "nodes of BenchmarkKubeletWatches")
	flag.IntVar(&o.watchers, "watchers", 300, "--watchers of the lwbench run")
	flag.IntVar(&o.objects, "objects", 3000, "--objects of the lwbench run")
	runArgs := flag.String("run-args", "", "flags added to `lwbench run --kube-apiserver 1.37 --watchers W --objects O`, space-separated")
	flag.StringVar(&o.out, "out", "results/harness-cost.md", "where to write the table (and the JSON, .json)")
	flag.StringVar(&o.commit, "commit", "", "git commit measured")
	flag.BoolVar(&o.quick, "quick", false, "label the output a quick run (not the targets' sizes)")
	render := flag.Bool("render", false, "only rewrite -out from its JSON (-out with .json), running nothing")
	bareOnly := flag.Bool("bare-only", false, "only run BenchmarkBareInformerRun, into the JSON beside -out (which must exist), and rewrite -out")
	informersOnly := flag.Bool("informers-only", false, "only run BenchmarkInformerMemory at -sizes, into the JSON beside -out (which must exist), and rewrite -out")
	flag.Parse()
	o.runArgs = strings.Fields(*runArgs)
	for _, s := range strings.Split(*sizes, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(s), "x")
		n, err1 := strconv.Atoi(a)
		p, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || n <= 0 || p <= 0 {
			log.Fatalf("harnesscost: -sizes %q: want INFORMERSxPODS, e.g. 30x1000", *sizes)
		}
		o.sizes = append(o.sizes, size{n, p})
	}
	if *render || *bareOnly || *informersOnly {
		if (*bareOnly || *informersOnly) && o.testBinary == "" {
			log.Fatal("harnesscost: -bare-only and -informers-only need -test-binary")
		}
		if err := rerender(o, *bareOnly, *informersOnly); err != nil {
			log.Fatalf("harnesscost: %v", err)
		}
		return
	}
	if o.lwbench == "" || o.testBinary == "" {
		log.Fatal("harnesscost: -lwbench and -test-binary are required")
	}
	if err := run(o); err != nil {
		log.Fatalf("harnesscost: %v", err)
	}
}

// Result is what harnesscost writes as JSON.
type Result struct {
	Date     string         `json:"date"`
	Commit   string         `json:"commit"`
	Machine  string         `json:"machine"`
	Go       string         `json:"go"`
	Quick    bool           `json:"quick"`
	Informer []InformerCost `json:"informers"`
	Kubelet  *KubeletCost   `json:"kubeletWatches"`
	// Run is the target's run; Variants the same run other ways
	// (runVariants), in that order.
	Run      *RunCost   `json:"run"`
	Variants []*RunCost `json:"variants,omitempty"`
	// BareRun is BenchmarkBareInformerRun's metrics (absent before
	// 2026-12-07).
	BareRun *BareRunCost `json:"bareRun,omitempty"`
	// Watchers and Objects are the run's --watchers and --objects (absent
	// from results written before 2026-12-06: -render takes the flags').
	Watchers int `json:"watchers,omitempty"`
	Objects  int `json:"objects,omitempty"`
	// TookSeconds is how long the script took (absent before 2026-12-06).
	TookSeconds float64 `json:"tookSeconds,omitempty"`
}

// InformerCost is one BenchmarkInformerMemory case: its metrics by the
// unit the benchmark reports (e.g. "heap-ratio", "bare-heap-B/informer").
type InformerCost struct {
	Informers int                `json:"informers"`
	Pods      int                `json:"pods"`
	Command   string             `json:"command"`
	Metrics   map[string]float64 `json:"metrics"`
	Error     string             `json:"error,omitempty"`
	// Date and Commit are set when it was measured apart from the rest
	// (-informers-only), which the Result's Date and Commit then do not
	// cover.
	Date   string `json:"date,omitempty"`
	Commit string `json:"commit,omitempty"`
}

// KubeletCost is BenchmarkKubeletWatches' metrics.
type KubeletCost struct {
	Nodes   int                `json:"nodes"`
	Command string             `json:"command"`
	Metrics map[string]float64 `json:"metrics"`
	Error   string             `json:"error,omitempty"`
}

// BareRunCost is BenchmarkBareInformerRun's metrics by unit
// ("synced-informers", "caught-up-informers", "pod-rangestreams",
// "writes-s", "sync-s", "cpu-s", "peak-rss-B").
type BareRunCost struct {
	Command string             `json:"command"`
	Metrics map[string]float64 `json:"metrics"`
	Error   string             `json:"error,omitempty"`
	// Date and Commit are set when it was measured apart from the rest
	// (-bare-only), which the Result's Date and Commit then do not cover.
	Date   string `json:"date,omitempty"`
	Commit string `json:"commit,omitempty"`
}

// runVariant is a way to run the target's lwbench run: flags added to
// it, and what they tell apart.
type runVariant struct {
	Name, Slug, Why string
	Args            []string
	// Env is added to lwbench's environment.
	Env []string
}

// runVariants are the target's run measured other ways: with etcd in a
// process of its own (--cluster-size 1), lwbench's resident set is the
// harness's alone (with the embedded member it includes etcd's, and the
// RangeStream chunks it holds for kube-apiserver); with kube-apiserver's
// own 5-minute compaction interval (k8s.io/apiserver pkg/server/options/
// etcd.go DefaultCompactInterval) instead of lwbench's default of a third
// of --duration, the informers' watches do not meet compacted revisions
// when a saturated stack delays them; with client-go's WatchListClient
// gate off the informers LIST then WATCH, and a 410 sends the reflector
// through its backoff (k8s.io/client-go tools/cache/reflector.go
// ListAndWatchWithContext under BackoffUntil) where a WATCHLIST's 410 is
// retried at once (watchList), which keeps a saturated stack saturated
// (kubeload's watch-list expiry warning); with GOMEMLIMIT (Go's soft
// memory limit, runtime/debug.SetMemoryLimit) the collector runs before
// the heap doubles the live one, and the run's CPU seconds say what that
// costs.
var runVariants = []runVariant{
	{Name: "etcd in a process of its own", Slug: "etcd-process", Args: []string{"--cluster-size", "1"},
		Why: "lwbench's peak RSS without the embedded etcd's"},
	{Name: "kube-apiserver's 5-minute compaction", Slug: "compaction-5m", Args: []string{"--compaction-interval", "5m"},
		Why: "no compaction passes the informers' watches during the run"},
	{Name: "client-go's WatchListClient off", Slug: "watchlist-off", Args: []string{"--client-feature-gates", "WatchListClient=false"},
		Why: "the informers LIST then WATCH: a 410 waits for the reflector's backoff"},
	{Name: "a 2 GiB soft memory limit", Slug: "memlimit-2gib", Env: []string{"GOMEMLIMIT=2GiB"},
		Why: "Go's collector keeps the heap near 2 GiB instead of letting it grow to twice the live heap (GOGC 100), at the CPU its extra cycles cost"},
}

// RunCost is the lwbench run's outcome, its self section, and what its
// result says of the stack: relists, the writes' schedule, warnings and
// verdict.
type RunCost struct {
	// Variant names the way it was run (runVariant.Name); "" for the
	// target's own command.
	Variant        string  `json:"variant,omitempty"`
	Command        string  `json:"command"`
	OK             bool    `json:"ok"`
	Error          string  `json:"error,omitempty"`
	WallSeconds    float64 `json:"wallSeconds"`
	MaxRSSBytes    int64   `json:"maxRSSBytes"`
	PeakHeapBytes  int64   `json:"peakHeapBytes"`
	CPUSeconds     float64 `json:"cpuSeconds"`
	LoadAverageMax float64 `json:"loadAverageMax"`
	// Relists counts the run's informer relists; WritesScheduledMs and
	// WritesTookMs are its writes' scheduled length and how long they
	// took (result.scenario.durationMs, result.writes.durationMs).
	Relists           int      `json:"relists"`
	WritesScheduledMs float64  `json:"writesScheduledMs"`
	WritesTookMs      float64  `json:"writesTookMs"`
	Warnings          []string `json:"warnings,omitempty"`
	Verdict           string   `json:"verdict,omitempty"`
}

// passed reports whether the run wrote its result and its verdict is
// PASS: every informer synced and caught up, nothing lost (lwbench's
// verdict; a FAIL names what was not).
func (rc *RunCost) passed() bool { return rc.OK && strings.HasPrefix(rc.Verdict, "PASS") }

func run(o options) error {
	start := time.Now()
	r := Result{Date: start.UTC().Format(time.RFC3339), Commit: o.commit, Machine: machine(), Go: runtime.Version(), Quick: o.quick, Watchers: o.watchers, Objects: o.objects}
	r.Informer = informerCosts(o)
	m, cmd, err := bench(o, "KubeletWatches", []string{fmt.Sprintf("LWBENCH_BENCH_NODES=%d", o.nodes)}, 1, 20*time.Minute)
	r.Kubelet = &KubeletCost{Nodes: o.nodes, Command: cmd, Metrics: m}
	if err != nil {
		r.Kubelet.Error = err.Error()
	}
	for i, v := range append([]runVariant{{}}, runVariants...) {
		rc, runJSON := lwbenchRun(o, v.Args, v.Env)
		rc.Variant = v.Name
		if len(runJSON) > 0 {
			// The run's own result, for the figures not copied here.
			name := strings.TrimSuffix(o.out, ".md") + "-run.json"
			if v.Slug != "" {
				name = strings.TrimSuffix(o.out, ".md") + "-run-" + v.Slug + ".json"
			}
			if err := os.WriteFile(name, runJSON, 0o644); err != nil {
				return err
			}
		}
		if i == 0 {
			r.Run = rc
		} else {
			r.Variants = append(r.Variants, rc)
		}
	}
	r.BareRun = bareRun(o)
	r.TookSeconds = time.Since(start).Seconds()
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(strings.TrimSuffix(o.out, ".md")+".json", append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(o.out, []byte(report(r)), 0o644)
}

// bareRun runs BenchmarkBareInformerRun at the run's size, with its
// --start-concurrency.
func bareRun(o options) *BareRunCost {
	env := []string{fmt.Sprintf("LWBENCH_BENCH_INFORMERS=%d", o.watchers), fmt.Sprintf("LWBENCH_BENCH_PODS=%d", o.objects)}
	if c := flagValue(o.runArgs, "--start-concurrency"); c != "" {
		env = append(env, "LWBENCH_BENCH_START_CONCURRENCY="+c)
	}
	m, cmd, err := bench(o, "BareInformerRun", env, 1, 30*time.Minute)
	c := &BareRunCost{Command: cmd, Metrics: m}
	if err != nil {
		c.Error = err.Error()
	}
	return c
}

// informerRuns is how many times BenchmarkInformerMemory runs per size;
// its metrics are the runs' medians (bench).
const informerRuns = 3

// informerCosts runs BenchmarkInformerMemory at each of o.sizes.
func informerCosts(o options) []InformerCost {
	var out []InformerCost
	for _, s := range o.sizes {
		env := []string{fmt.Sprintf("LWBENCH_BENCH_INFORMERS=%d", s.Informers), fmt.Sprintf("LWBENCH_BENCH_PODS=%d", s.Pods)}
		m, cmd, err := bench(o, "InformerMemory", env, informerRuns, 30*time.Minute)
		c := InformerCost{Informers: s.Informers, Pods: s.Pods, Command: cmd, Metrics: m}
		if err != nil {
			c.Error = err.Error()
		}
		out = append(out, c)
	}
	return out
}

// rerender rewrites o.out from the JSON an earlier run wrote beside it;
// with bare, it first measures the bare run again into that JSON, with
// informers BenchmarkInformerMemory at o.sizes, each dated and with
// o.commit, as the Result's own date and commit do not cover them.
func rerender(o options, bare, informers bool) error {
	b, err := os.ReadFile(strings.TrimSuffix(o.out, ".md") + ".json")
	if err != nil {
		return err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s.json: %w", strings.TrimSuffix(o.out, ".md"), err)
	}
	if r.Watchers == 0 {
		r.Watchers, r.Objects = o.watchers, o.objects
	}
	date := time.Now().UTC().Format(time.RFC3339)
	if bare {
		o.watchers, o.objects = r.Watchers, r.Objects
		r.BareRun = bareRun(o)
		r.BareRun.Date, r.BareRun.Commit = date, o.commit
	}
	if informers {
		r.Informer = informerCosts(o)
		for i := range r.Informer {
			r.Informer[i].Date, r.Informer[i].Commit = date, o.commit
		}
	}
	if bare || informers {
		js, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(strings.TrimSuffix(o.out, ".md")+".json", append(js, '\n'), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(o.out, []byte(report(r)), 0o644)
}

// flagValue returns the value following flag name in args ("" when
// absent).
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// bench runs one benchmark of the test binary with env added, within
// timeout, and returns its metrics by unit, and the command as a person
// would type it.
//
// With count above 1 the benchmark runs that many times and each metric is
// the median of its runs' (a ratio is the median of the runs' ratios, each
// measured within one run): one disturbed run cannot decide a verdict.
func bench(o options, name string, env []string, count int, timeout time.Duration) (map[string]float64, string, error) {
	args := []string{"-test.run", "^$", "-test.bench", "^Benchmark" + name + "$", "-test.benchtime", "1x", "-test.count", strconv.Itoa(count), "-test.timeout", timeout.String()}
	typed := strings.Join(env, " ") + " go test ./pkg/kubeload -run '^$' -bench '^Benchmark" + name + "$' -benchtime 1x"
	if count > 1 {
		typed += " -count " + strconv.Itoa(count)
	}
	typed += " -timeout " + timeout.String()
	bin, err := filepath.Abs(o.testBinary)
	if err != nil {
		return nil, typed, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = o.testDir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	log.Printf("harnesscost: %s", typed)
	runErr := cmd.Run()
	m := benchMetrics(out.String(), "Benchmark"+name)
	if runErr != nil || len(m) == 0 {
		return m, typed, fmt.Errorf("%s: %v: %s", name, runErr, lastLines(out.String(), 3))
	}
	return m, typed, nil
}

// benchMetrics parses the result lines of benchmark name: "BenchmarkX-2
// 1 123 ns/op 4.5 unit ...", one per run; each unit's value is the median
// of its runs' (the lower middle one of an even count).
func benchMetrics(out, name string) map[string]float64 {
	runs := map[string][]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], name) {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				runs[f[i+1]] = append(runs[f[i+1]], v)
			}
		}
	}
	m := map[string]float64{}
	for unit, vs := range runs {
		slices.Sort(vs)
		m[unit] = vs[(len(vs)-1)/2]
	}
	return m
}

// lwbenchRun runs the target's lwbench run with extra flags and env
// added and reads its result; it also returns the run's JSON result (nil
// if it wrote none).
func lwbenchRun(o options, extra, env []string) (*RunCost, []byte) {
	args := append([]string{"run", "--kube-apiserver", "1.37", "--watchers", strconv.Itoa(o.watchers), "--objects", strconv.Itoa(o.objects)}, o.runArgs...)
	args = append(append(args, extra...), "-w", "json")
	rc := &RunCost{Command: strings.TrimSpace(strings.Join(env, " ") + " lwbench " + strings.Join(args, " "))}
	log.Printf("harnesscost: %s", rc.Command)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.lwbench, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	rc.WallSeconds = time.Since(t0).Seconds()
	var res struct {
		Self struct {
			MaxRSSBytes    int64   `json:"maxRSSBytes"`
			PeakHeapBytes  int64   `json:"peakHeapBytes"`
			CPUSeconds     float64 `json:"cpuSeconds"`
			LoadAverageMax float64 `json:"loadAverageMax"`
		} `json:"self"`
		Relists  []json.RawMessage `json:"relists"`
		Scenario struct {
			DurationMs float64 `json:"durationMs"`
		} `json:"scenario"`
		Writes struct {
			DurationMs float64 `json:"durationMs"`
		} `json:"writes"`
		Warnings []string `json:"warnings"`
		Verdict  string   `json:"verdict"`
	}
	jerr := json.Unmarshal(stdout.Bytes(), &res)
	var exit *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exit):
		rc.Error = err.Error()
	case jerr != nil:
		rc.Error = fmt.Sprintf("exit %v; no result (%v): %s", err, jerr, lastLines(stderr.String(), 2))
	default:
		// lwbench exits 1 when the run's verdict fails, with its result
		// written: it finished (passed says whether it synced).
		rc.OK = true
		if err != nil {
			rc.Error = fmt.Sprintf("exit %v (the run's verdict, in -run.json): %s", err, lastLines(stderr.String(), 1))
		}
	}
	rc.MaxRSSBytes, rc.PeakHeapBytes = res.Self.MaxRSSBytes, res.Self.PeakHeapBytes
	rc.CPUSeconds, rc.LoadAverageMax = res.Self.CPUSeconds, res.Self.LoadAverageMax
	rc.Relists, rc.WritesScheduledMs, rc.WritesTookMs = len(res.Relists), res.Scenario.DurationMs, res.Writes.DurationMs
	rc.Warnings, rc.Verdict = res.Warnings, res.Verdict
	if jerr != nil {
		return rc, nil
	}
	return rc, stdout.Bytes()
}

// writeRuns writes the table of the target's run, its variants and the
// bare client-go run of the same load (if measured), and each one's
// warnings and verdict.
func writeRuns(b *strings.Builder, runs []*RunCost, bare *BareRunCost, watchers int) {
	b.WriteString("\n## The lwbench run: the target's command and its variants\n\n")
	b.WriteString("| run | lwbench peak RSS | peak heap | CPU s | wall s | relists | writes took (scheduled) | verdict |\n|---|--:|--:|--:|--:|--:|--:|---|\n")
	for _, rc := range runs {
		name := "the target's command"
		if rc.Variant != "" {
			name = rc.Variant
		}
		if !rc.OK {
			fmt.Fprintf(b, "| %s | did not finish: %s | | | | | | |\n", name, strings.ReplaceAll(rc.Error, "|", "/"))
			continue
		}
		v, _, _ := strings.Cut(rc.Verdict, ":")
		fmt.Fprintf(b, "| %s | %s | %s | %.0f | %.0f | %d | %.1f s (%.1f s) | %s |\n", name, mb(float64(rc.MaxRSSBytes)), mb(float64(rc.PeakHeapBytes)),
			rc.CPUSeconds, rc.WallSeconds, rc.Relists, rc.WritesTookMs/1000, rc.WritesScheduledMs/1000, v)
	}
	if bare != nil {
		m := bare.Metrics
		switch {
		case len(m) == 0:
			fmt.Fprintf(b, "| %s | not measured: %s | | | | | | |\n", bareRunName, strings.ReplaceAll(bare.Error, "|", "/"))
		default:
			fmt.Fprintf(b, "| %s | %s | - | %.0f | %.0f | - | %.1f s (%.1f s) | %s |\n", bareRunName, mb(m["peak-rss-B"]), m["cpu-s"],
				m["sync-s"]+m["writes-s"], m["writes-s"], runs[0].WritesScheduledMs/1000, bareVerdict(m, watchers))
		}
	}
	b.WriteString("\n")
	for _, rc := range runs {
		if rc.Variant != "" {
			for _, v := range runVariants {
				if v.Name == rc.Variant {
					fmt.Fprintf(b, "- %s (`%s`: %s)", rc.Variant, strings.Join(append(append([]string(nil), v.Env...), v.Args...), " "), v.Why)
				}
			}
		} else {
			b.WriteString("- the target's command")
		}
		fmt.Fprintf(b, ": %s", rc.Verdict)
		for _, w := range rc.Warnings {
			b.WriteString("; warning: " + w)
		}
		b.WriteString("\n")
	}
	if bare != nil && len(bare.Metrics) > 0 {
		m := bare.Metrics
		when := ""
		if bare.Date != "" {
			when = fmt.Sprintf(", measured apart from the runs above on %s at commit %s", bare.Date, bare.Commit)
		}
		fmt.Fprintf(b, "- %s (BenchmarkBareInformerRun%s: client-go SharedIndexInformers in place of lwbench's, managedFields dropped, "+
			"in one process with the embedded etcd and the counting proxy as lwbench run has them; peak RSS is that process's; "+
			"wall s is the sync and the writes): %.0f of %d synced in %.0f s, %.0f caught up with a marker written after the writes; "+
			"kube-apiserver streamed the pods' state from etcd %.0f times for %d pod informers (one each when no watch-list expires)\n",
			bareRunName, when, m["synced-informers"], watchers, m["sync-s"], m["caught-up-informers"], m["pod-rangestreams"], (watchers+2)/3)
		if rc := runs[0]; rc.OK && m["peak-rss-B"] > 0 {
			fmt.Fprintf(b, "  - the target's command above (lwbench's informers, the same load and stack) peaked at %s, %.2f of the bare set's %s\n",
				mb(float64(rc.MaxRSSBytes)), float64(rc.MaxRSSBytes)/m["peak-rss-B"], mb(m["peak-rss-B"]))
		}
	}
}

// bareRunName names BenchmarkBareInformerRun's row.
const bareRunName = "bare client-go informers, the same load"

// bareVerdict says how many of the bare run's informers synced and
// caught up with the writes: PASS only when all did.
func bareVerdict(m map[string]float64, watchers int) string {
	synced, caught := int(m["synced-informers"]), int(m["caught-up-informers"])
	v := "PASS"
	if synced < watchers || caught < watchers {
		v = "FAIL"
	}
	return fmt.Sprintf("%s: %d of %d synced, %d caught up", v, synced, watchers, caught)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// machine describes the machine: CPU model, cores, memory, load average.
func machine() string {
	model, memory := "unknown", "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%s, %d cores, %s memory; load average at the start: %s (the machine may be shared)", model, runtime.NumCPU(), memory, load)
}

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

// harnessAlone returns the variant run with etcd in a process of its own
// (runVariants[0]), nil when there was none.
func harnessAlone(variants []*RunCost) *RunCost {
	for _, v := range variants {
		if v.Variant == runVariants[0].Name {
			return v
		}
	}
	return nil
}

func mb(b float64) string { return fmt.Sprintf("%.1f MB", b/1e6) }

func report(r Result) string {
	var b strings.Builder
	title := "# What lwbench's own clients cost (issue 21 item 6)"
	if r.Quick {
		title += " (QUICK RUN: not the targets' sizes)"
	}
	fmt.Fprintf(&b, "%s\n\nGenerated by `scripts/harness-cost.sh` (scripts/harnesscost). Do not edit.\n\n", title)
	took := ""
	if r.TookSeconds > 0 {
		took = fmt.Sprintf(" (took %s)", (time.Duration(r.TookSeconds) * time.Second).Round(time.Second))
	}
	fmt.Fprintf(&b, "- Date: %s%s\n- Machine: %s\n- Versions: kube-apiserver 1.37.2, client-go 1.37.2, embedded etcd 3.7.3; %s; etcdkit commit %s\n\n",
		r.Date, took, r.Machine, r.Go, r.Commit)
	b.WriteString("## Verdict\n\n| target | measured | verdict |\n|---|---|---|\n")
	if rc := r.Run; rc != nil {
		ok := rc.passed() && float64(rc.MaxRSSBytes) <= maxRunRSSBytes
		m := fmt.Sprintf("peak RSS %s, peak heap %s, %.0f CPU s, %.0f s", mb(float64(rc.MaxRSSBytes)), mb(float64(rc.PeakHeapBytes)), rc.CPUSeconds, rc.WallSeconds)
		if !rc.OK {
			m = "did not finish: " + rc.Error
		} else if !rc.passed() {
			v, _, _ := strings.Cut(rc.Verdict, ";")
			m += "; " + v
		}
		fmt.Fprintf(&b, "| lwbench run: %d informers x %d pods sync and finish, lwbench at most 2.5 GB | %s | %s |\n", r.Watchers, r.Objects, m, verdict(ok))
	}
	if rc := harnessAlone(r.Variants); rc != nil {
		// The target's two halves apart, on the run whose resident set is
		// lwbench's own: etcd, the system under test, in a process of its
		// own.
		m := fmt.Sprintf("peak RSS %s, peak heap %s", mb(float64(rc.MaxRSSBytes)), mb(float64(rc.PeakHeapBytes)))
		v, _, _ := strings.Cut(rc.Verdict, ";")
		if !rc.OK {
			m, v = "did not finish: "+rc.Error, "did not finish: "+rc.Error
		}
		fmt.Fprintf(&b, "| the harness alone (etcd in a process of its own): lwbench at most 2.5 GB | %s | %s |\n", m, verdict(rc.OK && float64(rc.MaxRSSBytes) <= maxRunRSSBytes))
		fmt.Fprintf(&b, "| the harness alone (etcd in a process of its own): %d informers x %d pods sync and finish | %s | %s |\n", r.Watchers, r.Objects, v, verdict(rc.passed()))
	}
	for _, c := range r.Informer {
		for _, k := range []string{"heap-ratio", "rss-ratio", "cpu-ratio", "write-cpu-ratio"} {
			v, have := c.Metrics[k]
			m := fmt.Sprintf("%.2f", v)
			if !have {
				m = "not measured: " + c.Error
			}
			fmt.Fprintf(&b, "| %d informers x %d pods: lwbench's %s over client-go's at most %.1f | %s | %s |\n", c.Informers, c.Pods, strings.TrimSuffix(k, "-ratio"), maxRatio, m, verdict(have && v <= maxRatio))
		}
	}
	if k := r.Kubelet; k != nil {
		heap, rss := k.Metrics["heap-B"], k.Metrics["rss-B"]
		ok := k.Error == "" && heap < maxKubeletBytes && rss < maxKubeletBytes
		m := fmt.Sprintf("heap %s, RSS %s", mb(heap), mb(rss))
		if k.Error != "" {
			m = "not measured: " + k.Error
		}
		fmt.Fprintf(&b, "| kubelet watches of %d nodes under 1 GB | %s | %s |\n", k.Nodes, m, verdict(ok))
	}
	if r.Run != nil {
		writeRuns(&b, append([]*RunCost{r.Run}, r.Variants...), r.BareRun, r.Watchers)
	}
	b.WriteString("\n## Per informer: lwbench against bare client-go (BenchmarkInformerMemory)\n\n")
	if len(r.Informer) > 0 && r.Informer[0].Date != "" {
		fmt.Fprintf(&b, "Measured apart from the runs above, on %s at commit %s (`scripts/harness-cost.sh --informers-only`).\n\n", r.Informer[0].Date, r.Informer[0].Commit)
	}
	b.WriteString("| informers x pods | set | heap once synced | heap after writes | RSS growth | sync peak heap | sync CPU (s) | write CPU (s) | objects held |\n|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range r.Informer {
		for _, set := range []string{"bare", "lwbench"} {
			g := func(k string) float64 { return c.Metrics[set+"-"+k] }
			fmt.Fprintf(&b, "| %dx%d | %s | %s | %s | %s | %s | %.4f | %.4f | %.0f |\n", c.Informers, c.Pods, set,
				mb(g("heap-B/informer")), mb(g("heap-after-writes-B/informer")), mb(g("rss-B/informer")), mb(g("sync-peak-heap-B/informer")),
				g("cpu-s/informer"), g("write-cpu-s/informer"), g("objects/informer"))
		}
	}
	b.WriteString("\n## Kubelet watches (BenchmarkKubeletWatches)\n\n")
	if k := r.Kubelet; k != nil {
		fmt.Fprintf(&b, "| nodes | heap | RSS growth | peak heap | heap per node | RSS per node | CPU to start (s) |\n|--:|--:|--:|--:|--:|--:|--:|\n| %d | %s | %s | %s | %s | %s | %.1f |\n",
			k.Nodes, mb(k.Metrics["heap-B"]), mb(k.Metrics["rss-B"]), mb(k.Metrics["peak-heap-B"]), mb(k.Metrics["heap-B/node"]), mb(k.Metrics["rss-B/node"]), k.Metrics["cpu-s"])
	}
	b.WriteString("\n## Commands\n\n```\n")
	for _, c := range r.Informer {
		b.WriteString(c.Command + "\n")
	}
	if r.Kubelet != nil {
		b.WriteString(r.Kubelet.Command + "\n")
	}
	if r.Run != nil {
		b.WriteString(r.Run.Command + "\n")
	}
	for _, v := range r.Variants {
		b.WriteString(v.Command + "\n")
	}
	if r.BareRun != nil {
		b.WriteString(r.BareRun.Command + "\n")
	}
	b.WriteString("```\n")
	b.WriteString(`
How to read it: BenchmarkInformerMemory (pkg/kubeload; each figure the median of its runs, -count) syncs a bare set of client-go SharedIndexInformers (managedFields
dropped, as kube-controller-manager's informers do), then lwbench's InformerSet (which stores only each object's name, namespace and resourceVersion:
StoreMetadata) with the observers a run gives it, through one kube-apiserver (watch cache on), each informer on a connection of its
own; heap is the Go heap in use after a GC, RSS the resident set's growth, both per informer, from before the set started; CPU
the process's user and system time. The embedded etcd and the benchmark's writers are in the same process, outside the deltas.
The lwbench run reports its own peak RSS (self.maxRSSBytes), embedded etcd included unless etcd runs in a process of its
own (--cluster-size 1); relists are the informers' (result.relists); "writes took" is result.writes.durationMs beside
the scheduled --duration: a run whose writes took much longer than scheduled was run on a stack that could not keep
the rate. The machine is shared: CPU figures of one run are noisy.
`)
	return b.String()
}
