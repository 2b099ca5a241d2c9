package experiment

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// SchemaVersion is the version of the Result JSON document. It changes
// when a field is renamed, removed or changes meaning; adding a field
// keeps it. Version 2 (RunSchemaVersion 4): namespaceCleanup[] are
// report.Cleanup, whose namespaces still present are namespacesLeft
// (left before); a run's result converted by FromRun (experiment "run")
// is one kind, through kube-apiserver or not (experiment "kube-run"
// before). Version 3: a catch-up case's revisions counts the
// experiment's own writes in its span (CatchupCase.Revisions), every
// store revision before.
const SchemaVersion = 3

// The experiments' names, as Result.Experiment and lwbench's subcommands
// spell them.
const (
	NameRelistStorm     = "relist-storm"
	NameContinuation    = "continuation"
	NameCompactionSweep = "compaction-sweep"
	NameDefragStall     = "defrag-stall"
	NameCatchup         = "catchup"
)

// Names lists the experiments in the order the suite runs them.
var Names = []string{NameRelistStorm, NameContinuation, NameCompactionSweep, NameDefragStall, NameCatchup}

// Result is the versioned result of one experiment. Exactly one of the
// experiment-specific fields is set, the one Experiment names; Cases
// holds one comparable summary per case whatever the experiment, which is
// what `lwbench report` tabulates across results.
type Result struct {
	Kind          string `json:"kind"`          // report.KindExperiment
	SchemaVersion int    `json:"schemaVersion"` // SchemaVersion
	Experiment    string `json:"experiment"`    // one of Names
	// StartedAt is the epoch every offset runs from, UTC.
	StartedAt  time.Time `json:"startedAt"`
	DurationMs float64   `json:"durationMs"` // wall time of the whole experiment, ms
	// Quick is true for the small sizes of --quick (and the tests).
	Quick bool `json:"quick"`
	// Label names the result in comparisons; empty means Experiment.
	Label       string        `json:"label,omitempty"`
	Environment Environment   `json:"environment"` // where it ran
	Target      report.Target `json:"target"`      // the etcd driven (the first, when several)
	// APIServer describes the kube-apiservers the Kubernetes clients went
	// through (Common.Stack: their release, watch cache, the informers'
	// WatchListClient); nil when they were lwbench's etcd-direct model.
	APIServer *report.APIServerTarget `json:"apiServer,omitempty"`
	// NamespaceCleanup are, on a cluster lwbench does not own
	// (`--kubeconfig`), each load's deletion of the namespaces it created
	// (as a run's cleanup); empty elsewhere.
	NamespaceCleanup []report.Cleanup `json:"namespaceCleanup,omitempty"`
	// Cases summarise each case in the same columns, in the order run.
	Cases []CaseSummary `json:"cases"`
	// Timelines are the probe's series with the compactions and
	// defragmentations marked and the db size sampled: one for the whole
	// experiment, or one per case when each case has its own member.
	Timelines []Timeline `json:"timelines"`

	// Shard is, in a worker's result of a divided experiment
	// (Common.Shard), the worker's part; nil otherwise, and in the merged
	// result (Merge).
	Shard *shard.Shard `json:"shard,omitempty"`
	// Self is a worker's own process's CPU, memory and scheduling delay
	// over its part (set by the process that ran it; nil when not
	// measured). In a merged result, the workers' summed and their worst
	// (report.MergeSelfStats).
	Self *report.SelfStats `json:"self,omitempty"`
	// Workers are, in a merged result, each worker's own figures, by
	// shard index; empty otherwise.
	Workers []Worker `json:"workers,omitempty"`
	// Warnings say what a reader must know to trust the figures: a merged
	// result names each worker whose figures were limited by the load
	// generator (report.GeneratorLimited).
	Warnings []string `json:"warnings,omitempty"`

	RelistStorm     *RelistStormResult     `json:"relistStorm,omitempty"`     // set for relist-storm
	Continuation    *ContinuationResult    `json:"continuation,omitempty"`    // set for continuation
	CompactionSweep *CompactionSweepResult `json:"compactionSweep,omitempty"` // set for compaction-sweep
	DefragStall     *DefragStallResult     `json:"defragStall,omitempty"`     // set for defrag-stall
	Catchup         *CatchupResult         `json:"catchup,omitempty"`         // set for catchup
}

// Name returns the label of the result, or its experiment's name.
func (r *Result) Name() string {
	if r.Label != "" {
		return r.Label
	}
	return r.Experiment
}

// Environment is the machine and software an experiment ran on.
type Environment struct {
	CPUModel    string `json:"cpuModel"`    // /proc/cpuinfo model name
	Cores       int    `json:"cores"`       // logical CPUs
	MemoryBytes int64  `json:"memoryBytes"` // MemTotal
	Kernel      string `json:"kernel"`      // uname -sr
	GoVersion   string `json:"goVersion"`   // the Go that built lwbench
	EtcdVersion string `json:"etcdVersion"` // the member's version
}

// CaseSummary is one case of any experiment in comparable columns. Fields
// that do not apply to an experiment are zero.
type CaseSummary struct {
	Experiment string `json:"experiment"` // the experiment it belongs to
	Case       string `json:"case"`       // e.g. "objects=10000 pageSize=500"
	// Relists counts LIST phases after the first (relist storm,
	// compaction sweep); RelistObjects and RelistBytes what they read.
	Relists       int64 `json:"relists"`
	RelistObjects int64 `json:"relistObjects"` // objects read by relists
	RelistBytes   int64 `json:"relistBytes"`   // key and value bytes read by relists
	// ResyncP50Ms and ResyncMaxMs: per watcher, from the moment it could
	// watch again to its cache being current again (relist storm), or one
	// list's total time (continuation), or catching up (catchup).
	ResyncP50Ms float64 `json:"resyncP50Ms"`
	ResyncMaxMs float64 `json:"resyncMaxMs"` // slowest of them
	// BackoffP50Ms and RelistP50Ms split a relist's resync (relist storm,
	// runs): the median of client-go's wait before each relist (backoff)
	// and of the relist's LIST requests themselves (relist, failed
	// attempts included); resync is about their sum (a relist storm's also
	// counts the failed watch before the backoff). 0 in results written
	// before they were recorded.
	BackoffP50Ms float64 `json:"backoffP50Ms,omitempty"`
	RelistP50Ms  float64 `json:"relistP50Ms,omitempty"` // median relist duration, ms
	// ListRestarts counts LIST requests that met ErrCompacted and had to
	// be made again (continuation).
	ListRestarts int64 `json:"listRestarts"`
	// Compactions and Defrags count the maintenance done in the case.
	Compactions int `json:"compactions"`
	Defrags     int `json:"defrags"` // defragmentations in the case
	// DefragMs is the longest defragmentation of the case.
	DefragMs float64 `json:"defragMs"`
	// WritesPerSecond and WriteP99Ms are the load's writes (0 if none).
	WritesPerSecond float64 `json:"writesPerSecond"`
	WriteP99Ms      float64 `json:"writeP99Ms"` // latency from schedule
	// DeliveryP99Ms is the p99 of the watch events' delivery latency from
	// their write's response (RunResult.Delivery.FromResponse: the
	// informers not held back), over DeliveryEvents timed events (runs;
	// absent before RunSchemaVersion 4's conversion).
	DeliveryP99Ms  float64 `json:"deliveryP99Ms,omitempty"`
	DeliveryEvents int64   `json:"deliveryEvents,omitempty"` // timed events of DeliveryP99Ms
	// Probe summarises the probe's operations due during the case's
	// window of interest (see each experiment).
	Probe compaction.ProbeWindow `json:"probe"`
	// DBSizeBeforeBytes and DBSizeAfterBytes are the member's file size at
	// the case's start and end (after defrag, for defrag-stall).
	DBSizeBeforeBytes int64 `json:"dbSizeBeforeBytes"`
	DBSizeAfterBytes  int64 `json:"dbSizeAfterBytes"` // file size at the end (after defrag, for defrag-stall)
	// LostEvents and OtherViolations count broken watch guarantees.
	LostEvents      int64 `json:"lostEvents"`
	OtherViolations int64 `json:"otherViolations"` // every other broken guarantee (see Validation)
}

// Timeline is what happened on one member over time.
type Timeline struct {
	Name string `json:"name"` // "all", or the case
	// Probe is the probe's result, its Series from the experiment's
	// epoch.
	Probe compaction.ProbeResult `json:"probe"`
	// APIProbe is the probe's twin through kube-apiserver
	// (kubeload.APIProbe: a configmap patched and read at the same rate),
	// when the experiment ran one (defrag-stall through kube-apiserver);
	// nil otherwise.
	APIProbe *compaction.ProbeResult `json:"apiProbe,omitempty"`
	// Marks are the compactions, defragmentations and other events, by
	// start.
	Marks []Mark `json:"marks"`
	// DBSize is the member's size sampled over time.
	DBSize []SizeSample `json:"dbSize"`
}

// The kinds of Mark.
const (
	MarkCompaction = "compaction"
	MarkDefrag     = "defrag"
	MarkHold       = "hold"    // watchers held back
	MarkRelease    = "release" // held watchers let go
	MarkPhase      = "phase"   // a case or phase starts
)

// Mark is an event on a timeline.
type Mark struct {
	Kind  string  `json:"kind"`  // compaction, defrag, hold, release, phase
	AtMs  float64 `json:"atMs"`  // start, ms from the epoch
	EndMs float64 `json:"endMs"` // end, ms from the epoch (= atMs for instants)
	Label string  `json:"label"` // what it was, e.g. "compact 10234"
	// Revision is the compacted revision, for compactions.
	Revision int64 `json:"revision,omitempty"`
}

// SizeSample is the member's db size at one moment.
type SizeSample struct {
	AtMs       float64 `json:"atMs"`       // ms from the epoch
	Bytes      int64   `json:"bytes"`      // dbSize: the file
	InUseBytes int64   `json:"inUseBytes"` // dbSizeInUse
}

// Validation is an experiment's JSON view of the broken watch guarantees
// of its watchers: the counting is watchload's (watchload.ValidationOf,
// which returns a report.Validation, `lwbench run`'s view), and this is
// built from it only by fromReport, which keeps the counts by kind (see
// report.Validation for each), folds the unverified events and the
// watchers that never confirmed the end into Unverified, and drops what
// an experiment does not report (prevKVMissing, unrecordedWrites,
// recorderScope). add sums the views of several cases.
type Validation struct {
	Lost         int64 `json:"lost"`             // events never delivered (Reliable)
	Duplicated   int64 `json:"duplicated"`       // Unique
	OutOfOrder   int64 `json:"outOfOrder"`       // Ordered
	Atomic       int64 `json:"atomic"`           // revisions split over responses
	Resumable    int64 `json:"resumable"`        // watches not resuming at their start
	Bookmarkable int64 `json:"bookmarkable"`     // events at or below a progress notification
	Unexpected   int64 `json:"unexpected"`       // events absent from the history
	PrevKV       int64 `json:"prevKVMismatches"` // prevKV or create flag disagreeing with the cache
	Cache        int64 `json:"cacheMismatches"`  // keys differing from etcd at the end
	RecorderGaps int64 `json:"recorderGaps"`     // revisions the recorder skipped
	Unverified   int64 `json:"unverifiedEvents"` // events the history never covered, watchers that never confirmed the end, events whose resourceVersion did not parse
	// HistoryEvents is the number of events recorded.
	HistoryEvents int64 `json:"historyEvents"`
	// RecorderError is why the history is incomplete, if it is.
	RecorderError string `json:"recorderError,omitempty"`
	// Samples are the first violations, by revision.
	Samples []report.Violation `json:"samples,omitempty"`
}

// Others returns the violations other than lost events.
func (v Validation) Others() int64 {
	n := v.Duplicated + v.OutOfOrder + v.Atomic + v.Resumable + v.Bookmarkable + v.Unexpected + v.PrevKV + v.Cache + v.RecorderGaps + v.Unverified
	if v.RecorderError != "" {
		n++
	}
	return n
}

// ErrUnknownExperiment is returned (wrapped, naming the value) for an
// experiment result whose experiment this build does not know.
var ErrUnknownExperiment = errors.New("unknown experiment")

// Decode decodes an experiment result (report.KindExperiment, or a
// result written before the kind field by its experiment field). It
// returns an error wrapping report.ErrUnknownKind, naming the kind, for
// any other document, one wrapping report.ErrNewerSchema for a newer
// schema version, one wrapping ErrUnknownExperiment for an experiment
// this build does not know, and one wrapping report.ErrMissingField,
// naming the field, for a result without the fields every result of its
// experiment has (Result.Check).
func Decode(b []byte) (*Result, error) {
	h, err := report.Identify(b)
	if err != nil {
		return nil, err
	}
	if h.Kind != report.KindExperiment {
		return nil, fmt.Errorf("%w, not an experiment result", report.UnknownKind(h.Kind))
	}
	if err := report.CheckSchema(h, SchemaVersion); err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", h.Kind, err)
	}
	if err := r.Check(); err != nil {
		return nil, err
	}
	r.Kind = report.KindExperiment
	return &r, nil
}

// Check returns an error for a result that a table or a plot could only
// show as empty: one wrapping ErrUnknownExperiment, naming the value,
// when Experiment is none of Names, NameRun and NameKubeRun, and one wrapping
// report.ErrMissingField, naming the first field missing by its JSON
// path, when there is no case, a case lacks its experiment or its name,
// or the experiment's own part (relistStorm, ...) or its cases are
// missing.
func (r *Result) Check() error {
	if r.Experiment == "" {
		return report.MissingField("experiment")
	}
	if !slices.Contains(Names, r.Experiment) && r.Experiment != NameRun && r.Experiment != NameKubeRun {
		return fmt.Errorf("%w %q (this lwbench knows %s)", ErrUnknownExperiment, r.Experiment, strings.Join(Names, ", "))
	}
	if len(r.Cases) == 0 {
		return report.MissingField("cases")
	}
	for i, c := range r.Cases {
		switch {
		case c.Experiment == "":
			return report.MissingField(fmt.Sprintf("cases[%d].experiment", i))
		case c.Experiment != r.Experiment:
			return fmt.Errorf("cases[%d].experiment is %q in a %s result", i, c.Experiment, r.Experiment)
		case c.Case == "":
			return report.MissingField(fmt.Sprintf("cases[%d].case", i))
		}
	}
	var own string
	var cases int
	switch r.Experiment {
	case NameRelistStorm:
		if own = "relistStorm"; r.RelistStorm != nil {
			cases = len(r.RelistStorm.Cases)
		}
	case NameContinuation:
		if own = "continuation"; r.Continuation != nil {
			cases = len(r.Continuation.Cases)
		}
	case NameCompactionSweep:
		if own = "compactionSweep"; r.CompactionSweep != nil {
			cases = len(r.CompactionSweep.Cases)
		}
	case NameDefragStall:
		if own = "defragStall"; r.DefragStall != nil {
			cases = len(r.DefragStall.Cases)
		}
	case NameCatchup:
		if own = "catchup"; r.Catchup != nil {
			cases = len(r.Catchup.Cases)
		}
	default:
		return nil // a run's result has no part of its own
	}
	if cases == 0 {
		return report.MissingField(own + ".cases")
	}
	return nil
}

// fromReport is the one conversion from a load's validation
// (watchload.ValidationOf) to an experiment's Validation: the counts by
// kind, the unverified events and unsynced watchers in one count, and the
// samples.
func fromReport(rv report.Validation) Validation {
	return Validation{
		Lost: rv.Lost, Duplicated: rv.Duplicated, OutOfOrder: rv.OutOfOrder, Atomic: rv.Atomic, Resumable: rv.Resumable,
		Bookmarkable: rv.Bookmarkable, Unexpected: rv.Unexpected, PrevKV: rv.PrevKVMismatches, Cache: rv.CacheMismatches,
		RecorderGaps: rv.RecorderGaps, Unverified: rv.UnverifiedEvents + int64(rv.UnsyncedWatchers) + rv.UnparsedResourceVersions, HistoryEvents: rv.HistoryEvents,
		RecorderError: rv.RecorderError, Samples: rv.Violations,
	}
}

// add sums two validations (samples of both, up to 50).
func (v Validation) add(o Validation) Validation {
	v.Lost += o.Lost
	v.Duplicated += o.Duplicated
	v.OutOfOrder += o.OutOfOrder
	v.Atomic += o.Atomic
	v.Resumable += o.Resumable
	v.Bookmarkable += o.Bookmarkable
	v.Unexpected += o.Unexpected
	v.PrevKV += o.PrevKV
	v.Cache += o.Cache
	v.RecorderGaps = max(v.RecorderGaps, o.RecorderGaps)
	v.Unverified += o.Unverified
	v.HistoryEvents = max(v.HistoryEvents, o.HistoryEvents)
	if v.RecorderError == "" {
		v.RecorderError = o.RecorderError
	}
	for _, s := range o.Samples {
		if len(v.Samples) < 50 {
			v.Samples = append(v.Samples, s)
		}
	}
	return v
}
