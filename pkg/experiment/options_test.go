package experiment

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestOptionsFieldPaths: every experiment's Validate names the field of
// each error, so that lwbench can name the flag.
func TestOptionsFieldPaths(t *testing.T) {
	c := Common{NewTarget: func(context.Context, string) (watchload.Target, func(), error) {
		return watchload.Target{}, func() {}, nil
	}}
	for _, tt := range []struct {
		name      string
		err       error
		wantPaths []string
	}{
		{"relist-storm defaults", RelistStormOptions{Common: c}.Defaults().Validate(), nil},
		{"relist-storm NaN write rate", RelistStormOptions{Common: c, WriteRate: math.NaN()}.Defaults().Validate(), []string{"writeRate"}},
		{"relist-storm tiny write rate", RelistStormOptions{Common: c, WriteRate: 1e-300}.Defaults().Validate(), []string{"writeRate"}},
		{"relist-storm connections beyond the bound", RelistStormOptions{Common: c, Connections: 1e6}.Defaults().Validate(), []string{"connections"}},
		{"relist-storm descending objects", RelistStormOptions{Common: c, Objects: []int{5, 3}}.Defaults().Validate(), []string{"objects[1]"}},
		{"infinite probe rate", RelistStormOptions{Common: Common{NewTarget: c.NewTarget, Probe: probeRate(math.Inf(1))}}.Defaults().Validate(), []string{"probeRate"}},
		{"bad prefix", CatchupOptions{Common: Common{NewTarget: c.NewTarget, Prefix: "registry"}}.Defaults().Validate(), []string{"prefix"}},
		{"no target factory", CatchupOptions{}.Defaults().Validate(), []string{"newTarget"}},
		{"continuation retain-lists", ContinuationOptions{Common: c, RetainLists: []float64{1, math.NaN()}}.Defaults().Validate(), []string{"retainLists[1]"}},
		{"continuation infinite write rate", ContinuationOptions{Common: c, WriteRate: math.Inf(1)}.Defaults().Validate(), []string{"writeRate"}},
		{"sweep no write in the duration", CompactionSweepOptions{Common: c, WriteRate: 0.01, Duration: time.Second}.Defaults().Validate(), []string{"writeRate"}},
		{"sweep flaky and disconnect-every", CompactionSweepOptions{Common: c, Flaky: 20, Disconnect: time.Minute}.Defaults().Validate(), []string{"flaky", "disconnectEvery"}},
		{"defrag-stall sizes", DefragStallOptions{Common: c, Sizes: []int64{2e6, 1e3}}.Defaults().Validate(), []string{"sizes[1]", "sizes[1]"}},
		{"catchup behind", CatchupOptions{Common: c, Behind: []int64{-1}}.Defaults().Validate(), []string{"behind[0]"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			if tt.err != nil {
				var agg utilerrors.Aggregate
				if !errors.As(tt.err, &agg) {
					t.Fatalf("got %T %v, want an aggregate of field errors", tt.err, tt.err)
				}
				for _, e := range agg.Errors() {
					var fe *field.Error
					if !errors.As(e, &fe) {
						t.Fatalf("got %T %v, want *field.Error", e, e)
					}
					got = append(got, fe.Field)
				}
			}
			if !slices.Equal(got, tt.wantPaths) {
				t.Errorf("got field paths %q, want %q (error: %v)", got, tt.wantPaths, tt.err)
			}
		})
	}
}

func probeRate(r float64) compaction.ProbeOptions { return compaction.ProbeOptions{RatePerSecond: r} }
