package report

// EtcdMetrics is what etcd's own /metrics said during a run through
// kube-apiserver: the first member's, scraped every IntervalMs.
type EtcdMetrics struct {
	// Endpoint is the member's client URL whose /metrics was read.
	Endpoint string `json:"endpoint"`
	// Source is "" when the samples come from the member's /metrics, and
	// EtcdMetricsFromStatus when /metrics could not be read for this
	// member alone and its db sizes came from the Maintenance API's
	// Status instead; Phases is then empty.
	Source     string  `json:"source,omitempty"`
	IntervalMs float64 `json:"intervalMs"` // between scrapes
	// Samples are the database's sizes at each scrape, in time order.
	Samples []EtcdDBSample `json:"samples"`
	// Phases are etcd's counters' increase over each phase (as
	// EtcdPhase; a scrape's increase counts in the phase current at the
	// scrape), in the order first seen.
	Phases []EtcdMetricsPhase `json:"phases"`
	// Errors counts the scrapes that failed; Error is the first failure.
	Errors int    `json:"errors,omitempty"`
	Error  string `json:"error,omitempty"`
	// FailedAtMs are when each failed scrape was issued, ms since the
	// run's epoch, in time order (one per Errors). A Status read
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
	// BackendCommits and BackendCommitP99Ms are
	// etcd_disk_backend_commit_duration_seconds
	// (server/storage/backend/metrics.go): bbolt commits and their p99;
	// WALFsyncs and WALFsyncP99Ms etcd_disk_wal_fsync_duration_seconds
	// (server/storage/wal/metrics.go). P99 is 0 without samples.
	BackendCommits     int64   `json:"backendCommits"`
	BackendCommitP99Ms float64 `json:"backendCommitP99Ms"`
	WALFsyncs          int64   `json:"walFsyncs"`
	WALFsyncP99Ms      float64 `json:"walFsyncP99Ms"`
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
