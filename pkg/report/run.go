package report

import (
	"fmt"
	"time"
)

// RunSchemaVersion is the version of the RunResult JSON document. It
// changes when a field is renamed, removed or changes meaning; adding a
// field keeps it.
const RunSchemaVersion = 1

// RunResult is the versioned result of `lwbench run`. Durations and
// latencies are float milliseconds with the unit in the field name, sizes
// are bytes, revisions are int64.
type RunResult struct {
	SchemaVersion int       `json:"schemaVersion"`
	StartedAt     time.Time `json:"startedAt"`
	// Target describes the etcd the run drove.
	Target Target `json:"target"`
	// Scenario echoes the options that shaped the load.
	Scenario Scenario `json:"scenario"`

	Writes     WriteStats     `json:"writes"`
	Delivery   DeliveryStats  `json:"delivery"`
	Relists    []Relist       `json:"relists"`
	Compaction []Compaction   `json:"compactions"`
	Defrag     *Defrag        `json:"defrag,omitempty"`
	DBSize     DBSizes        `json:"dbSize"`
	Validation Validation     `json:"validation"`
	Final      FinalState     `json:"final"`
	Watchers   []WatcherStats `json:"watchers"`
}

// Target is the etcd a run drove.
type Target struct {
	// Embedded is true when lwbench started its own member.
	Embedded    bool     `json:"embedded"`
	Endpoints   []string `json:"endpoints"`
	EtcdVersion string   `json:"etcdVersion"`
}

// Scenario is the shape of the load.
type Scenario struct {
	Prefix                string  `json:"prefix"`
	Objects               int     `json:"objects"`
	Namespaces            int     `json:"namespaces"`
	Watchers              int     `json:"watchers"`
	WriteRatePerSecond    float64 `json:"writeRatePerSecond"`
	DurationMs            float64 `json:"durationMs"`
	PageSize              int64   `json:"pageSize"`
	CompactionIntervalMs  float64 `json:"compactionIntervalMs"`
	CreatePercent         int     `json:"createPercent"`
	UpdatePercent         int     `json:"updatePercent"`
	DeletePercent         int     `json:"deletePercent"`
	WriterConcurrency     int     `json:"writerConcurrency"`
	HeldBackWatchers      int     `json:"heldBackWatchers"`
	Seed                  uint64  `json:"seed"`
	Defragment            bool    `json:"defragment"`
	PhysicalCompaction    bool    `json:"physicalCompaction"`
	ProgressRequestPeriod float64 `json:"progressRequestPeriodMs"`
}

// Latency summarises a latency distribution in milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
	MaxMs  float64 `json:"maxMs"`
	MeanMs float64 `json:"meanMs"`
}

// WriteStats counts the writers' operations. Latency runs from each
// operation's scheduled send time, so a stall that delays later sends is
// counted in full (no coordinated omission); failed operations are counted
// in it too, at the time they failed.
type WriteStats struct {
	Planned   int64   `json:"planned"`
	Completed int64   `json:"completed"`
	Errors    int64   `json:"errors"`
	Creates   int64   `json:"creates"`
	Updates   int64   `json:"updates"`
	Deletes   int64   `json:"deletes"`
	Conflicts int64   `json:"conflicts"`
	Latency   Latency `json:"latency"`
	// ErrorSamples holds up to a few distinct error messages.
	ErrorSamples []string `json:"errorSamples,omitempty"`
}

// DeliveryStats measures watch events from their write to their receipt by
// a watcher, merged across watchers.
type DeliveryStats struct {
	// Events counts events received by all watchers.
	Events int64 `json:"events"`
	// FromCommit runs from the moment the writer got etcd's response,
	// which is after the commit; an event that arrives before the
	// response counts as 0 and in DeliveredBeforeResponse.
	FromCommit Latency `json:"fromCommit"`
	// FromSend runs from the moment the writer sent the request, an upper
	// bound of the delay from commit.
	FromSend                Latency `json:"fromSend"`
	DeliveredBeforeResponse int64   `json:"deliveredBeforeResponse"`
}

// Relist is one full LIST a watcher made after its watch failed.
type Relist struct {
	Watcher int `json:"watcher"`
	// Reason is what forced it, e.g. "compacted".
	Reason string `json:"reason"`
	// FromRevision is the revision the failed watch asked for;
	// CompactRevision the one etcd reported.
	FromRevision    int64   `json:"fromRevision"`
	CompactRevision int64   `json:"compactRevision"`
	ListRevision    int64   `json:"listRevision"`
	AtMs            float64 `json:"atMs"`
	DurationMs      float64 `json:"durationMs"`
	Objects         int64   `json:"objects"`
	Bytes           int64   `json:"bytes"`
	Pages           int     `json:"pages"`
}

// Compaction is one compaction the compactor issued.
type Compaction struct {
	AtMs       float64 `json:"atMs"`
	Revision   int64   `json:"revision"`
	DurationMs float64 `json:"durationMs"`
	Error      string  `json:"error,omitempty"`
}

// Defrag is one defragmentation of the member.
type Defrag struct {
	AtMs       float64 `json:"atMs"`
	DurationMs float64 `json:"durationMs"`
	Error      string  `json:"error,omitempty"`
}

// DBSizes are the member's dbSize (file) and dbSizeInUse, as etcd's
// Maintenance.Status reports them, at three points of the run.
type DBSizes struct {
	BeforeCompactionBytes      int64 `json:"beforeCompactionBytes"`
	BeforeCompactionInUseBytes int64 `json:"beforeCompactionInUseBytes"`
	AfterCompactionBytes       int64 `json:"afterCompactionBytes"`
	AfterCompactionInUseBytes  int64 `json:"afterCompactionInUseBytes"`
	AfterDefragBytes           int64 `json:"afterDefragBytes"`
	AfterDefragInUseBytes      int64 `json:"afterDefragInUseBytes"`
	EndBytes                   int64 `json:"endBytes"`
	EndInUseBytes              int64 `json:"endInUseBytes"`
}

// Validation reports violations of etcd's watch guarantees found by
// comparing every watcher's events with the writers' record and, at the
// end, every watcher's cache with etcd.
type Validation struct {
	// Lost counts writes inside a watcher's covered window (from its watch
	// start to the last revision it was told it had seen) that it never got.
	Lost int64 `json:"lost"`
	// Duplicated counts events delivered twice to one watch.
	Duplicated int64 `json:"duplicated"`
	// OutOfOrder counts events with a revision below an earlier one.
	OutOfOrder int64 `json:"outOfOrder"`
	// PrevKVMismatches counts events whose prevKV disagrees with the cache.
	PrevKVMismatches int64 `json:"prevKVMismatches"`
	// CacheMismatches counts keys whose presence or mod_revision differs
	// between a watcher's cache and etcd at the final revision.
	CacheMismatches int64 `json:"cacheMismatches"`
	// UnsyncedWatchers could not confirm the final revision in time.
	UnsyncedWatchers int `json:"unsyncedWatchers"`
	// Violations lists the first violations found, with revisions.
	Violations []Violation `json:"violations,omitempty"`
}

// OK reports whether no violation was found.
func (v Validation) OK() bool {
	return v.Lost == 0 && v.Duplicated == 0 && v.OutOfOrder == 0 && v.PrevKVMismatches == 0 &&
		v.CacheMismatches == 0 && v.UnsyncedWatchers == 0
}

// Violation is one broken guarantee.
type Violation struct {
	Watcher  int    `json:"watcher"`
	Kind     string `json:"kind"`
	Revision int64  `json:"revision"`
	Key      string `json:"key,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// FinalState is etcd's state when the run ended.
type FinalState struct {
	Revision        int64 `json:"revision"`
	CompactRevision int64 `json:"compactRevision"`
	// Objects counts the live keys under the watched prefix.
	Objects int64 `json:"objects"`
}

// WatcherStats summarises one watcher.
type WatcherStats struct {
	ID           int   `json:"id"`
	Events       int64 `json:"events"`
	Lists        int   `json:"lists"`
	LastRevision int64 `json:"lastRevision"`
	CacheObjects int   `json:"cacheObjects"`
	HeldBack     bool  `json:"heldBack"`
}

// Ms converts a duration to float milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MakeRunTable lays a run result out as metric/value rows, the summary
// `lwbench run` prints.
func MakeRunTable(r *RunResult) Table {
	lat := func(l Latency) string {
		return fmt.Sprintf("p50 %.2f / p99 %.2f / max %.2f ms", l.P50Ms, l.P99Ms, l.MaxMs)
	}
	var relistMs, relistObjects string
	if len(r.Relists) > 0 {
		var maxMs float64
		var objs int64
		for _, rl := range r.Relists {
			maxMs = max(maxMs, rl.DurationMs)
			objs += rl.Objects
		}
		relistMs = fmt.Sprintf("%.2f ms (longest)", maxMs)
		relistObjects = fmt.Sprint(objs)
	} else {
		relistMs, relistObjects = "-", "0"
	}
	defrag := "-"
	if r.Defrag != nil {
		defrag = fmt.Sprintf("%.2f ms", r.Defrag.DurationMs)
		if r.Defrag.Error != "" {
			defrag += " (error: " + r.Defrag.Error + ")"
		}
	}
	var compactRevs string
	for i, c := range r.Compaction {
		if i > 0 {
			compactRevs += ", "
		}
		compactRevs += fmt.Sprint(c.Revision)
		if c.Error != "" {
			compactRevs += " (error)"
		}
	}
	if compactRevs == "" {
		compactRevs = "-"
	}
	v := r.Validation
	rows := [][]string{
		{"etcd", fmt.Sprintf("%s (%s)", r.Target.EtcdVersion, targetKind(r.Target))},
		{"writes completed / planned", fmt.Sprintf("%d / %d", r.Writes.Completed, r.Writes.Planned)},
		{"write errors", fmt.Sprint(r.Writes.Errors)},
		{"write latency (from schedule)", lat(r.Writes.Latency)},
		{"events delivered", fmt.Sprint(r.Delivery.Events)},
		{"delivery latency from commit", lat(r.Delivery.FromCommit)},
		{"delivery latency from send", lat(r.Delivery.FromSend)},
		{"relists", fmt.Sprint(len(r.Relists))},
		{"relist duration", relistMs},
		{"relist objects", relistObjects},
		{"compactions at revision", compactRevs},
		{"db size before compaction", fmt.Sprintf("%d bytes (%d in use)", r.DBSize.BeforeCompactionBytes, r.DBSize.BeforeCompactionInUseBytes)},
		{"db size after compaction", fmt.Sprintf("%d bytes (%d in use)", r.DBSize.AfterCompactionBytes, r.DBSize.AfterCompactionInUseBytes)},
		{"db size after defrag", fmt.Sprintf("%d bytes (%d in use)", r.DBSize.AfterDefragBytes, r.DBSize.AfterDefragInUseBytes)},
		{"defrag duration", defrag},
		{"lost events", fmt.Sprint(v.Lost)},
		{"duplicated events", fmt.Sprint(v.Duplicated)},
		{"out-of-order events", fmt.Sprint(v.OutOfOrder)},
		{"prevKV mismatches", fmt.Sprint(v.PrevKVMismatches)},
		{"cache mismatches at end", fmt.Sprint(v.CacheMismatches)},
		{"unsynced watchers at end", fmt.Sprint(v.UnsyncedWatchers)},
		{"final revision", fmt.Sprint(r.Final.Revision)},
		{"final compact revision", fmt.Sprint(r.Final.CompactRevision)},
		{"live objects", fmt.Sprint(r.Final.Objects)},
	}
	return Table{Header: []string{"metric", "value"}, Rows: rows}
}

func targetKind(t Target) string {
	if t.Embedded {
		return "embedded"
	}
	return "external"
}
