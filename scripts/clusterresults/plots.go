package main

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot/plotter"

	"github.com/kubestore/etcdkit/pkg/plot"
	"github.com/kubestore/etcdkit/pkg/report"
)

// topResources is how many resources the writes figure draws on their
// own; the rest are summed as "other".
const topResources = 7

// writeFigures draws NAME-writes.png (etcd's writes per second by
// resource over the run, from the counting proxy) and NAME-db-size.png
// (etcd's db size and size in use over the run, from etcd's /metrics or
// the main member's Status)
// into dir, and returns the files written, for the README to link.
func writeFigures(dir, name string, r *report.RunResult) ([]string, error) {
	var figs []plot.Figure
	if s := r.EtcdWrites; s != nil && len(s.Samples) > 0 {
		f, err := writesFigure(name, s)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	if m := r.EtcdMetrics; m != nil && len(m.Samples) > 0 {
		var size, inUse plotter.XYs
		for _, s := range m.Samples {
			size = append(size, plotter.XY{X: s.AtMs / 1000, Y: float64(s.DBSizeBytes) / (1 << 20)})
			inUse = append(inUse, plotter.XY{X: s.AtMs / 1000, Y: float64(s.DBSizeInUseBytes) / (1 << 20)})
		}
		title := name + ": etcd db size over time (etcd_mvcc_db_total_size_in_bytes, _in_use_)"
		if m.Source == report.EtcdMetricsFromStatus {
			title = name + ": main etcd's db size over time (Maintenance Status DbSize, DbSizeInUse)"
		}
		if m.Errors > 0 {
			title += fmt.Sprintf("; %d reads failed, drawn across", m.Errors)
		}
		f, err := plot.Lines(name+"-db-size", title, "time since the run began (s)", "MiB",
			[]plot.Line{{Name: "file", Points: size}, {Name: "in use", Points: inUse, Dashed: true}})
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	var files []string
	for _, f := range figs {
		path := filepath.Join(dir, f.Name+".png")
		out, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		err = f.WritePNG(out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		files = append(files, f.Name+".png")
	}
	return files, nil
}

// writesFigure is the writes per second of the topResources resources
// with the most writes, and the others summed (writesLines).
func writesFigure(name string, s *report.EtcdWriteSeries) (plot.Figure, error) {
	return plot.Lines(name+"-writes", fmt.Sprintf("%s: etcd writes per second by resource (counting proxy)", name),
		"time since the run began (s)", "writes/s", writesLines(s))
}

// writesLines are writesFigure's lines: the topResources resources with
// the most writes in all, most first, then "other", their sum; each point
// the writes per second of a window of whole sampling intervals ending at
// its X, at most about 100 windows over the run.
func writesLines(s *report.EtcdWriteSeries) []plot.Line {
	totals := make([]int64, len(s.Resources))
	for _, sm := range s.Samples {
		for i, w := range sm.Writes {
			totals[i] += w
		}
	}
	order := make([]int, len(s.Resources))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Or(cmp.Compare(totals[b], totals[a]), cmp.Compare(a, b)) })
	top := order[:min(topResources, len(order))]
	lines := make([]plot.Line, len(top)+1)
	for k, i := range top {
		lines[k].Name = cmp.Or(s.Resources[i], "-")
	}
	lines[len(top)].Name = "other"
	// Sum the samples into at most about 100 windows of whole intervals,
	// so that a 16-minute run reads as a trend, not per-second noise.
	last := s.Samples[len(s.Samples)-1].AtMs
	window := s.IntervalMs * max(1, math.Ceil(last/100/s.IntervalMs))
	sums := make([]float64, len(lines))
	end := window
	flush := func() {
		for k := range lines {
			lines[k].Points = append(lines[k].Points, plotter.XY{X: end / 1000, Y: sums[k] / (window / 1000)})
			sums[k] = 0
		}
	}
	for _, sm := range s.Samples {
		for sm.AtMs > end+1e-9 {
			flush()
			end += window
		}
		for i, w := range sm.Writes {
			if k := slices.Index(top, i); k >= 0 {
				sums[k] += float64(w)
			} else {
				sums[len(top)] += float64(w)
			}
		}
	}
	flush()
	return lines
}
