package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubestore/etcdkit/pkg/shard"
)

// RunSchemaVersion is the version of the RunResult JSON document. It
// changes when a field is renamed, removed or changes meaning; adding a
// field keeps it. Version 2 (lwbench issue 4): final.objects counts every
// resource of the load, not only pods; relists carry their attempts;
// validation counts every watch guarantee. Version 3: the delivery
// latencies (delivery.fromCommit and fromSend, the intervals' and the
// members') leave out the watchers held back across a compaction, from
// their hold on, which delivery.heldBack measures apart. Version 4
// (lwbench issue 20): one RunResult for the etcd-direct model and for
// client-go through kube-apiserver (kind RunResult for both;
// KubeRunResult is gone): the API front's sections (apiserver, requests,
// holds, etcd, apiservers, apiserverMetrics) are set only for a run
// through kube-apiserver; watchers became informers, with KubeRunResult's
// informers' fields; relists, compactions and cleanup are one type each
// for both; delivery.fromCommit became delivery.fromResponse (it always
// ran from the write's response). Decode reads version 3 of both kinds
// into this one (legacy.go). See docs/lwbench-json.md.
const RunSchemaVersion = 4

// RunResult is the versioned result of `lwbench run`, through either
// client set: lwbench's etcd-direct model of kube-apiserver and its
// clients, or real client-go informers and writers through real
// kube-apiservers (`--kube-apiserver`, `--kubeconfig`), whose sections
// (APIServer and the fields after Faults) are nil or empty for the model;
// a figure one client set does not measure is zero, as each field says.
// Durations and
// latencies are float milliseconds with the unit in the field name, sizes
// are bytes, revisions are int64, offsets (atMs, startMs) run from the
// run's epoch (just before seeding) except interval offsets, which run
// from the start of the writes. The schema is documented field by field
// in docs/lwbench-json.md.
type RunResult struct {
	Kind          string    `json:"kind"`          // KindRun
	SchemaVersion int       `json:"schemaVersion"` // RunSchemaVersion
	StartedAt     time.Time `json:"startedAt"`     // when the run began, UTC
	// Interrupted is true when the run was stopped (SIGINT, SIGTERM)
	// before the end of its write phase: the figures cover the run until
	// then, and the watchers were given a bounded time to confirm.
	Interrupted bool `json:"interrupted,omitempty"`
	// Target describes the etcd the run drove (behind the apiservers,
	// for a run through kube-apiserver).
	Target Target `json:"target"`
	// APIServer describes the kube-apiservers the load went through and
	// the client-go clients' settings; nil for the etcd-direct model.
	APIServer *APIServerTarget `json:"apiserver,omitempty"`
	// Scenario echoes the options that shaped the load (through
	// kube-apiserver, the model's own fields are zero: profile, streams,
	// connections, page size, compaction schedule).
	Scenario Scenario `json:"scenario"`
	// Cluster describes a whole cluster's load (lwbench run --nodes);
	// nil otherwise.
	Cluster *ClusterScenario `json:"cluster,omitempty"`
	// Shard is the worker's part of a load divided among workers
	// (lwbench worker; pkg/shard): its 0-based index and the load's
	// number of shards. Nil for an undivided run and for a merged result,
	// whose Workers name the shards merged.
	Shard *shard.Shard `json:"shard,omitempty"`
	// Workers are a merged result's workers (MergeRuns), one per shard
	// in index order; empty for one process's run.
	Workers []WorkerSummary `json:"workers,omitempty"`
	// Clocks says whose clock timed a merged result's latencies and how
	// its workers' series were aligned; nil for one process's run, whose
	// every figure is one clock's.
	Clocks *Clocks `json:"clocks,omitempty"`

	Writes WriteStats `json:"writes"` // the writers' counts and latency from schedule
	// Delivery is the events the watchers received and their delivery
	// latency: the latencies are those of the watchers not held back,
	// Delivery.HeldBack the held ones' from their hold on (DeliveryStats).
	Delivery DeliveryStats `json:"delivery"`
	// InitialLists summarises every informer's first LIST (the model's;
	// zero through kube-apiserver).
	InitialLists ListSummary `json:"initialLists"`
	// Relists are the LIST phases after an informer's first: in informer
	// order (the model), or in the order they began (client-go).
	Relists []Relist `json:"relists"`
	// ConsistentReads is set for the apiserver-cache profile.
	ConsistentReads *ConsistentReads `json:"consistentReads,omitempty"`
	// Compactions are the compactions issued, in order: by lwbench's
	// compactor on kube-apiserver's algorithm (the model), or by
	// kube-apiserver's own, as seen from etcd.
	Compactions []Compaction `json:"compactions"`
	Defrag      *Defrag      `json:"defrag,omitempty"` // the defragmentation; nil if none
	DBSize      DBSizes      `json:"dbSize"`           // member sizes at four points
	Validation  Validation   `json:"validation"`       // watch guarantees and cache checks
	Final       FinalState   `json:"final"`            // etcd's state when the writes ended
	// Informers are per informer (or, in the model, watch cache), by id.
	Informers []InformerStats `json:"informers"`
	// Intervals is the one-second series from the start of the writes.
	Intervals []Interval `json:"intervals"`
	// Self is lwbench's own resource use (and etcd's, when it can be read).
	Self SelfStats `json:"self"`
	// Members are the target's members, in the order of its endpoints,
	// with what the clients pinned to each saw.
	Members []MemberStats `json:"members,omitempty"`
	// Faults are the faults injected, in order.
	Faults []Fault `json:"faults,omitempty"`
	// Cleanup is set when lwbench deleted what it wrote at the end (a
	// cluster it does not own: its keys under the prefix, or, through
	// --kubeconfig, its namespaces).
	Cleanup *Cleanup `json:"cleanup,omitempty"`

	// Requests count the client-go informers' requests by verb and
	// outcome, sorted; through kube-apiserver only.
	Requests []RequestCount `json:"requests,omitempty"`
	// Holds are the informers held back across a compaction, in order;
	// through kube-apiserver only (the model's are
	// Informers[].HeldBack).
	Holds []Hold `json:"holds,omitempty"`
	// Etcd counts the requests the apiservers sent etcd, by phase and
	// kind, as a counting proxy in front of etcd saw them; empty when no
	// proxy ran.
	Etcd []EtcdRequests `json:"etcd,omitempty"`
	// EtcdPhases are the phases of Etcd, in the order first set, with
	// their durations; empty when no proxy ran (and in results written
	// before lwbench recorded them).
	EtcdPhases []EtcdPhase `json:"etcdPhases,omitempty"`
	// EtcdWrites is the proxy's writes per resource over time; with a
	// proxy only.
	EtcdWrites *EtcdWriteSeries `json:"etcdWrites,omitempty"`
	// EtcdMetrics is etcd's own /metrics over the run (db size and in use
	// over time, its counters per phase); a whole cluster's load only
	// (--nodes).
	EtcdMetrics *EtcdMetrics `json:"etcdMetrics,omitempty"`
	// PeriodicTraffic is each periodic source of a cluster's etcd traffic
	// and whether the run saw it (PeriodicTrafficOf); a whole cluster's
	// load only.
	PeriodicTraffic []PeriodicTraffic `json:"periodicTraffic,omitempty"`
	// APIServers are the apiservers' CPU and memory, one per server in
	// start order; empty when they were not sampled.
	APIServers []APIServerUsage `json:"apiservers,omitempty"`
	// Components are the control plane's other processes' CPU and
	// memory (kube-controller-manager, kube-scheduler, kwok: lwbench run
	// --nodes), as APIServers', from /proc.
	Components []APIServerUsage `json:"components,omitempty"`
	// APIServerMetrics are what the apiservers' own /metrics counted, per
	// server and phase, sorted by server, phase (in the order the phases
	// began), name and labels; empty when they were not scraped.
	APIServerMetrics []APIServerMetric `json:"apiserverMetrics,omitempty"`
	// Warnings say what may have distorted the figures, one line each
	// naming the figures affected (BusyWarnings); none when nothing did.
	Warnings []string `json:"warnings,omitempty"`
	// Verdict is the run's one-line verdict (RunVerdict): "PASS: ..."
	// when every guarantee held and nothing was lost, "FAIL: ..." saying
	// what failed.
	Verdict string `json:"verdict"`
}

// Target is the etcd a run drove.
type Target struct {
	// Embedded is true when lwbench started its own member (in the same
	// process, so that Self counts it too).
	Embedded    bool     `json:"embedded"`
	Endpoints   []string `json:"endpoints"`   // client URLs driven
	EtcdVersion string   `json:"etcdVersion"` // the first member's version, e.g. 3.7.3
	// Managed is true when lwbench started the members itself (embedded,
	// or a cluster of etcd processes) and removes them afterwards; false
	// for --endpoints.
	Managed bool `json:"managed"`
}

// ResourceMix is the share of writes per resource, in percent.
type ResourceMix struct {
	PodsPercent       int `json:"podsPercent"`       // percent of writes to pods
	ConfigMapsPercent int `json:"configMapsPercent"` // percent of writes to configmaps
	EventsPercent     int `json:"eventsPercent"`     // percent of writes to events
}

// ClusterScenario is a whole cluster's load (lwbench run --nodes,
// pkg/clusterload): KWOK nodes and ClusterLoader2-shaped objects whose
// pods the real control plane runs, then churns.
type ClusterScenario struct {
	Nodes       int `json:"nodes"`       // KWOK nodes
	Namespaces  int `json:"namespaces"`  // of 100 nodes each, at least one
	Deployments int `json:"deployments"` // each with a ConfigMap and a Secret
	Services    int `json:"services"`    // for half the Deployments
	// Pods are the pods planned: the Deployments' and the DaemonSet's
	// one per node.
	Pods int `json:"pods"`
	// PodSize and NodeSize are the objects' planned sizes in bytes; 0:
	// clusterload's defaults (4 KiB, 12 KiB).
	PodSize  int `json:"podSize"`
	NodeSize int `json:"nodeSize"`
	// PodChurn is the pods created (and as many deleted) per second
	// after the seeding.
	PodChurn float64 `json:"podChurnPerSecond"`
	// RolloutPercent is the churn's share of ops that roll a small
	// Deployment out, in percent (clusterload.Plan.RolloutPercent); nil
	// in results written before it could be set, which used 20.
	RolloutPercent *int `json:"rolloutPercent,omitempty"`
	// PodsRunning were Running when the seeding ended, SeedMs after it
	// began (the objects' creates and the control plane's work).
	PodsRunning int     `json:"podsRunning"`
	SeedMs      float64 `json:"seedMs"`
	// KubeletWatchNodes had the watches their kubelets would open
	// (pods on the node, its Node, Services, each mounted ConfigMap and
	// Secret), which received KubeletWatchObjects objects in all
	// (initial lists included); counted, not validated.
	KubeletWatchNodes   int   `json:"kubeletWatchNodes"`
	KubeletWatchObjects int64 `json:"kubeletWatchObjects"`
	// FillerBytes of live keys outside the prefix grew etcd's db after
	// the seeding (0: none), so that a defragmentation copies them.
	FillerBytes int64 `json:"fillerBytes,omitempty"`
	// EventsEtcd are the client URLs of the second etcd that stored
	// events (--events-etcd, kube-apiserver's --etcd-servers-overrides);
	// absent: events were in the main etcd.
	EventsEtcd []string `json:"eventsEtcd,omitempty"`
	// DefragAtMs is when, after the churn began, every member was to be
	// defragmented once (the result's defrag says when it was, after the
	// run began); 0: not at a fixed time.
	DefragAtMs float64 `json:"defragAtMs,omitempty"`
	// Restart is the control-plane component restarted during the
	// churn; nil: none.
	Restart *ComponentRestart `json:"restart,omitempty"`
	// Exits are the components that exited on their own and were
	// started again, in time order.
	Exits []ComponentExit `json:"exits,omitempty"`
	// NodeHealth is what the nodes' Leases and Ready conditions did from
	// the churn's start to its end.
	NodeHealth *NodeHealth `json:"nodeHealth,omitempty"`
	// Model is what the etcd-direct model of the cluster sent (lwbench
	// run --nodes --cluster-model); nil through a real control plane.
	Model *ClusterModel `json:"model,omitempty"`
}

// Scenario is the shape of the load.
type Scenario struct {
	// Profile is "informer" or "apiserver-cache".
	Profile string `json:"profile"`
	Prefix  string `json:"prefix"` // kube-apiserver's --etcd-prefix, e.g. /registry
	// Objects is the number of pods seeded; ConfigMaps and Events the
	// other resources seeded.
	Objects    int `json:"objects"`
	ConfigMaps int `json:"configMaps"` // configmaps seeded
	Events     int `json:"events"`     // events seeded
	Namespaces int `json:"namespaces"` // namespaces objects are spread across
	Watchers   int `json:"watchers"`   // informers or watch caches
	// WatchResources are the resources watchers are assigned to, round
	// robin.
	WatchResources []string `json:"watchResources"`
	// Connections and Streams carry the watchers; WriterConnections the
	// writers.
	Connections        int     `json:"connections"`
	Streams            int     `json:"streams"`            // watch streams over Connections
	WriterConnections  int     `json:"writerConnections"`  // connections the writers use
	WriteRatePerSecond float64 `json:"writeRatePerSecond"` // scheduled writes per second
	DurationMs         float64 `json:"durationMs"`         // length of the write phase, ms
	PageSize           int64   `json:"pageSize"`           // LIST page size
	// WatchList is client-go's WatchListClient gate of the modelled
	// informers (on: they load their state with a WATCH carrying
	// sendInitialEvents); absent from results written before the model
	// had it (its informers then listed as with it off) and from runs
	// through kube-apiserver, which report apiServer.clientWatchList.
	WatchList *bool `json:"watchList,omitempty"`
	// RangeStream is kube-apiserver's EtcdRangeStream gate in the model
	// (on: its lists and watch-list syncs read with etcd's RangeStream,
	// as kube-apiserver 1.37 does; off: with Range, as 1.35 and 1.36
	// do); absent from results written before lwbench recorded it and
	// from runs through kube-apiserver, which report
	// apiServer.featureGates.
	RangeStream *bool       `json:"rangeStream,omitempty"`
	ResourceMix ResourceMix `json:"resourceMix"` // share of writes per resource
	// CompactionIntervalMs is negative when compaction was off.
	CompactionIntervalMs  float64 `json:"compactionIntervalMs"`
	CreatePercent         int     `json:"createPercent"`           // percent of pod and configmap writes that create
	UpdatePercent         int     `json:"updatePercent"`           // percent that update
	DeletePercent         int     `json:"deletePercent"`           // percent that delete
	WriterConcurrency     int     `json:"writerConcurrency"`       // writer workers
	HeldBackWatchers      int     `json:"heldBackWatchers"`        // watchers held back across a compaction
	Seed                  uint64  `json:"seed"`                    // seed of objects and the write plan
	Defragment            bool    `json:"defragment"`              // whether the member was defragmented once
	PhysicalCompaction    bool    `json:"physicalCompaction"`      // whether compactions waited for deletion
	ProgressRequestPeriod float64 `json:"progressRequestPeriodMs"` // period of the final progress requests, ms
	EventTTLMs            float64 `json:"eventTTLMs"`              // events' lease TTL, ms
	// ConsistentListRatePerSecond is the rate of consistent LISTs served
	// by the watch caches (apiserver-cache profile).
	ConsistentListRatePerSecond float64 `json:"consistentListRatePerSecond"`
	// StartConcurrency bounds the watchers listing at once at the start; 0
	// means all at once.
	StartConcurrency int `json:"startConcurrency"`
	// ReusePrefix is true when the run accepted a prefix that already
	// held keys.
	ReusePrefix bool `json:"reusePrefix"`
	// PinConnections is true when connection i talked to member i mod N
	// only.
	PinConnections bool `json:"pinConnections"`
	// CompactRevKey is the key the compactor's compare-and-swap used:
	// compact_rev_key at the root, as kube-apiserver, or under the prefix
	// on a cluster lwbench does not own.
	CompactRevKey string `json:"compactRevKey"`
	// Faults are the planned faults: kind, atMs (from the start of the
	// writes) and durationMs.
	Faults []PlannedFault `json:"faults,omitempty"`
}

// PlannedFault is a fault as the scenario asked for it.
type PlannedFault struct {
	Kind       string  `json:"kind"`       // e.g. kill-leader
	AtMs       float64 `json:"atMs"`       // from the start of the writes, ms
	DurationMs float64 `json:"durationMs"` // until the member is restarted, resumed or healed, ms
}

// Latency summarises a latency distribution in milliseconds, from an HDR
// histogram (3 significant digits for totals, 2 per interval). A zero
// Count means no sample.
type Latency struct {
	Count  int64   `json:"count"`  // samples; 0 means none
	P50Ms  float64 `json:"p50Ms"`  // median, ms
	P90Ms  float64 `json:"p90Ms"`  // 90th percentile, ms
	P99Ms  float64 `json:"p99Ms"`  // 99th percentile, ms
	P999Ms float64 `json:"p999Ms"` // 99.9th percentile, ms
	MaxMs  float64 `json:"maxMs"`  // largest sample, ms
	MeanMs float64 `json:"meanMs"` // mean, ms
	// HDR holds the histogram itself, in microseconds, when the run was
	// asked to keep it (a worker's result): HdrHistogram's V2 compressed
	// encoding in base64 (hdrhistogram-go Encode,
	// V2CompressedEncodingCookieBase), so results merge exactly
	// (MergeLatencies); empty otherwise.
	HDR string `json:"hdr,omitempty"`
}

// WriteStats counts the writers' operations. Latency runs from each
// operation's scheduled send time to its end, so a stall that delays later
// sends is counted in full (no coordinated omission); failed and timed-out
// operations are counted in it too, at the time they failed, and in
// Errors and Timeouts beside it.
type WriteStats struct {
	Planned int64 `json:"planned"` // writes scheduled
	// Sent counts the operations handed to etcd; Unsent those never sent
	// because the run was cancelled.
	Sent      int64 `json:"sent"`
	Completed int64 `json:"completed"` // writes that succeeded
	Errors    int64 `json:"errors"`    // writes that failed, timeouts included
	// Timeouts counts errors that were client deadlines or etcd request
	// timeouts (also counted in Errors).
	Timeouts  int64 `json:"timeouts"`
	Unsent    int64 `json:"unsent"`    // writes never sent: the run was cancelled
	Creates   int64 `json:"creates"`   // successful creates
	Updates   int64 `json:"updates"`   // successful updates
	Deletes   int64 `json:"deletes"`   // successful deletes
	Puts      int64 `json:"puts"`      // successful plain puts
	Conflicts int64 `json:"conflicts"` // writes that met a compare-and-swap conflict
	// StartMs is when the first write was scheduled, ms since the run's
	// epoch (StartedAt): StartedAt plus StartMs is the wall time the
	// intervals count from. Absent (0) in results that did not record it;
	// MergeRuns aligns the workers' intervals on it.
	StartMs float64 `json:"startMs,omitempty"`
	// ThroughputPerSecond is Completed over DurationMs, the time from the
	// first scheduled operation to the last one's end.
	ThroughputPerSecond float64 `json:"throughputPerSecond"`
	DurationMs          float64 `json:"durationMs"` // from the first scheduled write to the last end, ms
	Latency             Latency `json:"latency"`    // from each write's scheduled time to its end, failures included
	// ErrorSamples holds up to a few distinct error messages.
	ErrorSamples []string `json:"errorSamples,omitempty"`
}

// DeliveryStats measures watch events from their write to their receipt by
// a watcher. The counts (Events, TimedEvents, UntimedEvents,
// EventsPerSecond, DeliveredBeforeResponse) are over every watcher; the
// latencies (FromResponse, FromSend) leave out the events a watcher
// received from the moment it was held back across a compaction on
// (Scenario.HeldBackWatchers; RunResult.Informers[].HeldBack), which HeldBack measures apart: a
// held watcher that resumes its watch where it stopped receives every
// event of the hold late, by up to the hold's length, a delay of the
// scenario rather than of the delivery. It does with kube-apiserver's
// watch cache on, which serves the resumed watch from its own history of
// about the last 75 s of events (at most 102,400), whatever etcd
// compacted (k8s.io/apiserver/pkg/storage/cacher/cacher.go
// DefaultEventFreshDuration, watch_cache_history.go resizeCacheLocked);
// with the cache off its watch meets etcd's compaction and it relists
// instead.
type DeliveryStats struct {
	// Events counts events received by all watchers, HeldBack's included.
	Events int64 `json:"events"`
	// TimedEvents were matched with the write that caused them;
	// UntimedEvents were not (lease expiries, writes whose response was
	// lost, writes older than the join's ring). Both count every
	// watcher's, HeldBack's included.
	TimedEvents   int64 `json:"timedEvents"`
	UntimedEvents int64 `json:"untimedEvents"` // events not matched with a write
	// EventsPerSecond is Events over the time from the first write's
	// scheduled time to the last event received.
	EventsPerSecond float64 `json:"eventsPerSecond"`
	// FromResponse runs from the moment the writer got the response to
	// its write (etcd's, or kube-apiserver's), which is after the commit;
	// an event that arrives before the response counts as 0 and in
	// DeliveredBeforeResponse. Since RunSchemaVersion 3 it leaves out
	// HeldBack's events (its Count is TimedEvents - HeldBack.TimedEvents);
	// before, it merged every watcher's. Named fromCommit before
	// RunSchemaVersion 4 and WatchSchemaVersion 2.
	FromResponse Latency `json:"fromResponse"`
	// FromSend runs from the moment the writer sent the request, an upper
	// bound of the delay from commit; it leaves out HeldBack's events as
	// FromResponse does.
	FromSend                Latency `json:"fromSend"`
	DeliveredBeforeResponse int64   `json:"deliveredBeforeResponse"` // events received before their writer's response, every watcher's
	// HeldBack is the delivery to the watchers held back across a
	// compaction, from each one's hold on; nil when no watcher was held
	// back (and always in a WatchResult).
	HeldBack *HeldBackDelivery `json:"heldBack,omitempty"`
}

// HeldBackDelivery is the delivery to the watchers held back across a
// compaction, counted from the moment each was held back to the end of the
// run: the events that reached it while held (those already on their way),
// those it received late after its release (from a watch cache's history,
// or none when it relisted instead) and every later one. What each watcher
// received before its hold counts in DeliveryStats' latencies.
type HeldBackDelivery struct {
	// Watchers is the number of watchers held back.
	Watchers int `json:"watchers"`
	// Events counts the events they received from their hold on; the
	// DeliveryStats' Events include them.
	Events int64 `json:"events"`
	// TimedEvents counts those matched with the write that caused them,
	// the samples of FromResponse and FromSend.
	TimedEvents int64 `json:"timedEvents"`
	// FromResponse is their latency from the writer's response, as
	// DeliveryStats.FromResponse; the events of a hold that a watch cache
	// delivers after the release arrive late by up to the hold's length
	// (RunResult.Holds: releasedAtMs - heldAtMs).
	FromResponse Latency `json:"fromResponse"`
	// FromSend is their latency from the writer's send.
	FromSend Latency `json:"fromSend"`
}

// ListSummary summarises LIST phases.
type ListSummary struct {
	Count   int64   `json:"count"`   // LIST phases
	Objects int64   `json:"objects"` // objects read, summed
	Bytes   int64   `json:"bytes"`   // key and value bytes read, summed
	Pages   int64   `json:"pages"`   // range requests, summed
	Latency Latency `json:"latency"` // duration of each LIST phase
}

// ListAttempt is one LIST request of a relist, as the client made it.
type ListAttempt struct {
	// ResourceVersion is the LIST's resourceVersion: "0", "" (latest) or
	// a revision.
	ResourceVersion string `json:"resourceVersion"`
	// Limit is the page size; 0 is unpaginated.
	Limit int64 `json:"limit"`
	// ReadRevision is the etcd revision the first page read at, 0 for the
	// latest; Revision the one the list was served at (0 if it failed).
	ReadRevision     int64   `json:"readRevision"`
	Revision         int64   `json:"revision"`                   // revision served at; 0 if it failed
	Pages            int     `json:"pages"`                      // range requests
	Objects          int64   `json:"objects"`                    // keys read
	FullListFallback bool    `json:"fullListFallback,omitempty"` // the pager's unpaginated retry after a compacted continuation page
	Streamed         bool    `json:"streamed,omitempty"`         // etcd served it with RangeStream (else Range)
	WatchList        bool    `json:"watchList,omitempty"`        // a WATCH with sendInitialEvents (WatchListClient), not a LIST
	Error            string  `json:"error,omitempty"`            // why it failed; empty on success
	DurationMs       float64 `json:"durationMs"`                 // how long it took, ms
}

// Relist is one LIST phase an informer ran after its first: the model's
// (from etcd, every attempt in Attempts) or a client-go informer's
// through kube-apiserver (its requests as the informer's transport saw
// them; FromRevision, CompactRevision, ListRevision and Attempts are the
// model's only).
type Relist struct {
	// Informer is the informer's id (named watcher before
	// RunSchemaVersion 4).
	Informer int    `json:"informer"`
	Resource string `json:"resource"` // the resource it watches
	// Cache is true when the informer is a watch cache (InformerStats.Cache),
	// whose relists read etcd; an informer served by a cache relists from
	// the cache (etcd sees at most a consistent read's current revision).
	Cache bool `json:"cache,omitempty"`
	// Reason is what forced it. The model: "compacted" (its watch met
	// etcd's compaction), "watch-error", "list-error". Client-go: the
	// outcome of the request that failed before it, as its reflector saw
	// it: "expired" (410 Gone: compacted, or older than the watch cache),
	// "too-large-rv", "error", or "none" when none failed (named cause
	// in KubeRunResult).
	Reason string `json:"reason"`
	// Verb is "list" (pages) or "watchlist" (a WATCH with
	// sendInitialEvents).
	Verb string `json:"verb,omitempty"`
	// ResourceVersion is its first request's resourceVersion: "0", ""
	// (the latest, a quorum read) or a revision.
	ResourceVersion string `json:"resourceVersion"`
	// FromRevision is the revision the failed watch asked for;
	// CompactRevision the one etcd reported (the model's).
	FromRevision    int64 `json:"fromRevision,omitempty"`
	CompactRevision int64 `json:"compactRevision,omitempty"` // the compact revision etcd reported
	// ListRevision is the revision the relist was served at (0 if every
	// attempt failed; the model's).
	ListRevision int64 `json:"listRevision,omitempty"`
	// AtMs is when its first request was sent, ms since the epoch;
	// DurationMs runs from there to its last page (or, for a watchlist,
	// the bookmark ending its initial events), every attempt together.
	AtMs       float64 `json:"atMs"`
	DurationMs float64 `json:"durationMs"`
	// BackoffMs is the pause before it: from the end of the last request
	// that failed before it to its first request (client-go's backoff, or
	// the cacher's one second); 0 when none failed.
	BackoffMs float64 `json:"backoffMs"`
	// Objects and Bytes are what the successful attempt read: keys and
	// their key and value bytes (the model, from etcd), or objects and
	// response bytes (client-go, from kube-apiserver).
	Objects int64 `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Pages are the requests of the successful attempt: range requests
	// (the model), LIST pages (1 for a watchlist).
	Pages int `json:"pages"`
	// FailedRequests counts the LIST and WATCHLIST requests that failed
	// since the informer's previous LIST phase; Expired those answered
	// 410 Gone (ErrCompacted).
	FailedRequests int `json:"failedRequests"`
	Expired        int `json:"expired"`
	// Attempts are every LIST request, in order (the model's).
	Attempts []ListAttempt `json:"attempts,omitempty"`
}

// ReasonNone is Relist.Reason for a client-go relist before which no
// request failed.
const ReasonNone = "none"

// ConsistentReads measures consistent LISTs served from the watch caches
// (KEP-2340): each gets etcd's current revision, waits until the cache
// has seen it (requesting progress notifications every 100 ms), and falls
// back to etcd after 3 seconds.
type ConsistentReads struct {
	Requests        int64 `json:"requests"`        // consistent LISTs issued
	ServedFromCache int64 `json:"servedFromCache"` // served once the cache was fresh
	Fallbacks       int64 `json:"fallbacks"`       // served by etcd after the 3 s wait
	Errors          int64 `json:"errors"`          // failed
	// ProgressRequests counts the progress requests the caches sent.
	ProgressRequests int64 `json:"progressRequests"`
	// ReadWait is the wait for the cache to be fresh
	// (apiserver_watch_cache_read_wait_seconds); Latency the whole
	// request.
	ReadWait Latency `json:"readWait"`
	Latency  Latency `json:"latency"` // whole request, from its scheduled time
}

// Compaction is one compaction: issued by lwbench's compactor (the
// model; DurationMs and Error are its Compact call's), or by
// kube-apiserver's own, seen as the put of compact_rev_key that precedes
// each of its Compact calls (k8s.io/apiserver/pkg/storage/etcd3/compact.go
// Compact; DurationMs 0: not seen).
type Compaction struct {
	// N numbers kube-apiserver's compactions from 1; phases after it are
	// named "<phase> after compaction N" (EtcdRequests.Phase). 0 for the
	// model's.
	N          int     `json:"n,omitempty"`
	AtMs       float64 `json:"atMs"`            // when it was issued, ms since the epoch
	Revision   int64   `json:"revision"`        // revision compacted to; 0 on error
	DurationMs float64 `json:"durationMs"`      // how long the Compact call took, ms
	Error      string  `json:"error,omitempty"` // why it failed; empty on success
}

// Defrag is one defragmentation pass: every member in turn, never two at
// once, the leader last.
type Defrag struct {
	AtMs float64 `json:"atMs"` // when it started, ms since the epoch
	// DurationMs is how long members were blocked, summed over the
	// members (for one member: how long it was blocked), ms.
	DurationMs float64 `json:"durationMs"`
	Error      string  `json:"error,omitempty"` // the first failure; empty on success
	// Members are the members defragmented, in order; the pass stops at
	// the first failure.
	Members []MemberDefrag `json:"members,omitempty"`
}

// DBSizes are the member's dbSize (file) and dbSizeInUse, as etcd's
// Maintenance.Status reports them, at four points of the run.
type DBSizes struct {
	BeforeCompactionBytes      int64 `json:"beforeCompactionBytes"`      // file size before the compaction preceding the defrag
	BeforeCompactionInUseBytes int64 `json:"beforeCompactionInUseBytes"` // in use then
	AfterCompactionBytes       int64 `json:"afterCompactionBytes"`       // file size after it
	AfterCompactionInUseBytes  int64 `json:"afterCompactionInUseBytes"`  // in use then
	AfterDefragBytes           int64 `json:"afterDefragBytes"`           // file size after the defrag
	AfterDefragInUseBytes      int64 `json:"afterDefragInUseBytes"`      // in use then
	EndBytes                   int64 `json:"endBytes"`                   // file size at the end
	EndInUseBytes              int64 `json:"endInUseBytes"`              // in use then
}

// Validation reports violations of etcd's watch guarantees, checked for
// every watch of every watcher against a recorded history, and of cache
// consistency at the end. Each count is a number of events (or, for
// resumable and atomic, of watches and responses).
type Validation struct {
	// Lost counts events of the history, inside the range a watch
	// covered, that it never delivered (Reliable).
	Lost int64 `json:"lost"`
	// Duplicated counts events delivered twice on one watch (Unique).
	Duplicated int64 `json:"duplicated"`
	// OutOfOrder counts events below an earlier event's revision
	// (Ordered).
	OutOfOrder int64 `json:"outOfOrder"`
	// Atomic counts revisions split over two responses.
	Atomic int64 `json:"atomic"`
	// Resumable counts watches whose first event was not the first
	// recorded at or after their start revision.
	Resumable int64 `json:"resumable"`
	// Bookmarkable counts events at or below an earlier progress
	// notification, and progress notifications that went backwards.
	Bookmarkable int64 `json:"bookmarkable"`
	// Unexpected counts events the history does not hold at their
	// revision (or holds with another type).
	Unexpected int64 `json:"unexpected"`
	// PrevKVMismatches counts events whose prevKV or create flag disagrees
	// with the watcher's cache.
	PrevKVMismatches int64 `json:"prevKVMismatches"`
	// PrevKVMissing counts updates and deletes without the prevKV they
	// asked for (etcd omits it when the previous revision is compacted);
	// not a violation.
	PrevKVMissing int64 `json:"prevKVMissing"`
	// CacheMismatches counts keys whose presence or mod_revision differs
	// between a watcher's cache and etcd at the watcher's last revision.
	CacheMismatches int64 `json:"cacheMismatches"`
	// UnsyncedWatchers could not confirm the final revision in time.
	UnsyncedWatchers int `json:"unsyncedWatchers"`
	// RecorderGaps counts revisions the history recorder's whole-keyspace
	// watch skipped.
	RecorderGaps int64 `json:"recorderGaps"`
	// RecorderScope is what the recorder watched: "keyspace" (every key,
	// so that a skipped revision is detected), or the prefix when the
	// credentials allow only that (revision gaps cannot be seen then).
	RecorderScope string `json:"recorderScope"`
	// UnrecordedWrites counts writes etcd acknowledged whose revision the
	// recorder never saw.
	UnrecordedWrites int64 `json:"unrecordedWrites"`
	// UnverifiedEvents were received but never covered by the history.
	UnverifiedEvents int64 `json:"unverifiedEvents"`
	// UnparsedResourceVersions counts watch events and bookmarks from
	// kube-apiserver whose resourceVersion is not a revision: they could
	// be neither checked nor timed. Always 0 for the model's watchers;
	// absent from the JSON when 0.
	UnparsedResourceVersions int64 `json:"unparsedResourceVersions,omitempty"`
	// RecorderError is set when the history is incomplete.
	RecorderError string `json:"recorderError,omitempty"`
	// HistoryEvents is the number of events the recorder recorded.
	HistoryEvents int64 `json:"historyEvents"`
	// Violations lists the first violations found, by revision.
	Violations []Violation `json:"violations,omitempty"`
}

// OK reports whether no violation was found and everything was checked.
func (v Validation) OK() bool {
	return v.Lost == 0 && v.Duplicated == 0 && v.OutOfOrder == 0 && v.Atomic == 0 && v.Resumable == 0 &&
		v.Bookmarkable == 0 && v.Unexpected == 0 && v.PrevKVMismatches == 0 && v.CacheMismatches == 0 &&
		v.UnsyncedWatchers == 0 && v.RecorderGaps == 0 && v.UnverifiedEvents == 0 && v.RecorderError == "" &&
		v.UnrecordedWrites == 0 && v.UnparsedResourceVersions == 0
}

// Summary is a one-line account of the violations, for an error message.
func (v Validation) Summary() string {
	var parts []string
	add := func(n int64, what string) {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(v.Lost, "lost")
	add(v.Duplicated, "duplicated")
	add(v.OutOfOrder, "out of order")
	add(v.Atomic, "split revisions")
	add(v.Resumable, "not resumable")
	add(v.Bookmarkable, "bookmark violations")
	add(v.Unexpected, "unexpected")
	add(v.PrevKVMismatches, "prevKV mismatches")
	add(v.CacheMismatches, "cache mismatches")
	add(int64(v.UnsyncedWatchers), "unsynced watchers")
	add(v.RecorderGaps, "revisions skipped by the recorder")
	add(v.UnverifiedEvents, "unverified events")
	add(v.UnrecordedWrites, "acknowledged writes the recorder never saw")
	add(v.UnparsedResourceVersions, "unparsed resourceVersions")
	if v.RecorderError != "" {
		parts = append(parts, v.RecorderError)
	}
	if len(v.Violations) > 0 {
		x := v.Violations[0]
		first := fmt.Sprintf("first: %s at revision %d (watcher %d", x.Kind, x.Revision, x.Watcher)
		if x.Key != "" {
			first += fmt.Sprintf(", key %q", x.Key)
		}
		parts = append(parts, first+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Violation is one broken guarantee.
type Violation struct {
	// Watcher is the watcher's id, -1 for the history recorder.
	Watcher int `json:"watcher"`
	// Kind is ordered, unique, atomic, reliable, resumable, bookmarkable,
	// unexpected, prevKV, cache, recorder-gap, unrecorded-write or
	// unparsed-resourceVersion.
	Kind     string `json:"kind"`
	Revision int64  `json:"revision"`         // where it happened
	Key      string `json:"key,omitempty"`    // the key involved, if any
	Detail   string `json:"detail,omitempty"` // what was seen
}

// ResourceCount counts the live objects of one resource.
type ResourceCount struct {
	Resource string `json:"resource"` // e.g. pods
	Objects  int64  `json:"objects"`  // live keys
}

// FinalState is etcd's state when the writes ended.
type FinalState struct {
	Revision        int64 `json:"revision"`        // etcd's revision when the writes ended
	CompactRevision int64 `json:"compactRevision"` // the last revision compacted to
	// Objects counts the live keys of every resource of the load;
	// Resources splits them, in the order pods, configmaps, events.
	Objects   int64           `json:"objects"`
	Resources []ResourceCount `json:"resources"` // live keys per resource
}

// InformerStats summarises one informer: the model's reflector (or watch
// cache), or a client-go informer through kube-apiserver. Stream,
// Connection, Sessions and ProgressNotifies are the model's; Requests,
// Bookmarks and ResponseBytes client-go's (WatcherStats and KubeRunResult's
// InformerStats before RunSchemaVersion 4).
type InformerStats struct {
	ID         int    `json:"id"`         // the informer's id
	Resource   string `json:"resource"`   // the resource it watches
	Stream     int    `json:"stream"`     // its watch stream (the model's)
	Connection int    `json:"connection"` // its connection (the model's)
	// Events are the watch events it received (initial events and
	// bookmarks apart).
	Events int64 `json:"events"`
	Lists  int   `json:"lists"` // LIST phases, the first included
	// Sessions counts its Watch calls (the model's).
	Sessions         int64 `json:"sessions"`
	ProgressNotifies int64 `json:"progressNotifies"` // progress notifications received (the model's)
	// Requests is every LIST, WATCH and WATCHLIST it sent; Bookmarks the
	// bookmarks it received; ResponseBytes every byte of its responses,
	// streams included (client-go's).
	Requests      int   `json:"requests,omitempty"`
	Bookmarks     int64 `json:"bookmarks,omitempty"`
	ResponseBytes int64 `json:"responseBytes,omitempty"`
	LastRevision  int64 `json:"lastRevision"` // its last revision (lastSyncResourceVersion)
	CacheObjects  int   `json:"cacheObjects"` // objects in its cache at the end
	HeldBack      bool  `json:"heldBack"`     // whether it was held back
	// Cache is true for kube-apiserver's watch cache of the resource
	// (profile apiserver-cache), which the informers of the resource read
	// from: its ID follows the informers'.
	Cache bool `json:"cache,omitempty"`
}

// Interval is one second of a run, from the start of the writes.
// Writes are attributed to the interval they were scheduled in (their
// latency) and the one they ended in (completions, errors); events to the
// one they arrived in. Events counts every watcher's; the delivery
// percentiles leave out those of watchers held back, from their hold on
// (as DeliveryStats.FromResponse), which HeldBackEvents and
// HeldBackDeliveryP99Ms give.
type Interval struct {
	StartMs         float64 `json:"startMs"`         // offset from the start of the writes, ms
	WritesScheduled int64   `json:"writesScheduled"` // writes due in this second
	WritesCompleted int64   `json:"writesCompleted"` // writes that succeeded in it
	WriteErrors     int64   `json:"writeErrors"`     // writes that failed in it
	WriteP50Ms      float64 `json:"writeP50Ms"`      // median latency of the writes due in it, ms
	WriteP99Ms      float64 `json:"writeP99Ms"`      // 99th percentile, ms
	WriteP999Ms     float64 `json:"writeP999Ms"`     // 99.9th percentile, ms
	Events          int64   `json:"events"`          // events received in it, every watcher's
	DeliveryP50Ms   float64 `json:"deliveryP50Ms"`   // median delivery latency from the response, ms, of watchers not held back
	DeliveryP99Ms   float64 `json:"deliveryP99Ms"`   // 99th percentile, ms, of watchers not held back
	DeliveryP999Ms  float64 `json:"deliveryP999Ms"`  // 99.9th percentile, ms, of watchers not held back
	// HeldBackEvents counts the events of Events that watchers held back
	// received, from their hold on (DeliveryStats.HeldBack); 0 and absent
	// before any hold.
	HeldBackEvents int64 `json:"heldBackEvents,omitempty"`
	// HeldBackDeliveryP99Ms is the 99th percentile of those events'
	// delivery latency from the response, ms; absent when none was timed.
	HeldBackDeliveryP99Ms float64 `json:"heldBackDeliveryP99Ms,omitempty"`
}

// SelfStats is the resource use of the lwbench process over the run, so a
// reader can see whether the load generator was the bottleneck.
type SelfStats struct {
	WallMs float64 `json:"wallMs"` // wall time measured, ms
	// CPUSeconds is user + system CPU time; CPUCores is CPUSeconds over
	// the wall time (1.0 = one core busy throughout).
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUCores   float64 `json:"cpuCores"` // CPUSeconds over the wall time
	// NumCPU is the machine's logical CPUs.
	NumCPU int `json:"numCPU"`
	// MaxRSSBytes is the peak resident set; PeakHeapBytes the peak Go heap
	// in use, sampled every second.
	MaxRSSBytes    int64   `json:"maxRSSBytes"`
	PeakHeapBytes  int64   `json:"peakHeapBytes"`  // peak Go heap in use
	PeakGoroutines int     `json:"peakGoroutines"` // peak goroutines
	GCCount        int64   `json:"gcCount"`        // garbage collections
	GCPauseMs      float64 `json:"gcPauseMs"`      // their stop-the-world pauses, ms
	// IncludesEmbeddedEtcd is true when the etcd member ran in this
	// process, so these figures include it.
	IncludesEmbeddedEtcd bool `json:"includesEmbeddedEtcd"`
	// Etcd is the member's own CPU and memory, read from its /metrics
	// (process_cpu_seconds_total, process_resident_memory_bytes) before
	// and after; nil when it could not be read or runs in this process.
	Etcd *ProcessStats `json:"etcd,omitempty"`
	// LoadAverageMax is the machine's highest one-minute load average
	// (/proc/loadavg), sampled every second; 0 where it cannot be read.
	// Above NumCPU, runnable processes waited for a CPU (BusyWarnings).
	LoadAverageMax float64 `json:"loadAverageMax,omitempty"`
	// SchedLatencyP99Ms is the 99th percentile of how long this process's
	// goroutines waited, runnable, for a CPU during the run (the Go
	// runtime's /sched/latencies:seconds, runtime/metrics), ms: what
	// lwbench's own starved CPU adds to the latencies it measures.
	SchedLatencyP99Ms float64 `json:"schedLatencyP99Ms,omitempty"`
	// CPULimitCores is the CPU this process's cgroup may use, in cores
	// (cgroup v2 cpu.max: quota over period); 0 when unlimited or
	// unreadable (no cgroup v2, or a limit set only on a parent), and then
	// NumCPU is the limit (GeneratorLimited).
	CPULimitCores float64 `json:"cpuLimitCores,omitempty"`
}

// ProcessStats is another process's CPU and memory over the run.
type ProcessStats struct {
	Endpoint   string  `json:"endpoint"`   // the member read
	CPUSeconds float64 `json:"cpuSeconds"` // CPU over the run, s
	CPUCores   float64 `json:"cpuCores"`   // CPUSeconds over the time between the reads
	RSSBytes   int64   `json:"rssBytes"`   // resident memory at the end
}

// Ms converts a duration to float milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
