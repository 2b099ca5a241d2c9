package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MemberStats is one member of the target and what the clients pinned to
// it saw. Members are listed in the order of the target's endpoints.
type MemberStats struct {
	Name     string `json:"name"`     // the member's name, from the member list ("" if unknown)
	Endpoint string `json:"endpoint"` // its client URL as lwbench dialled it
	// ID is the member ID in hexadecimal, as etcdctl prints it.
	ID            string `json:"id"`
	Version       string `json:"version"`       // etcd version it reported at the start
	LeaderAtStart bool   `json:"leaderAtStart"` // whether it led when the run began
	// WatchConnections and WriterConnections count the connections pinned
	// to this member (scenario.pinConnections); 0 when connections spanned
	// every member.
	WatchConnections  int `json:"watchConnections"`
	WriterConnections int `json:"writerConnections"` // writer connections pinned to it
	Watchers          int `json:"watchers"`          // watchers whose stream was pinned to it
	// Writes and Delivery are what the clients of this member saw; nil
	// unless connections were pinned.
	Writes   *MemberWrites   `json:"writes,omitempty"`
	Delivery *MemberDelivery `json:"delivery,omitempty"`
	// DBSizeBytes and DBSizeInUseBytes are the member's database size at
	// the end; 0 when Error is set.
	DBSizeBytes      int64  `json:"dbSizeBytes"`
	DBSizeInUseBytes int64  `json:"dbSizeInUseBytes"` // in use then
	Error            string `json:"error,omitempty"`  // why its status could not be read at the end
}

// MemberWrites are the writes sent over the connections pinned to one
// member, latency from schedule as in WriteStats.
type MemberWrites struct {
	Completed int64   `json:"completed"` // writes that succeeded
	Errors    int64   `json:"errors"`    // writes that failed, timeouts included
	Timeouts  int64   `json:"timeouts"`  // of which timeouts
	Latency   Latency `json:"latency"`   // from each write's scheduled time to its end
}

// MemberDelivery are the events received by the watchers pinned to one
// member.
type MemberDelivery struct {
	Events      int64 `json:"events"`      // events received, every watcher's
	TimedEvents int64 `json:"timedEvents"` // of which matched with their write
	// FromResponse is from the writer's response, as
	// DeliveryStats.FromResponse: without the events of watchers held
	// back, from their hold on.
	FromResponse Latency `json:"fromResponse"`
}

// MemberDefrag is the defragmentation of one member.
type MemberDefrag struct {
	Endpoint string `json:"endpoint"` // the member's client URL
	// Leader is true for the member that led when the pass began; it is
	// defragmented last.
	Leader           bool    `json:"leader"`
	AtMs             float64 `json:"atMs"`             // when it started, ms since the epoch
	DurationMs       float64 `json:"durationMs"`       // how long the member was blocked, ms
	BeforeBytes      int64   `json:"beforeBytes"`      // file size before
	BeforeInUseBytes int64   `json:"beforeInUseBytes"` // in use before
	AfterBytes       int64   `json:"afterBytes"`       // file size after
	AfterInUseBytes  int64   `json:"afterInUseBytes"`  // in use after
	Error            string  `json:"error,omitempty"`  // why it failed; empty on success
}

// Fault is one fault injected into a cluster lwbench started, and what it
// did to the clients. Offsets (…AtMs) run from the run's epoch; durations
// named …Ms run from the injection.
type Fault struct {
	// Kind is kill-leader, kill-follower, pause-leader, pause-follower,
	// partition-leader or partition-follower.
	Kind     string `json:"kind"`
	Member   string `json:"member"`   // the member's name
	Endpoint string `json:"endpoint"` // its client URL
	// AtMs is when the fault was injected; PlannedDurationMs how long the
	// member was to stay killed, paused or cut off; EndedAtMs when it was
	// restarted, resumed or healed (0 if that failed).
	AtMs              float64 `json:"atMs"`
	PlannedDurationMs float64 `json:"plannedDurationMs"` // how long it was to last
	EndedAtMs         float64 `json:"endedAtMs"`         // when it was undone
	// LeaderBefore and LeaderAfter name the leader just before the
	// injection and once the cluster was healthy again.
	LeaderBefore string `json:"leaderBefore"`
	LeaderAfter  string `json:"leaderAfter"` // leader once healthy again
	// Recovered is true when writes succeeded again and every watcher and
	// the history recorder saw a revision written after the injection,
	// within the recovery timeout.
	Recovered bool `json:"recovered"`
	// RecoveryRevision is the revision of the first write sent after the
	// injection that succeeded.
	RecoveryRevision int64 `json:"recoveryRevision"`
	// WriteRecoveryMs is when that write succeeded; WatchRecoveryMs when
	// the last watcher (or the recorder) saw its revision; RecoveryMs the
	// later of the two: the time to recover.
	WriteRecoveryMs float64 `json:"writeRecoveryMs"`
	WatchRecoveryMs float64 `json:"watchRecoveryMs"` // when the last watcher saw RecoveryRevision
	RecoveryMs      float64 `json:"recoveryMs"`      // the later of the two
	// SlowestWatcher is the watcher that saw RecoveryRevision last (-1:
	// the history recorder).
	SlowestWatcher int `json:"slowestWatcher"`
	// HeldWatchers counts the watchers the run itself held back across a
	// compaction at the time; recovery does not wait for them.
	HeldWatchers int `json:"heldWatchers"`
	// HealthyMs is when every member answered a status request with a
	// leader again, after the fault was undone.
	HealthyMs float64 `json:"healthyMs"`
	// SettledAtMs ends the window the counts below cover: the later of
	// recovery and health, plus the write timeout (a write sent into the
	// fault can fail that late), or the next fault.
	SettledAtMs float64 `json:"settledAtMs"`
	// Relists counts LIST phases started in the window, by
	// RelistReasons (watch-error, list-error, compacted), except those of
	// watchers the run held back across a compaction on purpose;
	// WatchersRelisted the watchers that relisted.
	Relists          int            `json:"relists"`
	RelistReasons    map[string]int `json:"relistReasons,omitempty"` // relists per reason
	WatchersRelisted int            `json:"watchersRelisted"`        // watchers that relisted in the window
	// WriteErrors and WriteTimeouts count the writers' operations that
	// ended in an error in the window.
	WriteErrors   int64 `json:"writeErrors"`
	WriteTimeouts int64 `json:"writeTimeouts"` // of which timeouts
	// Probe is a fixed-rate probe of small writes and reads on a
	// connection to every member, from one second before the injection to
	// the end of the window.
	Probe FaultProbe `json:"probe"`
	// Error says why the fault could not be injected or undone, or why
	// recovery was not seen.
	Error string `json:"error,omitempty"`
}

// FaultProbe is what the probe saw during a fault (pkg/compaction Probe).
type FaultProbe struct {
	Writes ProbeOps `json:"writes"` // puts of one key
	Reads  ProbeOps `json:"reads"`  // linearizable gets of it
	// LongestStallMs is the longest time during which an operation was
	// due and none succeeded.
	LongestStallMs float64        `json:"longestStallMs"`
	Errors         map[string]int `json:"errors,omitempty"` // distinct error messages and their counts
}

// ProbeOps summarises one kind of probe operation.
type ProbeOps struct {
	Count    int64   `json:"count"`    // operations issued
	Errors   int64   `json:"errors"`   // failed, timeouts included
	Timeouts int64   `json:"timeouts"` // of which timeouts
	Latency  Latency `json:"latency"`  // from the scheduled time to the end
}

// Cleanup is what lwbench deleted at the end of a run against a cluster
// it does not own, nothing else: through etcd, the keys it created and
// the leases it granted (KeysDeleted, LeasesRevoked, KeysLeft); through
// kube-apiserver (--kubeconfig), the objects it wrote in the namespaces
// it created, then those namespaces (Namespaces, ObjectsDeleted,
// NamespacesLeft: KubeRunResult's namespaceCleanup before
// RunSchemaVersion 4).
type Cleanup struct {
	KeysDeleted   int64 `json:"keysDeleted"`   // keys deleted
	LeasesRevoked int64 `json:"leasesRevoked"` // leases revoked (with the events attached to them)
	// KeysLeft counts the keys under the prefix afterwards; other clients'
	// keys when the prefix was reused; -1 if it could not be counted.
	KeysLeft int64 `json:"keysLeft"`
	// Namespaces are the namespaces the run created and deleted, in
	// creation order; no other namespace is deleted.
	Namespaces []string `json:"namespaces,omitempty"`
	// ObjectsDeleted counts the pods, configmaps and events the run
	// deleted in them before deleting the namespaces.
	ObjectsDeleted int `json:"objectsDeleted,omitempty"`
	// NamespacesLeft are the namespaces still present (Terminating) when
	// the wait ended; the cluster's namespace controller removes them
	// later.
	NamespacesLeft []string `json:"namespacesLeft,omitempty"`
	DurationMs     float64  `json:"durationMs"`      // how long it took, ms
	Error          string   `json:"error,omitempty"` // the first error; empty on success
}

// RelistSummary returns the fault's relists with their reasons, as
// "4 (3 watch-error, 1 compacted)"; reasons in lexical order.
func (f Fault) RelistSummary() string {
	s := strconv.Itoa(f.Relists)
	if len(f.RelistReasons) == 0 {
		return s
	}
	reasons := make([]string, 0, len(f.RelistReasons))
	for _, r := range slices.Sorted(maps.Keys(f.RelistReasons)) {
		reasons = append(reasons, fmt.Sprintf("%d %s", f.RelistReasons[r], r))
	}
	return s + " (" + strings.Join(reasons, ", ") + ")"
}
