package plot_test

import (
	"bytes"
	"image/png"
	"testing"

	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/plot"
)

func timeline(name string) experiment.Timeline {
	tl := experiment.Timeline{Name: name, Probe: compaction.ProbeResult{SeriesIntervalMs: 250}}
	for i := range 40 {
		iv := compaction.ProbeInterval{StartMs: float64(i) * 250, Ops: 5, P50Ms: 1, P99Ms: 2, MaxMs: 3}
		if i == 20 {
			iv.MaxMs, iv.Errors = 900, 1
		}
		tl.Probe.Series = append(tl.Probe.Series, iv)
		tl.DBSize = append(tl.DBSize, experiment.SizeSample{AtMs: float64(i) * 250, Bytes: int64(i+1) * 1e6, InUseBytes: int64(i+1) * 5e5})
	}
	tl.Marks = []experiment.Mark{
		{Kind: experiment.MarkCompaction, AtMs: 2000, EndMs: 2100, Revision: 10},
		{Kind: experiment.MarkDefrag, AtMs: 5000, EndMs: 5900},
		{Kind: experiment.MarkHold, AtMs: 1000, EndMs: 3000},
		{Kind: experiment.MarkRelease, AtMs: 3000, EndMs: 4000},
	}
	return tl
}

// figuresOf gives each experiment the figures lwbench's registry gives it.
func figuresOf(name string) []plot.ExperimentFigure {
	return map[string][]plot.ExperimentFigure{
		experiment.NameRelistStorm:     {plot.RelistCostFigure},
		experiment.NameContinuation:    {plot.ContinuationFigure},
		experiment.NameCompactionSweep: {plot.SweepDBSizeFigure},
		experiment.NameDefragStall:     {plot.DefragFigure, plot.DBSizeFigure},
		experiment.NameCatchup:         {plot.CatchupFigure},
	}[name]
}

func TestFigures(t *testing.T) {
	results := []*experiment.Result{
		{Experiment: experiment.NameRelistStorm, Timelines: []experiment.Timeline{timeline("all")},
			RelistStorm: &experiment.RelistStormResult{Cases: []experiment.RelistStormCase{
				{Objects: 100, PageSize: 500, Compacted: true, ListP50Ms: 2},
				{Objects: 1000, PageSize: 500, Compacted: true, ListP50Ms: 20},
				{Objects: 1000, PageSize: 500, Compacted: false},
			}}},
		{Experiment: experiment.NameCompactionSweep, Timelines: []experiment.Timeline{timeline("interval=never"), timeline("interval=1s")},
			CompactionSweep: &experiment.CompactionSweepResult{}},
		{Experiment: experiment.NameDefragStall, Timelines: []experiment.Timeline{timeline("all")},
			DefragStall: &experiment.DefragStallResult{Cases: []experiment.DefragStallCase{
				{BeforeBytes: 1e8, DefragMs: 500}, {BeforeBytes: 1e8, DefragMs: 700, Overlapping: true}}}},
		{Experiment: experiment.NameCatchup, Timelines: []experiment.Timeline{timeline("all")},
			Catchup: &experiment.CatchupResult{Scenario: experiment.CatchupScenario{MaxRevisionsPerSecond: 10000, Objects: 10, PageSize: 500},
				Cases: []experiment.CatchupCase{{Revisions: 1000, CatchupMs: 100, RelistMs: 2}}}},
		{Experiment: experiment.NameContinuation, Timelines: []experiment.Timeline{timeline("all")},
			Continuation: &experiment.ContinuationResult{Cases: []experiment.ContinuationCase{{PageSize: 100, DurationP50Ms: 50},
				{PageSize: 100, Compacting: true, Fallback: experiment.FallbackRestart, RetainLists: 1, DurationP50Ms: 80},
				{PageSize: 100, Compacting: true, Fallback: experiment.FallbackFullList, RetainLists: 1, DurationP50Ms: 60}}}},
	}
	figs, err := plot.Figures(results, figuresOf)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"relist-storm-latency", "compaction-sweep-latency-1", "compaction-sweep-latency-2", "defrag-stall-latency",
		"defrag-stall-defrag", "catchup-latency", "catchup-catchup", "continuation-latency", "continuation-lists",
		"defrag-stall-db-size", "db-size", "relist-cost"}
	got := map[string]bool{}
	for _, f := range figs {
		if got[f.Name] {
			t.Errorf("figure name %s twice", f.Name)
		}
		got[f.Name] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no figure %s; got %v", w, got)
		}
	}
	var buf bytes.Buffer
	if err := figs[0].WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("figure %s is not a PNG: %v", figs[0].Name, err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 300 {
		t.Errorf("figure of %dx%d pixels, want a readable size", b.Dx(), b.Dy())
	}
}

func TestFiguresWithoutData(t *testing.T) {
	figs, err := plot.Figures([]*experiment.Result{{Experiment: experiment.NameCatchup, Catchup: &experiment.CatchupResult{}}}, figuresOf)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range figs {
		if f.Name == "db-size" || f.Name == "relist-cost" {
			t.Errorf("figure %s drawn without data", f.Name)
		}
		var buf bytes.Buffer
		if err := f.WritePNG(&buf); err != nil {
			t.Errorf("empty figure %s: %v", f.Name, err)
		}
	}
}
