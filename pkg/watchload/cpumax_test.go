package watchload

import "testing"

func TestParseCPUMax(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    float64
		wantErr bool
	}{
		{"unlimited", "max 100000\n", 0, false},
		{"two cores", "200000 100000\n", 2, false},
		{"half a core", "50000 100000", 0.5, false},
		{"another period", "150000 50000", 3, false},
		{"empty", "", 0, true},
		{"quota only", "200000", 0, true},
		{"three fields", "200000 100000 1", 0, true},
		{"zero period", "200000 0", 0, true},
		{"bad quota", "lots 100000", 0, true},
		{"negative quota", "-1 100000", 0, true},
		{"bad period", "max x", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCPUMax(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseCPUMax(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
