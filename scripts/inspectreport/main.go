// Command inspectreport turns the measurements of scripts/inspect-bench.sh
// into results/inspect-bench.json and results/inspect-bench.md: hyperfine's
// JSON export (the timings, side by side), the --mem-stats lines of
// etcdinspect, and the machine and versions the script recorded.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/kubestore/etcdkit/pkg/report"
)

// hyperfineExport is the part of `hyperfine --export-json` read here.
type hyperfineExport struct {
	Results []struct {
		Command string    `json:"command"`
		Mean    float64   `json:"mean"`
		Stddev  float64   `json:"stddev"`
		Median  float64   `json:"median"`
		Min     float64   `json:"min"`
		Max     float64   `json:"max"`
		Times   []float64 `json:"times"`
	} `json:"results"`
}

// Timing is one command's wall-clock times, page cache warm.
type Timing struct {
	Name     string  `json:"name"`
	Command  string  `json:"command"`
	MeanMs   float64 `json:"meanMs"`
	MedianMs float64 `json:"medianMs"`
	StddevMs float64 `json:"stddevMs"`
	MinMs    float64 `json:"minMs"`
	MaxMs    float64 `json:"maxMs"`
	Runs     int     `json:"runs"`
}

// Memory is the --mem-stats line of one etcdinspect run.
type Memory struct {
	File            string `json:"file"`
	FileBytes       int64  `json:"fileBytes"`
	Command         string `json:"command"`
	PeakHeapBytes   uint64 `json:"peakHeapBytes"`
	TotalAllocBytes uint64 `json:"totalAllocBytes"`
	SysBytes        uint64 `json:"sysBytes"`
}

// Result is results/inspect-bench.json.
type Result struct {
	Kind          string            `json:"kind"` // report.KindInspectBench
	SchemaVersion int               `json:"schemaVersion"`
	Date          string            `json:"date"`
	Commit        string            `json:"commit"`
	Machine       map[string]string `json:"machine"`
	Versions      map[string]string `json:"versions"`
	DB            map[string]string `json:"db"`
	Timings       []Timing          `json:"timings"`
	Memory        []Memory          `json:"memory"`
	// UsageVsEtcdutl and UsageVsBboltKeys are the ratios of mean times
	// the issue sets targets for (<= 1 and <= 2).
	UsageVsEtcdutl   float64 `json:"usageVsEtcdutl"`
	UsageVsBboltKeys float64 `json:"usageVsBboltKeys"`
}

type kvFlag map[string]string

func (k kvFlag) String() string { return fmt.Sprint(map[string]string(k)) }
func (k kvFlag) Set(s string) error {
	name, val, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want name=value, got %q", s)
	}
	k[name] = val
	return nil
}

func main() {
	hf := flag.String("hyperfine", "", "hyperfine --export-json file")
	names := flag.String("names", "", "comma-separated names of hyperfine's commands, in order")
	outJSON := flag.String("json", "results/inspect-bench.json", "JSON output")
	outMD := flag.String("md", "results/inspect-bench.md", "markdown output")
	machine, versions, db := kvFlag{}, kvFlag{}, kvFlag{}
	var mems []string
	flag.Var(machine, "machine", "name=value about the machine (repeatable)")
	flag.Var(versions, "version", "name=value of a tool version (repeatable)")
	flag.Var(db, "db", "name=value about the database (repeatable)")
	flag.Func("mem", "FILE:BYTES:COMMAND:MEMSTATS-JSON-FILE (repeatable)", func(s string) error { mems = append(mems, s); return nil })
	date := flag.String("date", "", "date of the run")
	commit := flag.String("commit", "", "git commit measured")
	flag.Parse()

	b, err := os.ReadFile(*hf)
	if err != nil {
		log.Fatal(err)
	}
	var h hyperfineExport
	if err := json.Unmarshal(b, &h); err != nil {
		log.Fatal(err)
	}
	nameList := strings.Split(*names, ",")
	if len(nameList) != len(h.Results) {
		log.Fatalf("%d names for %d hyperfine results", len(nameList), len(h.Results))
	}
	r := Result{Kind: report.KindInspectBench, SchemaVersion: 1, Date: *date, Commit: *commit, Machine: machine, Versions: versions, DB: db}
	byName := map[string]Timing{}
	for i, x := range h.Results {
		t := Timing{Name: nameList[i], Command: x.Command, MeanMs: 1000 * x.Mean, MedianMs: 1000 * x.Median,
			StddevMs: 1000 * x.Stddev, MinMs: 1000 * x.Min, MaxMs: 1000 * x.Max, Runs: len(x.Times)}
		r.Timings = append(r.Timings, t)
		byName[t.Name] = t
	}
	if u, e := byName["etcdinspect usage"], byName["etcdutl snapshot status"]; e.MeanMs > 0 {
		r.UsageVsEtcdutl = u.MeanMs / e.MeanMs
	}
	if u, k := byName["etcdinspect usage"], byName["bbolt keys"]; k.MeanMs > 0 {
		r.UsageVsBboltKeys = u.MeanMs / k.MeanMs
	}
	for _, m := range mems {
		parts := strings.SplitN(m, ":", 4)
		if len(parts) != 4 {
			log.Fatalf("bad -mem %q", m)
		}
		var mem Memory
		b, err := os.ReadFile(parts[3])
		if err != nil {
			log.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &mem); err != nil {
			log.Fatalf("%s: %v", parts[3], err)
		}
		mem.File, mem.Command = parts[0], parts[2]
		fmt.Sscan(parts[1], &mem.FileBytes)
		r.Memory = append(r.Memory, mem)
	}
	js, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(*outJSON, append(js, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# etcdinspect on a 1 GiB etcd database\n\nGenerated by `scripts/inspect-bench.sh` on %s at commit %s; do not edit by hand.\n\n", r.Date, r.Commit)
	fmt.Fprintf(&md, "Database: %s.\n\n", db["description"])
	md.WriteString("| machine | |\n|---|---|\n")
	for _, k := range []string{"cpu", "cores", "memory", "kernel", "loadavg"} {
		fmt.Fprintf(&md, "| %s | %s |\n", k, machine[k])
	}
	for _, k := range []string{"go", "etcd", "etcdutl", "bbolt"} {
		fmt.Fprintf(&md, "| %s | %s |\n", k, versions[k])
	}
	md.WriteString("\nWall-clock time, page cache warm, hyperfine (one run, side by side):\n\n| command | mean ms | median ms | stddev ms | min ms | max ms | runs |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range r.Timings {
		fmt.Fprintf(&md, "| `%s` | %.1f | %.1f | %.1f | %.1f | %.1f | %d |\n", t.Command, t.MeanMs, t.MedianMs, t.StddevMs, t.MinMs, t.MaxMs, t.Runs)
	}
	fmt.Fprintf(&md, "\n`etcdinspect usage` takes %.2fx the time of `etcdutl snapshot status` (target: at most 1x) and %.2fx that of `bbolt keys` (target: at most 2x).\n",
		r.UsageVsEtcdutl, r.UsageVsBboltKeys)
	md.WriteString("\nGo heap of etcdinspect (`--mem-stats`: peak of live heap objects sampled every millisecond); it follows the number of distinct keys, not the file size:\n\n| file | file bytes | command | peak heap bytes | total allocated bytes | runtime sys bytes |\n|---|---:|---|---:|---:|---:|\n")
	for _, m := range r.Memory {
		fmt.Fprintf(&md, "| %s | %d | `%s` | %d | %d | %d |\n", m.File, m.FileBytes, m.Command, m.PeakHeapBytes, m.TotalAllocBytes, m.SysBytes)
	}
	if err := os.WriteFile(*outMD, []byte(md.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}
