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
