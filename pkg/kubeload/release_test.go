package kubeload

import (
	"maps"
	"testing"

	"github.com/kubestore/etcdkit/internal/release"
)

// TestGateDefault holds the release table to kube_features.go of each
// release: EtcdRangeStream in 1.37 and 1.38, on; WatchList on in all four.
func TestGateDefault(t *testing.T) {
	tests := []struct {
		version, gate string
		wantDef       bool
		wantOK        bool
	}{
		{"1.35.4", GateEtcdRangeStream, false, false},
		{"1.36.3", GateEtcdRangeStream, false, false},
		{"1.36", GateEtcdRangeStream, false, false},
		{"1.37.2", GateEtcdRangeStream, true, true},
		{"v1.37.2", GateEtcdRangeStream, true, true},
		{"1.35.4", GateWatchList, true, true},
		{"1.36.3", GateWatchList, true, true},
		{"1.37.2", GateWatchList, true, true},
		{"1.38.0-beta.0", GateEtcdRangeStream, true, true},
		{"1.38.0-beta.0", GateWatchList, true, true},
		{"1.37.2", "ConsistentListFromCache", false, false},
		{"1.34.0", GateWatchList, false, false},
	}
	for _, tt := range tests {
		def, ok := GateDefault(tt.version, tt.gate)
		if def != tt.wantDef || ok != tt.wantOK {
			t.Errorf("GateDefault(%q, %q) = %v, %v; want %v, %v", tt.version, tt.gate, def, ok, tt.wantDef, tt.wantOK)
		}
	}
}

// TestGatesOfEveryRelease: every Kubernetes line lwbench builds
// (release.Kubernetes) has its gates in the table; WatchList exists in
// all of them.
func TestGatesOfEveryRelease(t *testing.T) {
	for _, l := range release.Kubernetes.Lines {
		if _, ok := GateDefault(l.Default, GateWatchList); !ok {
			t.Errorf("GateDefault(%q, %q): got absent, want the release's default in releaseGates", l.Default, GateWatchList)
		}
	}
}

// TestParseFeatureGates parses as component-base's featuregate Set does.
func TestParseFeatureGates(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]bool
		wantErr string
	}{
		{"", map[string]bool{}, ""},
		{"EtcdRangeStream=false", map[string]bool{"EtcdRangeStream": false}, ""},
		{" EtcdRangeStream = true ,WatchList=0,,", map[string]bool{"EtcdRangeStream": true, "WatchList": false}, ""},
		{"WatchList=true,WatchList=false", map[string]bool{"WatchList": false}, ""},
		{"EtcdRangeStream", nil, "missing bool value for EtcdRangeStream"},
		{"EtcdRangeStream=maybe", nil, "invalid value of EtcdRangeStream=maybe: want true or false"},
	}
	for _, tt := range tests {
		got, err := ParseFeatureGates(tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("ParseFeatureGates(%q): error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tt.want) {
			t.Errorf("ParseFeatureGates(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
