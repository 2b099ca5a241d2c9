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
		{"delivery latency from commit", lat(r.Delivery.FromResponse)},
		{"delivery latency from send", lat(r.Delivery.FromSend)},
		{"violations", v.Summary()},
	}
	rows = append(rows, selfRows(r.Self)...)
	return output.Table{Header: []string{"metric", "value"}, Rows: rows}
}

// makeWatchCSVTable lays a watch result out as one row of figures, what
// `lwbench watch -w csv` prints.
func makeWatchCSVTable(r *report.WatchResult) output.Table {
	f := newFigures()
	f.target(r.Target)
	f.int("watchers", int64(r.Scenario.Watchers))
	f.int("streams", int64(r.Scenario.Streams))
	f.int("connections", int64(r.Scenario.Connections))
	f.latency("watch_creation", r.Creation)
	f.writes("put", r.Writes)
	f.int("events", r.Delivery.Events)
	f.int("expected_events", r.ExpectedEvents)
	f.float("events_per_second", r.Delivery.EventsPerSecond)
	f.latency("delivery_from_commit", r.Delivery.FromResponse)
	f.latency("delivery_from_send", r.Delivery.FromSend)
	f.int("lost_events", r.Validation.Lost)
	f.int("duplicated_events", r.Validation.Duplicated)
	f.self(r.Self)
	return f.t
}
