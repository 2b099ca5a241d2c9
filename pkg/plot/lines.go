package plot

import (
	"fmt"

	"gonum.org/v1/plot/plotter"
)

// Line is one named series of a Lines figure: points in X order.
type Line struct {
	Name   string
	Points plotter.XYs
	Dashed bool
}

// Lines is a figure of lines on linear axes from 0 (the Y axis up to 5 %
// above the highest point), each in the next colour of the palette, in
// the order given; x and y label the axes. Lines without points are left
// out; it fails when none has any.
func Lines(name, title, x, y string, lines []Line) (Figure, error) {
	p := newPlot(title, x, y)
	top, drawn := 1.0, 0
	for i, l := range lines {
		for _, pt := range l.Points {
			top = max(top, pt.Y)
		}
		if err := line(p, l.Points, palette[i%len(palette)], l.Name, l.Dashed, false); err != nil {
			return Figure{}, err
		}
		if len(l.Points) > 0 {
			drawn++
		}
	}
	if drawn == 0 {
		return Figure{}, fmt.Errorf("figure %s: no points", name)
	}
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, top*1.05
	return Figure{Name: name, Title: title, p: p}, nil
}
