package command

import (
	"slices"
	"testing"

	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/plot"
)

// TestRegistryIsTheExperiments checks that the experiment registry holds
// each of experiment.Names once, in the suite's order; that an entry's
// table declines a result without the experiment's own part (which then
// gets the comparison table) instead of failing; and that every entry has
// figures of distinct names, which draw nothing for a result without its
// part, while a run's result has none.
func TestRegistryIsTheExperiments(t *testing.T) {
	var names []string
	for _, e := range experiments {
		names = append(names, e.name)
	}
	if !slices.Equal(names, experiment.Names) {
		t.Errorf("registry experiments %v, want experiment.Names %v", names, experiment.Names)
	}
	comparison := makeComparisonTable(nil).Header
	for _, e := range experiments {
		r := &experiment.Result{Experiment: e.name}
		if tb, ok := e.table(r); ok || tb.Header != nil {
			t.Errorf("%s: table of a result without its part: got ok %v, header %v; want false and none", e.name, ok, tb.Header)
		}
		if h := makeExperimentTable(r).Header; !slices.Equal(h, comparison) {
			t.Errorf("%s: makeExperimentTable of a result without its part has header %v, want the comparison's", e.name, h)
		}
		seen := map[string]bool{}
		for _, f := range e.figures {
			if seen[f.Name] {
				t.Errorf("%s: figure %s twice", e.name, f.Name)
			}
			seen[f.Name] = true
		}
		if len(e.figures) == 0 {
			t.Errorf("%s: no figure of its own", e.name)
		}
		figs, err := plot.Figures([]*experiment.Result{r}, experimentFigures)
		if err != nil || len(figs) != 0 {
			t.Errorf("%s: figures of a result without its part: %d, error %v; want none", e.name, len(figs), err)
		}
	}
	if f := experimentFigures(experiment.NameRun); f != nil {
		t.Errorf("a run's result has figures %v, want none", f)
	}
}
