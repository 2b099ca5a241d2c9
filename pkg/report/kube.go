package report

import "time"

// KubeRunSchemaVersion is the version of the KubeRunResult JSON document;
// it changes when a field is renamed, removed or changes meaning. Version
// 3: the delivery latencies (delivery.fromCommit and fromSend, the
// intervals') leave out the informers held back across a compaction, from
// their hold on, which delivery.heldBack measures apart (DeliveryStats).
const KubeRunSchemaVersion = 3

// KubeRunResult is the result of `lwbench run --kube-apiserver`: a load
// through real kube-apiservers in front of etcd, written by real client-go
// clients and watched by real client-go informers. Durations are float
// milliseconds with the unit in the field name, sizes bytes, offsets
// (atMs, startMs) from the run's epoch (before seeding) except interval
// offsets, which run from the start of the writes.
type KubeRunResult struct {
	Kind          string    `json:"kind"`          // KindKubeRun
	SchemaVersion int       `json:"schemaVersion"` // KubeRunSchemaVersion
	StartedAt     time.Time `json:"startedAt"`     // when the run began, UTC
	// Interrupted is true when the run was stopped before the end of its
	// write phase.
	Interrupted bool `json:"interrupted,omitempty"`
	// Target is the etcd behind the apiservers.
	Target Target `json:"target"`
	// APIServer describes the apiservers and the clients.
	APIServer APIServerTarget `json:"apiserver"`
	// Scenario echoes the options that shaped the load (the fields of the
	// etcd-direct model that do not apply are zero).
	Scenario Scenario `json:"scenario"`

	Writes WriteStats `json:"writes"` // the API writers' counts and latency from schedule
	// Delivery is the watch events the informers received and their
	// latency from each write's response; the latencies are those of the
	// informers not held back, Delivery.HeldBack the held ones' from their
	// hold on (DeliveryStats).
	Delivery DeliveryStats `json:"delivery"`
	// Informers are per informer, by id.
	Informers []InformerStats `json:"informers"`
	// Requests count the informers' requests by verb and outcome, sorted.
	Requests []RequestCount `json:"requests"`
	// Relists are every LIST (or WATCHLIST) phase after an informer's
	// first, in the order they began.
	Relists []KubeRelist `json:"relists"`
	// Holds are the informers held back across a compaction, in order.
	Holds []Hold `json:"holds,omitempty"`
	// Etcd counts the requests the apiservers sent etcd, by phase and
	// kind, as a counting proxy in front of etcd saw them; empty when no
	// proxy ran.
	Etcd []EtcdRequests `json:"etcd,omitempty"`
	// Compactions are kube-apiserver's compactions seen during the load,
	// in order; each begins a phase (see EtcdRequests.Phase).
	Compactions []KubeCompaction `json:"compactions,omitempty"`
	// Defrag is the defragmentation after the compaction the held
	// informers missed; nil if none ran.
	Defrag *Defrag `json:"defrag,omitempty"`
	// APIServers are the apiservers' CPU and memory, one per server in
	// start order; empty when they were not sampled.
	APIServers []APIServerUsage `json:"apiservers,omitempty"`
	// APIServerMetrics are what the apiservers' own /metrics counted, per
	// server and phase, sorted by server, phase (in the order the phases
	// began), name and labels; empty when they were not scraped.
	APIServerMetrics []APIServerMetric `json:"apiserverMetrics,omitempty"`
	// Validation checks every informer's watch events against etcd's
	// recorded history, and every informer's cache against etcd at the
	// end.
	Validation Validation `json:"validation"`
	// Intervals is the one-second series from the start of the writes.
	Intervals []Interval `json:"intervals"`
	// Cleanup is the deletion of the run's namespaces on a cluster
	// lwbench does not own (--kubeconfig); nil otherwise (a cluster
	// lwbench started is thrown away whole).
	Cleanup *NamespaceCleanup `json:"namespaceCleanup,omitempty"`
	// Verdict is the run's one-line verdict (KubeRunVerdict), as
	// RunResult's.
	Verdict string `json:"verdict"`
}

// NamespaceCleanup is the end of a run on a cluster lwbench does not own:
// the run deletes the objects it wrote in the namespaces it created, then
// those namespaces, and waits (bounded) until they are gone.
type NamespaceCleanup struct {
	// Namespaces are the namespaces the run created and deleted, in
	// creation order; no other namespace is deleted.
	Namespaces []string `json:"namespaces"`
	// ObjectsDeleted counts the pods, configmaps and events the run
	// deleted in them before deleting the namespaces.
	ObjectsDeleted int `json:"objectsDeleted"`
	// Left are the namespaces still present (Terminating) when the wait
	// ended; the cluster's namespace controller removes them later.
	Left []string `json:"left,omitempty"`
	// DurationMs is how long the cleanup took, the wait included.
	DurationMs float64 `json:"durationMs"`
	// Error is the first failure, "" if none; namespaces left over
	// after the wait are one.
	Error string `json:"error,omitempty"`
}

// APIServerTarget describes the kube-apiservers of a KubeRunResult and
// the clients' settings.
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

// InformerStats is one informer's share of a KubeRunResult.
type InformerStats struct {
	ID       int    `json:"id"`
	Resource string `json:"resource"`
	// Requests is every LIST, WATCH and WATCHLIST it sent.
	Requests int `json:"requests"`
	// Relists counts its LIST phases after the first.
	Relists int `json:"relists"`
	// Events are the watch events it received (initial events and
	// bookmarks apart), Bookmarks the bookmarks.
	Events    int64 `json:"events"`
	Bookmarks int64 `json:"bookmarks"`
	// ResponseBytes is every byte of its responses, streams included.
	ResponseBytes int64 `json:"responseBytes"`
	// CachedObjects is the size of its cache at the end.
	CachedObjects int `json:"cachedObjects"`
	// LastRevision is the last resourceVersion its watches delivered.
	LastRevision int64 `json:"lastRevision"`
	// HeldBack is true when it was held back across a compaction.
	HeldBack bool `json:"heldBack,omitempty"`
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

// KubeRelist is one LIST phase after an informer's first.
type KubeRelist struct {
	Informer int     `json:"informer"`
	AtMs     float64 `json:"atMs"` // when its first request was sent
	// Cause is the outcome of the request that failed before it, as
	// client-go's reflector saw it: "expired" (410: compacted, or older
	// than the watch cache), "too-large-rv", "error", or "" if none
	// failed.
	Cause string `json:"cause"`
	// Verb is list (pages) or watchlist.
	Verb string `json:"verb"`
	// ResourceVersion is the first request's.
	ResourceVersion string `json:"resourceVersion"`
	// Requests counts the pages (1 for a watchlist).
	Requests int `json:"requests"`
	// Objects and Bytes are what it read: the pages' items and response
	// bytes, or a WATCHLIST's initial events and its response bytes until
	// their bookmark.
	Objects    int64   `json:"objects"`
	Bytes      int64   `json:"bytes"`
	DurationMs float64 `json:"durationMs"` // until the last page, or the initial events' bookmark
	// FailedRequests counts the LIST and WATCHLIST requests that failed
	// since the informer's previous LIST phase (a LIST at a compacted
	// resourceVersion answered 410, say); Expired those answered 410.
	FailedRequests int `json:"failedRequests"`
	Expired        int `json:"expired"` // failed requests answered 410 Gone
	// BackoffMs runs from the end of the last request that failed before
	// it to its first request: client-go's backoff (0 when none failed).
	BackoffMs float64 `json:"backoffMs"`
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

// KubeCompaction is one compaction by kube-apiserver's compactor, as the
// harness saw it: the put of compact_rev_key that precedes each Compact
// call (k8s.io/apiserver/pkg/storage/etcd3/compact.go Compact).
type KubeCompaction struct {
	// N numbers the compactions from 1; phases after it are named
	// "<phase> after compaction N".
	N int `json:"n"`
	// AtMs is when the harness saw compact_rev_key change, ms since the
	// epoch.
	AtMs float64 `json:"atMs"`
	// Revision is the revision compacted to (compact_rev_key's value).
	Revision int64 `json:"revision"`
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

// EtcdRequests counts requests of one kind that the apiservers sent etcd
// in one phase.
type EtcdRequests struct {
	// Phase is the load's phase: seed, sync, steady, held, released,
	// defrag, drain; a phase that began after kube-apiserver's Nth
	// compaction is "<phase> after compaction N" (defrag excepted).
	Phase  string `json:"phase"`
	Method string `json:"method"` // the gRPC method without its service, e.g. Range
	// Kind is the request's shape, e.g. "range limit=500" or "watch
	// create"; see internal/etcdproxy.
	Kind          string `json:"kind"`
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
	Method string `json:"method"`
	Kind   string `json:"kind"`
	// Model and Real count the requests (for watch responses, which have
	// no request, the responses).
	Model int64 `json:"model"`
	Real  int64 `json:"real"`
	// ModelBytes and RealBytes are the bytes both ways.
	ModelBytes int64 `json:"modelBytes"`
	RealBytes  int64 `json:"realBytes"`
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
