package report

import (
	"fmt"
	"strings"
	"time"
)

// RunSchemaVersion is the version of the RunResult JSON document. It
// changes when a field is renamed, removed or changes meaning; adding a
// field keeps it. Version 2 (lwbench issue 4): final.objects counts every
// resource of the load, not only pods; relists carry their attempts;
// validation counts every watch guarantee. Version 3: the delivery
// latencies (delivery.fromCommit and fromSend, the intervals' and the
// members') leave out the watchers held back across a compaction, from
// their hold on, which delivery.heldBack measures apart; see
// docs/lwbench-json.md.
const RunSchemaVersion = 3

// RunResult is the versioned result of `lwbench run`. Durations and
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
	// Target describes the etcd the run drove.
	Target Target `json:"target"`
	// Scenario echoes the options that shaped the load.
	Scenario Scenario `json:"scenario"`

	Writes WriteStats `json:"writes"` // the writers' counts and latency from schedule
	// Delivery is the events the watchers received and their delivery
	// latency: the latencies are those of the watchers not held back,
	// Delivery.HeldBack the held ones' from their hold on (DeliveryStats).
	Delivery DeliveryStats `json:"delivery"`
	// InitialLists summarises every watcher's first LIST.
	InitialLists ListSummary `json:"initialLists"`
	// Relists are the LIST phases after the first, in watcher order.
	Relists []Relist `json:"relists"`
	// ConsistentReads is set for the apiserver-cache profile.
	ConsistentReads *ConsistentReads `json:"consistentReads,omitempty"`
	Compaction      []Compaction     `json:"compactions"`      // compactions issued, in order
	Defrag          *Defrag          `json:"defrag,omitempty"` // the defragmentation; nil if none
	DBSize          DBSizes          `json:"dbSize"`           // member sizes at four points
	Validation      Validation       `json:"validation"`       // watch guarantees and cache checks
	Final           FinalState       `json:"final"`            // etcd's state when the writes ended
	Watchers        []WatcherStats   `json:"watchers"`         // per watcher, by id
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
	// cluster it does not own).
	Cleanup *Cleanup `json:"cleanup,omitempty"`
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
// latencies (FromCommit, FromSend) leave out the events a watcher
// received from the moment it was held back across a compaction on
// (Scenario.HeldBackWatchers; RunResult.Watchers[].HeldBack,
// KubeRunResult.Informers[].HeldBack), which HeldBack measures apart: a
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
	// FromCommit runs from the moment the writer got etcd's response,
	// which is after the commit; an event that arrives before the
	// response counts as 0 and in DeliveredBeforeResponse. Since
	// RunSchemaVersion 3 and KubeRunSchemaVersion 3 it leaves out
	// HeldBack's events (its Count is TimedEvents - HeldBack.TimedEvents);
	// before, it merged every watcher's.
	FromCommit Latency `json:"fromCommit"`
	// FromSend runs from the moment the writer sent the request, an upper
	// bound of the delay from commit; it leaves out HeldBack's events as
	// FromCommit does.
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
	// the samples of FromCommit and FromSend.
	TimedEvents int64 `json:"timedEvents"`
	// FromCommit is their latency from the writer's response, as
	// DeliveryStats.FromCommit; the events of a hold that a watch cache
	// delivers after the release arrive late by up to the hold's length
	// (KubeRunResult.Holds: releasedAtMs - heldAtMs).
	FromCommit Latency `json:"fromCommit"`
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

// Relist is one LIST phase a watcher ran after its first.
type Relist struct {
	Watcher  int    `json:"watcher"`  // the watcher's id
	Resource string `json:"resource"` // the resource it watches
	// Cache is true when the watcher is a watch cache (WatcherStats.Cache),
	// whose relists read etcd; a watcher served by a cache relists from
	// the cache (etcd sees at most a consistent read's current revision).
	Cache bool `json:"cache,omitempty"`
	// Reason is what forced it: "compacted", "watch-error", "list-error".
	Reason string `json:"reason"`
	// FromRevision is the revision the failed watch asked for;
	// CompactRevision the one etcd reported.
	FromRevision    int64 `json:"fromRevision"`
	CompactRevision int64 `json:"compactRevision"` // the compact revision etcd reported
	// ListRevision is the revision the relist was served at (0 if every
	// attempt failed).
	ListRevision int64   `json:"listRevision"`
	AtMs         float64 `json:"atMs"`       // when it started, ms since the epoch
	DurationMs   float64 `json:"durationMs"` // every attempt together, ms
	// BackoffMs is the pause before it (client-go's backoff, or the
	// cacher's one second).
	BackoffMs float64       `json:"backoffMs"`
	Objects   int64         `json:"objects"`  // keys read by the successful attempt
	Bytes     int64         `json:"bytes"`    // key and value bytes read by it
	Pages     int           `json:"pages"`    // range requests of it
	Attempts  []ListAttempt `json:"attempts"` // every LIST request, in order
}

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

// Compaction is one compaction the compactor issued.
type Compaction struct {
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
		v.UnrecordedWrites == 0
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
	// unexpected, prevKV, cache or recorder-gap.
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

// WatcherStats summarises one watcher.
type WatcherStats struct {
	ID               int    `json:"id"`               // the watcher's id
	Resource         string `json:"resource"`         // the resource it watches
	Stream           int    `json:"stream"`           // its watch stream
	Connection       int    `json:"connection"`       // its connection
	Events           int64  `json:"events"`           // events received
	Lists            int    `json:"lists"`            // LIST phases, the first included
	Sessions         int64  `json:"sessions"`         // Watch calls
	ProgressNotifies int64  `json:"progressNotifies"` // progress notifications received
	LastRevision     int64  `json:"lastRevision"`     // its last revision (lastSyncResourceVersion)
	CacheObjects     int    `json:"cacheObjects"`     // objects in its cache at the end
	HeldBack         bool   `json:"heldBack"`         // whether it was held back
	// Cache is true for kube-apiserver's watch cache of the resource
	// (profile apiserver-cache), which the watchers of the resource read
	// from: its ID follows the watchers'.
	Cache bool `json:"cache,omitempty"`
}

// Interval is one second of a run, from the start of the writes.
// Writes are attributed to the interval they were scheduled in (their
// latency) and the one they ended in (completions, errors); events to the
// one they arrived in. Events counts every watcher's; the delivery
// percentiles leave out those of watchers held back, from their hold on
// (as DeliveryStats.FromCommit), which HeldBackEvents and
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
