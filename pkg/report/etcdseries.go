package report

// EtcdMetrics is what etcd's own /metrics said during a run, scraped
// every IntervalMs: in a run through kube-apiserver the first member's;
// in `lwbench run --workers` and `lwbench scrape` every member's, and
// then, with several members, Phases are summed over them and Members
// hold each one's.
type EtcdMetrics struct {
	// Endpoint is the member's client URL whose /metrics was read (the
	// first member's, with Members).
	Endpoint string `json:"endpoint"`
	// Source is "" when the samples come from the member's /metrics, and
	// EtcdMetricsFromStatus when /metrics could not be read for this
	// member alone and its db sizes came from the Maintenance API's
	// Status instead; Phases is then empty.
	Source     string  `json:"source,omitempty"`
	IntervalMs float64 `json:"intervalMs"` // between scrapes
	// Samples are the database's sizes at each scrape, in time order (the
	// first member's, with Members).
	Samples []EtcdDBSample `json:"samples"`
	// Phases are etcd's counters' increase over each phase (as
	// EtcdPhase; a scrape's increase counts in the phase current at the
	// scrape), in the order first seen. With Members they are the
	// members' summed as EtcdMemberMetrics says.
	Phases []EtcdMetricsPhase `json:"phases"`
	// Members are each member's own figures, in the order of the
	// endpoints given; nil when one member was read.
	Members []EtcdMemberMetrics `json:"members,omitempty"`
	// Errors counts the scrapes that failed (of every member); Error is
	// the first failure (of the first member that had one).
	Errors int    `json:"errors,omitempty"`
	Error  string `json:"error,omitempty"`
	// FailedAtMs are when each failed scrape was issued, ms since the
	// run's epoch, in time order (one per Errors, every member's). A Status read
	// (Source EtcdMetricsFromStatus) gives up after IntervalMs, a
	// /metrics scrape after 10 s. A defragmentation blocks the member's
	// Status while it
	// runs: defrag holds the backend's read transaction lock
	// (go.etcd.io/etcd/server/v3 storage/backend/backend.go), which
	// Status waits for to read the storage version (etcdserver/api/v3rpc/
	// maintenance.go Status, etcdserver/server.go StorageVersion), so
	// reads issued during it, or within one interval before, fail.
	FailedAtMs []float64 `json:"failedAtMs,omitempty"`
}

// EtcdMemberMetrics is one member's own /metrics over a run of several
// members (EtcdMetrics.Members). Its Phases are its own; the cluster's
// (EtcdMetrics.Phases) sum them phase by phase: counters, watchers and db
// size added, each p99 computed from the members' histogram buckets added
// bucket by bucket (as Prometheus' histogram_quantile of a sum by le),
// never a mean of the members' p99s, and a phase's duration the longest
// member's. Every member applies every committed write, so the sum of
// puts, deletes, txns and proposals is the cluster's times the members;
// ranges, watchers and RPCs are served by the member a client reached, so
// their sum is the cluster's.
type EtcdMemberMetrics struct {
	// Endpoint is the member's client URL whose /metrics was read.
	Endpoint string `json:"endpoint"`
	// Samples are its database's sizes at each scrape, in time order.
	Samples []EtcdDBSample `json:"samples"`
	// Phases are its counters' increase over each phase, in the order
	// first seen.
	Phases []EtcdMetricsPhase `json:"phases"`
	// Errors counts its scrapes that failed; Error is the first failure.
	Errors int    `json:"errors,omitempty"`
	Error  string `json:"error,omitempty"`
}

// EtcdHandledRPCs counts the RPCs of one method that a member (or the
// members, summed) completed with one status code in one phase:
// the increase of grpc_server_handled_total (go-grpc-prometheus
// server_metrics.go, which etcd's server/embed/etcd.go registers),
// summed over grpc_type. A unary RPC counts when it returns; a stream
// (Watch, LeaseKeepAlive, Snapshot) when it ends, so a watch open over
// the whole load counts in the phase it was closed in.
type EtcdHandledRPCs struct {
	// Service is grpc_service, e.g. etcdserverpb.KV; Method grpc_method,
	// e.g. Range, Txn, Put, Watch, LeaseGrant.
	Service string `json:"service"`
	Method  string `json:"method"`
	// Code is grpc_code: OK, or the failure's (Unavailable,
	// DeadlineExceeded, Canceled, OutOfRange for a compacted revision, ...).
	Code  string `json:"code"`
	Count int64  `json:"count"`
}

// EtcdMetricsFromStatus is EtcdMetrics.Source when the db sizes were
// read with the Maintenance API's Status (DbSize, DbSizeInUse: etcd
// api/etcdserverpb/rpc.proto StatusResponse), not from /metrics.
const EtcdMetricsFromStatus = "status"

// EtcdDBSample is one scrape's database sizes
// (etcd_mvcc_db_total_size_in_bytes, etcd_mvcc_db_total_size_in_use_in_bytes:
// go.etcd.io/etcd/server/v3/storage/mvcc/metrics.go).
type EtcdDBSample struct {
	AtMs             float64 `json:"atMs"`  // since the run's epoch
	Phase            string  `json:"phase"` // the counting proxy's phase then
	DBSizeBytes      int64   `json:"dbSizeBytes"`
	DBSizeInUseBytes int64   `json:"dbSizeInUseBytes"`
}

// EtcdMetricsPhase is etcd's own account of one phase: counter increases
// and, from histograms' bucket increases, the 99th percentile
// (interpolated within its bucket, as Prometheus' histogram_quantile).
type EtcdMetricsPhase struct {
	Phase      string  `json:"phase"`
	DurationMs float64 `json:"durationMs"` // between the phase's first and last scrape's predecessors
	// Puts, Deletes, Ranges and Txns are etcd_mvcc_put_total,
	// etcd_mvcc_delete_total, etcd_mvcc_range_total, etcd_mvcc_txn_total
	// (server/storage/mvcc/metrics.go): operations inside etcd, a Txn's
	// own puts and ranges included, which the proxy counts as one Txn;
	// Txns counts only mvcc transactions of more than one operation
	// (server/storage/mvcc/metrics_txn.go EndCommon), and kube-apiserver's
	// (a compare, then one put or delete) showed 0 in runs here.
	Puts    int64 `json:"puts"`
	Deletes int64 `json:"deletes"`
	Ranges  int64 `json:"ranges"`
	Txns    int64 `json:"txns"`
	// ProposalsCommitted is the increase of
	// etcd_server_proposals_committed_total, a gauge holding the
	// committed raft index (server/etcdserver/metrics.go): raft entries
	// committed.
	ProposalsCommitted int64 `json:"proposalsCommitted"`
	// Watchers and SlowWatchers are the largest
	// etcd_debugging_mvcc_watcher_total and
	// etcd_debugging_mvcc_slow_watcher_total (gauges,
	// server/storage/mvcc/metrics.go) seen in the phase: watchers etcd
	// holds, and those behind on their events (unsynced).
	Watchers     int64 `json:"watchers"`
	SlowWatchers int64 `json:"slowWatchers"`
	// DBSizeBytes is the largest etcd_mvcc_db_total_size_in_bytes seen at
	// a scrape in the phase; 0 in results written before lwbench read it.
	DBSizeBytes int64 `json:"dbSizeBytes,omitempty"`
	// BackendCommits and BackendCommitP99Ms are
	// etcd_disk_backend_commit_duration_seconds
	// (server/storage/backend/metrics.go): bbolt commits and their p99;
	// WALFsyncs and WALFsyncP99Ms etcd_disk_wal_fsync_duration_seconds
	// (server/storage/wal/metrics.go). P99 is 0 without samples.
	BackendCommits     int64   `json:"backendCommits"`
	BackendCommitP99Ms float64 `json:"backendCommitP99Ms"`
	WALFsyncs          int64   `json:"walFsyncs"`
	WALFsyncP99Ms      float64 `json:"walFsyncP99Ms"`
	// HandledRPCs are the RPCs completed in the phase by method and code
	// (grpc_server_handled_total), sorted by service, method and code;
	// series without an increase are left out.
	HandledRPCs []EtcdHandledRPCs `json:"handledRPCs,omitempty"`
}

// EtcdWriteSeries is the writes etcd received per resource over time,
// from the counting proxy (EtcdVerb EtcdWrite: Put, DeleteRange, a Txn
// that puts or deletes), sampled every IntervalMs. Only resources with a
// write are listed.
type EtcdWriteSeries struct {
	IntervalMs float64 `json:"intervalMs"`
	// Resources are the resources written (EtcdRequests.Resource, "" for
	// none), byte-wise; each sample's Writes follow their order.
	Resources []string          `json:"resources"`
	Samples   []EtcdWriteSample `json:"samples"`
}

// EtcdWriteSample is the writes of one interval, ending at AtMs.
type EtcdWriteSample struct {
	AtMs  float64 `json:"atMs"`  // since the run's epoch
	Phase string  `json:"phase"` // the proxy's phase at AtMs
	// Writes are the interval's writes per resource, in
	// EtcdWriteSeries.Resources' order; shorter when later resources had
	// none yet.
	Writes []int64 `json:"writes"`
}

// ServerMetrics is what `lwbench scrape` read over a load divided among
// workers, following their barrier: etcd's own /metrics per phase (its
// fields at the top level, as scrape wrote them before it read
// kube-apiserver's) and, with --kubeconfig or --apiserver-metrics,
// kube-apiserver's own per phase. `lwbench merge --etcd-metrics` sets
// both beside the workers' merged figures.
type ServerMetrics struct {
	// EtcdMetrics is nil when no etcd member was read (scrape without
	// --endpoints).
	*EtcdMetrics
	// APIServers are the CPU and memory of the kube-apiserver read (the
	// one --kubeconfig's server reaches, named "apiserver"), by phase, from its
	// process_cpu_seconds_total and process_resident_memory_bytes.
	APIServers []APIServerUsage `json:"apiservers,omitempty"`
	// APIServerMetrics are its own /metrics per phase, as
	// RunResult.APIServerMetrics.
	APIServerMetrics []APIServerMetric `json:"apiserverMetrics,omitempty"`
}
