// Command clusterconformance runs `lwbench conformance --nodes N` for
// issue 21 item 5, for scripts/cluster-conformance.sh: the etcd-direct
// model of a cluster (pkg/clustermodel) against the real control plane
// (kube-apiserver, kube-controller-manager, kube-scheduler and KWOK nodes),
// each on a fresh embedded etcd behind the counting proxy, compared by
// resource, method and request kind. It writes NAME.json (lwbench's
// Conformance result) and NAME.meta.json (command, commit, times, exit)
// per case into -out, and -out/README.md from them: per case how many
// rows are within 10 %, how many outside carry a note (their cause and
// upstream source, kubeload.Compare) and how many do not, then every row.
//
// Each case is one lwbench process (-lwbench); a case that fails is
// reported with its error and the end of its log, and the others still
// run. -render rewrites the README from the files already in -out.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kubestore/etcdkit/internal/machine"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/scripts/internal/casefile"
)

// testCase is one lwbench conformance.
type testCase struct {
	Name  string   // file name stem in -out
	Title string   // what it compares
	Args  []string // lwbench conformance's flags, -w json added
}

// cases are 100 and 1,000 nodes at a churn the control plane keeps up
// with on 2 cores (4 pods/s: at ClusterLoader2's 10 it makes 6-7 here and
// the model, which answers every op at once, does not fall behind), with
// few pods per node so that 1,000 nodes seed in minutes, each side's
// churn 5 minutes long (one of kube-apiserver's 5-minute compactions).
func cases(quick bool) []testCase {
	if quick {
		return []testCase{{"quick-10", "10 nodes, 2 pods per node (quick check of the script)",
			[]string{"--nodes", "10", "--pods-per-node", "2", "--pod-churn", "2", "--duration", "60s"}}}
	}
	return []testCase{
		{"nodes-100", "100 nodes, 5 pods per node, 4 pods/s", []string{"--nodes", "100", "--pods-per-node", "5", "--pod-churn", "4", "--duration", "5m"}},
		{"nodes-1000", "1,000 nodes, 3 pods per node, 4 pods/s", []string{"--nodes", "1000", "--pods-per-node", "3", "--pod-churn", "4", "--duration", "5m"}},
		// The churn without rollouts: every op changes one pod, so no
		// controller sees two pods of one owner change at once.
		{"nodes-1000-scale-only", "1,000 nodes, 3 pods per node, 4 pods/s, no rollouts (every op scales a Deployment by one pod)",
			[]string{"--nodes", "1000", "--pods-per-node", "3", "--pod-churn", "4", "--rollout-percent", "0", "--duration", "5m"}},
	}
}

type options struct {
	lwbench, out, commit string
	only                 []string
	quick, render        bool
}

func main() {
	var o options
	flag.StringVar(&o.lwbench, "lwbench", "", "lwbench binary")
	flag.StringVar(&o.out, "out", "results/cluster-conformance", "directory of the JSON results and README.md")
	flag.StringVar(&o.commit, "commit", "", "git commit measured")
	only := flag.String("only", "", "comma-separated case names to run (default all); the README covers every case with files in -out")
	flag.BoolVar(&o.quick, "quick", false, "a small case, a check that the script works")
	flag.BoolVar(&o.render, "render", false, "only rewrite the README from the files in -out")
	flag.Parse()
	if *only != "" {
		o.only = strings.Split(*only, ",")
	}
	log.SetFlags(0)
	if err := run(o); err != nil {
		log.Fatalf("clusterconformance: %v", err)
	}
}

func run(o options) error {
	all := cases(o.quick)
	for _, name := range o.only {
		if !slices.ContainsFunc(all, func(c testCase) bool { return c.Name == name }) {
			return fmt.Errorf("-only: no case %q", name)
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if !o.render {
		if o.lwbench == "" {
			return fmt.Errorf("-lwbench is required")
		}
		for _, c := range all {
			if len(o.only) == 0 || slices.Contains(o.only, c.Name) {
				runCase(o, c)
			}
		}
	}
	var b bytes.Buffer
	render(&b, o.out, o.commit, all)
	return os.WriteFile(filepath.Join(o.out, "README.md"), b.Bytes(), 0o644)
}

// runCase runs one case, writing NAME.json and NAME.meta.json; a failure
// is recorded in the meta file, not returned.
func runCase(o options, c testCase) {
	casefile.Run(o.lwbench, o.out, c.Name, o.commit, append([]string{"conformance"}, c.Args...))
}

// loaded is one case's files: meta nil when it never ran; err when its
// files cannot be read or it wrote no result.
type loaded struct {
	c    testCase
	meta *casefile.Meta
	res  *report.Conformance
	err  error
}

func load(dir string, c testCase) (l loaded) {
	l.c = c
	var b []byte
	l.meta, b, l.err = casefile.Load(dir, c.Name)
	if l.err != nil || l.meta == nil {
		return l
	}
	_, doc, err := report.Decode(b)
	if err != nil {
		l.err = err
		return l
	}
	r, ok := doc.(*report.Conformance)
	if !ok || len(r.Cases) == 0 {
		l.err = fmt.Errorf("%s.json is a %T without cases, not a conformance result", c.Name, doc)
		return l
	}
	// The rows are derived from the raw counts: compare them again, so
	// that the notes are the comparison's at the rendering commit.
	for i := range r.Cases {
		if c := &r.Cases[i]; len(c.Model) > 0 || len(c.Real) > 0 {
			c.Rows = kubeload.CompareByResource(c.Model, c.Real)
		}
	}
	l.res = r
	return l
}

// counts are a case's rows: within 10 %, outside with a note, outside
// without one.
type counts struct{ within, noted, unexplained int }

func countRows(rows []report.ConformanceRow) (n counts) {
	for _, r := range rows {
		switch {
		case r.Within10:
			n.within++
		case r.Note != "":
			n.noted++
		default:
			n.unexplained++
		}
	}
	return n
}

// render writes the README from every case's files in dir.
func render(b *bytes.Buffer, dir, commit string, all []testCase) {
	mem, _ := machine.MemTotalBytes()
	fmt.Fprintf(b, "# The cluster model against the real control plane\n\n")
	fmt.Fprintf(b, "Written by `scripts/cluster-conformance.sh` (scripts/clusterconformance) on %s: %s, %d CPUs, %.0f GiB, kernel %s, %s. Do not edit.\n\n",
		time.Now().UTC().Format("2006-01-02"), machine.CPUModel(), runtime.NumCPU(), float64(mem)/(1<<30), machine.Kernel(), runtime.Version())
	b.WriteString("Each case is one `lwbench conformance --nodes N`: the etcd-direct model of a cluster (pkg/clustermodel) and the real control plane " +
		"(kube-apiserver, kube-controller-manager, kube-scheduler, KWOK nodes), each on a fresh embedded etcd behind the counting proxy, run the same plan; " +
		"etcd's requests after the seeding (the drain, each side's own wait for its informers, apart) are compared by resource, method and kind. " +
		"A row is within 10 % when its counts are; a row outside says what is known of the difference, with its upstream source (kubeload.CompareByResource). " +
		"Its JSON result is beside this file, its command and commit in `NAME.meta.json`; ")
	if commit == "" {
		commit = "(not given: -commit)"
	}
	fmt.Fprintf(b, "the rows below are compared from each result's raw counts by the code at commit %s, which wrote this file.\n\n", commit)
	var ls []loaded
	for _, c := range all {
		if l := load(dir, c); l.meta != nil {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		b.WriteString("No case has run yet.\n")
		return
	}
	b.WriteString("| case | etcd / kube-apiserver | rows | within 10 % | outside, noted | outside, unexplained | took |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, l := range ls {
		if l.res == nil {
			fmt.Fprintf(b, "| %s | failed: %s | | | | | |\n", l.c.Name, oneLine(l.err.Error()))
			continue
		}
		rows := l.res.Cases[0].Rows
		n := countRows(rows)
		fmt.Fprintf(b, "| %s | %s / %s | %d | %d | %d | %d | %.0f s |\n", l.c.Name, l.res.EtcdVersion, l.res.APIServerVersion, len(rows),
			n.within, n.noted, n.unexplained, l.meta.DurationMs/1000)
	}
	for _, l := range ls {
		fmt.Fprintf(b, "\n## %s: %s\n\n`%s` (commit %s, %s)\n\n", l.c.Name, l.c.Title, l.meta.Command, l.meta.Commit, l.meta.StartedAt.Format(time.RFC3339))
		if l.res == nil {
			fmt.Fprintf(b, "Failed: %s\n", l.err)
			continue
		}
		for _, c := range l.res.Cases {
			n := countRows(c.Rows)
			fmt.Fprintf(b, "%s: %d of %d rows within 10 %%, %d outside with a note, %d without.\n\n", c.Name, n.within, len(c.Rows), n.noted, n.unexplained)
			b.WriteString("Failed compares are a Txn row's requests whose compares did not hold (a write from a stale object, retried by kube-apiserver): they wrote nothing and made no watch event.\n\n")
			b.WriteString("| resource | method | kind | model | real | ratio | failed compares, model / real | within 10 % | note |\n|---|---|---|--:|--:|--:|--:|---|---|\n")
			var notes []string // each note once, numbered from 1 below the table
			for _, r := range c.Rows {
				note := ""
				if r.Note != "" {
					i := slices.Index(notes, r.Note)
					if i < 0 {
						notes, i = append(notes, r.Note), len(notes)
					}
					note = fmt.Sprintf("[%d]", i+1)
				}
				resource := r.Resource
				if resource == "" {
					resource = "-" // no resource's keys: leases granted, progress requests, streams
				}
				ratio := "-"
				if r.Real > 0 {
					ratio = fmt.Sprintf("%.2f", r.Ratio)
				}
				within := "no"
				if r.Within10 {
					within = "yes"
				}
				failed := ""
				if r.ModelFailedCompares > 0 || r.RealFailedCompares > 0 {
					failed = fmt.Sprintf("%d / %d", r.ModelFailedCompares, r.RealFailedCompares)
				}
				fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %s | %s | %s | %s |\n", resource, r.Method, r.Kind, r.Model, r.Real, ratio, failed, within, note)
			}
			b.WriteString("\n")
			for i, n := range notes {
				fmt.Fprintf(b, "[%d] %s\n\n", i+1, oneLine(n))
			}
		}
	}
}

// oneLine makes s fit a table cell.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "|", "/").Replace(s)
}
