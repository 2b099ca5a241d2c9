// Package plot draws the figures of lwbench's experiments with
// gonum.org/v1/plot: the probe's latency over time with compactions and
// defragmentations marked, db size over time, relist cost against object
// count, defragmentation time against db size, and catch-up against
// relist. It returns figures; callers write them where they want (PNG).
//
// Every figure has labelled axes with units; times run in seconds from
// the experiment's (or, for the compaction sweep, the case's) start.
package plot

import (
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/kubestore/etcdkit/pkg/experiment"
)

// Figure is one plot, ready to be written.
type Figure struct {
	// Name is a file name without extension, unique within one call,
	// e.g. "relist-storm-latency".
	Name string
	// Title is the plot's title.
	Title string
	p     *plot.Plot
}

// Width and Height are the size figures are drawn at: 1152 x 480 pixels
// at 96 dpi, of which LegendWidth on the right holds the legend, off the
// data.
const (
	Width       = 12 * vg.Inch
	Height      = 5 * vg.Inch
	LegendWidth = 3.3 * vg.Inch
)

// WritePNG draws the figure as a PNG image to w: the plot, with its
// legend in a strip of LegendWidth to the right of it.
func (f Figure) WritePNG(w io.Writer) error {
	img := vgimg.New(Width, Height)
	dc := draw.New(img)
	legend := f.p.Legend
	f.p.Legend = plot.NewLegend()
	f.p.Draw(draw.Crop(dc, 0, -LegendWidth, 0, 0))
	f.p.Legend = legend
	// The legend's top aligns with the data's, below the title.
	title := f.p.Title.TextStyle.Height(f.p.Title.Text) + f.p.Title.Padding
	legend.Draw(draw.Crop(dc, Width-LegendWidth+vg.Points(8), 0, 0, -title-vg.Points(4)))
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("figure %s: %w", f.Name, err)
	}
	return nil
}

var (
	colorCompaction = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	colorDefrag     = color.NRGBA{R: 255, G: 140, B: 0, A: 90}
	colorHold       = color.NRGBA{R: 60, G: 120, B: 220, A: 45}
	colorRelease    = color.NRGBA{R: 40, G: 170, B: 60, A: 45}
	palette         = []color.Color{
		color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 44, G: 160, B: 44, A: 255},
		color.RGBA{R: 148, G: 103, B: 189, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
		color.RGBA{R: 255, G: 127, B: 14, A: 255}, color.RGBA{R: 140, G: 86, B: 75, A: 255},
		color.RGBA{R: 23, G: 190, B: 207, A: 255}, color.RGBA{R: 127, G: 127, B: 127, A: 255},
	}
	dashed = []vg.Length{vg.Points(5), vg.Points(3)}
)

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.X.Tick.Marker, p.Y.Tick.Marker = linearTicks{}, linearTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.Padding = vg.Points(2)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	return p
}

// linearTicks marks a linear axis every 1, 2 or 5 times a power of ten,
// whichever gives fewer than 11 labelled ticks, with as many decimals as the
// step needs ("0.5", "2,500"), and four unlabelled ticks between.
type linearTicks struct{}

// Ticks implements plot.Ticker.
func (linearTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return nil
	}
	mag := math.Pow(10, math.Floor(math.Log10((hi-lo)/5)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; (hi-lo)/step < 10 {
			break
		}
	}
	decimals := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	var ts []plot.Tick
	minor := step / 5
	for i := math.Ceil(lo / minor); i*minor <= hi+minor*1e-9 && len(ts) <= 100; i++ {
		t := plot.Tick{Value: i * minor}
		if k := math.Round(t.Value / step); math.Abs(t.Value/step-k) < 1e-6 {
			t.Value = k * step
			t.Label = tickLabel(t.Value, decimals)
		}
		ts = append(ts, t)
	}
	return ts
}

func line(p *plot.Plot, xys plotter.XYs, c color.Color, label string, dash bool, points bool) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dash {
		l.Dashes = dashed
	}
	p.Add(l)
	if points {
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		s.Color = c
		s.Shape = draw.CircleGlyph{}
		p.Add(s)
	}
	if label != "" {
		p.Legend.Add(label, l)
	}
	return nil
}

// ExperimentFigure is a figure the results of an experiment have, besides
// each timeline's latency: drawn for each result on its own (named
// "<result>-Name", titled "<result>: Title"), or, Across, once over every
// result whose experiment has it (named Name, titled Title). Which
// experiments have which figures is the caller's registry (lwbench's
// experiment registry); the figures are the values below.
type ExperimentFigure struct {
	Name   string // the file name, or its part after the result's name and a dash
	Title  string // the title, or its part after the result's name and a colon
	Across bool   // drawn once over every result that has it
	// draw plots the results (one, unless Across); nil when they lack
	// what it plots.
	draw func(results []*experiment.Result, title string) (*plot.Plot, error)
}

// The experiments' figures.
var (
	// DefragFigure is a defragmentation experiment's defragmentation time
	// and the probe's longest stall against db size.
	DefragFigure = ExperimentFigure{Name: "defrag", Title: "defragmentation against db size", draw: one(defragFigure)}
	// CatchupFigure is a catch-up experiment's catch-up time against its
	// relists and etcd's pace.
	CatchupFigure = ExperimentFigure{Name: "catchup", Title: "catch-up against relist", draw: one(catchupFigure)}
	// ContinuationFigure is a continuation experiment's list time by
	// history kept and fallback.
	ContinuationFigure = ExperimentFigure{Name: "lists", Title: "paginated LIST time by history kept and fallback", draw: one(continuationFigure)}
	// DBSizeFigure is one result's db size over time (DBSize).
	DBSizeFigure = ExperimentFigure{Name: "db-size", Title: "db size over time", draw: DBSize}
	// SweepDBSizeFigure is the db size over time of every case of every
	// result that has it together (DBSize): the compaction sweeps.
	SweepDBSizeFigure = ExperimentFigure{Name: "db-size", Title: "db size over time by compaction interval", Across: true, draw: DBSize}
	// RelistCostFigure is the relist cost against object count of every
	// relist storm among the results that have it together (RelistCost).
	RelistCostFigure = ExperimentFigure{Name: "relist-cost", Title: "relist cost against object count", Across: true, draw: RelistCost}
)

// one makes a figure of one result a figure of results, drawn from the
// first.
func one(draw func(*experiment.Result, string) (*plot.Plot, error)) func([]*experiment.Result, string) (*plot.Plot, error) {
	return func(rs []*experiment.Result, title string) (*plot.Plot, error) { return draw(rs[0], title) }
}

// Figures returns the figures of a set of results: per result, the
// latency over time of each timeline (with compactions, defragmentations
// and held-back watchers marked), then the figures figuresOf(its
// experiment) draws per result; then each figure drawn across results,
// over every result whose experiment has it, in the order first met.
// figuresOf may return nil (a run's result has none of its own).
func Figures(results []*experiment.Result, figuresOf func(experiment string) []ExperimentFigure) ([]Figure, error) {
	c := NewCollector(figuresOf)
	var figs []Figure
	for _, r := range results {
		f, err := c.Add(r)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f...)
	}
	f, err := c.Across()
	if err != nil {
		return nil, err
	}
	return append(figs, f...), nil
}

// Collector draws the figures of results one at a time, as Figures does
// for all at once, so that a caller reading many results needs to hold
// only one whole result at a time: of each result, Add keeps only what
// the figures drawn across results plot (the relist storm's cases, the
// timelines' db size samples, and only for an experiment that has such a
// figure).
type Collector struct {
	figuresOf func(experiment string) []ExperimentFigure
	used      map[string]int // figure names given, for unique names
	across    []ExperimentFigure
	// acrossResults are, per across figure's name, the parts of the
	// results that have it which it plots.
	acrossResults map[string][]*experiment.Result
}

// NewCollector returns a Collector of the figures figuresOf names per
// experiment (see Figures).
func NewCollector(figuresOf func(experiment string) []ExperimentFigure) *Collector {
	return &Collector{figuresOf: figuresOf, used: map[string]int{}, acrossResults: map[string][]*experiment.Result{}}
}

// name returns s, or s-N for its Nth use.
func (c *Collector) name(s string) string {
	c.used[s]++
	if c.used[s] > 1 {
		return fmt.Sprintf("%s-%d", s, c.used[s])
	}
	return s
}

// Add returns r's own figures (the latency of each timeline, then its
// experiment's figures drawn per result) and keeps what r's figures drawn
// across results need, for Across. r is not retained.
func (c *Collector) Add(r *experiment.Result) ([]Figure, error) {
	var figs []Figure
	add := func(n, title string, p *plot.Plot, err error) error {
		if err == nil && p != nil {
			figs = append(figs, Figure{Name: c.name(n), Title: title, p: p})
		}
		return err
	}
	for i, tl := range r.Timelines {
		title := fmt.Sprintf("%s: probe latency", r.Name())
		if len(r.Timelines) > 1 {
			title += " (" + tl.Name + ")"
		}
		n := r.Name() + "-latency"
		if len(r.Timelines) > 1 {
			n = fmt.Sprintf("%s-latency-%d", r.Name(), i+1)
		}
		p, err := Latency(tl, title)
		if err := add(n, title, p, err); err != nil {
			return nil, err
		}
	}
	var kept *experiment.Result
	for _, f := range c.figuresOf(r.Experiment) {
		if f.Across {
			if _, ok := c.acrossResults[f.Name]; !ok {
				c.across = append(c.across, f)
			}
			if kept == nil {
				kept = acrossPart(r)
			}
			c.acrossResults[f.Name] = append(c.acrossResults[f.Name], kept)
			continue
		}
		title := r.Name() + ": " + f.Title
		p, err := f.draw([]*experiment.Result{r}, title)
		if err := add(r.Name()+"-"+f.Name, title, p, err); err != nil {
			return nil, err
		}
	}
	return figs, nil
}

// acrossPart returns the part of r the figures drawn across results plot
// (DBSize, RelistCost): its names, the relist storm's cases, and each
// timeline's name and db size samples.
func acrossPart(r *experiment.Result) *experiment.Result {
	k := &experiment.Result{Experiment: r.Experiment, Label: r.Label}
	if r.RelistStorm != nil {
		k.RelistStorm = &experiment.RelistStormResult{Cases: r.RelistStorm.Cases}
	}
	for _, tl := range r.Timelines {
		k.Timelines = append(k.Timelines, experiment.Timeline{Name: tl.Name, DBSize: tl.DBSize})
	}
	return k
}

// Across returns the figures drawn across the results added, each over
// every result whose experiment has it, in the order first met.
func (c *Collector) Across() ([]Figure, error) {
	var figs []Figure
	for _, f := range c.across {
		p, err := f.draw(c.acrossResults[f.Name], f.Title)
		if err != nil {
			return nil, err
		}
		if p != nil {
			figs = append(figs, Figure{Name: c.name(f.Name), Title: f.Title, p: p})
		}
	}
	return figs, nil
}

// Latency plots a timeline's probe: the median and the slowest operation
// per bucket, against seconds from the epoch, with compactions
// as red vertical lines, defragmentations as orange bands, held-back
// watchers as blue bands and released ones until they resynced as green.
// Failed operations are drawn as crosses at their latency.
func Latency(tl experiment.Timeline, title string) (*plot.Plot, error) {
	p := newPlot(title, "time since start (s)", "probe latency from schedule (ms)")
	var p50, maxs, errs plotter.XYs
	top := 1.0
	for _, iv := range tl.Probe.Series {
		if iv.Ops == 0 {
			continue
		}
		x := (iv.StartMs + tl.Probe.SeriesIntervalMs/2) / 1000
		p50 = append(p50, plotter.XY{X: x, Y: iv.P50Ms})
		maxs = append(maxs, plotter.XY{X: x, Y: iv.MaxMs})
		if iv.Errors > 0 {
			errs = append(errs, plotter.XY{X: x, Y: iv.MaxMs})
		}
		top = max(top, iv.MaxMs)
	}
	// The marks reach top; the cases' names, if any, are written in a
	// strip above it.
	top *= 1.05
	cases := caseSpans(tl.Marks)
	labelTop := top
	if len(cases) > 0 {
		labelTop = top * 1.25
	}
	var end float64
	if n := len(tl.Probe.Series); n > 0 {
		end = (tl.Probe.Series[n-1].StartMs + tl.Probe.SeriesIntervalMs) / 1000
	}
	if err := bands(p, tl.Marks, experiment.MarkHold, colorHold, top, "watchers held back / disconnected"); err != nil {
		return nil, err
	}
	if err := bands(p, tl.Marks, experiment.MarkRelease, colorRelease, top, "released watchers relisting"); err != nil {
		return nil, err
	}
	if err := bands(p, tl.Marks, experiment.MarkDefrag, colorDefrag, top, "defragmentation"); err != nil {
		return nil, err
	}
	// Compactions are dashed lines across the plot; too many to see the
	// data between (a continuation's compactor), short ticks at its foot.
	compactions := 0
	for _, m := range tl.Marks {
		if m.Kind == experiment.MarkCompaction {
			compactions++
		}
	}
	label, height, dash := "compaction", top, true
	if compactions > maxCompactionLines {
		label, height, dash = "compaction (ticks at the foot)", top*0.04, false
	}
	for _, m := range tl.Marks {
		if m.Kind != experiment.MarkCompaction {
			continue
		}
		if err := line(p, plotter.XYs{{X: m.AtMs / 1000, Y: 0}, {X: m.AtMs / 1000, Y: height}}, colorCompaction, label, dash, false); err != nil {
			return nil, err
		}
		label = ""
	}
	if err := line(p, maxs, palette[0], fmt.Sprintf("slowest per %.0f ms", tl.Probe.SeriesIntervalMs), false, false); err != nil {
		return nil, err
	}
	if err := line(p, p50, palette[1], fmt.Sprintf("median per %.0f ms", tl.Probe.SeriesIntervalMs), false, false); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		s, err := plotter.NewScatter(errs)
		if err != nil {
			return nil, err
		}
		s.Shape = draw.CrossGlyph{}
		s.Color = colorCompaction
		s.Radius = vg.Points(4)
		p.Add(s)
		p.Legend.Add("errors or timeouts", s)
	}
	if err := caseLabels(p, cases, labelTop, end); err != nil {
		return nil, err
	}
	p.Y.Min, p.Y.Max = 0, labelTop
	p.X.Min = 0
	if end > 0 {
		p.X.Max = end
	}
	return p, nil
}

// caseLabel is how a case's name is written over its time: a relist
// storm's "n=1000 ps=500 control" a word per line, "1000 pods / pages 500
// / control"; any other name on one line.
func caseLabel(name string) string {
	if !strings.HasPrefix(name, "n=") {
		return name
	}
	words := strings.Fields(name)
	for i, w := range words {
		switch {
		case strings.HasPrefix(w, "n="):
			words[i] = w[2:] + " pods"
		case w == "ps=none":
			words[i] = "unpaginated"
		case strings.HasPrefix(w, "ps="):
			words[i] = "pages " + w[3:]
		}
	}
	return strings.Join(words, "\n")
}

// caseSpan is the time one case of a timeline took: from its first mark
// to its last, ms from the epoch.
type caseSpan struct {
	name     string
	from, to float64
}

// caseSpans returns the cases of a timeline several cases share (a relist
// storm's), in order, from the marks labelled "<case>: <what>": nil when
// the marks name fewer than two cases.
func caseSpans(marks []experiment.Mark) []caseSpan {
	var spans []caseSpan
	for _, m := range marks {
		name, _, ok := strings.Cut(m.Label, ": ")
		if !ok || m.Kind == experiment.MarkCompaction {
			continue
		}
		i := slices.IndexFunc(spans, func(c caseSpan) bool { return c.name == name })
		if i < 0 {
			spans = append(spans, caseSpan{name: name, from: m.AtMs, to: max(m.EndMs, m.AtMs)})
			continue
		}
		spans[i].from, spans[i].to = min(spans[i].from, m.AtMs), max(spans[i].to, m.EndMs)
	}
	if len(spans) < 2 {
		return nil
	}
	return spans
}

// maxCompactionLines is the most compactions Latency draws as lines
// across the plot.
const maxCompactionLines = 40

// caseLabels writes each case's name (caseLabel) at the top of the plot,
// centred over its time, the plot running from 0 to end seconds; when a
// name is wider than its case's time, every case is numbered there
// instead and named by its number in the legend.
func caseLabels(p *plot.Plot, cases []caseSpan, top, end float64) error {
	if len(cases) == 0 || end <= 0 {
		return nil
	}
	var xy plotter.XYLabels
	for _, c := range cases {
		xy.XYs = append(xy.XYs, plotter.XY{X: (c.from + c.to) / 2000, Y: top})
		xy.Labels = append(xy.Labels, caseLabel(c.name))
	}
	l, err := plotter.NewLabels(xy)
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
		l.TextStyle[i].YAlign = draw.YTop
		l.TextStyle[i].Font.Size = vg.Points(9)
	}
	if !labelsFit(cases, xy.Labels, l.TextStyle[0], end) {
		for i := range l.Labels {
			p.Legend.Add(fmt.Sprintf("%d: %s", i+1, strings.ReplaceAll(l.Labels[i], "\n", ", ")))
			l.Labels[i] = fmt.Sprint(i + 1)
		}
	}
	p.Add(l)
	return nil
}

// labelsFit reports whether every case's label, in style sty, is
// narrower than the case's time on a plot from 0 to end seconds.
func labelsFit(cases []caseSpan, labels []string, sty text.Style, end float64) bool {
	// The data's width: the figure's, but the legend and the y axis.
	dataWidth := Width - LegendWidth - vg.Inch
	for i, c := range cases {
		span := vg.Length((c.to - c.from) / 1000 / end * float64(dataWidth))
		for _, ln := range strings.Split(labels[i], "\n") {
			if sty.Width(ln) >= span {
				return false
			}
		}
	}
	return true
}

// bands draws the marks of one kind as translucent bands.
func bands(p *plot.Plot, marks []experiment.Mark, kind string, c color.Color, top float64, label string) error {
	first := true
	for _, m := range marks {
		if m.Kind != kind {
			continue
		}
		x0, x1 := m.AtMs/1000, math.Max(m.EndMs, m.AtMs+1)/1000
		poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: top}, {X: x0, Y: top}})
		if err != nil {
			return err
		}
		poly.Color = c
		poly.LineStyle.Width = 0
		poly.LineStyle.Color = color.Transparent
		p.Add(poly)
		if first {
			p.Legend.Add(label, poly)
			first = false
		}
	}
	return nil
}

// DBSize plots the db file size (solid) and the size in use (dashed) of
// every timeline of the results, in MB against seconds from the
// timeline's start, with each timeline's compactions as short ticks at
// the bottom. It returns nil when no timeline has a size sample.
func DBSize(results []*experiment.Result, title string) (*plot.Plot, error) {
	p := newPlot(title, "time since start (s)", "db size (MB, decimal)")
	p.X.Min = 0
	i := 0
	top := 1.0
	for _, r := range results {
		for _, tl := range r.Timelines {
			if len(tl.DBSize) == 0 {
				continue
			}
			c := palette[i%len(palette)]
			i++
			var total, inUse plotter.XYs
			for _, s := range tl.DBSize {
				top = max(top, float64(s.Bytes)/1e6)
				total = append(total, plotter.XY{X: s.AtMs / 1000, Y: float64(s.Bytes) / 1e6})
				inUse = append(inUse, plotter.XY{X: s.AtMs / 1000, Y: float64(s.InUseBytes) / 1e6})
			}
			// Name the timeline by its case, and by its result when
			// several are drawn; one timeline of the whole experiment
			// ("all") needs no name.
			var name []string
			if len(results) > 1 {
				name = append(name, r.Name())
			}
			if tl.Name != "all" {
				name = append(name, tl.Name)
			}
			label := strings.Join(name, " ")
			if label != "" {
				label += ": "
			}
			if err := line(p, total, c, label+"file", false, false); err != nil {
				return nil, err
			}
			if err := line(p, inUse, c, label+"in use", true, false); err != nil {
				return nil, err
			}
		}
	}
	if i == 0 {
		return nil, nil
	}
	p.Y.Min = 0
	p.Y.Max = top * 1.05
	return p, nil
}

// RelistCost plots, for every relist storm among the results, the median
// relist duration against the object count, one line per page size (log
// scales). It returns nil when there is no relist storm.
func RelistCost(results []*experiment.Result, title string) (*plot.Plot, error) {
	// A short y label: gonum pads a log axis for its label as if centred
	// at the arithmetic mean of the range, near the top.
	p := newPlot(title+" (log scales)", "objects listed", "median relist (ms)")
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = logTicks{}, logTicks{}
	xmin, xmax, ymin, ymax := math.Inf(1), 0.0, math.Inf(1), 0.0
	i := 0
	for _, r := range results {
		rs := r.RelistStorm
		if rs == nil {
			continue
		}
		byPage := map[int64]plotter.XYs{}
		for _, c := range rs.Cases {
			if !c.Compacted || c.ListP50Ms <= 0 {
				continue
			}
			byPage[c.PageSize] = append(byPage[c.PageSize], plotter.XY{X: float64(c.Objects), Y: c.ListP50Ms})
			xmin, xmax = min(xmin, float64(c.Objects)), max(xmax, float64(c.Objects))
			ymin, ymax = min(ymin, c.ListP50Ms), max(ymax, c.ListP50Ms)
		}
		var sizes []int64
		for ps := range byPage {
			sizes = append(sizes, ps)
		}
		sort.Slice(sizes, func(a, b int) bool { return sizes[a] < sizes[b] })
		for _, ps := range sizes {
			label := "page size " + pageSizeLabel(ps)
			if len(results) > 1 {
				label = r.Name() + " " + label
			}
			if err := line(p, byPage[ps], palette[i%len(palette)], label, false, true); err != nil {
				return nil, err
			}
			i++
		}
	}
	if i == 0 || xmin <= 0 {
		return nil, nil
	}
	// A margin around the points, so that none sits on an axis.
	p.X.Min, p.X.Max = xmin/1.25, xmax*1.25
	p.Y.Min, p.Y.Max = ymin/1.25, ymax*1.25
	return p, nil
}

// logTicks marks a log axis at 1, 2 and 5 times each power of ten,
// labelled ("20", "5,000", "0.5"), and at the other multiples unlabelled:
// at least two labels on any axis spanning a factor of 2.5.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, e)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = tickLabel(v, max(0, -int(math.Floor(math.Log10(v)+1e-9))))
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// tickLabel writes v with the decimals given and a comma every three
// digits of its integer part ("50,000", "2.5").
func tickLabel(v float64, decimals int) string {
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	if strings.Trim(s, "0.") == "" {
		sign = "" // not "-0"
	}
	integer, frac, _ := strings.Cut(s, ".")
	for i := len(integer) - 3; i > 0; i -= 3 {
		integer = integer[:i] + "," + integer[i:]
	}
	if frac != "" {
		integer += "." + frac
	}
	return sign + integer
}

func pageSizeLabel(ps int64) string {
	if ps == 0 {
		return "none (unpaginated)"
	}
	return fmt.Sprint(ps)
}

func defragFigure(r *experiment.Result, title string) (*plot.Plot, error) {
	ds := r.DefragStall
	if ds == nil {
		return nil, nil
	}
	p := newPlot(title, "db size before defragmentation (MB, decimal)", "time (ms)")
	var defrag, stall, odefrag, ostall plotter.XYs
	for _, c := range ds.Cases {
		x := float64(c.BeforeBytes) / 1e6
		if c.Overlapping {
			odefrag = append(odefrag, plotter.XY{X: x, Y: c.DefragMs})
			ostall = append(ostall, plotter.XY{X: x, Y: c.Probe.LongestStallMs})
			continue
		}
		defrag = append(defrag, plotter.XY{X: x, Y: c.DefragMs})
		stall = append(stall, plotter.XY{X: x, Y: c.Probe.LongestStallMs})
	}
	if err := line(p, defrag, palette[0], "defragmentation", false, true); err != nil {
		return nil, err
	}
	if err := line(p, stall, palette[1], "probe's longest stall", false, true); err != nil {
		return nil, err
	}
	if err := line(p, odefrag, palette[0], "defragmentation overlapping a compaction", true, true); err != nil {
		return nil, err
	}
	if err := line(p, ostall, palette[1], "probe's longest stall, overlapping", true, true); err != nil {
		return nil, err
	}
	p.X.Min, p.Y.Min = 0, 0
	return p, nil
}

func catchupFigure(r *experiment.Result, title string) (*plot.Plot, error) {
	cr := r.Catchup
	if cr == nil {
		return nil, nil
	}
	p := newPlot(title, "revisions behind", "time to be current again (ms)")
	var catchup, relist, unpaged, bound plotter.XYs
	for _, c := range cr.Cases {
		x := float64(c.Revisions)
		catchup = append(catchup, plotter.XY{X: x, Y: c.CatchupMs})
		relist = append(relist, plotter.XY{X: x, Y: c.RelistMs})
		unpaged = append(unpaged, plotter.XY{X: x, Y: c.RelistUnpaginatedMs})
		bound = append(bound, plotter.XY{X: x, Y: x / cr.Scenario.MaxRevisionsPerSecond * 1000})
	}
	if err := line(p, catchup, palette[0], "watch catch-up from the old revision", false, true); err != nil {
		return nil, err
	}
	if err := line(p, bound, palette[3], "etcd's pace: 1,000 revisions per 100 ms", true, false); err != nil {
		return nil, err
	}
	if err := line(p, relist, palette[1], fmt.Sprintf("relist of %d objects, pages of %d", cr.Scenario.Objects, cr.Scenario.PageSize), false, true); err != nil {
		return nil, err
	}
	if err := line(p, unpaged, palette[2], "relist, unpaginated", false, true); err != nil {
		return nil, err
	}
	p.X.Min, p.Y.Min = 0, 0
	return p, nil
}

func continuationFigure(r *experiment.Result, title string) (*plot.Plot, error) {
	cr := r.Continuation
	if cr == nil {
		return nil, nil
	}
	p := newPlot(title, "history kept by the compactor (lists' worth of revisions)", "median time per list, retries included (ms)")
	type key struct {
		pageSize int64
		fallback string
	}
	series := map[key]plotter.XYs{}
	var order []key
	control := map[int64]float64{}
	var xmax float64
	for _, c := range cr.Cases {
		if !c.Compacting {
			control[c.PageSize] = c.DurationP50Ms
			continue
		}
		if c.RetainLists <= 0 {
			continue
		}
		k := key{c.PageSize, c.Fallback}
		if _, ok := series[k]; !ok {
			order = append(order, k)
		}
		series[k] = append(series[k], plotter.XY{X: c.RetainLists, Y: c.DurationP50Ms})
		xmax = max(xmax, c.RetainLists)
	}
	if len(order) == 0 {
		return nil, nil
	}
	pages := map[int64]int{}
	for _, k := range order {
		if _, ok := pages[k.pageSize]; !ok {
			pages[k.pageSize] = len(pages)
		}
	}
	for _, k := range order {
		c := palette[pages[k.pageSize]%len(palette)]
		xys := series[k]
		sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
		label := fmt.Sprintf("page size %d, %s", k.pageSize, k.fallback)
		if err := line(p, xys, c, label, k.fallback == experiment.FallbackFullList, true); err != nil {
			return nil, err
		}
	}
	top := 0.0
	for _, xys := range series {
		for _, xy := range xys {
			top = max(top, xy.Y)
		}
	}
	for _, ps := range slices.Sorted(maps.Keys(control)) {
		d := control[ps]
		top = max(top, d)
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: d}, {X: xmax * 1.05, Y: d}})
		if err != nil {
			return nil, err
		}
		// Dotted and thin: a level to compare with, unlike the dashed
		// full-list fallback.
		l.Color, l.Width, l.Dashes = palette[pages[ps]%len(palette)], vg.Points(1), []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("page size %d, no compaction", ps), l)
	}
	p.X.Min, p.Y.Min = 0, 0
	p.Y.Max = top * 1.1
	return p, nil
}
