package plot

import (
	"bytes"
	"image/png"
	"testing"

	"gonum.org/v1/plot/plotter"
)

func TestLines(t *testing.T) {
	f, err := Lines("writes", "writes/s by resource", "s", "writes/s", []Line{
		{Name: "leases", Points: plotter.XYs{{X: 0, Y: 10}, {X: 1, Y: 12}}},
		{Name: "pods", Points: plotter.XYs{{X: 0, Y: 3}, {X: 1, Y: 40}}, Dashed: true},
		{Name: "empty"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.p.Y.Max != 42 {
		t.Errorf("got Y max %v, want 42 (5 %% above 40)", f.p.Y.Max)
	}
	var b bytes.Buffer
	if err := f.WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Dx(); got != 1152 {
		t.Errorf("got width %d px, want 1152", got)
	}
	if _, err := Lines("none", "", "", "", []Line{{Name: "empty"}}); err == nil {
		t.Error("got no error for a figure without points")
	}
}
