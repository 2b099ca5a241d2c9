package plot

import (
	"bytes"
	"image/color"
	"image/png"
	"slices"
	"testing"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/experiment"
)

// tickLabels returns the labelled ticks' labels.
func tickLabels(t gplot.Ticker, lo, hi float64) []string {
	var out []string
	for _, tk := range t.Ticks(lo, hi) {
		if tk.Label != "" {
			if tk.Value < lo || tk.Value > hi {
				out = append(out, "outside:"+tk.Label)
				continue
			}
			out = append(out, tk.Label)
		}
	}
	return out
}

// TestLogTicks checks that a log axis is labelled at 1, 2 and 5 times
// each power of ten within its range, with thousands separated: an axis
// from 80 to 1,250 objects read "100" and "1000" only.
func TestLogTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []string
	}{
		{80, 1250, []string{"100", "200", "500", "1,000"}},
		{800, 62500, []string{"1,000", "2,000", "5,000", "10,000", "20,000", "50,000"}},
		{1.5, 625, []string{"2", "5", "10", "20", "50", "100", "200", "500"}},
		{0.3, 0.9, []string{"0.5"}},
		{0, 10, nil},
	}
	for _, tt := range tests {
		if got := tickLabels(logTicks{}, tt.lo, tt.hi); !slices.Equal(got, tt.want) {
			t.Errorf("log ticks of [%g, %g]: got %q, want %q", tt.lo, tt.hi, got, tt.want)
		}
	}
}

// TestLinearTicks checks that a linear axis gets at most 10 labels at round
// steps with no needless decimals: 0 to 5,000 read "0.00 2500.00
// 5000.00" with gonum's default.
func TestLinearTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []string
	}{
		{0, 5020, []string{"0", "1,000", "2,000", "3,000", "4,000", "5,000"}},
		{0, 4.9, []string{"0.0", "0.5", "1.0", "1.5", "2.0", "2.5", "3.0", "3.5", "4.0", "4.5"}},
		{0, 27, []string{"0", "5", "10", "15", "20", "25"}},
		{-10, 10, []string{"-10", "-5", "0", "5", "10"}},
		{5, 5, nil},
	}
	for _, tt := range tests {
		if got := tickLabels(linearTicks{}, tt.lo, tt.hi); !slices.Equal(got, tt.want) {
			t.Errorf("linear ticks of [%g, %g]: got %q, want %q", tt.lo, tt.hi, got, tt.want)
		}
	}
}

// TestCaseSpans checks that a timeline several cases share (a relist
// storm's) names each case once, over its marks' time, in a form a person
// reads, and that one case's timeline names none.
func TestCaseSpans(t *testing.T) {
	marks := []experiment.Mark{
		{Kind: experiment.MarkPhase, AtMs: 0, EndMs: 100, Label: "seed 100 pods"},
		{Kind: experiment.MarkPhase, AtMs: 100, EndMs: 200, Label: "n=100 ps=500: initial lists"},
		{Kind: experiment.MarkHold, AtMs: 300, EndMs: 800, Label: "n=100 ps=500: informers held back"},
		{Kind: experiment.MarkCompaction, AtMs: 700, EndMs: 720, Label: "compact 10"},
		{Kind: experiment.MarkRelease, AtMs: 800, EndMs: 2000, Label: "n=100 ps=500: released until resynced"},
		{Kind: experiment.MarkHold, AtMs: 2500, EndMs: 3000, Label: "n=1000 ps=none control: informers held back"},
		{Kind: experiment.MarkRelease, AtMs: 3000, EndMs: 3100, Label: "n=1000 ps=none control: released until resynced"},
	}
	got := caseSpans(marks)
	want := []caseSpan{{"n=100 ps=500", 100, 2000}, {"n=1000 ps=none control", 2500, 3100}}
	if !slices.Equal(got, want) {
		t.Errorf("caseSpans = %+v, want %+v", got, want)
	}
	if l := caseLabel(got[1].name); l != "1000 pods\nunpaginated\ncontrol" {
		t.Errorf("caseLabel(%q) = %q", got[1].name, l)
	}
	if l := caseLabel("page size 100"); l != "page size 100" {
		t.Errorf("caseLabel(page size 100) = %q, want it as is", l)
	}
	if s := caseSpans(marks[:5]); s != nil {
		t.Errorf("caseSpans of one case = %+v, want none", s)
	}
}

// TestLegendOffTheData checks that a figure's legend is drawn in a strip
// right of the plot, not over the data: the strip holds the legend's
// pixels, and the plot ends before it.
func TestLegendOffTheData(t *testing.T) {
	tl := experiment.Timeline{Name: "all", Probe: compaction.ProbeResult{SeriesIntervalMs: 250}}
	for i := range 40 {
		tl.Probe.Series = append(tl.Probe.Series, compaction.ProbeInterval{StartMs: float64(i) * 250, Ops: 5, P50Ms: 100, MaxMs: 100})
	}
	p, err := Latency(tl, "t")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := (Figure{Name: "t", p: p}).WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	strip := int(float64(img.Bounds().Dx()) * float64(LegendWidth/Width))
	var inStrip, plotInStrip int
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Max.X - strip + 2; x < img.Bounds().Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != 0xffff || g != 0xffff || bl != 0xffff {
				inStrip++
			}
			if c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA); c == (color.RGBA{R: 31, G: 119, B: 180, A: 255}) && y > img.Bounds().Dy()/2 {
				plotInStrip++ // the slowest line's blue in the lower half: the plot
			}
		}
	}
	if inStrip == 0 {
		t.Errorf("nothing drawn in the legend strip of %d pixels", strip)
	}
	if plotInStrip > 0 {
		t.Errorf("%d pixels of the data's line in the legend strip", plotInStrip)
	}
}

// TestLabelsFit checks when the cases' names fit above their times: a
// quick relist storm's eight cases over 25 s do, the full storm's first
// cases of 3 s over 110 s do not (they are then numbered, and named in
// the legend).
func TestLabelsFit(t *testing.T) {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{}}, Labels: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	sty := l.TextStyle[0]
	sty.Font.Size = vg.Points(9)
	cases := []caseSpan{{"n=1000 ps=10000", 3000, 6000}, {"n=1000 ps=none control", 6000, 9000}}
	labels := []string{caseLabel(cases[0].name), caseLabel(cases[1].name)}
	if !labelsFit(cases, labels, sty, 25) {
		t.Errorf("cases of 3 s on a plot of 25 s: labels do not fit, want them to")
	}
	if labelsFit(cases, labels, sty, 110) {
		t.Errorf("cases of 3 s on a plot of 110 s: labels fit, want them numbered")
	}
}
