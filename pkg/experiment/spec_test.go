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
