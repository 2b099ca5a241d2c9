package command

import (
	"fmt"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
)

// makeWatchTable lays a watch result out as metric/value rows.
func makeWatchTable(r *report.WatchResult) output.Table {
	v := r.Validation
	rows := [][]string{
		{"etcd", fmt.Sprintf("%s (%s)", r.Target.EtcdVersion, targetDescription(r.Target))},
		{"watchers", fmt.Sprintf("%d on %d streams over %d connections, prevKV %v", r.Scenario.Watchers, r.Scenario.Streams, r.Scenario.Connections, r.Scenario.PrevKV)},
		{"watch creation", lat(r.Creation)},
		{"puts completed / planned", fmt.Sprintf("%d / %d (%.0f/s)", r.Writes.Completed, r.Writes.Planned, r.Writes.ThroughputPerSecond)},
		{"put errors (timeouts)", fmt.Sprintf("%d (%d)", r.Writes.Errors, r.Writes.Timeouts)},
		{"put latency (from schedule)", lat(r.Writes.Latency)},
		{"events received / expected", fmt.Sprintf("%d / %d", r.Delivery.Events, r.ExpectedEvents)},
		{"events per second", fmt.Sprintf("%.0f", r.Delivery.EventsPerSecond)},
		{"delivery latency from commit", lat(r.Delivery.FromCommit)},
		{"delivery latency from send", lat(r.Delivery.FromSend)},
		{"violations", v.Summary()},
	}
	rows = append(rows, selfRows(r.Self)...)
	return output.Table{Header: []string{"metric", "value"}, Rows: rows}
}
