package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/scripts/internal/casefile"
)

// TestRender: a case's rows are counted within 10 %, outside with a note
// and outside without; a failed case shows its log's end; a case never run
// is left out.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	all := cases(false)
	write(all[0].Name+".meta.json", casefile.Meta{Case: all[0].Name, Command: "lwbench conformance --nodes 100 -w json", Commit: "abc1234", DurationMs: 600000})
	write(all[0].Name+".json", report.Conformance{Kind: report.KindConformance, SchemaVersion: report.ConformanceSchemaVersion,
		EtcdVersion: "3.7.3", APIServerVersion: "v1.37.2", Cases: []report.ConformanceCase{{Name: "cluster of 100 nodes", Rows: []report.ConformanceRow{
			{Resource: "pods", Method: "Txn", Kind: "put", Model: 100, Real: 98, Ratio: 100.0 / 98, Within10: true},
			{Resource: "events", Method: "Txn", Kind: "patch", Model: 145, Real: 100, ModelFailedCompares: 5, RealFailedCompares: 7, Ratio: 1.45, Note: "event | correlator\nnote"},
			{Resource: "nodes", Method: "Range", Kind: "key", Model: 3, Real: 0},
			{Method: "Watch", Kind: "progress", Model: 2, Real: 1, Ratio: 2, Note: "event | correlator\nnote"},
		}}}})
	write(all[1].Name+".meta.json", casefile.Meta{Case: all[1].Name, Command: "lwbench conformance --nodes 1000 -w json", ExitCode: 1, LogTail: "Error: the control plane did not start"})
	var b bytes.Buffer
	render(&b, dir, "def5678", append(all, testCase{Name: "never", Title: "not run"}))
	out := b.String()
	for _, want := range []string{
		"| nodes-100 | 3.7.3 / v1.37.2 | 4 | 1 | 2 | 1 | 600 s |",
		"| events | Txn | patch | 145 | 100 | 1.45 | 5 / 7 | no | [1] |",
		"[1] event / correlator note",
		"| nodes | Range | key | 3 | 0 | - |  | no |  |",
		"| - | Watch | progress | 2 | 1 | 2.00 |  | no | [1] |",
		"cluster of 100 nodes: 1 of 4 rows within 10 %, 2 outside with a note, 1 without.",
		"| nodes-1000 | failed: no result (exit 1): Error: the control plane did not start |",
		"compared from each result's raw counts by the code at commit def5678",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("README lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "event / correlator note"); n != 1 {
		t.Errorf("a note shared by two rows is written %d times, want once below the table:\n%s", n, out)
	}
	if strings.Contains(out, "never") {
		t.Errorf("a case never run is in the README:\n%s", out)
	}
}

// TestLoadComparesAgain: a result with raw counts gets its rows from
// kubeload.CompareByResource at load, not the rows it was written with.
func TestLoadComparesAgain(t *testing.T) {
	dir := t.TempDir()
	c := cases(false)[0]
	for name, v := range map[string]any{
		c.Name + ".meta.json": casefile.Meta{Case: c.Name, Command: "lwbench conformance --nodes 100 -w json", Commit: "abc1234"},
		c.Name + ".json": report.Conformance{Kind: report.KindConformance, SchemaVersion: report.ConformanceSchemaVersion,
			Cases: []report.ConformanceCase{{Name: "cluster", Rows: []report.ConformanceRow{{Resource: "pods", Method: "Txn", Kind: "put", Note: "stale"}},
				Model: []report.EtcdRequests{{Phase: "steady", Method: "RangeStream", Kind: "prefix limit rev", Resource: "secrets", Requests: 1}},
				Real:  []report.EtcdRequests{{Phase: "steady", Method: "RangeStream", Kind: "prefix limit rev", Resource: "secrets", Requests: 1}}}}},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := load(dir, c)
	if l.err != nil {
		t.Fatal(l.err)
	}
	rows := l.res.Cases[0].Rows
	if len(rows) != 1 || rows[0].Resource != "secrets" || rows[0].Model != 1 || rows[0].Real != 1 || !rows[0].Within10 {
		t.Errorf("got rows %+v, want the one compared from the raw counts (secrets, 1 and 1, within 10 %%)", rows)
	}
}
