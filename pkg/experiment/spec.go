package experiment

import (
	"slices"

	"github.com/kubestore/etcdkit/pkg/report"
)

// The figures of a CaseSummary, by their JSON names. An experiment
// measures some of them (Spec.Figures); the others do not apply to it and
// are 0 in its CaseSummary, which does not mean it measured 0.
const (
	FigureRelists         = "relists"
	FigureRelistObjects   = "relistObjects"
	FigureRelistBytes     = "relistBytes"
	FigureResync          = "resyncP50Ms" // and resyncMaxMs
	FigureRelistTime      = "relistP50Ms" // and backoffP50Ms
	FigureListRestarts    = "listRestarts"
	FigureCompactions     = "compactions"
	FigureDefrag          = "defragMs"        // and defrags; only for a case that defragmented
	FigureWrites          = "writesPerSecond" // and writeP99Ms
	FigureDelivery        = "deliveryP99Ms"   // and deliveryEvents
	FigureProbe           = "probe"
	FigureDBSize          = "dbSizeBeforeBytes" // and dbSizeAfterBytes
	FigureLostEvents      = "lostEvents"
	FigureOtherViolations = "otherViolations"
)

// Spec describes one kind of Result: the experiment's name (as
// Result.Experiment spells it) and the figures its cases measure.
type Spec struct {
	Name    string   // one of Names, NameRun or NameKubeRun
	Figures []string // the Figure constants its CaseSummary fills
}

// Specs are the experiments in the order the suite runs them, then `lwbench
// run` as FromRun summarises it, of the etcd-direct model and through
// kube-apiserver.
var Specs = []Spec{
	{NameRelistStorm, []string{FigureRelists, FigureRelistObjects, FigureRelistBytes, FigureRelistTime, FigureResync, FigureListRestarts, FigureCompactions,
		FigureWrites, FigureProbe, FigureLostEvents, FigureOtherViolations}},
	{NameContinuation, []string{FigureResync, FigureListRestarts, FigureCompactions, FigureWrites, FigureProbe}},
	{NameCompactionSweep, []string{FigureRelists, FigureRelistObjects, FigureRelistBytes, FigureCompactions, FigureWrites, FigureProbe,
		FigureDBSize, FigureLostEvents, FigureOtherViolations}},
	{NameDefragStall, []string{FigureCompactions, FigureDefrag, FigureProbe, FigureDBSize}},
	{NameCatchup, []string{FigureRelistObjects, FigureRelistBytes, FigureResync, FigureProbe, FigureLostEvents, FigureOtherViolations}},
	{NameRun, []string{FigureRelists, FigureRelistObjects, FigureRelistBytes, FigureRelistTime, FigureResync, FigureListRestarts, FigureCompactions,
		FigureDefrag, FigureWrites, FigureDelivery, FigureDBSize, FigureLostEvents, FigureOtherViolations}},
	{NameKubeRun, []string{FigureRelists, FigureRelistObjects, FigureRelistBytes, FigureRelistTime, FigureResync, FigureListRestarts, FigureCompactions,
		FigureDefrag, FigureWrites, FigureDelivery, FigureLostEvents, FigureOtherViolations}},
}

// Lookup returns the Spec of the experiment name.
func Lookup(name string) (Spec, bool) {
	i := slices.IndexFunc(Specs, func(s Spec) bool { return s.Name == name })
	if i < 0 {
		return Spec{}, false
	}
	return Specs[i], true
}

// Measured reports whether case c measured figure: its experiment
// measures it, and, for FigureDefrag, the case defragmented.
func Measured(c CaseSummary, figure string) bool {
	s, ok := Lookup(c.Experiment)
	if !ok || !slices.Contains(s.Figures, figure) {
		return false
	}
	if figure == FigureDefrag {
		return c.Defrags > 0
	}
	return true
}

// Summary returns what Compare and a comparison of r read of it: its
// experiment, label, target, kube-apiservers and cases, without its
// timelines and its experiment's own part, which are most of a result's
// size. A reader of many results keeps the summaries (lwbench report).
func (r *Result) Summary() *Result {
	return &Result{Kind: r.Kind, SchemaVersion: r.SchemaVersion, Experiment: r.Experiment, StartedAt: r.StartedAt,
		DurationMs: r.DurationMs, Quick: r.Quick, Label: r.Label, Environment: r.Environment, Target: r.Target,
		APIServer: r.APIServer, Cases: r.Cases}
}

// ComparisonSchemaVersion is the version of the Comparison JSON document.
const ComparisonSchemaVersion = 1

// Comparison is what `lwbench report -w json` prints: every case of
// every result read, in the columns experiments share.
type Comparison struct {
	Kind          string `json:"kind"`          // report.KindComparison
	SchemaVersion int    `json:"schemaVersion"` // ComparisonSchemaVersion
	// Results are the results compared, in the order given.
	Results []ComparedResult `json:"results"`
}

// ComparedResult is one result in a Comparison.
type ComparedResult struct {
	Name        string `json:"name"`        // Result.Name()
	Experiment  string `json:"experiment"`  // the experiment, run or kube-run
	EtcdVersion string `json:"etcdVersion"` // the target's version
	// APIServer describes the kube-apiservers the result's clients went
	// through (Result.APIServer); absent for lwbench's etcd-direct model.
	APIServer *report.APIServerTarget `json:"apiServer,omitempty"`
	// Figures are the CaseSummary figures the experiment measures; the
	// others are 0 in Cases and mean "not measured".
	Figures []string      `json:"figures"`
	Cases   []CaseSummary `json:"cases"` // in the order run
}

// Compare lays results out as a Comparison.
func Compare(results []*Result) *Comparison {
	c := &Comparison{Kind: report.KindComparison, SchemaVersion: ComparisonSchemaVersion, Results: []ComparedResult{}}
	for _, r := range results {
		s, _ := Lookup(r.Experiment)
		c.Results = append(c.Results, ComparedResult{Name: r.Name(), Experiment: r.Experiment, EtcdVersion: r.Target.EtcdVersion,
			APIServer: r.APIServer, Figures: s.Figures, Cases: r.Cases})
	}
	return c
}
