package watchload

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// Options shape one run. The zero value of a field means its default, set
// by Defaults.
type Options struct {
	// Profile is the client the watchers model; empty means
	// ProfileInformer.
	Profile Profile
	// Prefix is the Kubernetes prefix objects are written under
	// (kube-apiserver's --etcd-prefix); pods go to <Prefix>/pods/<ns>/<name>.
	Prefix string
	// Objects pods, ConfigMaps configmaps and Events events are created
	// before the load starts. ConfigMaps and Events default to Objects/5
	// and Objects/2; a negative value means none.
	Objects, ConfigMaps, Events int
	// Namespaces the objects are spread across.
	Namespaces int
	// Watchers is the number of reflectors.
	Watchers int
	// WatchResources are the resources watchers are assigned to, round
	// robin: watcher i watches WatchResources[i mod len]. Empty means
	// pods, configmaps, events.
	WatchResources []string
	// Connections and Streams carry the watchers (Topology); Streams
	// defaults to Connections.
	Connections, Streams int
	// WriterConnections carry the writers.
	WriterConnections int
	// WriteRate is the scheduled writes per second during Duration.
	WriteRate float64
	// Duration of the write phase.
	Duration time.Duration
	// Mix of creates, updates and deletes for pods and configmaps.
	Mix Mix
	// ResourceMix is the share of writes per resource.
	ResourceMix ResourceMix
	// PageSize overrides the profile's LIST page size.
	PageSize int64
	// WatchList is client-go's WatchListClient gate of the informers
	// (ProfileInformer): on, each loads its state with a WATCH carrying
	// sendInitialEvents, which kube-apiserver with the watch cache off
	// serves with one RangeStream of the prefix at the latest revision
	// (ReflectorOptions.WatchList); off, with LISTs in pages of PageSize.
	// nil means DefaultWatchList, set by Defaults. The apiserver-cache
	// profile's caches list as kube-apiserver's own reflectors do,
	// whatever it says.
	WatchList *bool
	// RangeStream is kube-apiserver's EtcdRangeStream feature gate: on,
	// every unfiltered LIST and every watch-list's initial-events sync of
	// the modelled kube-apiserver reads with etcd 3.7's RangeStream (one
	// stream per page, or per sync, chunks merged) while etcd serves it,
	// and with Range after etcd answered Unimplemented (rangestream.go);
	// off, always with Range: the sync in pages of WatcherSyncPageSize.
	// The gate is beta and on by default since Kubernetes 1.37 and does
	// not exist in 1.35 and 1.36, whose kube-apiservers always read with
	// Range (k8s.io/apiserver/pkg/features/kube_features.go
	// EtcdRangeStream; storage/etcd3/store.go shouldStream,
	// storage/etcd3/watcher.go sync). nil means DefaultRangeStream, set
	// by Defaults.
	RangeStream *bool
	// WriterConcurrency is the number of writer workers.
	WriterConcurrency int
	// CompactionInterval is the compactor's tick (kube-apiserver's
	// --etcd-compaction-interval); 0 means Duration/3. The compactor
	// starts with the run and, as kube-apiserver's, ticks first one
	// interval later, noting a revision, and compacts from the second tick
	// on: a run whose seeding is shorter than an interval compacts at
	// two and three intervals from its start, twice in its writes.
	// Negative disables compaction.
	CompactionInterval time.Duration
	// PhysicalCompaction makes each Compact wait until etcd has deleted
	// the compacted revisions (clientv3.WithCompactPhysical), so that the
	// sizes after a compaction (DBSize) are what it freed and a
	// defragmentation never overlaps the deletion. kube-apiserver does not
	// wait (k8s.io/apiserver/pkg/storage/etcd3/compact.go Compact:
	// client.Compact(ctx, rev), no option), and the request etcd sees
	// differs by that flag alone; `lwbench run` waits unless
	// --logical-compaction, `lwbench conformance` does not, to send what
	// kube-apiserver sends.
	PhysicalCompaction bool
	// HoldBack is the number of watchers (the first ones) held back across
	// a compaction to force a relist.
	HoldBack int
	// Defragment the member once, right after the compaction that the
	// held-back watchers missed.
	Defragment bool
	// EventTTL is the events' lease TTL (--event-ttl); 0 means 1 hour.
	EventTTL time.Duration
	// ConsistentListRate is the consistent LISTs per second served by the
	// watch caches (apiserver-cache profile only); 0 means 5, negative
	// none.
	ConsistentListRate float64
	// StartConcurrency bounds the watchers listing at once at the start;
	// 0 means 32, negative means all at once.
	StartConcurrency int
	// ProgressRequestPeriod is how often the run asks etcd for progress
	// notifications at the end, to confirm each watcher has seen the final
	// revision.
	ProgressRequestPeriod time.Duration
	// SyncTimeout bounds the wait for watchers to list at the start and to
	// reach the final revision at the end; 0 means 60 s.
	SyncTimeout time.Duration
	// WriteTimeout bounds one write.
	WriteTimeout time.Duration
	// Seed makes objects and the op plan reproducible.
	Seed uint64
	// Clock times the reflectors' backoffs and watch timeouts and the
	// compaction schedule: its ticks, the hold and the defragmentation
	// (compaction.SchedulerOptions.Clock); nil is the real clock. The
	// writers, the recorder and the faults keep the real clock.
	Clock clock.WithTicker
	// Logf, if set, receives one line per phase of the run.
	Logf func(format string, args ...any)
	// OnStatus, if set, is called about every StatusInterval with a
	// live view of the run; it must not block.
	OnStatus func(LoadStatus)
	// StatusInterval defaults to 500 ms.
	StatusInterval time.Duration
	// OnPhase, if set, is called with each phase Run enters, in order
	// (PhaseSeed, PhaseSync, PhaseSteady, PhaseDrain, PhaseStop, and the
	// client set's own between them),
	// synchronously, before the phase's first request to etcd: for what
	// must attribute requests to phases exactly (a counting proxy), which
	// OnStatus, behind by up to StatusInterval, cannot.
	OnPhase func(phase string)
	// Abandon, if set, is a context whose end (a second SIGINT) gives up
	// what an interrupted run still does to hand back its result
	// (Session.AfterWrites): Run then stops at once and returns
	// ErrAbandoned, naming what it did not collect, and no result. With
	// Cleanup, the deletion of what the run wrote is cut short too. nil:
	// an interrupted run always collects, within its grace period.
	Abandon context.Context
	// Hooks are given to every reflector.
	Hooks ReflectorHooks
	// Clients are the run's client set; nil means the etcd-direct model.
	// The model's own fields (Profile, PageSize, the connections and
	// streams, the compaction schedule, the faults, Cleanup) apply to it
	// alone; client-go through kube-apiserver (kubeload.NewClients)
	// takes the objects, writes and informers from the rest. A client set
	// serves one run.
	Clients Clients

	// ReusePrefix accepts a Prefix that already holds keys. Without it
	// Run refuses such a prefix (ErrPrefixNotEmpty) before writing
	// anything. With it the run's objects get namespaces of their own
	// (lwbench-<random>-ns-N), so that they cannot collide with the keys
	// already there.
	ReusePrefix bool
	// NamespacePrefix starts the name of every namespace of the run's
	// objects, followed by its number (KubernetesWorkloadOptions'
	// NamespacePrefix); "" means "ns-", or lwbench-<random>-ns- with
	// ReusePrefix. The generated objects' content derives from their
	// namespace and name (keyspace.Generator), so `lwbench conformance`
	// gives the model the real stack's namespaces (lwbench-<run id>-):
	// both then write the same keys and objects.
	NamespacePrefix string
	// NamespaceCompactRevKey keeps the compactor's compare-and-swap key
	// under Prefix (<Prefix>/compact_rev_key) instead of at the root, where
	// a real kube-apiserver of the cluster keeps its own: lwbench must not
	// move that key's version (it would make the apiservers skip a
	// compaction). Set it for clusters lwbench does not own.
	NamespaceCompactRevKey bool
	// Cleanup deletes, at the end (also when the run fails after it began
	// to seed), exactly what the run wrote: the keys it created, while
	// their create revision is still one of the run's, and the leases it
	// granted. Set it for clusters lwbench does not own.
	Cleanup bool
	// BeforeCleanup, if set, runs after the measurements and before the
	// cleanup, only when the run succeeded (e.g. to save a snapshot).
	BeforeCleanup func(ctx context.Context) error
	// Shard is this worker's part of a load divided among workers
	// (lwbench worker): the seeding and writes of its block of namespaces
	// (KubernetesWorkloadOptions.Shard), its block of the informers
	// (shard.Shard.Range over Watchers; each keeps its ID and resource in
	// the whole load, so the shards' informers together are the undivided
	// run's), and, on shard 0 alone, what one process of the load must do
	// alone: kube-apiserver's own informer and periodic reads, the
	// compactor, the informers held back across a compaction, the
	// defragmentation, the faults and the consistent reads. Every worker
	// plans the whole load from the same options, so the shards agree
	// without talking. The zero value is the whole load (shard.Whole).
	Shard shard.Shard
	// Barrier is where the workers of a divided load meet; required when
	// Shard divides the load. Run waits there after counting the
	// prefix's keys (BarrierBegin), after seeding (BarrierSeeded), after
	// its informers synced (BarrierSynced: every worker starts its writes
	// BarrierLead after the latest arrival, so their schedules line up),
	// after the writes (BarrierWritten: then the final revision is read,
	// which every worker's writes precede) and once it has its result,
	// before any cleanup (BarrierDone). A worker whose run fails aborts the barrier, so the
	// others stop instead of waiting.
	Barrier Barrier
	// PinConnections dials connection i of the watchers and of the
	// writers to endpoint i mod len(Endpoints) alone (Target.DialEndpoint),
	// so that latency is also reported per member. Such connections do
	// not fail over; the history recorder, the probe and the maintenance
	// connection always use every endpoint.
	PinConnections bool
	// Faults are injected in order into a cluster whose processes the run
	// controls (Target.Members); their At offsets must be increasing and
	// a fault must be undone before the next begins.
	Faults []Fault
	// RecoveryTimeout bounds the wait for recovery after a fault has been
	// undone; 0 means 60 seconds.
	RecoveryTimeout time.Duration
	// ProbeRate is the probe's operations per second during a fault; 0
	// means 20.
	ProbeRate float64
}

// Defaults returns o with zero fields set to their defaults.
func (o Options) Defaults() Options {
	if o.Profile == "" {
		o.Profile = ProfileInformer
	}
	if o.Shard == (shard.Shard{}) {
		o.Shard = shard.Whole
	}
	if o.Prefix == "" {
		o.Prefix = keyspace.DefaultPrefix
	}
	if o.Objects == 0 {
		o.Objects = 1000
	}
	if o.ConfigMaps == 0 {
		o.ConfigMaps = o.Objects / 5
	}
	if o.Events == 0 {
		o.Events = o.Objects / 2
	}
	o.Objects, o.ConfigMaps, o.Events = max(o.Objects, 0), max(o.ConfigMaps, 0), max(o.Events, 0)
	if o.Namespaces == 0 {
		o.Namespaces = 10
	}
	if o.Watchers == 0 {
		o.Watchers = 10
	}
	if len(o.WatchResources) == 0 {
		o.WatchResources = Resources
	}
	if o.Connections == 0 {
		o.Connections = 1
	}
	if o.Streams == 0 {
		o.Streams = o.Connections
	}
	if o.WriterConnections == 0 {
		o.WriterConnections = 1
	}
	if o.WriteRate == 0 {
		o.WriteRate = 200
	}
	if o.Duration == 0 {
		o.Duration = 20 * time.Second
	}
	if o.Mix == (Mix{}) {
		o.Mix = DefaultMix
	}
	if o.ResourceMix == (ResourceMix{}) {
		o.ResourceMix = DefaultResourceMix
	}
	if o.PageSize == 0 {
		o.PageSize = o.Profile.DefaultPageSize()
	}
	if o.WatchList == nil {
		on := DefaultWatchList
		o.WatchList = &on
	}
	if o.RangeStream == nil {
		on := DefaultRangeStream
		o.RangeStream = &on
	}
	if o.WriterConcurrency == 0 {
		o.WriterConcurrency = 16
	}
	if o.CompactionInterval == 0 {
		o.CompactionInterval = o.Duration / 3
	}
	if o.EventTTL == 0 {
		o.EventTTL = DefaultEventTTL
	}
	if o.ConsistentListRate == 0 {
		o.ConsistentListRate = 5
	}
	if o.StartConcurrency == 0 {
		o.StartConcurrency = 32
	}
	if o.ProgressRequestPeriod == 0 {
		o.ProgressRequestPeriod = 100 * time.Millisecond
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = 60 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = 500 * time.Millisecond
	}
	if o.RecoveryTimeout == 0 {
		o.RecoveryTimeout = 60 * time.Second
	}
	if o.ProbeRate == 0 {
		o.ProbeRate = 20
	}
	return o
}

// DefaultWatchList is client-go's default of its WatchListClient gate: on
// since Kubernetes 1.35 (k8s.io/client-go/features/known_features.go),
// so also in client-go 1.37.
const DefaultWatchList = true

// informerWatchList reports whether the informers watch-list: WatchList,
// or DefaultWatchList when it is nil.
func (o Options) informerWatchList() bool {
	if o.WatchList == nil {
		return DefaultWatchList
	}
	return *o.WatchList
}

// DefaultRangeStream is kube-apiserver 1.37's default of its
// EtcdRangeStream gate: on (beta since 1.37,
// k8s.io/apiserver/pkg/features/kube_features.go). Kubernetes 1.35 and 1.36
// have no such gate and never stream.
const DefaultRangeStream = true

// rangeStream reports whether the modelled kube-apiserver reads with
// RangeStream: RangeStream, or DefaultRangeStream when it is nil.
func (o Options) rangeStream() bool {
	if o.RangeStream == nil {
		return DefaultRangeStream
	}
	return *o.RangeStream
}

// MaxWriterConcurrency bounds the writer workers: each holds a queue of
// 4096 planned writes (WriterOptions.QueueDepth), about 360 KiB.
// MaxConnections bounds the connections of the watchers and of the
// writers, each a gRPC client of its own.
const (
	MaxWriterConcurrency = 1000
	MaxConnections       = 1000
)

// MaxPlannedWrites bounds the writes a run plans (WriteRate x Duration):
// the writers run until every planned write is done, so a plan far beyond
// what etcd can commit in the Duration never ends.
const MaxPlannedWrites = 100_000_000

// Validate reports every invalid field of o, with its field path
// (writeRate, mix, faults[0].at, ...), as an error wrapping a
// field.ErrorList (utilerrors.Aggregate of *field.Error). Call it after
// Defaults; the fields that Defaults derives from others (Streams,
// PageSize, ConfigMaps, Events, CompactionInterval) may also still be 0,
// so that a caller can validate options whose other fields it filled from
// Defaults before it set them (lwbench's flags) and so reject an explicit
// 0 that Defaults would replace.
func (o Options) Validate() error {
	return o.validate().ToAggregate()
}

func (o Options) validate() field.ErrorList {
	var errs field.ErrorList
	if o.Profile != "" {
		if _, err := ParseProfile(string(o.Profile)); err != nil {
			errs = append(errs, field.NotSupported(field.NewPath("profile"), string(o.Profile), Profiles))
		}
	}
	errs = append(errs, validatePrefix(o.Prefix, field.NewPath("prefix"))...)
	errs = append(errs, fieldcheck.NonNegative(o.Objects, field.NewPath("objects"))...)
	errs = append(errs, fieldcheck.Positive(o.Namespaces, field.NewPath("namespaces"))...)
	errs = append(errs, fieldcheck.Positive(o.Watchers, field.NewPath("watchers"))...)
	for i, r := range o.WatchResources {
		if !isResource(r) {
			errs = append(errs, field.NotSupported(field.NewPath("watchResources").Index(i), r, Resources))
		}
	}
	errs = append(errs, validateConnections(o.Connections, field.NewPath("connections"))...)
	errs = append(errs, fieldcheck.NonNegative(o.Streams, field.NewPath("streams"))...)
	errs = append(errs, validateConnections(o.WriterConnections, field.NewPath("writerConnections"))...)
	errs = append(errs, validateWriterConcurrency(o.WriterConcurrency, field.NewPath("writerConcurrency"))...)
	errs = append(errs, fieldcheck.PositiveDuration(o.Duration, field.NewPath("duration"))...)
	if o.SyncTimeout < 0 {
		errs = append(errs, field.Invalid(field.NewPath("syncTimeout"), o.SyncTimeout.String(), "must not be negative (0: 60s)"))
	}
	if rate := fieldcheck.Rate(o.WriteRate, field.NewPath("writeRate")); len(rate) > 0 {
		errs = append(errs, rate...)
	} else if o.Duration > 0 {
		errs = append(errs, fieldcheck.PlannedWrites(o.WriteRate, o.Duration, MaxPlannedWrites, field.NewPath("writeRate"))...)
	}
	errs = append(errs, o.Mix.Validate(field.NewPath("mix"))...)
	errs = append(errs, o.ResourceMix.Validate(field.NewPath("resourceMix"))...)
	errs = append(errs, fieldcheck.NonNegative(o.PageSize, field.NewPath("pageSize"))...)
	errs = append(errs, fieldcheck.NonNegative(o.HoldBack, field.NewPath("holdBack"))...)
	errs = append(errs, fieldcheck.AtMost(o.HoldBack, o.Watchers, "the number of watchers", field.NewPath("holdBack"))...)
	errs = append(errs, fieldcheck.PositiveDuration(o.EventTTL, field.NewPath("eventTTL"))...)
	errs = append(errs, fieldcheck.OptionalRate(o.ConsistentListRate, field.NewPath("consistentListRate"))...)
	errs = append(errs, fieldcheck.OptionalRate(o.ProbeRate, field.NewPath("probeRate"))...)
	errs = append(errs, fieldcheck.PositiveDuration(o.RecoveryTimeout, field.NewPath("recoveryTimeout"))...)
	errs = append(errs, validateFaults(o.Faults, o.Duration, field.NewPath("faults"))...)
	errs = append(errs, o.validateShard(field.NewPath("shard"))...)
	return errs
}

// Divided reports whether the run is a worker of a divided load: a
// Shard of more than one, or a Barrier (lwbench run --workers 1 is one
// worker that still meets its coordinator's barrier and keeps what a
// merge needs).
func (o Options) Divided() bool { return o.Shard.Count > 1 || o.Barrier != nil }

// validateShard reports a shard out of range and, for a divided load, a
// missing barrier and parts too small to divide: fewer namespaces or
// informers than shards, or shard 0 with fewer informers than HoldBack.
func (o Options) validateShard(p *field.Path) field.ErrorList {
	sh := o.Shard
	if sh == (shard.Shard{}) {
		return nil
	}
	if err := sh.Validate(); err != nil {
		return field.ErrorList{field.Invalid(p, sh.String(), err.Error())}
	}
	if sh.Count == 1 {
		return nil
	}
	var errs field.ErrorList
	if o.Barrier == nil {
		errs = append(errs, field.Required(field.NewPath("barrier"), "a load divided into shards needs a barrier where its workers meet"))
	}
	if o.Namespaces < sh.Count {
		errs = append(errs, field.Invalid(field.NewPath("namespaces"), o.Namespaces, fmt.Sprintf("a load of %d shards needs at least as many namespaces (each shard writes its own)", sh.Count)))
	}
	if o.Watchers < sh.Count {
		errs = append(errs, field.Invalid(field.NewPath("watchers"), o.Watchers, fmt.Sprintf("a load of %d shards needs at least as many informers", sh.Count)))
	} else if first := (shard.Shard{Index: 0, Count: sh.Count}).Len(o.Watchers); o.HoldBack > first {
		errs = append(errs, field.Invalid(field.NewPath("holdBack"), o.HoldBack, fmt.Sprintf("shard 0 holds the held-back informers and has %d", first)))
	}
	return errs
}

// Barrier is where the workers of a divided load meet (Options.Barrier;
// pkg/barrier implements it in etcd and in a ConfigMap).
type Barrier interface {
	// Wait records this worker's arrival at point and returns once every
	// worker has arrived, with the latest arrival time (the same for
	// every worker); an error when a worker aborted or ctx ended.
	Wait(ctx context.Context, point string) (time.Time, error)
	// Abort tells the other workers this one failed, with why.
	Abort(ctx context.Context, why string) error
}

// The points where a divided load's workers meet (Options.Barrier), in
// order.
const (
	BarrierBegin   = "begin"   // each counted the prefix's keys; nothing written yet
	BarrierSeeded  = "seeded"  // every shard's objects exist
	BarrierSynced  = "synced"  // every informer has listed; the writes start together
	BarrierWritten = "written" // every shard's writes are done
	BarrierDone    = "done"    // every worker has its result; a cleanup may begin
	BarrierCleaned = "cleaned" // every worker deleted what it wrote (with Options.Cleanup)
)

// BarrierLead is how long after the latest arrival at BarrierSynced the
// workers start their writes: long enough for the last to learn of it,
// so that every schedule starts at the same wall-clock time (to the
// workers' clock skew).
const BarrierLead = 500 * time.Millisecond

// validateConnections reports a number of connections below 1 or above
// MaxConnections.
func validateConnections(n int, p *field.Path) field.ErrorList {
	return append(fieldcheck.Positive(n, p), fieldcheck.AtMost(n, MaxConnections, "the bound on connections", p)...)
}

// validateWriterConcurrency reports a number of writer workers below 1
// or above MaxWriterConcurrency.
func validateWriterConcurrency(n int, p *field.Path) field.ErrorList {
	return append(fieldcheck.Positive(n, p), fieldcheck.AtMost(n, MaxWriterConcurrency, "the bound on writer workers", p)...)
}

// validatePrefix reports a Kubernetes prefix that does not start with '/'
// or names no path.
func validatePrefix(prefix string, p *field.Path) field.ErrorList {
	if !strings.HasPrefix(prefix, "/") || strings.TrimRight(prefix, "/") == "" {
		return field.ErrorList{field.Invalid(p, prefix, "must start with '/' and name a path")}
	}
	return nil
}

// validateSchedule reports writes that are not positive at writesPath and
// a rate that is out of bounds, or that spreads the writes over longer
// than a time.Duration holds, at ratePath.
func validateSchedule(writes int64, rate float64, writesPath, ratePath *field.Path) field.ErrorList {
	errs := fieldcheck.Positive(writes, writesPath)
	if rerrs := fieldcheck.Rate(rate, ratePath); len(rerrs) > 0 {
		return append(errs, rerrs...)
	}
	if float64(writes)/rate > (math.MaxInt64 / float64(time.Second)) {
		errs = append(errs, field.Invalid(ratePath, rate, fmt.Sprintf("spreads %d writes over more than %v", writes, time.Duration(math.MaxInt64))))
	}
	return errs
}

func isResource(r string) bool {
	for _, x := range Resources {
		if x == r {
			return true
		}
	}
	return false
}
