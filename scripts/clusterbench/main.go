// Command clusterbench runs `lwbench run` against real etcd clusters that
// lwbench starts itself (--cluster-size) and writes the results under
// results/, with the machine, Go and etcd versions, date, commit and exact
// commands:
//
//	go run ./scripts/clusterbench matrix [-runs 3] [-versions 3.5.35,3.6.16,3.7.3] [-out results]
//	go run ./scripts/clusterbench faults [-version 3.7.3] [-faults kill-leader,...] [-out results]
//
// matrix runs the quick scenario (a short `lwbench run` on three members,
// connections pinned one per member) against each etcd version, -runs
// times, versions interleaved, and writes version-matrix.{json,md}.
// faults runs one fault per run on three members of one version, for each
// fault kind and each client setup (informers with connections to every
// member, informers pinned to one member each, kube-apiserver's watch
// cache), and writes faults.{json,md}; partitions are skipped, with the
// reason, where network namespaces are not allowed.
//
// scripts/version-matrix.sh and scripts/faults.sh call it. lwbench is
// built once into a temporary directory; etcd binaries come from
// scripts/build-etcd.sh (the module proxy). Every etcd process is started
// and stopped by lwbench, by PID, on free loopback ports or in network
// namespaces of its own.
package main

import (
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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/machine"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// Machine is what the results were measured on.
type Machine struct {
	CPUModel      string `json:"cpuModel"`
	Cores         int    `json:"cores"`
	MemTotalBytes int64  `json:"memTotalBytes"`
	Kernel        string `json:"kernel"`
}

// Provenance says where, when and from what a result file came.
type Provenance struct {
	Date    string  `json:"date"`
	Commit  string  `json:"commit"`
	Dirty   bool    `json:"dirty"` // uncommitted changes in the working tree
	Machine Machine `json:"machine"`
	Go      string  `json:"go"`
	Script  string  `json:"script"` // how to regenerate
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg's 1, 5 and 15 minute
	// load averages when the script began and ended: other work on the
	// machine shows there.
	LoadAvgStart string `json:"loadAvgStart"`
	LoadAvgEnd   string `json:"loadAvgEnd"`
}

// Run is one `lwbench run` and what it reported.
type Run struct {
	Name     string   `json:"name"`
	Command  []string `json:"command"` // lwbench's arguments
	ExitCode int      `json:"exitCode"`
	WallMs   float64  `json:"wallMs"`
	Error    string   `json:"error,omitempty"` // why no result came out
	Summary  *Summary `json:"summary,omitempty"`
}

// Summary is the part of a RunResult the tables use; the full result
// goes to the log directory only.
type Summary struct {
	EtcdVersion    string               `json:"etcdVersion"`
	MemberVersions []string             `json:"memberVersions"`
	Writes         report.WriteStats    `json:"writes"`
	Delivery       report.DeliveryStats `json:"delivery"`
	InitialLists   report.Latency       `json:"initialLists"`
	Relists        int                  `json:"relists"`
	Compactions    int                  `json:"compactions"`
	Defrag         *report.Defrag       `json:"defrag,omitempty"`
	Validation     report.Validation    `json:"validation"`
	ValidationOK   bool                 `json:"validationOK"`
	Members        []report.MemberStats `json:"members"`
	Faults         []report.Fault       `json:"faults,omitempty"`
	LwbenchCPU     float64              `json:"lwbenchCPUSeconds"`
}

// Skipped is a case that could not run here, and why.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Doc is results/<name>.json.
type Doc struct {
	// Kind is report.KindVersionMatrix or report.KindFaultRuns.
	Kind          string     `json:"kind"`
	SchemaVersion int        `json:"schemaVersion"`
	Provenance    Provenance `json:"provenance"`
	// Scenario is the lwbench arguments every run shares.
	Scenario []string  `json:"scenario"`
	Runs     []Run     `json:"runs"`
	Skipped  []Skipped `json:"skipped,omitempty"`
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("clusterbench: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: clusterbench matrix|faults [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	out := fs.String("out", "results", "directory the results are written to")
	runs := fs.Int("runs", 3, "matrix: runs per version")
	versions := fs.String("versions", strings.Join(etcdproc.Versions, ","), "matrix: etcd versions")
	version := fs.String("version", etcdproc.Versions[len(etcdproc.Versions)-1], "faults: etcd version")
	var kinds []string
	for _, k := range watchload.FaultKinds {
		kinds = append(kinds, string(k))
	}
	faults := fs.String("faults", strings.Join(kinds, ","), "faults: fault kinds")
	fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "matrix":
		err = matrix(*out, strings.Split(*versions, ","), *runs)
	case "faults":
		err = faultRuns(*out, *version, strings.Split(*faults, ","))
	default:
		err = fmt.Errorf("unknown command %q: want matrix or faults", os.Args[1])
	}
	if err != nil {
		log.Fatal(err)
	}
}

// matrixScenario is the quick scenario: a short default run on three
// members, each watch and writer connection pinned to one member so that
// latency is seen per member; all watchers watch pods so that the members
// serve the same watches.
var matrixScenario = []string{"run", "--cluster-size", "3", "--duration", "15s", "--objects", "1000", "--watchers", "12",
	"--watch-resources", "pods", "--conns", "3", "--writer-conns", "3", "--pin-connections", "-w", "json"}

func matrix(out string, versions []string, runs int) error {
	lw, cleanup, err := buildLwbench()
	if err != nil {
		return err
	}
	defer cleanup()
	doc := Doc{Kind: report.KindVersionMatrix, SchemaVersion: 1, Scenario: matrixScenario}
	doc.Provenance, err = provenance("scripts/version-matrix.sh")
	if err != nil {
		return err
	}
	for _, v := range versions {
		if _, err := etcdproc.Binaries(context.Background(), v, os.Stderr); err != nil {
			doc.Skipped = append(doc.Skipped, Skipped{Name: "etcd " + v, Reason: err.Error()})
		}
	}
	for r := 1; r <= runs; r++ {
		for _, v := range versions {
			if skipped(doc.Skipped, "etcd "+v) {
				continue
			}
			args := append(append([]string(nil), matrixScenario...), "--etcd-version", v)
			doc.Runs = append(doc.Runs, runLwbench(lw, fmt.Sprintf("etcd %s run %d", v, r), args))
		}
	}
	doc.Provenance.LoadAvgEnd = loadAvg()
	return write(out, "version-matrix", doc, matrixMarkdown(doc, versions))
}

// faultScenario is every fault run's load: twenty seconds of writes, the
// fault eight seconds in for five seconds, compaction on kube-apiserver's
// schedule (a third of the duration) but no watcher held back, so that
// every relist is the fault's.
var faultScenario = []string{"run", "--cluster-size", "3", "--duration", "20s", "--fault-at", "8s", "--fault-duration", "5s",
	"--objects", "1000", "--watchers", "12", "--conns", "3", "--writer-conns", "3", "--hold-back", "0", "-w", "json"}

// clientSetups are the clients each fault is run with.
var clientSetups = []struct{ name, note string }{
	{"informers, every endpoint", "client-go informers (watch cache off) on connections to every member, which fail over"},
	{"informers, pinned", "the same, each connection pinned to one member (no fail-over; latency per member)"},
	{"watch caches, every endpoint", "kube-apiserver's watch caches (apiserver-cache profile) on connections to every member"},
}

func setupArgs(i int) []string {
	switch i {
	case 1:
		return []string{"--pin-connections", "--watch-resources", "pods"}
	case 2:
		return []string{"--profile", "apiserver-cache"}
	}
	return nil
}

func faultRuns(out, version string, kinds []string) error {
	lw, cleanup, err := buildLwbench()
	if err != nil {
		return err
	}
	defer cleanup()
	doc := Doc{Kind: report.KindFaultRuns, SchemaVersion: 1, Scenario: append(append([]string(nil), faultScenario...), "--etcd-version", version)}
	doc.Provenance, err = provenance("scripts/faults.sh")
	if err != nil {
		return err
	}
	if _, err := etcdproc.Binaries(context.Background(), version, os.Stderr); err != nil {
		return err
	}
	netnsErr := etcdproc.CheckNetns()
	for _, k := range kinds {
		kind, err := watchload.ParseFaultKind(k)
		if err != nil {
			return err
		}
		for i, setup := range clientSetups {
			name := fmt.Sprintf("%s, %s", kind, setup.name)
			if kind.Partition() && netnsErr != nil {
				doc.Skipped = append(doc.Skipped, Skipped{Name: name, Reason: netnsErr.Error()})
				continue
			}
			args := append(append(append([]string(nil), doc.Scenario...), "--fault", string(kind)), setupArgs(i)...)
			doc.Runs = append(doc.Runs, runLwbench(lw, name, args))
		}
	}
	doc.Provenance.LoadAvgEnd = loadAvg()
	return write(out, "faults", doc, faultsMarkdown(doc))
}

func skipped(s []Skipped, name string) bool {
	for _, x := range s {
		if x.Name == name {
			return true
		}
	}
	return false
}

// buildLwbench builds lwbench into a temporary directory.
func buildLwbench() (string, func(), error) {
	dir, err := os.MkdirTemp("", "clusterbench-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "lwbench")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/lwbench")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build lwbench: %w", err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// runLwbench runs lwbench with args (etcd's ETCD_* variables removed from
// its environment) and summarises its JSON result; stderr goes to ours.
func runLwbench(bin, name string, args []string) Run {
	log.Printf("%s: lwbench %s", name, strings.Join(args, " "))
	run := Run{Name: name, Command: append([]string{"lwbench"}, args...)}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = etcdproc.CleanEnv()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	run.WallMs = report.Ms(time.Since(start))
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		run.ExitCode = exit.ExitCode()
	case err != nil:
		run.ExitCode, run.Error = -1, err.Error()
		return run
	}
	var res report.RunResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		run.Error = lastLine(stderr.String())
		log.Printf("%s: no result: %s", name, run.Error)
		return run
	}
	if run.ExitCode != 0 {
		run.Error = lastLine(stderr.String())
	}
	s := &Summary{EtcdVersion: res.Target.EtcdVersion, Writes: res.Writes, Delivery: res.Delivery, InitialLists: res.InitialLists.Latency,
		Relists: len(res.Relists), Compactions: len(res.Compactions), Defrag: res.Defrag, Validation: res.Validation,
		ValidationOK: res.Validation.OK(), Members: res.Members, Faults: res.Faults, LwbenchCPU: res.Self.CPUSeconds}
	s.Validation.Violations = nil
	for _, m := range res.Members {
		s.MemberVersions = append(s.MemberVersions, m.Version)
	}
	run.Summary = s
	log.Printf("%s: exit %d, %d writes, %d events, %d lost, validation %s", name, run.ExitCode, res.Writes.Completed,
		res.Delivery.Events, res.Validation.Lost, res.Validation.Summary())
	return run
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// provenance records the machine, the toolchain and the commit.
func provenance(script string) (Provenance, error) {
	p := Provenance{Date: time.Now().UTC().Format(time.RFC3339), Script: script}
	p.Machine.CPUModel = machine.CPUModel()
	p.Machine.Cores = runtime.NumCPU()
	p.Machine.MemTotalBytes, _ = machine.MemTotalBytes()
	p.LoadAvgStart = loadAvg()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		p.Machine.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("go", "version").Output(); err == nil {
		p.Go = strings.TrimSpace(string(b))
	}
	b, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return p, fmt.Errorf("git rev-parse HEAD: %w", err)
	}
	p.Commit = strings.TrimSpace(string(b))
	p.Dirty = exec.Command("git", "diff", "--quiet", "HEAD", "--", ".").Run() != nil
	return p, nil
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func write(out, name string, doc Doc, md string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, name+".json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, name+".md"), []byte(md), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s and %s", filepath.Join(out, name+".json"), filepath.Join(out, name+".md"))
	return nil
}

func header(b *strings.Builder, title string, doc Doc) {
	p := doc.Provenance
	fmt.Fprintf(b, "# %s\n\nGenerated by `%s` (do not edit). %s, commit `%s`", title, p.Script, p.Date, p.Commit)
	if p.Dirty {
		b.WriteString(" with uncommitted changes")
	}
	fmt.Fprintf(b, ".\n\nMachine: %s, %d cores, %.1f GiB RAM, Linux %s; %s. Load average (1, 5, 15 min) %s at the start, %s at the end.\n\n",
		p.Machine.CPUModel, p.Machine.Cores, float64(p.Machine.MemTotalBytes)/(1<<30), p.Machine.Kernel, p.Go, p.LoadAvgStart, p.LoadAvgEnd)
	fmt.Fprintf(b, "Every run: `lwbench %s` plus the arguments of its row. lwbench starts the members itself (real etcd processes built by `scripts/build-etcd.sh`, with fsync), on loopback or in network namespaces, and stops them by PID.\n\n",
		strings.Join(doc.Scenario, " "))
}

func ms(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// table writes a markdown table, the first column left-aligned and the
// others right-aligned, then an empty line.
func table(b *strings.Builder, header []string, rows [][]string) {
	t := output.Table{Header: header, Numeric: make([]bool, len(header))}
	for i := 1; i < len(header); i++ {
		t.Numeric[i] = true
	}
	for _, r := range rows {
		for len(r) < len(header) {
			r = append(r, "")
		}
		t.Rows = append(t.Rows, r)
	}
	if err := output.Write(b, output.FormatMarkdown, t, nil); err != nil {
		log.Fatal(err) // a strings.Builder does not fail; rows are as wide as the header
	}
	b.WriteString("\n")
}

func matrixMarkdown(doc Doc, versions []string) string {
	var b strings.Builder
	header(&b, "lwbench quick scenario against etcd 3.5, 3.6 and 3.7", doc)
	b.WriteString("Medians over the runs of each version (all runs are in version-matrix.json). Latencies in ms; write latency from each write's scheduled time, delivery latency from the writer's response to the watcher's receipt. Per-member delivery p99: the watchers pinned to that member.\n\n")
	var rows [][]string
	metric := func(name string, f func(*Summary) float64, format func(float64) string) {
		row := []string{name}
		for _, v := range versions {
			var xs []float64
			for _, r := range doc.Runs {
				if r.Summary != nil && strings.HasPrefix(r.Name, "etcd "+v+" ") {
					xs = append(xs, f(r.Summary))
				}
			}
			if len(xs) == 0 {
				row = append(row, "-")
				continue
			}
			row = append(row, format(median(xs)))
		}
		rows = append(rows, row)
	}
	count := func(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }
	metric("runs", func(*Summary) float64 { return 1 }, func(float64) string { return "" })
	for i, v := range versions {
		n := 0
		for _, r := range doc.Runs {
			if r.Summary != nil && strings.HasPrefix(r.Name, "etcd "+v+" ") {
				n++
			}
		}
		rows[0][i+1] = strconv.Itoa(n)
	}
	metric("writes completed", func(s *Summary) float64 { return float64(s.Writes.Completed) }, count)
	metric("write errors", func(s *Summary) float64 { return float64(s.Writes.Errors) }, count)
	metric("write p50", func(s *Summary) float64 { return s.Writes.Latency.P50Ms }, ms)
	metric("write p99", func(s *Summary) float64 { return s.Writes.Latency.P99Ms }, ms)
	metric("events delivered", func(s *Summary) float64 { return float64(s.Delivery.Events) }, count)
	metric("delivery p50", func(s *Summary) float64 { return s.Delivery.FromResponse.P50Ms }, ms)
	metric("delivery p99", func(s *Summary) float64 { return s.Delivery.FromResponse.P99Ms }, ms)
	for m := range 3 {
		metric(fmt.Sprintf("delivery p99, member %d", m), func(s *Summary) float64 {
			if m < len(s.Members) && s.Members[m].Delivery != nil {
				return s.Members[m].Delivery.FromResponse.P99Ms
			}
			return 0
		}, ms)
	}
	metric("initial list p50", func(s *Summary) float64 { return s.InitialLists.P50Ms }, ms)
	metric("relists", func(s *Summary) float64 { return float64(s.Relists) }, count)
	metric("compactions", func(s *Summary) float64 { return float64(s.Compactions) }, count)
	metric("defrag, all members", func(s *Summary) float64 {
		if s.Defrag == nil {
			return 0
		}
		return s.Defrag.DurationMs
	}, ms)
	metric("lost events", func(s *Summary) float64 { return float64(s.Validation.Lost) }, count)
	metric("runs with every guarantee held", func(s *Summary) float64 {
		if s.ValidationOK {
			return 1
		}
		return 0
	}, func(float64) string { return "" })
	for i, v := range versions {
		ok, n := 0, 0
		for _, r := range doc.Runs {
			if r.Summary != nil && strings.HasPrefix(r.Name, "etcd "+v+" ") {
				n++
				if r.Summary.ValidationOK {
					ok++
				}
			}
		}
		rows[len(rows)-1][i+1] = fmt.Sprintf("%d of %d", ok, n)
	}
	head := []string{"metric"}
	for _, v := range versions {
		head = append(head, "etcd "+v)
	}
	table(&b, head, rows)
	failed(&b, doc)
	return b.String()
}

func failed(b *strings.Builder, doc Doc) {
	for _, r := range doc.Runs {
		if r.Error != "" {
			fmt.Fprintf(b, "- %s: exit %d: %s\n", r.Name, r.ExitCode, r.Error)
		}
	}
	for _, s := range doc.Skipped {
		fmt.Fprintf(b, "- %s: skipped: %s\n", s.Name, s.Reason)
	}
	b.WriteString("\n")
}

func faultsMarkdown(doc Doc) string {
	var b strings.Builder
	header(&b, "What a member fault does to Kubernetes-style watchers", doc)
	b.WriteString(`One fault per run, on a three-member cluster, eight seconds into twenty seconds of writes, for five seconds: the leader or a follower is killed (SIGKILL, then restarted on its data), paused (SIGSTOP, then SIGCONT) or cut off (its network link taken down in its network namespace, then brought back).

- recovery: from the fault until writes succeed again (a write sent through every member at once, retried every second) and every watcher and the history recorder have seen that write's revision; writes: the first part alone; healthy: until every member answers with a leader after the member is back.
- relists: LIST phases started from the fault until a write timeout (10 s) after recovery and health, by reason; write errors: the writers' failures in that window (timeouts in brackets); probe: 20 small writes and reads per second through every member from a second before the fault, failures and the longest time without a success.
- lost: events of the recorded history a watcher never delivered, over the whole run; every run checks all of etcd's watch guarantees.

Reading it: a write that a follower forwarded to a leader which then died or froze waits for etcd's request timeout (7 s with the default election timeout) even once another leader is elected; the writers are 16 workers each writing its keys in order, so after a leader fault every worker is soon waiting and the writers stall for that long, while *writes ms* shows when the cluster itself accepted writes again. With connections to every member, gRPC decides which member each watch stream uses: a fault on a member no watch stream uses is recovered from at once, one on a member some streams use lasts until they fail over or the member returns (kube-apiserver's keepalive, 30 s + 10 s, is longer than these faults). A partition cuts the member's link: its watch streams hang until it is healed, and then end with "no leader" (the member lost its leader meanwhile), so informers relist and watch caches watch again.

Client setups: `)
	for i, s := range clientSetups {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "*%s*: %s", s.name, s.note)
	}
	b.WriteString(".\n\n")
	var rows [][]string
	for _, r := range doc.Runs {
		s := r.Summary
		if s == nil || len(s.Faults) == 0 {
			rows = append(rows, []string{r.Name, "no result: " + r.Error, "", "", "", "", "", "", "", ""})
			continue
		}
		f := s.Faults[0]
		rec := "not recovered"
		if f.Recovered {
			rec = ms(f.RecoveryMs)
		}
		relists := f.RelistSummary()
		ok := "yes"
		if !s.ValidationOK {
			ok = "no: " + s.Validation.Summary()
		}
		if f.Error != "" {
			rec += " (" + f.Error + ")"
		}
		rows = append(rows, []string{r.Name, rec, ms(f.WriteRecoveryMs), ms(f.HealthyMs),
			fmt.Sprintf("%s → %s", f.LeaderBefore, f.LeaderAfter), relists,
			fmt.Sprintf("%d (%d)", f.WriteErrors, f.WriteTimeouts),
			fmt.Sprintf("%d / %d, %s", f.Probe.Writes.Errors+f.Probe.Reads.Errors, f.Probe.Writes.Count+f.Probe.Reads.Count, ms(f.Probe.LongestStallMs)),
			strconv.FormatInt(s.Validation.Lost, 10), ok})
	}
	table(&b, []string{"fault, clients", "recovery ms", "writes ms", "healthy ms", "leader", "relists", "write errors (timeouts)",
		"probe failures / ops, longest stall ms", "lost", "guarantees held"}, rows)

	b.WriteString("Per member, pinned clients: write p99 and delivery p99 (ms) of the connections pinned to each member; the struck member is marked *.\n\n")
	var prow [][]string
	for _, r := range doc.Runs {
		s := r.Summary
		if s == nil || len(s.Faults) == 0 || !strings.Contains(r.Name, "pinned") {
			continue
		}
		row := []string{r.Name}
		for _, m := range s.Members {
			if m.Writes == nil || m.Delivery == nil {
				row = append(row, "-")
				continue
			}
			mark := ""
			if m.Name == s.Faults[0].Member {
				mark = "*"
			}
			row = append(row, fmt.Sprintf("%s%s: %s / %s", m.Name, mark, ms(m.Writes.Latency.P99Ms), ms(m.Delivery.FromResponse.P99Ms)))
		}
		prow = append(prow, row)
	}
	if len(prow) > 0 {
		table(&b, []string{"fault", "member 0", "member 1", "member 2"}, prow)
	}
	failed(&b, doc)
	return b.String()
}
