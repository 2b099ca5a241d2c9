package main

import (
	"cmp"
	"fmt"
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
// (etcd's db size and size in use over the run, from etcd's /metrics)
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
		f, err := plot.Lines(name+"-db-size", name+": etcd db size over time (etcd_mvcc_db_total_size_in_bytes, _in_use_)", "time since the run began (s)", "MiB",
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
	return plot.Lines(name+"-writes", fmt.Sprintf("%s: etcd writes per second by resource (counting proxy, every %.0f s)", name, s.IntervalMs/1000),
		"time since the run began (s)", "writes/s", writesLines(s))
}

// writesLines are writesFigure's lines: the topResources resources with
// the most writes in all, most first, then "other", their sum.
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
	seconds := s.IntervalMs / 1000
	for _, sm := range s.Samples {
		x := sm.AtMs / 1000
		var other int64
		for i, w := range sm.Writes {
			if k := slices.Index(top, i); k >= 0 {
				continue
			}
			other += w
		}
		for k, i := range top {
			var w int64
			if i < len(sm.Writes) {
				w = sm.Writes[i]
			}
			lines[k].Points = append(lines[k].Points, plotter.XY{X: x, Y: float64(w) / seconds})
		}
		lines[len(top)].Points = append(lines[len(top)].Points, plotter.XY{X: x, Y: float64(other) / seconds})
	}
	return lines
}
