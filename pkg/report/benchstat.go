package report

import (
	"fmt"
	"io"
	"runtime"
	"strings"
)

// BenchstatLine is one result line in Go's benchmark format, which
// golang.org/x/perf/cmd/benchstat reads: "Benchmark<Name> 1 <value> <unit>
// ...". Units carry their meaning ("events/s", "p99-delivery-ms"); lower
// is better for every unit ending in "ms", higher for the rates.
type BenchstatLine struct {
	// Name follows "Benchmark", with sub-benchmark keys, e.g.
	// "LwbenchRun/profile=informer/watchers=10".
	Name    string
	Metrics []BenchstatMetric // values in order, ns/op first
}

// BenchstatMetric is one value and its unit.
type BenchstatMetric struct {
	Value float64 // the value
	Unit  string  // its unit, without spaces
}

// WriteBenchstat writes the configuration header benchstat groups by
// (goos, goarch, pkg, cpu) and the lines. cpu is the CPU model.
func WriteBenchstat(w io.Writer, cpu string, lines []BenchstatLine) error {
	var b strings.Builder
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\npkg: github.com/kubestore/etcdkit/cmd/lwbench\n", runtime.GOOS, runtime.GOARCH)
	if cpu != "" {
		fmt.Fprintf(&b, "cpu: %s\n", cpu)
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "Benchmark%s-%d\t1", l.Name, runtime.GOMAXPROCS(0))
		for _, m := range l.Metrics {
			fmt.Fprintf(&b, "\t%g %s", m.Value, m.Unit)
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func latencyMetrics(prefix string, l Latency) []BenchstatMetric {
	return []BenchstatMetric{
		{l.P50Ms, "p50-" + prefix + "-ms"},
		{l.P99Ms, "p99-" + prefix + "-ms"},
		{l.P999Ms, "p999-" + prefix + "-ms"},
	}
}

// RunBenchstat returns the benchstat line of a run.
func RunBenchstat(r *RunResult) []BenchstatLine {
	s := r.Scenario
	m := []BenchstatMetric{
		{s.DurationMs * 1e6, "ns/op"},
		{r.Writes.ThroughputPerSecond, "writes/s"},
		{r.Delivery.EventsPerSecond, "events/s"},
	}
	m = append(m, latencyMetrics("write", r.Writes.Latency)...)
	m = append(m, latencyMetrics("delivery", r.Delivery.FromResponse)...)
	m = append(m,
		BenchstatMetric{float64(len(r.Relists)), "relists"},
		BenchstatMetric{float64(r.Writes.Errors), "write-errors"},
		BenchstatMetric{r.Self.CPUCores, "lwbench-cores"},
	)
	return []BenchstatLine{{
		Name:    fmt.Sprintf("LwbenchRun/profile=%s/watchers=%d/rate=%g", s.Profile, s.Watchers, s.WriteRatePerSecond),
		Metrics: m,
	}}
}

// WatchBenchstat returns the benchstat line of a watch run.
func WatchBenchstat(r *WatchResult) []BenchstatLine {
	s := r.Scenario
	m := []BenchstatMetric{
		{r.Writes.DurationMs * 1e6, "ns/op"},
		{r.Delivery.EventsPerSecond, "events/s"},
		{r.Writes.ThroughputPerSecond, "puts/s"},
	}
	m = append(m, latencyMetrics("delivery", r.Delivery.FromResponse)...)
	m = append(m, latencyMetrics("creation", r.Creation)...)
	m = append(m, BenchstatMetric{r.Self.CPUCores, "lwbench-cores"})
	return []BenchstatLine{{
		Name:    fmt.Sprintf("LwbenchWatch/watchers=%d/streams=%d/conns=%d/keys=%d", s.Watchers, s.Streams, s.Connections, s.Keys),
		Metrics: m,
	}}
}

// PutBenchstat returns the benchstat line of a put run.
func PutBenchstat(r *PutResult) []BenchstatLine {
	s := r.Scenario
	m := []BenchstatMetric{
		{r.Writes.DurationMs * 1e6, "ns/op"},
		{r.Writes.ThroughputPerSecond, "puts/s"},
	}
	m = append(m, latencyMetrics("put", r.Writes.Latency)...)
	m = append(m, BenchstatMetric{float64(r.Writes.Errors), "errors"}, BenchstatMetric{r.Self.CPUCores, "lwbench-cores"})
	return []BenchstatLine{{
		Name:    fmt.Sprintf("LwbenchPut/workers=%d/conns=%d/value=%d", s.Workers, s.Connections, s.ValueSize),
		Metrics: m,
	}}
}

// ListBenchstat returns one benchstat line per list row.
func ListBenchstat(r *ListResult) []BenchstatLine {
	var out []BenchstatLine
	for _, row := range r.Rows {
		m := []BenchstatMetric{{row.Latency.MeanMs * 1e6, "ns/op"}}
		m = append(m, latencyMetrics("list", row.Latency)...)
		m = append(m, BenchstatMetric{row.ObjectsPerSecond, "objects/s"}, BenchstatMetric{float64(row.ResponseBytes), "B/list"})
		out = append(out, BenchstatLine{
			Name:    fmt.Sprintf("LwbenchList/objects=%d/mode=%s/page=%d", row.Objects, row.Mode, row.PageSize),
			Metrics: m,
		})
	}
	return out
}
