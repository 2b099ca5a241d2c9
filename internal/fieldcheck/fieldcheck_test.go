package fieldcheck

import (
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestChecks(t *testing.T) {
	p := field.NewPath("x")
	for _, tt := range []struct {
		name string
		errs field.ErrorList
		want string // "" for none
	}{
		{"rate ok", Rate(200, p), ""},
		{"rate NaN", Rate(math.NaN(), p), "x: Invalid value: NaN: must be finite and positive"},
		{"rate +Inf", Rate(math.Inf(1), p), "x: Invalid value: +Inf: must be finite and positive"},
		{"rate zero", Rate(0, p), "x: Invalid value: 0: must be finite and positive"},
		{"rate tiny", Rate(1e-300, p), "x: Invalid value: 1e-300: must be at least 0.001 per second"},
		{"rate huge", Rate(1e9, p), "x: Invalid value: 1e+09: must be at most 1e+07 per second (1e6 already measures etcd's ceiling)"},
		{"optional rate zero", OptionalRate(0, p), ""},
		{"optional rate negative", OptionalRate(-1, p), ""},
		{"optional rate -Inf", OptionalRate(math.Inf(-1), p), "x: Invalid value: -Inf: must be finite and positive"},
		{"positive", Positive(0, p), "x: Invalid value: 0: must be greater than 0"},
		{"non-negative", NonNegative(int64(-2), p), "x: Invalid value: -2: must be greater than or equal to 0"},
		{"at most", AtMost(5, 4, "the limit", p), "x: Invalid value: 5: must not exceed the limit (4)"},
		{"duration", PositiveDuration(-time.Second, p), `x: Invalid value: "-1s": must be greater than 0`},
		{"planned none", PlannedWrites(0.01, 10*time.Second, 100, p), "x: Invalid value: 0.01: plans no write in a duration of 10s"},
		{"planned too many", PlannedWrites(20, 10*time.Second, 100, p), "x: Invalid value: 20: plans 200 writes in a duration of 10s, more than 100"},
		{"ascending", Ascending([]int{1, 3, 3}, true, p), "x[2]: Invalid value: 3: must be greater than the value before it (values ascending)"},
		{"ascending positive", Ascending([]int64{0, 3}, true, p), "x[0]: Invalid value: 0: must be greater than 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := tt.errs.ToAggregate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
