package report

import "time"

// APIServerTarget describes the kube-apiservers a RunResult's load went
// through and the client-go clients' settings.
type APIServerTarget struct {
	// Version is kube-apiserver's version as /version reports it.
	Version string `json:"version"`
	// Servers is the number of kube-apiservers; 0 with --kubeconfig
	// (unknown to lwbench).
	Servers int `json:"servers"`
	// Managed is true when lwbench started them (false: --kubeconfig).
	Managed bool `json:"managed"`
	// URL is the server the clients talked to, as the kubeconfig names
	// it; "" when lwbench started the apiservers.
	URL string `json:"url,omitempty"`
	// WatchCache is kube-apiserver's --watch-cache; false with
	// --kubeconfig (unknown to lwbench).
	WatchCache bool `json:"watchCache"`
	// EtcdCompactionIntervalMs is --etcd-compaction-interval (0: off);
	// with --kubeconfig the cluster's as --compaction-interval gave it
	// (0: unknown).
	EtcdCompactionIntervalMs float64 `json:"etcdCompactionIntervalMs"`
	// FeatureGates is --feature-gates as passed ("" none).
	FeatureGates string `json:"featureGates,omitempty"`
	// Args are the further command-line flags lwbench passed
	// (--apiserver-arg), in order; none: nil.
	Args []string `json:"args,omitempty"`
	// ClientWatchList is client-go's WatchListClient gate in the
	// informers: "on", "off", or "default" (client-go's own default).
	ClientWatchList string `json:"clientWatchList"`
	// Connections is the layout of the informers' and writers'
	// connections to kube-apiserver: "per-client" (one TCP connection
	// each, as separate processes have) or "shared" (one HTTP/2
	// connection for all, as one process's clientsets share;
	// --shared-connection); "" in results written before it was recorded.
	Connections string `json:"connections,omitempty"`
	// ClientConnections counts the TCP connections to kube-apiserver the
	// informers and writers held open at the end of the run (lwbench's
	// own requests apart): as many as informers and writer workers when
	// per-client, 1 when shared; 0 when not recorded.
	ClientConnections int64 `json:"clientConnections,omitempty"`
}

// RequestCount counts informer requests of one verb and outcome.
type RequestCount struct {
	Verb    string `json:"verb"`    // list, watch or watchlist
	Outcome string `json:"outcome"` // ok, closed, stopped, expired, too-large-rv, throttled, error
	// ResourceVersion is the kind of resourceVersion asked for: "" (a
	// quorum read of the latest), "0" (any) or "exact" (a revision).
	ResourceVersion string `json:"resourceVersion"`
	Count           int64  `json:"count"`
	Objects         int64  `json:"objects"` // list items or initial events
	Bytes           int64  `json:"bytes"`   // response bytes
}

// Hold is one informer held back across a compaction: its watch was
// broken off at HeldAtMs and it could not list or watch until
// ReleasedAtMs.
type Hold struct {
	Informer     int     `json:"informer"`
	HeldAtMs     float64 `json:"heldAtMs"`
	ReleasedAtMs float64 `json:"releasedAtMs"`
	// HeldRevision is the last resourceVersion it had seen when held.
	HeldRevision int64 `json:"heldRevision"`
	// Compacted is true when etcd was compacted past HeldRevision+1
	// before the release (its next watch must fail with 410 if it goes to
	// etcd).
	Compacted bool `json:"compacted"`
}

// APIServerUsage is one kube-apiserver's CPU and memory over the load,
// from its own process_cpu_seconds_total and process_resident_memory_bytes
// at every phase boundary and, when it runs on this machine, its resident
// set in /proc sampled every 250 ms.
type APIServerUsage struct {
	// Server names it (apiserver0, ...).
	Server string `json:"server"`
	// PID is its process ID on this machine; 0 when unknown.
	PID int `json:"pid,omitempty"`
	// CPUSeconds is the user and system CPU time it used from the first
	// scrape (before seeding) to the last (after the drain).
	CPUSeconds float64 `json:"cpuSeconds"`
	// PeakResidentMemoryBytes is the highest resident set seen;
	// FinalResidentMemoryBytes the one at the last scrape.
	PeakResidentMemoryBytes  int64 `json:"peakResidentMemoryBytes"`
	FinalResidentMemoryBytes int64 `json:"finalResidentMemoryBytes"`
	// Phases are the same figures per phase, in the order the phases
	// began.
	Phases []APIServerPhaseUsage `json:"phases"`
}

// APIServerPhaseUsage is one kube-apiserver's CPU and memory in one phase
// (summed over the phase's stretches when it was entered more than once).
type APIServerPhaseUsage struct {
	Phase      string  `json:"phase"`
	DurationMs float64 `json:"durationMs"`
	CPUSeconds float64 `json:"cpuSeconds"`
	// PeakResidentMemoryBytes is the highest resident set seen in it,
	// ResidentMemoryBytes the one at its (last) end.
	PeakResidentMemoryBytes int64 `json:"peakResidentMemoryBytes"`
	ResidentMemoryBytes     int64 `json:"residentMemoryBytes"`
}

// APIServerMetric is one series of a kube-apiserver's own /metrics in one
// phase, its labels reduced to those kept (the others summed over).
type APIServerMetric struct {
	Server string `json:"server"`
	Phase  string `json:"phase"`
	// Name is the metric's name, e.g. apiserver_storage_list_total; a
	// histogram gives two series, <name>_count and <name>_sum.
	Name string `json:"name"`
	// Labels are the labels kept (e.g. resource, storage); empty values
	// are left out.
	Labels map[string]string `json:"labels,omitempty"`
	// Value is a counter's increase over the phase, or, for a gauge
	// (Gauge true), its value at the phase's end.
	Value float64 `json:"value"`
	Gauge bool    `json:"gauge,omitempty"`
}

// EtcdRequests counts requests of one kind, touching one resource, that
// the apiservers sent etcd in one phase.
type EtcdRequests struct {
	// Phase is the load's phase: seed, sync, steady, held, released,
	// defrag, drain; a phase that began after kube-apiserver's Nth
	// compaction is "<phase> after compaction N" (defrag excepted).
	Phase  string `json:"phase"`
	Method string `json:"method"` // the gRPC method without its service, e.g. Range
	// Kind is the request's shape, e.g. "range limit=500" or "watch
	// create"; see internal/etcdproxy.
	Kind string `json:"kind"`
	// Resource is the resource the requests touch, named from their key
	// in kubectl's resource.group spelling ("pods",
	// "leases.coordination.k8s.io"), or "(compact_rev_key)", "(outside
	// prefix)", "(whole prefix)"; watch responses count under their
	// watch's resource. "" for requests without a key (leases, Compact,
	// Status, progress requests) and in results written before lwbench
	// counted by resource (internal/etcdproxy Row.Resource).
	Resource string `json:"resource,omitempty"`
	// Namespace, Name and PrefixKey are set only in the rows the periodic
	// traffic is found in (internal/etcdproxy Row's): a single Lease's
	// namespace, a kube-system Lease's name, a read of the resource's
	// prefix key (kube-apiserver's object count poll); never in Etcd.
	Namespace     string `json:"namespace,omitempty"`
	Name          string `json:"name,omitempty"`
	PrefixKey     bool   `json:"prefixKey,omitempty"`
	Requests      int64  `json:"requests"`
	RequestBytes  int64  `json:"requestBytes"` // protobuf payload bytes, without gRPC framing
	Responses     int64  `json:"responses"`
	ResponseBytes int64  `json:"responseBytes"`
	// Items are the keys of range responses and the events of watch
	// responses.
	Items int64 `json:"items"`
	// Errors are the calls that ended with a gRPC status other than OK
	// (cancellations by the apiserver included).
	Errors int64 `json:"errors"`
	// FailedCompares are the Txn responses whose compares did not hold
	// (internal/etcdproxy Row.FailedCompares): writes from a stale
	// object, which wrote nothing and made no watch event. Absent in
	// results written before lwbench counted them.
	FailedCompares int64 `json:"failedCompares,omitempty"`
}

// EtcdPhase is how long the counting proxy counted into one phase of
// EtcdRequests, to make rates of its counts.
type EtcdPhase struct {
	Phase string `json:"phase"` // as EtcdRequests.Phase
	// StartedAt is when the phase was first set, UTC.
	StartedAt time.Time `json:"startedAt"`
	// DurationMs is how long it was the current phase, summed over every
	// time it was set, up to when the counts were read, ms.
	DurationMs float64 `json:"durationMs"`
}

// ConformanceSchemaVersion is the version of the Conformance JSON
// document.
const ConformanceSchemaVersion = 1

// Conformance is the result of `lwbench conformance`: the same load run
// through lwbench's etcd-direct model and through real kube-apiservers
// with client-go, and what etcd was asked in each, side by side.
type Conformance struct {
	Kind          string    `json:"kind"`          // KindConformance
	SchemaVersion int       `json:"schemaVersion"` // ConformanceSchemaVersion
	StartedAt     time.Time `json:"startedAt"`     // when it began, UTC
	// EtcdVersion and APIServerVersion are the versions of the stack.
	EtcdVersion      string `json:"etcdVersion"`
	APIServerVersion string `json:"apiserverVersion"`
	// Scenario is the load both sides ran.
	Scenario Scenario `json:"scenario"`
	// Cluster is the cluster both sides ran (lwbench conformance
	// --nodes: the model of a cluster against the real control plane,
	// compared by resource); nil otherwise.
	Cluster *ClusterScenario `json:"cluster,omitempty"`
	// FeatureGates is --apiserver-feature-gates as given ("" none): the
	// real kube-apiservers' --feature-gates, and the model's gates of
	// those it follows.
	FeatureGates string `json:"featureGates,omitempty"`
	// APIServerArgs are the real kube-apiservers' further command-line
	// flags (--apiserver-arg, e.g. --disable-admission-plugins=LimitRanger),
	// in order; none: nil.
	APIServerArgs []string `json:"apiServerArgs,omitempty"`
	// Cases are the real-stack settings compared, in order.
	Cases []ConformanceCase `json:"cases"`
}

// ConformanceCase compares one real-stack setting with the model profile
// that stands for it.
type ConformanceCase struct {
	// Name names the setting, e.g. "watch cache off, WatchList on".
	Name            string `json:"name"`
	WatchCache      bool   `json:"watchCache"`
	ClientWatchList string `json:"clientWatchList"` // on, off or default
	// ModelProfile is the etcd-direct model's profile it is compared with
	// (informer for the watch cache off, apiserver-cache for on).
	ModelProfile string `json:"modelProfile"`
	// ModelRangeStream is the model's EtcdRangeStream gate
	// (Scenario.RangeStream): --apiserver-feature-gates', else the
	// release's default, off in 1.35 and 1.36, which have no such gate;
	// absent from results written before lwbench recorded it (the model
	// then streamed).
	ModelRangeStream *bool `json:"modelRangeStream,omitempty"`
	// Rows are etcd's requests by method and kind over the whole load
	// (seeding apart), sorted by method and kind.
	Rows []ConformanceRow `json:"rows"`
	// Model and Real are the full counts, by phase.
	Model []EtcdRequests `json:"model"`
	Real  []EtcdRequests `json:"real"`
}

// ConformanceRow is one kind of etcd request as the model and the real
// stack sent it.
type ConformanceRow struct {
	// Resource is the resource the requests touch (EtcdRequests.Resource)
	// in a comparison by resource (a cluster's: lwbench conformance
	// --nodes); "" in one by method and kind alone.
	Resource string `json:"resource,omitempty"`
	Method   string `json:"method"`
	Kind     string `json:"kind"`
	// Model and Real count the requests (for watch responses, which have
	// no request, the responses).
	Model int64 `json:"model"`
	Real  int64 `json:"real"`
	// ModelBytes and RealBytes are the bytes both ways.
	ModelBytes int64 `json:"modelBytes"`
	RealBytes  int64 `json:"realBytes"`
	// ModelFailedCompares and RealFailedCompares are, of a Txn row's
	// requests, those whose compares did not hold (EtcdRequests.
	// FailedCompares): writes from a stale object that wrote nothing.
	ModelFailedCompares int64 `json:"modelFailedCompares,omitempty"`
	RealFailedCompares  int64 `json:"realFailedCompares,omitempty"`
	// Ratio is Model / Real (0 when Real is 0).
	Ratio float64 `json:"ratio"`
	// BytesRatio is ModelBytes / RealBytes (0 when RealBytes is 0).
	BytesRatio float64 `json:"bytesRatio"`
	// Within10 is true when the counts differ by at most 10 % of Real;
	// the bytes are not judged (they follow the stored objects' sizes,
	// which differ between the model and kube-apiserver on every row whose
	// count matches: results/kube/README.md).
	Within10 bool `json:"within10Percent"`
	// Note says why a row is not within 10 %, when that is known.
	Note string `json:"note,omitempty"`
}
