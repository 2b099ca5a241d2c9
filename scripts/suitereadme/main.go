// Command suitereadme writes the README of a scripts/run-suite.sh run from
// what the run left in its directory: provenance.json (machine, versions,
// date, commit, the exact commands and their times), each experiment's
// NAME.md table and NAME-*.png figures, comparison.md and report/*.png.
// It adds nothing that is not in those files.
//
//	go run ./scripts/suitereadme -dir results/experiments [-index results/README.md]
//
// -index also writes a README one directory up (the results/ index): the
// same report with image paths relative to it, preceded by links to the
// other result files beside it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// provenance is provenance.json as run-suite.sh writes it.
type provenance struct {
	StartedAt string `json:"startedAt"`
	Commit    string `json:"commit"`
	Mode      string `json:"mode"`
	Machine   struct {
		CPU           string `json:"cpu"`
		Cores         int    `json:"cores"`
		Memory        string `json:"memory"`
		Kernel        string `json:"kernel"`
		LoadavgBefore string `json:"loadavgBefore"`
		LoadavgAfter  string `json:"loadavgAfter"`
	} `json:"machine"`
	Versions struct {
		Go   string `json:"go"`
		Etcd string `json:"etcd"`
	} `json:"versions"`
	TotalSeconds float64 `json:"totalSeconds"`
	Runs         []struct {
		Experiment string  `json:"experiment"`
		Command    string  `json:"command"`
		Seconds    float64 `json:"seconds"`
	} `json:"runs"`
	ReportCommand string `json:"reportCommand"`
}

// descriptions say what each experiment does, for the reader of the
// README; the numbers come only from the run's files.
var descriptions = map[string]string{
	"relist-storm": "W client-go informers are held back past a kube-apiserver-style compaction and released together: " +
		"each watch fails with \"required revision has been compacted\" and the informer relists as client-go does " +
		"(backoff 0.8-1.6 s, LIST at its revision, 410 if it was paginated, LIST at the latest). Relists, LIST requests, " +
		"objects and bytes, time to resync per informer (backoff included), the relist itself, and a probe's latency " +
		"meanwhile. A control per object count holds the informers back as long without compacting: no relist.",
	"continuation": "Paginated LISTs pinned to their first page's revision (as kube-apiserver reads a paginated LIST from etcd) " +
		"while pods are updated and an every-N-revisions compactor runs: how often a continuation page has been compacted, " +
		"and what each fallback costs: restarting the paginated list, or one unpaginated list as client-go's pager does " +
		"(FullListIfExpired). N is derived from the control's list time so that a list is hit about half the time.",
	"compaction-sweep": "The same Kubernetes load (pods written by kube-apiserver's transactions, informers watching) under " +
		"kube-apiserver's compactor at several --etcd-compaction-interval values, and never, each on a fresh member; some " +
		"informers lose their watch for a few seconds periodically and resume from their last revision. Db size over time, " +
		"relists (only when a compaction passed a disconnected informer), write throughput and latency.",
	"defrag-stall": "One member grown to each db size (new keys written twice, so half the file is history), compacted, then " +
		"defragmented while a probe reads and writes at 50 operations per second: how long the member stops, the probe's " +
		"latency, longest stall, errors and timeouts, sizes before and after. Then the same keys are rewritten and a " +
		"defragmentation is started while the compaction is still deleting.",
	"catchup": "A watcher resuming from an old, uncompacted revision far behind, against a relist of the same objects: " +
		"etcd sends a lagging (unsynced) watcher at most 1,000 revisions per response, one round every 100 ms " +
		"(server/storage/mvcc/watchable_store.go). Every update's event must arrive exactly once.",
}

func main() {
	dir := flag.String("dir", "results/experiments", "the run's directory")
	index := flag.String("index", "", "also write this README (e.g. results/README.md) linking the other results beside it")
	flag.Parse()
	log.SetFlags(0)
	b, err := os.ReadFile(filepath.Join(*dir, "provenance.json"))
	if err != nil {
		log.Fatalf("suitereadme: %v", err)
	}
	var p provenance
	if err := json.Unmarshal(b, &p); err != nil {
		log.Fatalf("suitereadme: %s/provenance.json: %v", *dir, err)
	}
	body, err := render(*dir, p, "")
	if err != nil {
		log.Fatalf("suitereadme: %v", err)
	}
	if err := os.WriteFile(filepath.Join(*dir, "README.md"), []byte(body), 0o644); err != nil {
		log.Fatalf("suitereadme: %v", err)
	}
	if *index == "" {
		return
	}
	rel, err := filepath.Rel(filepath.Dir(*index), *dir)
	if err != nil {
		log.Fatalf("suitereadme: %v", err)
	}
	body, err = render(*dir, p, filepath.ToSlash(rel)+"/")
	if err != nil {
		log.Fatalf("suitereadme: %v", err)
	}
	var sb strings.Builder
	sb.WriteString("# Results\n\nEvery file here is written by a script under scripts/; none is edited by hand.\n\n")
	sb.WriteString("| file | made by |\n|---|---|\n")
	others, _ := filepath.Glob(filepath.Join(filepath.Dir(*index), "*.md"))
	sort.Strings(others)
	for _, o := range others {
		base := filepath.Base(o)
		if base == filepath.Base(*index) {
			continue
		}
		fmt.Fprintf(&sb, "| [%s](%s) | %s |\n", base, base, madeBy(base))
	}
	fmt.Fprintf(&sb, "| [%sREADME.md](%sREADME.md) | `scripts/run-suite.sh` (the report below) |\n", rel+"/", rel+"/")
	if _, err := os.Stat(filepath.Join(filepath.Dir(*index), "kube", "README.md")); err == nil {
		sb.WriteString("| [kube/README.md](kube/README.md) | `scripts/kube-matrix.sh`: lwbench and the experiments through real kube-apiservers, and the conformance of the etcd-direct model |\n")
	}
	sb.WriteString("\n")
	// One heading level down: the report is a section of the index.
	body = strings.Replace(body, "# Compaction", "## Compaction", 1)
	body = strings.ReplaceAll(body, "\n## ", "\n### ")
	sb.WriteString(body)
	if err := os.WriteFile(*index, []byte(sb.String()), 0o644); err != nil {
		log.Fatalf("suitereadme: %v", err)
	}
}

func madeBy(file string) string {
	switch {
	case strings.HasPrefix(file, "inspect-bench"):
		return "`scripts/inspect-bench.sh`"
	case strings.HasPrefix(file, "lwbench-vs-benchmark"):
		return "`scripts/bench-vs-etcd.sh`"
	case strings.HasPrefix(file, "faults"):
		return "`scripts/faults.sh`"
	case strings.HasPrefix(file, "harness-cost"):
		return "`scripts/harness-cost.sh`: what lwbench's own client-go clients cost it, against bare client-go"
	case strings.HasPrefix(file, "version-matrix"):
		return "`scripts/version-matrix.sh`"
	case strings.HasPrefix(file, "wal-vs-dump-logs"):
		return "`scripts/wal-vs-dump-logs.sh`"
	case strings.HasPrefix(file, "wal-bench"):
		return "`scripts/wal-vs-dump-logs.sh --wal-bytes 1073741824`"
	}
	return "a script under scripts/"
}

// render returns the README of the run in dir, image paths prefixed with
// prefix. Section headings one level below the title.
func render(dir string, p provenance, prefix string) (string, error) {
	var sb strings.Builder
	title := "# Compaction and defragmentation experiments"
	run := "scripts/run-suite.sh"
	if p.Mode == "quick" {
		title += " (quick mode)"
		run += " --quick"
	}
	fmt.Fprintf(&sb, "%s\n\nGenerated by `%s`; do not edit by hand.\n\n", title, run)
	sb.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(&sb, "| date | %s |\n| commit | %s |\n", p.StartedAt, p.Commit)
	fmt.Fprintf(&sb, "| machine | %s, %d cores, %s RAM, %s |\n", p.Machine.CPU, p.Machine.Cores, p.Machine.Memory, p.Machine.Kernel)
	fmt.Fprintf(&sb, "| load average (1, 5, 15 min) | before %s; after %s (the machine is shared with other work) |\n",
		p.Machine.LoadavgBefore, p.Machine.LoadavgAfter)
	fmt.Fprintf(&sb, "| Go | %s |\n| etcd | %s, an embedded member per experiment (per case for compaction-sweep), fsync on |\n",
		p.Versions.Go, p.Versions.Etcd)
	fmt.Fprintf(&sb, "| total time | %.0f s |\n\n", p.TotalSeconds)
	sb.WriteString("Each experiment's JSON result (`NAME.json`, documented in docs/lwbench-experiments.md) holds every figure\n")
	sb.WriteString("below and more, including the machine and versions; `lwbench report` compares any set of them.\n")
	sb.WriteString("Sizes are decimal MB, times milliseconds unless stated. The probe's latency runs from each operation's\n")
	sb.WriteString("scheduled time, so a stalled member cannot hide the operations it delayed.\n")
	var jsons []string
	for _, r := range p.Runs {
		e := r.Experiment
		fmt.Fprintf(&sb, "\n## %s\n\n%s\n\n```sh\n%s    # %.0f s\n```\n\n", e, descriptions[e], r.Command, r.Seconds)
		table, err := os.ReadFile(filepath.Join(dir, e+".md"))
		if err != nil {
			return "", err
		}
		sb.Write(table)
		figs, _ := filepath.Glob(filepath.Join(dir, e+"-*.png"))
		sort.Strings(figs)
		for _, f := range figs {
			base := filepath.Base(f)
			fmt.Fprintf(&sb, "\n![%s](%s%s)\n", strings.TrimSuffix(base, ".png"), prefix, base)
		}
		jsons = append(jsons, filepath.Join(dir, e+".json"))
	}
	cmp, err := os.ReadFile(filepath.Join(dir, "comparison.md"))
	if err != nil {
		return "", err
	}
	cmd := p.ReportCommand
	if cmd == "" {
		cmd = "lwbench report " + strings.Join(jsons, " ") + " -w markdown --plots DIR"
	}
	fmt.Fprintf(&sb, "\n## All results compared\n\n```sh\n%s\n```\n\n", cmd)
	sb.Write(cmp)
	figs, _ := filepath.Glob(filepath.Join(dir, "report", "*.png"))
	sort.Strings(figs)
	for _, f := range figs {
		base := filepath.Base(f)
		fmt.Fprintf(&sb, "\n![%s](%sreport/%s)\n", strings.TrimSuffix(base, ".png"), prefix, base)
	}
	return sb.String(), nil
}
