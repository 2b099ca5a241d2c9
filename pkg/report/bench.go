package report

import (
	"fmt"
	"time"
)

// Schema versions of the building-block results; they change like
// RunSchemaVersion.
const (
	WatchSchemaVersion = 1
	PutSchemaVersion   = 1
	ListSchemaVersion  = 1
)

// WatchResult is the versioned result of `lwbench watch`: fan-out of puts
// to many watchers of one prefix.
type WatchResult struct {
	SchemaVersion int           `json:"schemaVersion"`
	StartedAt     time.Time     `json:"startedAt"`
	Target        Target        `json:"target"`
	Scenario      WatchScenario `json:"scenario"`
	// Creation is the time each Watch call took to return, which clientv3
	// does once etcd has created the watch.
	Creation Latency    `json:"creation"`
	Writes   WriteStats `json:"writes"`
	// ExpectedEvents is the number of events the watchers should get:
	// completed writes times watchers.
	ExpectedEvents int64         `json:"expectedEvents"`
	Delivery       DeliveryStats `json:"delivery"`
	Validation     Validation    `json:"validation"`
	Intervals      []Interval    `json:"intervals"`
	Self           SelfStats     `json:"self"`
}

// WatchScenario is the shape of a watch fan-out run.
type WatchScenario struct {
	Prefix      string `json:"prefix"`
	Watchers    int    `json:"watchers"`
	Streams     int    `json:"streams"`
	Connections int    `json:"connections"`
	// Keys is the key space the puts go to; every watcher watches all of
	// it (the prefix).
	Keys int `json:"keys"`
	// ValueSize is the raw value size; 0 means Kubernetes pods (updates
	// with kube-apiserver's transactions).
	ValueSize          int     `json:"valueSize"`
	Puts               int64   `json:"puts"`
	PutRatePerSecond   float64 `json:"putRatePerSecond"`
	PutWorkers         int     `json:"putWorkers"`
	PutConnections     int     `json:"putConnections"`
	PrevKV             bool    `json:"prevKV"`
	ProgressNotify     bool    `json:"progressNotify"`
	Seed               uint64  `json:"seed"`
	ProgressNotifyNote string  `json:"progressNotifyNote,omitempty"`
}

// PutResult is the versioned result of `lwbench put`: an open-loop write
// load alone.
type PutResult struct {
	SchemaVersion int         `json:"schemaVersion"`
	StartedAt     time.Time   `json:"startedAt"`
	Target        Target      `json:"target"`
	Scenario      PutScenario `json:"scenario"`
	Writes        WriteStats  `json:"writes"`
	Intervals     []Interval  `json:"intervals"`
	Self          SelfStats   `json:"self"`
}

// PutScenario is the shape of a put run.
type PutScenario struct {
	Prefix  string `json:"prefix"`
	Keys    int    `json:"keys"`
	KeySize int    `json:"keySize"`
	// ValueSize is the raw value size; 0 means the Kubernetes workload
	// (pods, configmaps, events with kube-apiserver's transactions).
	ValueSize         int     `json:"valueSize"`
	Total             int64   `json:"total"`
	RatePerSecond     float64 `json:"ratePerSecond"`
	Workers           int     `json:"workers"`
	Connections       int     `json:"connections"`
	Seed              uint64  `json:"seed"`
	SequentialKeys    bool    `json:"sequentialKeys"`
	KubernetesObjects int     `json:"kubernetesObjects,omitempty"`
}

// ListResult is the versioned result of `lwbench list`: the cost of LISTs
// by object count, page size and mode.
type ListResult struct {
	SchemaVersion int          `json:"schemaVersion"`
	StartedAt     time.Time    `json:"startedAt"`
	Target        Target       `json:"target"`
	Scenario      ListScenario `json:"scenario"`
	// Rows are ordered by objects, mode, then page size.
	Rows []ListRow `json:"rows"`
	Self SelfStats `json:"self"`
}

// ListScenario is the shape of a list run.
type ListScenario struct {
	Prefix       string   `json:"prefix"`
	Resource     string   `json:"resource"`
	Objects      []int    `json:"objects"`
	PageSizes    []int64  `json:"pageSizes"`
	Modes        []string `json:"modes"`
	Repeats      int      `json:"repeats"`
	Serializable bool     `json:"serializable"`
	Seed         uint64   `json:"seed"`
}

// ListRow is the cost of one kind of LIST at one object count.
type ListRow struct {
	Objects int `json:"objects"`
	// Mode is "full", "keys-only", "count-only" or "stream" (RangeStream).
	Mode string `json:"mode"`
	// PageSize is the limit per range request; 0 is unpaginated.
	PageSize int64 `json:"pageSize"`
	Lists    int   `json:"lists"`
	// Pages, ObjectsReturned and ResponseBytes are per list; bytes are
	// the range responses' protobuf size.
	Pages           int     `json:"pages"`
	ObjectsReturned int64   `json:"objectsReturned"`
	ResponseBytes   int64   `json:"responseBytes"`
	Latency         Latency `json:"latency"`
	// ObjectsPerSecond and MegabytesPerSecond use the median latency.
	ObjectsPerSecond   float64 `json:"objectsPerSecond"`
	MegabytesPerSecond float64 `json:"megabytesPerSecond"`
	Errors             int64   `json:"errors"`
}

// MakeWatchTable lays a watch result out as metric/value rows.
func MakeWatchTable(r *WatchResult) Table {
	v := r.Validation
	rows := [][]string{
		{"etcd", fmt.Sprintf("%s (%s)", r.Target.EtcdVersion, targetKind(r.Target))},
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
	return Table{Header: []string{"metric", "value"}, Rows: rows}
}

// MakePutTable lays a put result out as metric/value rows.
func MakePutTable(r *PutResult) Table {
	rows := [][]string{
		{"etcd", fmt.Sprintf("%s (%s)", r.Target.EtcdVersion, targetKind(r.Target))},
		{"workers / connections", fmt.Sprintf("%d / %d", r.Scenario.Workers, r.Scenario.Connections)},
		{"completed / planned", fmt.Sprintf("%d / %d", r.Writes.Completed, r.Writes.Planned)},
		{"throughput", fmt.Sprintf("%.0f/s (scheduled %.0f/s)", r.Writes.ThroughputPerSecond, r.Scenario.RatePerSecond)},
		{"errors (timeouts)", fmt.Sprintf("%d (%d)", r.Writes.Errors, r.Writes.Timeouts)},
		{"latency (from schedule)", lat(r.Writes.Latency)},
	}
	rows = append(rows, selfRows(r.Self)...)
	return Table{Header: []string{"metric", "value"}, Rows: rows}
}

// MakeListTable lays a list result out, one row per ListRow.
func MakeListTable(r *ListResult) Table {
	t := Table{
		Header:  []string{"objects", "mode", "page size", "pages", "objects returned", "response bytes", "p50 ms", "p99 ms", "max ms", "objects/s", "MB/s", "errors"},
		Numeric: []bool{true, false, true, true, true, true, true, true, true, true, true, true},
	}
	for _, row := range r.Rows {
		ps := fmt.Sprint(row.PageSize)
		if row.PageSize == 0 {
			ps = "none"
		}
		t.Rows = append(t.Rows, []string{fmt.Sprint(row.Objects), row.Mode, ps, fmt.Sprint(row.Pages), fmt.Sprint(row.ObjectsReturned),
			fmt.Sprint(row.ResponseBytes), fmt.Sprintf("%.2f", row.Latency.P50Ms), fmt.Sprintf("%.2f", row.Latency.P99Ms),
			fmt.Sprintf("%.2f", row.Latency.MaxMs), fmt.Sprintf("%.0f", row.ObjectsPerSecond), fmt.Sprintf("%.1f", row.MegabytesPerSecond),
			fmt.Sprint(row.Errors)})
	}
	return t
}
