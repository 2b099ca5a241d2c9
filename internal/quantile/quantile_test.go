package quantile

import "testing"

func TestNearestRank(t *testing.T) {
	tests := []struct {
		name   string
		sorted []float64
		q      float64
		want   float64
	}{
		{"none", nil, 0.5, 0},
		{"one", []float64{7}, 0.99, 7},
		{"median of four", []float64{1, 2, 3, 4}, 0.5, 2},
		{"median of five", []float64{1, 2, 3, 4, 5}, 0.5, 3},
		{"p99 of 100", seq(100), 0.99, 99},
		{"p99 of 101", seq(101), 0.99, 100},
		{"max", []float64{1, 2, 3}, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NearestRank(tt.sorted, tt.q); got != tt.want {
				t.Errorf("NearestRank(%d samples, %v): got %v, want %v", len(tt.sorted), tt.q, got, tt.want)
			}
		})
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}
