package main

import (
	"reflect"
	"testing"
)

func TestBenchMetrics(t *testing.T) {
	out := `goos: linux
BenchmarkKubeletWatches-2   	       1	2595421986 ns/op	         0.7908 cpu-s	  29317336 heap-B	       100.0 nodes
--- BENCH: BenchmarkKubeletWatches-2
    kubelet_bench_test.go:117: created 100 nodes
BenchmarkOther-2 1 5 ns/op 3 x
PASS
`
	tests := []struct {
		name string
		want map[string]float64
	}{
		{"BenchmarkKubeletWatches", map[string]float64{"ns/op": 2595421986, "cpu-s": 0.7908, "heap-B": 29317336, "nodes": 100}},
		{"BenchmarkMissing", map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := benchMetrics(out, tt.name); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
