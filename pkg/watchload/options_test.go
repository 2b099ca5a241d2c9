package watchload

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fieldErrors returns the field errors err wraps, in order.
func fieldErrors(t *testing.T, err error) []*field.Error {
	t.Helper()
	if err == nil {
		return nil
	}
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("got %T %v, want an aggregate of field errors", err, err)
	}
	var out []*field.Error
	for _, e := range agg.Errors() {
		var fe *field.Error
		if !errors.As(e, &fe) {
			t.Fatalf("got %T %v in the aggregate, want *field.Error", e, e)
		}
		out = append(out, fe)
	}
	return out
}

func paths(errs []*field.Error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func TestOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		name       string
		change     func(*Options)
		wantPaths  []string
		wantDetail string
	}{
		{"defaults", func(*Options) {}, nil, ""},
		{"NaN rate", func(o *Options) { o.WriteRate = math.NaN() }, []string{"writeRate"}, "must be finite and positive"},
		{"infinite rate", func(o *Options) { o.WriteRate = math.Inf(1) }, []string{"writeRate"}, "must be finite and positive"},
		{"negative rate", func(o *Options) { o.WriteRate = -1 }, []string{"writeRate"}, "must be finite and positive"},
		{"rate of no write", func(o *Options) { o.WriteRate = 1e-300 }, []string{"writeRate"}, "at least 0.001"},
		{"no write in the duration", func(o *Options) { o.WriteRate, o.Duration = 0.01, time.Second }, []string{"writeRate"}, "plans no write"},
		{"too many writes", func(o *Options) { o.WriteRate, o.Duration = 1e7, time.Hour }, []string{"writeRate"}, "more than 100000000"},
		{"zero duration", func(o *Options) { o.Duration = 0 }, []string{"duration"}, "greater than 0"},
		{"hold back more than the watchers", func(o *Options) { o.HoldBack = 11 }, []string{"holdBack"}, "must not exceed the number of watchers (10)"},
		{"every bad field at once", func(o *Options) { o.Watchers, o.Connections, o.WriterConcurrency = 0, -1, 0 },
			[]string{"watchers", "connections", "writerConcurrency"}, ""},
		{"writer workers beyond the bound", func(o *Options) { o.WriterConcurrency = 100000 }, []string{"writerConcurrency"}, "must not exceed the bound on writer workers (1000)"},
		{"connections beyond the bound", func(o *Options) { o.Connections = 5000 }, []string{"connections"}, "must not exceed the bound on connections (1000)"},
		{"mix", func(o *Options) { o.Mix = Mix{CreatePercent: 30, UpdatePercent: 30, DeletePercent: 30} }, []string{"mix"}, "sum to 100"},
		{"watch resource", func(o *Options) { o.WatchResources = []string{"pods", "secrets"} }, []string{"watchResources[1]"}, `supported values: "pods"`},
		{"profile", func(o *Options) { o.Profile = "kubelet" }, []string{"profile"}, ""},
		{"prefix", func(o *Options) { o.Prefix = "registry" }, []string{"prefix"}, "must start with '/'"},
		{"NaN probe rate", func(o *Options) { o.ProbeRate = math.NaN() }, []string{"probeRate"}, "finite"},
		{"overlapping faults", func(o *Options) {
			o.Faults = []Fault{{Kind: FaultKillLeader, At: time.Second, Duration: 5 * time.Second}, {Kind: FaultPauseLeader, At: 2 * time.Second, Duration: time.Second}}
		}, []string{"faults[1].at"}, "before the previous fault is undone"},
		{"fault kind", func(o *Options) { o.Faults = []Fault{{Kind: "explode", Duration: time.Second}} }, []string{"faults[0].kind"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{}.Defaults()
			tt.change(&o)
			errs := fieldErrors(t, o.Validate())
			if got := paths(errs); !slices.Equal(got, tt.wantPaths) {
				t.Fatalf("got field paths %q, want %q (errors: %v)", got, tt.wantPaths, errs)
			}
			if tt.wantDetail != "" && !strings.Contains(errs[0].Error(), tt.wantDetail) {
				t.Errorf("got %q, want it to contain %q", errs[0].Error(), tt.wantDetail)
			}
		})
	}
}

// TestOptionsValidateExplicitZero: options filled from Defaults and then
// changed (as lwbench's flags do) keep an explicit 0 that Defaults would
// replace, and Validate rejects it; the fields Defaults derives may be 0.
func TestOptionsValidateExplicitZero(t *testing.T) {
	o := Options{}.Defaults()
	o.Streams, o.PageSize, o.ConfigMaps, o.Events, o.CompactionInterval = 0, 0, 0, 0, 0
	if err := o.Validate(); err != nil {
		t.Fatalf("derived fields at 0: got %v, want no error", err)
	}
	o.WriteRate, o.Namespaces = 0, 0
	if got, want := paths(fieldErrors(t, o.Validate())), []string{"namespaces", "writeRate"}; !slices.Equal(got, want) {
		t.Errorf("got field paths %q, want %q", got, want)
	}
}

func TestBenchOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		name      string
		err       error
		wantPaths []string
	}{
		{"put defaults", PutOptions{}.Defaults().Validate(), nil},
		{"put NaN rate", PutOptions{Rate: math.NaN()}.Defaults().Validate(), []string{"writeRate"}},
		{"put schedule beyond a duration", PutOptions{Rate: 0.001, Total: 1e15}.Defaults().Validate(), []string{"writeRate"}},
		{"put more connections than workers", PutOptions{Workers: 2, Connections: 3}.Defaults().Validate(), []string{"writerConnections"}},
		{"put workers beyond the bound", PutOptions{Workers: 1e6}.Defaults().Validate(), []string{"writerConcurrency"}},
		{"put negative sizes", PutOptions{KeySize: -1, ValueSize: -1}.Defaults().Validate(), []string{"keySize", "valueSize"}},
		{"watch defaults", WatchOptions{}.Defaults().Validate(), nil},
		{"watch infinite rate", WatchOptions{PutRate: math.Inf(1)}.Defaults().Validate(), []string{"writeRate"}},
		{"watch more streams than watchers", WatchOptions{Watchers: 2, Streams: 3, Connections: 1}.Defaults().Validate(), []string{"streams"}},
		{"watch negative puts", WatchOptions{Puts: -5}.Defaults().Validate(), []string{"writes"}},
		{"list defaults", ListOptions{}.Defaults().Validate(), nil},
		{"list descending objects", ListOptions{Objects: []int{10, 5}}.Defaults().Validate(), []string{"objects[1]"}},
		{"list mode", ListOptions{Modes: []string{"full", "sideways"}}.Defaults().Validate(), []string{"modes[1]"}},
		{"list resource", ListOptions{Resource: "secrets"}.Defaults().Validate(), []string{"resource"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := paths(fieldErrors(t, tt.err)); !slices.Equal(got, tt.wantPaths) {
				t.Errorf("got field paths %q, want %q (error: %v)", got, tt.wantPaths, tt.err)
			}
		})
	}
}
