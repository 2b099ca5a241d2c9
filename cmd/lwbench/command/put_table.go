package command

import (
	"fmt"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
)

// makePutTable lays a put result out as metric/value rows.
func makePutTable(r *report.PutResult) output.Table {
	rows := [][]string{
		{"etcd", fmt.Sprintf("%s (%s)", r.Target.EtcdVersion, targetDescription(r.Target))},
		{"workers / connections", fmt.Sprintf("%d / %d", r.Scenario.Workers, r.Scenario.Connections)},
		{"completed / planned", fmt.Sprintf("%d / %d", r.Writes.Completed, r.Writes.Planned)},
		{"throughput", fmt.Sprintf("%.0f/s (scheduled %.0f/s)", r.Writes.ThroughputPerSecond, r.Scenario.RatePerSecond)},
		{"errors (timeouts)", fmt.Sprintf("%d (%d)", r.Writes.Errors, r.Writes.Timeouts)},
		{"latency (from schedule)", lat(r.Writes.Latency)},
	}
	rows = append(rows, selfRows(r.Self)...)
	return output.Table{Header: []string{"metric", "value"}, Rows: rows}
}

// makePutCSVTable lays a put result out as one row of figures, what
// `lwbench put -w csv` prints.
func makePutCSVTable(r *report.PutResult) output.Table {
	f := newFigures()
	f.target(r.Target)
	f.int("workers", int64(r.Scenario.Workers))
	f.int("connections", int64(r.Scenario.Connections))
	f.float("scheduled_per_second", r.Scenario.RatePerSecond)
	f.writes("op", r.Writes)
	f.self(r.Self)
	return f.t
}
