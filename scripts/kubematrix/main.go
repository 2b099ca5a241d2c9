// Command kubematrix runs lwbench through real kube-apiservers and writes
// results/kube/: for each Kubernetes release given, `lwbench conformance`
// (the etcd-direct model against the real stack, watch cache on and off ×
// WatchListClient on and off), `lwbench run --kube-apiserver` with
// client-go's WatchListClient on and off, and the experiments through
// kube-apiserver (--quick sizes: relist-storm per watch cache ×
// WatchListClient, compaction-sweep per WatchListClient, continuation and
// catchup per watch cache, defrag-stall), as JSON, plus README.md with the tables, the
// machine, the versions, the date, the commit and the exact commands.
// scripts/kube-matrix.sh runs it.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kubestore/etcdkit/internal/machine"
	"github.com/kubestore/etcdkit/internal/release"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
)

func main() {
	out := flag.String("out", "results/kube", "directory to write into")
	duration := flag.String("duration", "30s", "each load's --duration")
	objects := flag.String("objects", "500", "each load's --objects")
	flag.Parse()
	versions := flag.Args()
	if len(versions) == 0 {
		versions = []string{"1.37.2"}
	}
	// Each version names files under -out and reaches the build script:
	// only releases lwbench builds, checked before anything is written.
	for i, v := range versions {
		r, err := release.Kubernetes.Resolve(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubematrix: version:", err)
			os.Exit(2)
		}
		versions[i] = r
	}
	if err := run(*out, versions, *duration, *objects); err != nil {
		fmt.Fprintln(os.Stderr, "kubematrix:", err)
		os.Exit(1)
	}
}

// entry is one lwbench invocation and the file it wrote.
type entry struct {
	Version string   `json:"version"`
	Args    []string `json:"args"`
	File    string   `json:"file"`
	// Table is the experiment's own markdown table (lwbench --out's
	// NAME.md), beside File; "" for runs and conformance.
	Table string `json:"table,omitempty"`
	// Date and Commit say when and from which commit lwbench wrote File:
	// a release not given to this run keeps its earlier files (kept).
	Date   time.Time `json:"date"`
	Commit string    `json:"commit"`
}

// kept returns the entries of the previous run under out (its index.json;
// none if there is none) of releases not in versions: their files stay
// and README.md shows them again, with their date and commit, so that a
// run of one release (the others' kube-apiservers not built on this
// machine) does not drop the others' results.
func kept(out string, versions []string) ([]entry, error) {
	b, err := os.ReadFile(filepath.Join(out, "index.json"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var prev struct {
		Date   time.Time `json:"date"`
		Commit string    `json:"commit"`
		Runs   []entry   `json:"runs"`
	}
	if err := json.Unmarshal(b, &prev); err != nil {
		return nil, fmt.Errorf("%s/index.json: %w", out, err)
	}
	var keep []entry
	for _, e := range prev.Runs {
		if slices.Contains(versions, e.Version) {
			continue
		}
		if e.Commit == "" { // written before entries had their own
			e.Date, e.Commit = prev.Date, prev.Commit
		}
		keep = append(keep, e)
	}
	return keep, nil
}

// experimentDir is where the experiments' results go, under -out.
const experimentDir = "experiments"

// experimentRuns are the experiments through kube-apiserver version, at
// --quick sizes: each writes its JSON (and, through --out, its markdown
// table) as experiments/NAME.json.
func experimentRuns(version string) []entry {
	var runs []entry
	// add adds experiment name with flags of the form --flag=value, its
	// label made of them: relist-storm-1.37.2-watch-cache-false-watchlist-true.
	add := func(name string, flags ...string) {
		label := name + "-" + version
		for _, f := range flags {
			k, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
			if k == "client-feature-gates" {
				k, v = "watchlist", strings.TrimPrefix(v, "WatchListClient=")
			}
			label += "-" + k + "-" + v
		}
		a := append([]string{name, "--quick", "--kube-apiserver", version}, flags...)
		a = append(a, "--label", label, "-w", "json")
		runs = append(runs, entry{Version: version, Args: a, File: filepath.Join(experimentDir, label+".json"), Table: filepath.Join(experimentDir, label+".md")})
	}
	for _, cache := range []string{"false", "true"} {
		for _, wl := range []string{"true", "false"} {
			add("relist-storm", "--watch-cache="+cache, "--client-feature-gates=WatchListClient="+wl)
		}
	}
	for _, wl := range []string{"true", "false"} {
		add("compaction-sweep", "--client-feature-gates=WatchListClient="+wl)
	}
	for _, cache := range []string{"false", "true"} {
		add("continuation", "--watch-cache="+cache)
		add("catchup", "--watch-cache="+cache)
	}
	add("defrag-stall")
	return runs
}

// runOne runs lwbench with e's arguments and writes its stdout to e.File
// under out; an experiment also writes its table (and plots, which are
// not kept: results/experiments holds the model's) through --out.
func runOne(bin, out string, e *entry) error {
	args := e.Args
	var tmp string
	if e.Table != "" {
		var err error
		if tmp, err = os.MkdirTemp("", "kubematrix-"); err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		args = append(append([]string(nil), args...), "--out", tmp)
	}
	fmt.Fprintf(os.Stderr, "kubematrix: lwbench %s\n", strings.Join(e.Args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil && len(b) == 0 {
		return fmt.Errorf("lwbench %s: %w", strings.Join(e.Args, " "), err)
	}
	path := filepath.Join(out, e.File)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	if e.Table == "" {
		return nil
	}
	md, err := os.ReadFile(filepath.Join(tmp, strings.TrimSuffix(filepath.Base(e.File), ".json")+".md"))
	if err != nil {
		return fmt.Errorf("lwbench %s: its table: %w", strings.Join(e.Args, " "), err)
	}
	return os.WriteFile(filepath.Join(out, e.Table), md, 0o644)
}

func run(out string, versions []string, duration, objects string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	keep, err := kept(out, versions)
	if err != nil {
		return err
	}
	// What this run writes replaces the previous run's experiments of
	// the same releases.
	if entries, err := os.ReadDir(filepath.Join(out, experimentDir)); err == nil {
		for _, de := range entries {
			for _, v := range versions {
				if strings.Contains(de.Name(), "-"+v+"-") || strings.HasSuffix(strings.TrimSuffix(strings.TrimSuffix(de.Name(), ".json"), ".md"), "-"+v) {
					if err := os.Remove(filepath.Join(out, experimentDir, de.Name())); err != nil {
						return err
					}
					break
				}
			}
		}
	}
	// The commit lwbench is built from, read before the build: the tree may
	// move on during the matrix's half hour.
	commit := builtCommit()
	bin := filepath.Join(os.TempDir(), fmt.Sprintf("lwbench-kubematrix-%d", os.Getpid()))
	if b, err := exec.Command("go", "build", "-o", bin, "./cmd/lwbench").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/lwbench: %v\n%s", err, b)
	}
	defer os.Remove(bin)
	load := []string{"--duration", duration, "--objects", objects, "-w", "json"}
	var entries []entry
	var md bytes.Buffer
	began := time.Now().UTC()
	loadStart := loadAvg()
	for _, v := range versions {
		conf := entry{Version: v, Args: append([]string{"conformance", "--kube-apiserver", v}, load...), File: fmt.Sprintf("conformance-%s.json", v)}
		runs := []entry{conf}
		for _, wl := range []string{"true", "false"} {
			for _, profile := range []string{"informer", "apiserver-cache"} {
				runs = append(runs, entry{Version: v, File: fmt.Sprintf("run-%s-%s-watchlist-%s.json", v, profile, wl),
					Args: append([]string{"run", "--kube-apiserver", v, "--profile", profile, "--client-feature-gates", "WatchListClient=" + wl}, load...)})
			}
		}
		runs = append(runs, experimentRuns(v)...)
		for _, e := range runs {
			if err := runOne(bin, out, &e); err != nil {
				return err
			}
			e.Date, e.Commit = began, commit
			entries = append(entries, e)
		}
	}
	if len(keep) > 0 {
		// The kept releases after the new ones, newest first as given.
		entries = append(entries, keep...)
	}
	mem, _ := machine.MemTotalBytes()
	fmt.Fprintf(&md, "# lwbench through real kube-apiservers\n\nWritten by `scripts/kube-matrix.sh %s` on %s (commit %s, %s).\n\n",
		strings.Join(versions, " "), began.Format(time.RFC3339), commit, runtime.Version())
	fmt.Fprintf(&md, "Machine: %d cores, %s, %.1f GiB, %s; load average %s at the start, %s at the end (the machine is shared: figures vary from run to run). Every load: `--duration %s --objects %s` on an embedded etcd; each conformance case and each run starts its own etcd and kube-apiserver.\n\n",
		runtime.NumCPU(), machine.CPUModel(), float64(mem)/(1<<30), machine.Kernel(), loadStart, loadAvg(), duration, objects)
	if len(keep) > 0 {
		fmt.Fprintf(&md, "Not re-run: %s. Their sections below are those of the earlier run named in each (its date and commit), rendered again from their files (the conformance rows judged and annotated again from their counts by this commit's comparison); this machine had not built their kube-apiservers (scripts/build-kube-apiserver.sh, about 45 minutes each on 2 cores).\n\n", strings.Join(keptVersions(keep), ", "))
	}
	for _, e := range entries {
		if e.Table != "" {
			// An experiment: its own table, with the machine and
			// versions on its first line.
			md2, err := os.ReadFile(filepath.Join(out, e.Table))
			if err != nil {
				return err
			}
			fmt.Fprintf(&md, "## `lwbench %s`\n\n[%s](%s)%s\n\n%s\n", strings.Join(e.Args, " "), e.File, e.File, keptFrom(e, commit), md2)
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, e.File))
		if err != nil {
			return err
		}
		_, v, err := report.Decode(b)
		if err != nil {
			return fmt.Errorf("%s: %w", e.File, err)
		}
		fmt.Fprintf(&md, "## `lwbench %s`\n\n[%s](%s)%s\n\n", strings.Join(e.Args, " "), e.File, e.File, keptFrom(e, commit))
		switch r := v.(type) {
		case *report.Conformance:
			if e.Commit != commit {
				// A kept release's counts, judged and annotated by this
				// commit's comparison (its notes corrected since).
				for i := range r.Cases {
					r.Cases[i].Rows = kubeload.Compare(r.Cases[i].Model, r.Cases[i].Real)
				}
			}
			writeConformance(&md, r)
		case *report.RunResult:
			if r.APIServer != nil {
				writeRun(&md, r)
			}
		}
	}
	doc, err := json.MarshalIndent(map[string]any{"kind": "KubeMatrix", "date": began, "commit": commit,
		"go": runtime.Version(), "cpu": machine.CPUModel(), "cores": runtime.NumCPU(), "runs": entries}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "index.json"), append(doc, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "README.md"), md.Bytes(), 0o644)
}

// keptVersions are the releases of keep, in order, once each.
func keptVersions(keep []entry) []string {
	var vs []string
	for _, e := range keep {
		if !slices.Contains(vs, e.Version) {
			vs = append(vs, e.Version)
		}
	}
	return vs
}

// keptFrom says, for an entry an earlier run wrote (another commit than
// this run's), when and from which commit.
func keptFrom(e entry, commit string) string {
	if e.Commit == commit {
		return ""
	}
	return fmt.Sprintf(" (kept: written on %s, commit %s)", e.Date.Format(time.RFC3339), e.Commit)
}

func writeConformance(md *bytes.Buffer, r *report.Conformance) {
	fmt.Fprintf(md, "etcd %s, kube-apiserver %s. Requests etcd received after seeding, by method and shape, and their bytes both ways; a row is within 10 %% when its counts are; rows outside 10 %% say what is known of the difference.\n\n", r.EtcdVersion, r.APIServerVersion)
	for _, c := range r.Cases {
		within := 0
		for _, row := range c.Rows {
			if row.Within10 {
				within++
			}
		}
		rangeStream := "on"
		if c.ModelRangeStream != nil && !*c.ModelRangeStream {
			rangeStream = "off"
		}
		fmt.Fprintf(md, "### %s (model: profile %s, EtcdRangeStream %s): %d of %d rows within 10 %%\n\n", c.Name, c.ModelProfile, rangeStream, within, len(c.Rows))
		fmt.Fprintf(md, "| method | kind | model | real | ratio | within 10 %% | model bytes | real bytes | bytes ratio | note |\n|---|---|---:|---:|---:|---|---:|---:|---:|---|\n")
		for _, row := range c.Rows {
			fmt.Fprintf(md, "| %s | %s | %d | %d | %s | %v | %d | %d | %s | %s |\n", row.Method, row.Kind, row.Model, row.Real, ratio(row.Model, row.Real),
				row.Within10, row.ModelBytes, row.RealBytes, ratio(row.ModelBytes, row.RealBytes), row.Note)
		}
		md.WriteString("\n")
	}
}

// ratio formats model/real with two decimals, "-" when real is 0.
func ratio(model, real int64) string {
	if real == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(model)/float64(real))
}

func writeRun(md *bytes.Buffer, r *report.RunResult) {
	counts := map[string]int{}
	for _, rl := range r.Relists {
		counts[rl.Reason]++
	}
	var causes []string
	for _, c := range slices.Sorted(maps.Keys(counts)) {
		causes = append(causes, fmt.Sprintf("%s %d", c, counts[c]))
	}
	v := r.Validation
	fmt.Fprintf(md, "| kube-apiserver | watch cache | WatchListClient | writes | relists (cause) | delivery p99 ms | lost | cache mismatches |\n|---|---|---|---:|---|---:|---:|---:|\n")
	fmt.Fprintf(md, "| %s | %v | %s | %d | %d (%s) | %.1f | %d | %d |\n\n", r.APIServer.Version, r.APIServer.WatchCache, r.APIServer.ClientWatchList,
		r.Writes.Completed, len(r.Relists), strings.Join(causes, ", "), r.Delivery.FromResponse.P99Ms, v.Lost, v.CacheMismatches)
	fmt.Fprintf(md, "| informer requests | count | objects | bytes |\n|---|---:|---:|---:|\n")
	for _, c := range r.Requests {
		fmt.Fprintf(md, "| %s RV=%q %s | %d | %d | %d |\n", c.Verb, c.ResourceVersion, c.Outcome, c.Count, c.Objects, c.Bytes)
	}
	md.WriteString("\n")
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// builtCommit is HEAD's short hash, with "+changes" when tracked files
// differ from it (what `go build` then compiles is not that commit).
func builtCommit() string {
	head, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	commit := strings.TrimSpace(string(head))
	if exec.Command("git", "diff", "--quiet", "HEAD", "--", ".", ":!results").Run() != nil {
		commit += "+changes"
	}
	return commit
}
