package command

import (
	"slices"
	"testing"

	"github.com/kubestore/etcdkit/pkg/experiment"
)

// TestRegistryIsTheExperiments checks that the experiment registry holds
// each of experiment.Names once, in the suite's order, and that an entry's
// table declines a result without the experiment's own part (which then
// gets the comparison table) instead of failing.
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
	}
}
