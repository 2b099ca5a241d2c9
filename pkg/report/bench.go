package report

import (
	"time"
)

// Schema versions of the building-block results; they change like
// RunSchemaVersion. WatchSchemaVersion 2: delivery.fromResponse became
// delivery.fromResponse (DeliveryStats), as in RunSchemaVersion 4.
const (
	WatchSchemaVersion = 2
	PutSchemaVersion   = 1
	ListSchemaVersion  = 1
)

// WatchResult is the versioned result of `lwbench watch`: fan-out of puts
// to many watchers of one prefix.
type WatchResult struct {
	Kind          string    `json:"kind"`          // KindWatch
	SchemaVersion int       `json:"schemaVersion"` // WatchSchemaVersion
	StartedAt     time.Time `json:"startedAt"`     // when the run began, UTC
	// Interrupted is true when SIGINT or SIGTERM stopped the load during
	// its writes: the figures cover it until then.
	Interrupted bool          `json:"interrupted,omitempty"`
	Target      Target        `json:"target"`   // the etcd driven
	Scenario    WatchScenario `json:"scenario"` // the options
	// Creation is the time each Watch call took to return, which clientv3
	// does once etcd has created the watch.
	Creation Latency    `json:"creation"`
	Writes   WriteStats `json:"writes"` // the puts
	// ExpectedEvents is the number of events the watchers should get:
	// completed writes times watchers.
	ExpectedEvents int64         `json:"expectedEvents"`
	Delivery       DeliveryStats `json:"delivery"`   // events and latency, merged over watchers
	Validation     Validation    `json:"validation"` // every watch against the recorded history
	Intervals      []Interval    `json:"intervals"`  // one-second series from the first put
	Self           SelfStats     `json:"self"`       // lwbench's CPU and memory
}

// WatchScenario is the shape of a watch fan-out run.
type WatchScenario struct {
	Prefix      string `json:"prefix"`      // the prefix every watcher watches
	Watchers    int    `json:"watchers"`    // watches
	Streams     int    `json:"streams"`     // watch streams
	Connections int    `json:"connections"` // connections of the streams
	// Keys is the key space the puts go to; every watcher watches all of
	// it (the prefix).
	Keys int `json:"keys"`
	// ValueSize is the raw value size; 0 means Kubernetes pods (updates
	// with kube-apiserver's transactions).
	ValueSize          int     `json:"valueSize"`
	Puts               int64   `json:"puts"`                         // puts made
	PutRatePerSecond   float64 `json:"putRatePerSecond"`             // scheduled puts per second
	PutWorkers         int     `json:"putWorkers"`                   // put workers
	PutConnections     int     `json:"putConnections"`               // connections of the put workers
	PrevKV             bool    `json:"prevKV"`                       // watches asked for prevKV
	ProgressNotify     bool    `json:"progressNotify"`               // watches asked for progress notifications
	Seed               uint64  `json:"seed"`                         // seed of keys and objects
	ProgressNotifyNote string  `json:"progressNotifyNote,omitempty"` // reserved; empty
}

// PutResult is the versioned result of `lwbench put`: an open-loop write
// load alone.
type PutResult struct {
	Kind          string    `json:"kind"`          // KindPut
	SchemaVersion int       `json:"schemaVersion"` // PutSchemaVersion
	StartedAt     time.Time `json:"startedAt"`     // when the run began, UTC
	// Interrupted is true when SIGINT or SIGTERM stopped the load during
	// its writes: the figures cover it until then.
	Interrupted bool        `json:"interrupted,omitempty"`
	Target      Target      `json:"target"`    // the etcd driven
	Scenario    PutScenario `json:"scenario"`  // the options
	Writes      WriteStats  `json:"writes"`    // counts, throughput and latency from schedule
	Intervals   []Interval  `json:"intervals"` // one-second series
	Self        SelfStats   `json:"self"`      // lwbench's CPU and memory
}

// PutScenario is the shape of a put run.
type PutScenario struct {
	Prefix  string `json:"prefix"`  // key prefix
	Keys    int    `json:"keys"`    // key space, or pods seeded
	KeySize int    `json:"keySize"` // minimum raw key size, bytes
	// ValueSize is the raw value size; 0 means the Kubernetes workload
	// (pods, configmaps, events with kube-apiserver's transactions).
	ValueSize         int     `json:"valueSize"`
	Total             int64   `json:"total"`                       // ops scheduled
	RatePerSecond     float64 `json:"ratePerSecond"`               // scheduled ops per second
	Workers           int     `json:"workers"`                     // concurrent workers
	Connections       int     `json:"connections"`                 // connections of the workers
	Seed              uint64  `json:"seed"`                        // seed of keys and objects
	SequentialKeys    bool    `json:"sequentialKeys"`              // keys in turn instead of at random
	KubernetesObjects int     `json:"kubernetesObjects,omitempty"` // objects seeded by the Kubernetes workload
}

// ListResult is the versioned result of `lwbench list`: the cost of LISTs
// by object count, page size and mode.
type ListResult struct {
	Kind          string       `json:"kind"`          // KindList
	SchemaVersion int          `json:"schemaVersion"` // ListSchemaVersion
	StartedAt     time.Time    `json:"startedAt"`     // when the run began, UTC
	Target        Target       `json:"target"`        // the etcd driven
	Scenario      ListScenario `json:"scenario"`      // the options
	// Rows are ordered by objects, mode, then page size.
	Rows []ListRow `json:"rows"`
	Self SelfStats `json:"self"` // lwbench's CPU and memory
}

// ListScenario is the shape of a list run.
type ListScenario struct {
	Prefix       string   `json:"prefix"`       // --etcd-prefix
	Resource     string   `json:"resource"`     // pods or configmaps
	Objects      []int    `json:"objects"`      // object counts measured at, ascending
	PageSizes    []int64  `json:"pageSizes"`    // limits of full and keys-only lists; 0 unpaginated
	Modes        []string `json:"modes"`        // list modes
	Repeats      int      `json:"repeats"`      // lists per row
	Serializable bool     `json:"serializable"` // serializable reads
	Seed         uint64   `json:"seed"`         // seed of the objects
}

// ListRow is the cost of one kind of LIST at one object count.
type ListRow struct {
	Objects int `json:"objects"` // objects under the prefix
	// Mode is "full", "keys-only", "count-only" or "stream" (RangeStream).
	Mode string `json:"mode"`
	// PageSize is the limit per range request; 0 is unpaginated.
	PageSize int64 `json:"pageSize"`
	Lists    int   `json:"lists"` // lists measured
	// Pages, ObjectsReturned and ResponseBytes are per list; bytes are
	// the range responses' protobuf size.
	Pages           int     `json:"pages"`
	ObjectsReturned int64   `json:"objectsReturned"` // objects per list (count-only: the count)
	ResponseBytes   int64   `json:"responseBytes"`   // protobuf size of the responses per list
	Latency         Latency `json:"latency"`         // duration of each whole list
	// ObjectsPerSecond and MegabytesPerSecond use the median latency.
	ObjectsPerSecond   float64 `json:"objectsPerSecond"`
	MegabytesPerSecond float64 `json:"megabytesPerSecond"` // ResponseBytes/1e6 over the median latency
	Errors             int64   `json:"errors"`             // lists that failed
}
