// Command clusterresults runs `lwbench run --nodes` for the cluster
// presets and experiments of issue 21, for scripts/cluster-results.sh,
// and writes -out/README.md (results/cluster) from the JSON results it
// keeps beside it: per case the etcd traffic by resource during the churn
// beside the rates ../shared/reference/cluster-traffic.md derives from
// Kubernetes' source, the components' and lwbench's own CPU and memory,
// the node Leases' renewals and Ready conditions, the periodic traffic
// seen, each experiment's defragmentation, restart and component exits,
// and per case two figures: etcd's writes per second by resource and its
// db size over time.
//
// Each case is one lwbench process (-lwbench) with its own control plane
// and embedded etcd; a case that fails is reported with its error and the
// end of its log, and the others still run. -render rewrites the README
// from the JSON files already in -out without running anything.
package main

import (
	"bytes"
	"cmp"
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
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/scripts/internal/casefile"
)

// testCase is one lwbench run.
type testCase struct {
	Name  string   // file name stem in -out
	Title string   // what it shows
	Args  []string // lwbench run's flags, -w json added
}

// cases are the published presets and experiments: 100 nodes as
// ClusterLoader2 runs them (30 pods per node); 1,000 and 5,000 nodes with
// fewer pods per node, as this machine holds them (kwok-control-plane.md:
// 5,000 nodes and 10,000 pods); the experiments at their smallest telling
// size. Runs with --nodes span two of kube-apiserver's 5-minute
// compactions unless a case says otherwise.
func cases(quick bool) []testCase {
	if quick {
		return []testCase{
			{"quick-20", "20 nodes, 5 pods per node (quick check of the script)", []string{"--nodes", "20", "--pods-per-node", "5", "--duration", "60s", "--compaction-interval", "20s"}},
			{"quick-defrag", "20 nodes, 128 MiB filler, defragmentation", []string{"--nodes", "20", "--pods-per-node", "2", "--duration", "40s", "--db-size", "128Mi", "--defrag-at", "10s"}},
		}
	}
	return []testCase{
		{"nodes-100", "100 nodes, 30 pods per node (ClusterLoader2's load test)", []string{"--nodes", "100"}},
		{"nodes-1000", "1,000 nodes, 10 pods per node", []string{"--nodes", "1000", "--pods-per-node", "10"}},
		{"nodes-5000", "5,000 nodes, 2 pods per node", []string{"--nodes", "5000", "--pods-per-node", "2"}},
		{"defrag-1000", "defragmentation of a 2 GiB db under 1,000 nodes, events in a second etcd", []string{"--nodes", "1000", "--pods-per-node", "3", "--db-size", "2Gi", "--defrag-at", "60s", "--duration", "4m", "--events-etcd"}},
		{"restart-apiserver-100", "kube-apiserver restarted under 100 nodes (watch cache rebuilt from etcd)", []string{"--nodes", "100", "--pods-per-node", "10", "--restart", "kube-apiserver", "--duration", "4m"}},
		{"restart-apiserver-100-paginated", "the same with EtcdRangeStream off (the watch cache's LISTs in pages)", []string{"--nodes", "100", "--pods-per-node", "10", "--restart", "kube-apiserver", "--apiserver-feature-gates", "EtcdRangeStream=false", "--duration", "4m"}},
		{"restart-kcm-100-nocache", "kube-controller-manager restarted, watch cache off (its informers' relists reach etcd)", []string{"--nodes", "100", "--pods-per-node", "10", "--restart", "kube-controller-manager", "--watch-cache=false", "--duration", "4m"}},
		{"compaction-1m-100", "compaction every minute under 100 nodes", []string{"--nodes", "100", "--pods-per-node", "10", "--compaction-interval", "1m", "--duration", "4m"}},
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
	flag.StringVar(&o.out, "out", "results/cluster", "directory of the JSON results and README.md")
	flag.StringVar(&o.commit, "commit", "", "git commit measured")
	only := flag.String("only", "", "comma-separated case names to run (default all); the README covers every JSON in -out")
	flag.BoolVar(&o.quick, "quick", false, "small cases, a check that the script works")
	flag.BoolVar(&o.render, "render", false, "only rewrite the README from the JSON files in -out")
	flag.Parse()
	if *only != "" {
		o.only = strings.Split(*only, ",")
	}
	log.SetFlags(0)
	if err := run(o); err != nil {
		log.Fatalf("clusterresults: %v", err)
	}
}

func run(o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	all := cases(o.quick)
	for _, name := range o.only {
		if !slices.ContainsFunc(all, func(c testCase) bool { return c.Name == name }) {
			return fmt.Errorf("-only: no case %q", name)
		}
	}
	if !o.render {
		if o.lwbench == "" {
			return fmt.Errorf("-lwbench is required")
		}
		for _, c := range all {
			if len(o.only) > 0 && !slices.Contains(o.only, c.Name) {
				continue
			}
			runCase(o, c)
		}
	}
	md, err := render(o, all)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, "README.md"), md, 0o644)
}

// runCase runs one case, writing NAME.json (lwbench's result) and
// NAME.meta.json.
func runCase(o options, c testCase) {
	casefile.Run(o.lwbench, o.out, c.Name, o.commit, append([]string{"run"}, c.Args...))
}

// loaded is one case's files.
type loaded struct {
	c    testCase
	meta *casefile.Meta
	res  *report.RunResult
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
	r, ok := doc.(*report.RunResult)
	if !ok {
		l.err = fmt.Errorf("%s.json is a %T, not a run result", c.Name, doc)
		return l
	}
	l.res = r
	return l
}

// render writes the README from every case's files in o.out.
func render(o options, all []testCase) ([]byte, error) {
	var b bytes.Buffer
	mem, _ := machine.MemTotalBytes()
	fmt.Fprintf(&b, "# A cluster on one machine\n\n")
	fmt.Fprintf(&b, "Written by `scripts/cluster-results.sh` (scripts/clusterresults) on %s: %s, %d CPUs, %.0f GiB, kernel %s, %s.\n",
		time.Now().UTC().Format("2006-01-02"), machine.CPUModel(), runtime.NumCPU(), float64(mem)/(1<<30), machine.Kernel(), runtime.Version())
	fmt.Fprintf(&b, "Each case is one `lwbench run --nodes N` (a real kube-apiserver, kube-controller-manager and kube-scheduler, KWOK nodes, an embedded etcd behind the counting proxy); its JSON result is beside this file, its command and commit in `NAME.meta.json`.\n\n")
	var ls []loaded
	for _, c := range all {
		if l := load(o.out, c); l.meta != nil || l.err != nil {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		fmt.Fprintf(&b, "No case has run yet.\n")
		return b.Bytes(), nil
	}
	writeSummary(&b, ls)
	for _, l := range ls {
		writeCase(&b, o.out, l)
	}
	return b.Bytes(), nil
}

// writeSummary is one line per case: what fit on this machine.
func writeSummary(b *bytes.Buffer, ls []loaded) {
	fmt.Fprintf(b, "| case | nodes / pods | seeding | verdict | fits (node Leases) | lease writes/s at etcd (expected) | etcd writes/s | kube-apiserver peak RSS | lwbench + etcd peak RSS |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range ls {
		if l.res == nil || l.res.Cluster == nil {
			fmt.Fprintf(b, "| %s | - | - | failed: %s | - | - | - | - | - |\n", l.c.Name, oneLine(errText(l)))
			continue
		}
		r, c := l.res, l.res.Cluster
		churn := churnRates(r)
		var leases, writes float64
		for _, x := range churn {
			writes += x.WritesPerSecond
			if x.Resource == "leases.coordination.k8s.io" {
				leases = x.WritesPerSecond
			}
		}
		var apiRSS int64
		for _, u := range r.APIServers {
			apiRSS = max(apiRSS, u.PeakResidentMemoryBytes)
		}
		fmt.Fprintf(b, "| %s | %d / %d | %.0f s | %s | %s | %.1f (%.1f) | %.1f | %s | %s |\n", l.c.Name, c.Nodes, c.PodsRunning, c.SeedMs/1000,
			oneLine(r.Verdict), fits(c.NodeHealth), leases, expectedLeaseWrites(c.Nodes), writes, mib(apiRSS), mib(r.Self.MaxRSSBytes))
	}
	fmt.Fprintf(b, "\nFits: yes when every node's Lease was renewed within its 40 s duration throughout (kube-controller-manager's node lifecycle controller marks a node NotReady 50 s after its last renewal: --node-monitor-grace-period, k8s.io/kubernetes pkg/controller/nodelifecycle/config/v1alpha1/defaults.go); late: some went past 40 s, none NotReady; no: nodes marked NotReady. KWOK renews the Leases with 4 workers (sigs.k8s.io/kwok NodeLeaseParallelism), each renewal a round trip through kube-apiserver.\n")
	fmt.Fprintf(b, "\nKWOK reports each node's status every 600-610 s (its node-heartbeat-with-lease stage's delay, in the stage files beside the kwok binary), a kubelet every 5 minutes ±50 %% (pkg/kubelet/apis/config/v1beta1/defaults.go NodeStatusReportFrequency): a KWOK cluster writes half the node status a real one does when KWOK keeps up (one per node every 605 s at 100 nodes here); with a backlog it writes more (the node status updates row of each case), not yet explained by a run.\n")
	fmt.Fprintf(b, "\nExpected lease writes: every node's Lease renewed every 10.2 s (KWOK as the kubelet: `NodeLeaseDurationSeconds` 40 s x 0.25, jitter 4 %%, k8s.io/kubernetes pkg/kubelet/kubelet.go and component-helpers/apimachinery/lease/controller.go), kube-controller-manager's and kube-scheduler's leader Leases every 2 s (component-base/config/v1alpha1 defaults RetryPeriod) and kube-apiserver's identity Lease every 10 s (pkg/controlplane/apiserver/server.go): nodes/10.2 + 1.1 per second (../shared/reference/cluster-traffic.md section 1).\n\n")
}

// fits says whether the machine held a cluster's nodes (writeSummary's
// "fits" column): every Lease renewed in time, late, or nodes NotReady.
func fits(h *report.NodeHealth) string {
	switch {
	case h == nil:
		return "-"
	case h.NotReady > 0:
		return fmt.Sprintf("no: %d of %d nodes NotReady, Lease p99 %.0f s", h.NotReady, h.Nodes, h.IntervalP99Ms/1000)
	case h.LeaseExpired > 0:
		return fmt.Sprintf("late: %d nodes past 40 s, Lease p99 %.0f s, none NotReady", h.LeaseExpired, h.IntervalP99Ms/1000)
	}
	return fmt.Sprintf("yes: Lease p99 %.1f s", h.IntervalP99Ms/1000)
}

// expectedLeaseWrites is writeSummary's expectation, per second.
func expectedLeaseWrites(nodes int) float64 { return float64(nodes)/10.2 + 2*0.5 + 0.1 }

// churnPhase tells the phases of the churn: steady and what follows it
// until the drain, whatever compaction suffix they carry.
func churnPhase(p string) bool {
	base, _, _ := strings.Cut(p, " after compaction")
	switch {
	case base == "seed" || base == "sync" || base == "before" || strings.HasPrefix(base, "drain") || strings.HasPrefix(base, "stop"):
		return false
	}
	return true
}

// churnRates are etcd's requests by resource over the churn's phases.
func churnRates(r *report.RunResult) []report.EtcdResourceRates {
	var reqs []report.EtcdRequests
	var phases []report.EtcdPhase
	for _, q := range r.Etcd {
		if churnPhase(q.Phase) {
			q.Phase = "churn"
			reqs = append(reqs, q)
		}
	}
	var ms float64
	for _, p := range r.EtcdPhases {
		if churnPhase(p.Phase) {
			ms += p.DurationMs
		}
	}
	phases = append(phases, report.EtcdPhase{Phase: "churn", DurationMs: ms})
	rates := report.EtcdByResource(reqs, phases)
	slices.SortFunc(rates, func(x, y report.EtcdResourceRates) int {
		return cmp.Or(cmp.Compare(y.WritesPerSecond+y.ReadsPerSecond, x.WritesPerSecond+x.ReadsPerSecond), cmp.Compare(x.Resource, y.Resource))
	})
	return rates
}

// writeCase writes one case's section, its figures into dir.
func writeCase(b *bytes.Buffer, dir string, l loaded) {
	fmt.Fprintf(b, "## %s: %s\n\n", l.c.Name, l.c.Title)
	if l.meta != nil {
		fmt.Fprintf(b, "`%s` (commit %s, %s, %.0f s)\n\n", l.meta.Command, l.meta.Commit, l.meta.StartedAt.Format(time.RFC3339), l.meta.DurationMs/1000)
	}
	if l.res == nil {
		fmt.Fprintf(b, "Failed: %s\n\n", errText(l))
		return
	}
	r, c := l.res, l.res.Cluster
	if c == nil {
		fmt.Fprintf(b, "Not a cluster run.\n\n")
		return
	}
	fmt.Fprintf(b, "%d KWOK nodes, %d of %d pods Running after %.0f s of seeding, churn %.0f pods/s. %s\n\n", c.Nodes, c.PodsRunning, c.Pods, c.SeedMs/1000, c.PodChurn, r.Verdict)
	if files, err := writeFigures(dir, l.c.Name, r); err != nil {
		fmt.Fprintf(b, "Figures: %v\n\n", err)
	} else {
		for _, f := range files {
			fmt.Fprintf(b, "![%s](%s)\n\n", f, f)
		}
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(b, "- warning: %s\n", w)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(b)
	}
	fmt.Fprintf(b, "etcd during the churn, by resource (the counting proxy; top 12 by requests):\n\n| resource | writes/s | reads/s | keys read/s | watch events/s | in/s | out/s |\n|---|---|---|---|---|---|---|\n")
	rates := churnRates(r)
	for _, x := range rates[:min(12, len(rates))] {
		name := x.Resource
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(b, "| %s | %.2f | %.2f | %.1f | %.1f | %s | %s |\n", name, x.WritesPerSecond, x.ReadsPerSecond, x.KeysPerSecond, x.WatchEventsPerSecond,
			kib(x.RequestBytesPerSecond), kib(x.ResponseBytesPerSecond))
	}
	if len(r.PeriodicTraffic) > 0 {
		fmt.Fprintf(b, "\nPeriodic traffic seen (report.PeriodicTrafficOf, after the seeding):\n\n| source | seen | count | instances | interval s (expected) | upstream |\n|---|---|---|---|---|---|\n")
		var notes []string
		for _, p := range r.PeriodicTraffic {
			expected := fmt.Sprintf("%.1f", p.ExpectedIntervalMs/1000)
			if p.ExpectedMaxIntervalMs > 0 {
				expected = fmt.Sprintf("%.1f-%.1f", p.ExpectedIntervalMs/1000, p.ExpectedMaxIntervalMs/1000)
			}
			if p.ExpectedIntervalMs <= 0 {
				expected = "-"
			}
			observed := "-"
			if p.ObservedIntervalMs > 0 {
				observed = fmt.Sprintf("%.1f", p.ObservedIntervalMs/1000)
			}
			seen := fmt.Sprint(p.Seen)
			if p.Note != "" {
				notes = append(notes, p.Note)
				seen += fmt.Sprintf(" (note %d)", len(notes))
			}
			fmt.Fprintf(b, "| %s | %s | %d | %d | %s (%s) | %s |\n", p.Source, seen, p.Count, p.Instances, observed, expected, oneLine(p.Upstream))
		}
		for i, n := range notes {
			fmt.Fprintf(b, "\n%d. %s", i+1, n)
		}
		if len(notes) > 0 {
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(b, "\n| process | CPU s | peak RSS |\n|---|---|---|\n")
	for _, u := range append(slices.Clone(r.APIServers), r.Components...) {
		fmt.Fprintf(b, "| %s | %.1f | %s |\n", u.Server, u.CPUSeconds, mib(u.PeakResidentMemoryBytes))
	}
	who := "lwbench"
	if r.Self.IncludesEmbeddedEtcd {
		who = "lwbench + embedded etcd"
	}
	fmt.Fprintf(b, "| %s | %.1f | %s |\n\n", who, r.Self.CPUSeconds, mib(r.Self.MaxRSSBytes))
	if h := c.NodeHealth; h != nil {
		fmt.Fprintf(b, "Node Leases: %d renewals of %d nodes, interval p50 %.1f / p99 %.1f / max %.1f s; %d nodes past their 40 s Lease; %d NotReady (%d at the end).\n\n",
			h.Renewals, h.Nodes, h.IntervalP50Ms/1000, h.IntervalP99Ms/1000, h.IntervalMaxMs/1000, h.LeaseExpired, h.NotReady, h.StillNotReady)
		if len(h.Phases) > 1 {
			fmt.Fprintf(b, "| phase | renewals | interval p50 s | p99 s | max s |\n|---|---|---|---|---|\n")
			for _, p := range h.Phases {
				fmt.Fprintf(b, "| %s | %d | %.1f | %.1f | %.1f |\n", p.Phase, p.Renewals, p.IntervalP50Ms/1000, p.IntervalP99Ms/1000, p.IntervalMaxMs/1000)
			}
			fmt.Fprintln(b)
		}
	}
	if d := r.Defrag; d != nil {
		for _, m := range d.Members {
			fmt.Fprintf(b, "Defragmentation: %.1f s, %s -> %s (in use %s)%s.\n\n", m.DurationMs/1000, mib(m.BeforeBytes), mib(m.AfterBytes), mib(m.BeforeInUseBytes), errSuffix(m.Error))
		}
	}
	if rs := c.Restart; rs != nil {
		fmt.Fprintf(b, "Restart of %s at %.0f s: ready again after %.1f s%s.\n\n", rs.Component, rs.AtMs/1000, rs.DownMs/1000, errSuffix(rs.Error))
		writeRestartReads(b, r, rs.Component)
	}
	for _, e := range c.Exits {
		fmt.Fprintf(b, "- %s exited at %.0f s (%s) and was started again\n", e.Component, e.AtMs/1000, e.Status)
	}
	if len(c.Exits) > 0 {
		fmt.Fprintln(b)
	}
}

// writeRestartReads is what etcd was asked to read while component
// restarted, by resource.
func writeRestartReads(b *bytes.Buffer, r *report.RunResult, component string) {
	var reqs []report.EtcdRequests
	for _, q := range r.Etcd {
		if base, _, _ := strings.Cut(q.Phase, " after compaction"); base == "restart "+component {
			q.Phase = "restart"
			reqs = append(reqs, q)
		}
	}
	rates := report.EtcdByResource(reqs, nil)
	slices.SortFunc(rates, func(x, y report.EtcdResourceRates) int { return cmp.Compare(y.Keys, x.Keys) })
	fmt.Fprintf(b, "etcd reads during the restart (top 10 by keys):\n\n| resource | reads | keys | out |\n|---|---|---|---|\n")
	for _, x := range rates[:min(10, len(rates))] {
		fmt.Fprintf(b, "| %s | %d | %d | %s |\n", cmp.Or(x.Resource, "-"), x.Reads, x.Keys, mib(x.ResponseBytes))
	}
	fmt.Fprintln(b)
}

func errText(l loaded) string {
	if l.err != nil {
		return l.err.Error()
	}
	if l.meta != nil {
		return fmt.Sprintf("exit %d: %s", l.meta.ExitCode, l.meta.LogTail)
	}
	return "not run"
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return "; failed: " + e
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

func mib(v int64) string { return fmt.Sprintf("%.0f MiB", float64(v)/(1<<20)) }

func kib(v float64) string { return fmt.Sprintf("%.1f KiB", v/1024) }
