package experiment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubestore/etcdkit/pkg/report"
)

func TestDecode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "results", "experiments", "catchup.json")) // written before kind
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode(b)
	if err != nil || r.Experiment != NameCatchup || r.Kind != report.KindExperiment || r.Catchup == nil || len(r.Cases) == 0 {
		t.Fatalf("Decode(catchup.json) = %+v, %v; want a catchup result of kind %s", r, err, report.KindExperiment)
	}
	for _, tt := range []struct {
		name, doc string
		want      error
	}{
		{"run", `{"kind": "RunResult", "schemaVersion": 2}`, report.ErrUnknownKind},
		{"newer schema", `{"kind": "ExperimentResult", "schemaVersion": 9, "experiment": "catchup"}`, report.ErrNewerSchema},
		{"unknown experiment", `{"kind": "ExperimentResult", "schemaVersion": 1, "experiment": "partition-storm"}`, ErrUnknownExperiment},
		{"no experiment", `{"kind": "ExperimentResult", "schemaVersion": 1}`, report.ErrMissingField},
		{"no case", `{"kind": "ExperimentResult", "schemaVersion": 1, "experiment": "catchup", "cases": []}`, report.ErrMissingField},
		{"empty case", `{"kind": "ExperimentResult", "schemaVersion": 1, "experiment": "catchup", "cases": [{}]}`, report.ErrMissingField},
		{"no part of its own", `{"kind": "ExperimentResult", "schemaVersion": 1, "experiment": "catchup", "cases": [{"experiment": "catchup", "case": "a"}]}`,
			report.ErrMissingField},
	} {
		if _, err := Decode([]byte(tt.doc)); !errors.Is(err, tt.want) {
			t.Errorf("%s: Decode error %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestMeasured(t *testing.T) {
	tests := []struct {
		c      CaseSummary
		figure string
		want   bool
	}{
		{CaseSummary{Experiment: NameRun}, FigureProbe, false},
		{CaseSummary{Experiment: NameRun}, FigureWrites, true},
		{CaseSummary{Experiment: NameRun}, FigureDefrag, false},
		{CaseSummary{Experiment: NameRun, Defrags: 1}, FigureDefrag, true},
		{CaseSummary{Experiment: NameDefragStall, Defrags: 1}, FigureLostEvents, false},
		{CaseSummary{Experiment: NameRelistStorm}, FigureProbe, true},
		{CaseSummary{Experiment: "unknown"}, FigureRelists, false},
	}
	for _, tt := range tests {
		if got := Measured(tt.c, tt.figure); got != tt.want {
			t.Errorf("Measured(%s defrags=%d, %s) = %v, want %v", tt.c.Experiment, tt.c.Defrags, tt.figure, got, tt.want)
		}
	}
}

// TestBenchstat checks a case's benchstat line: its name, its words as
// sub-benchmark keys with no space nor inner slash, and only the figures
// its experiment measures.
func TestBenchstat(t *testing.T) {
	r := &Result{Experiment: NameRun, Cases: []CaseSummary{{Experiment: NameRun, Case: "informer watchers=3 rate=200/s",
		Relists: 2, BackoffP50Ms: 800, RelistP50Ms: 35, ResyncP50Ms: 835, WritesPerSecond: 200}}}
	lines := Benchstat(r)
	if len(lines) != 1 || lines[0].Name != "LwbenchRun/informer/watchers=3/rate=200-per-s" {
		t.Fatalf("Benchstat = %+v, want one line named LwbenchRun/informer/watchers=3/rate=200-per-s", lines)
	}
	units := map[string]float64{}
	for _, m := range lines[0].Metrics {
		units[m.Unit] = m.Value
	}
	if units["p50-backoff-ms"] != 800 || units["p50-relist-ms"] != 35 || units["p50-resync-ms"] != 835 || units["relists"] != 2 {
		t.Errorf("metrics %v, want backoff 800, relist 35, resync 835, 2 relists", units)
	}
	if _, ok := units["p99-probe-ms"]; ok {
		t.Errorf("a run's line has the probe, which a run does not measure: %v", units)
	}
}
