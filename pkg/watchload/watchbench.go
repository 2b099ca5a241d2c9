package watchload

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
)

// WatchOptions shape a watch fan-out run: Watchers watches of one prefix
// over Streams streams and Connections connections, while writers put
// Puts values at PutRate to Keys keys under it, so that every put reaches
// every watcher. Zero fields take their defaults (Defaults).
type WatchOptions struct {
	// Prefix holds the keys; default "/lwbench/watch/" for raw values and
	// "/registry" (pods under /registry/pods/) for Kubernetes objects.
	Prefix string
	// Watchers, Streams and Connections: watcher i uses stream i mod
	// Streams, stream j connection j mod Connections (etcd benchmark's
	// --streams with --watch-per-stream = Watchers/Streams, and --conns).
	Watchers, Streams, Connections int
	// Keys is the key space the puts go to (benchmark's
	// --key-space-size); with Kubernetes objects, the pods seeded and
	// updated.
	Keys int
	// ValueSize > 0 puts raw values of that size with plain Puts; 0
	// updates Kubernetes pods with kube-apiserver's transactions.
	ValueSize int
	// Puts is the number of writes, at PutRate per second (open loop),
	// by PutWorkers workers over PutConnections connections.
	Puts           int64
	PutRate        float64 // scheduled puts per second
	PutWorkers     int     // put workers
	PutConnections int     // connections of the put workers
	// NoPrevKV and NoProgressNotify drop the watch options Kubernetes
	// sets; etcd's benchmark watch sets neither.
	NoPrevKV, NoProgressNotify bool
	// Seed makes keys and objects reproducible.
	Seed uint64
	// WriteTimeout bounds one put; SyncTimeout the wait for watches to be
	// created and to deliver the last revision.
	WriteTimeout, SyncTimeout time.Duration
	// Logf receives one line per phase.
	Logf func(format string, args ...any)
	// OnProgress, if set, is called every 500 ms with a live view.
	OnProgress func(Progress)
}

// Defaults returns o with zero fields set.
func (o WatchOptions) Defaults() WatchOptions {
	if o.Prefix == "" {
		o.Prefix = "/lwbench/watch/"
		if o.ValueSize == 0 {
			o.Prefix = keyspace.DefaultPrefix
		}
	}
	if o.Watchers == 0 {
		o.Watchers = 1000
	}
	if o.Streams == 0 {
		o.Streams = 10
	}
	if o.Connections == 0 {
		o.Connections = 1
	}
	if o.Keys == 0 {
		o.Keys = 1
	}
	if o.Puts == 0 {
		o.Puts = 1000
	}
	if o.PutRate == 0 {
		o.PutRate = 100
	}
	if o.PutWorkers == 0 {
		o.PutWorkers = 16
	}
	if o.PutConnections == 0 {
		o.PutConnections = 1
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = 2 * time.Minute
	}
	return o
}

// Validate reports every invalid field of o, with its field path (the
// names are the settings' names across lwbench's options: Puts is writes,
// PutRate writeRate, PutWorkers writerConcurrency, PutConnections
// writerConnections), as an error wrapping a field.ErrorList. Call it
// after Defaults.
func (o WatchOptions) Validate() error {
	var errs field.ErrorList
	errs = append(errs, fieldcheck.Positive(o.Watchers, field.NewPath("watchers"))...)
	errs = append(errs, fieldcheck.Positive(o.Streams, field.NewPath("streams"))...)
	errs = append(errs, fieldcheck.AtMost(o.Streams, o.Watchers, "the number of watchers", field.NewPath("streams"))...)
	errs = append(errs, validateConnections(o.Connections, field.NewPath("connections"))...)
	errs = append(errs, fieldcheck.AtMost(o.Connections, o.Streams, "the number of streams", field.NewPath("connections"))...)
	errs = append(errs, fieldcheck.Positive(o.Keys, field.NewPath("keys"))...)
	errs = append(errs, fieldcheck.NonNegative(o.ValueSize, field.NewPath("valueSize"))...)
	errs = append(errs, validateSchedule(o.Puts, o.PutRate, field.NewPath("writes"), field.NewPath("writeRate"))...)
	errs = append(errs, validateWriterConcurrency(o.PutWorkers, field.NewPath("writerConcurrency"))...)
	errs = append(errs, validateConnections(o.PutConnections, field.NewPath("writerConnections"))...)
	return errs.ToAggregate()
}

// Watch runs a fan-out: it creates every watch (timing each creation),
// then puts on schedule, and measures how fast and how soon the events
// reach the watchers, validating every watch against the recorded history.
// It returns an error only if the run could not be carried out.
func Watch(ctx context.Context, t Target, o WatchOptions) (*report.WatchResult, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	epoch := time.Now()
	res := &report.WatchResult{
		Kind: report.KindWatch, SchemaVersion: report.WatchSchemaVersion, StartedAt: epoch.UTC(),
		Target: report.Target{Embedded: t.Embedded, Endpoints: t.Endpoints, Managed: t.Managed},
		Scenario: report.WatchScenario{
			Prefix: o.Prefix, Watchers: o.Watchers, Streams: o.Streams, Connections: o.Connections, Keys: o.Keys,
			ValueSize: o.ValueSize, Puts: o.Puts, PutRatePerSecond: o.PutRate, PutWorkers: o.PutWorkers,
			PutConnections: o.PutConnections, PrevKV: !o.NoPrevKV, ProgressNotify: !o.NoProgressNotify, Seed: o.Seed,
		},
	}
	self := startSelfSampler(ctx, t.Embedded, t.Endpoints[0])
	writerTopo, err := Connect(ctx, t.Dial, o.PutConnections, o.PutConnections, "")
	if err != nil {
		return nil, err
	}
	defer writerTopo.Close()
	admin := writerTopo.Conns[0]
	st, err := admin.Status(ctx, t.Endpoints[0])
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", t.Endpoints[0], err)
	}
	res.Target.EtcdVersion = st.Version
	kvs := make([]KV, len(writerTopo.Conns))
	for i, c := range writerTopo.Conns {
		kvs[i] = c
	}

	var wl Workload
	watchPrefix := o.Prefix
	if o.ValueSize > 0 {
		wl = &RawWorkload{Prefix: o.Prefix, Keys: o.Keys, ValueSize: o.ValueSize, Seed: o.Seed}
	} else {
		kw, err := NewKubernetesWorkload(KubernetesWorkloadOptions{
			Prefix: o.Prefix, Namespaces: 1, Pods: o.Keys, Mix: Mix{UpdatePercent: 100},
			ResourceMix: ResourceMix{PodsPercent: 100}, Workers: o.PutWorkers, Seed: o.Seed,
		})
		if err != nil {
			return nil, err
		}
		logf("seeding %d pods", o.Keys)
		if _, err := kw.Seed(ctx, kvs, o.PutWorkers); err != nil {
			return nil, fmt.Errorf("seed pods: %w", err)
		}
		wl = kw
		watchPrefix = ResourcePrefix(o.Prefix, ResourcePods)
	}

	head, err := admin.Get(ctx, keyspace.CompactRevKey)
	if err != nil {
		return nil, fmt.Errorf("read the current revision: %w", err)
	}
	from := head.Header.Revision + 1
	recTopo, err := Connect(ctx, t.Dial, 1, 1, "")
	if err != nil {
		return nil, err
	}
	defer recTopo.Close()
	rec := NewRecorder(recTopo.Streams[0], []string{watchPrefix})
	env := NewEnv(epoch, o.Puts+1024, o.PutWorkers, rec)
	rctx, stopRecorder := context.WithCancel(ctx)
	defer stopRecorder()
	var recWG sync.WaitGroup
	recWG.Add(1)
	go func() {
		defer recWG.Done()
		rec.Run(rctx, from)
	}()

	watchTopo, err := Connect(ctx, t.Dial, o.Connections, o.Streams, "")
	if err != nil {
		return nil, err
	}
	defer watchTopo.Close()
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	refls := make([]*Reflector, o.Watchers)
	for i := range refls {
		refls[i] = NewReflector(env, ReflectorOptions{
			ID: i, Resource: "watch", Prefix: watchPrefix, Stream: watchTopo.StreamFor(i), WatchOnlyFrom: from,
			NoPrevKV: o.NoPrevKV, NoProgressNotify: o.NoProgressNotify,
		})
	}
	live := &liveState{o: Options{Watchers: o.Watchers, OnProgress: o.OnProgress, ProgressInterval: 500 * time.Millisecond}, start: epoch, phase: "creating watches"}
	live.setWatchers(refls, rec)
	stopProgress := live.report(ctx)
	defer stopProgress()
	logf("creating %d watches of %s on %d streams over %d connections", o.Watchers, watchPrefix, o.Streams, o.Connections)
	var wwg sync.WaitGroup
	if err := startReflectors(ctx, wctx, refls, -1, o.SyncTimeout, &wwg); err != nil {
		return nil, err
	}
	creation := newHistogram()
	for _, r := range refls {
		creation.record(r.CreationLatency())
	}
	res.Creation = creation.summary()

	writers, err := NewWriters(env, kvs, wl, WriterOptions{Rate: o.PutRate, Total: o.Puts, Workers: o.PutWorkers, Timeout: o.WriteTimeout})
	if err != nil {
		return nil, err
	}
	live.setWriters(writers, o.Puts)
	live.setPhase("putting")
	env.SetIntervalOrigin(env.Since())
	logf("putting %d values at %.0f/s with %d workers over %d connections", o.Puts, o.PutRate, o.PutWorkers, o.PutConnections)
	res.Writes = writers.Run(ctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	live.setPhase("delivering")
	final, err := admin.Get(ctx, keyspace.CompactRevKey)
	if err != nil {
		return nil, fmt.Errorf("read the final revision: %w", err)
	}
	if err := rec.WaitFor(ctx, final.Header.Revision, 100*time.Millisecond); err != nil && ctx.Err() == nil {
		logf("history recorder did not reach revision %d: %v", final.Header.Revision, err)
	}
	unsynced := waitSynced(ctx, watchTopo.Streams, refls, final.Header.Revision, 100*time.Millisecond, o.SyncTimeout)
	stopWatchers()
	wwg.Wait()
	finishValidation(ctx, rec, refls, 100*time.Millisecond, logf)
	stopRecorder()
	recWG.Wait()

	tm := env.timing
	tm.mu.Lock()
	res.Writes.Latency = tm.writes.summary()
	res.Delivery.FromCommit, res.Delivery.FromSend = tm.fromCommit.summary(), tm.fromSend.summary()
	res.Delivery.DeliveredBeforeResponse = tm.beforeResponse
	res.Delivery.TimedEvents, res.Delivery.UntimedEvents = tm.timed, tm.untimed
	tm.mu.Unlock()
	res.Intervals = tm.series()
	var unverified int64
	for _, r := range refls {
		st := r.Stats()
		res.Delivery.Events += st.Events
		unverified += st.Unverified
	}
	res.Delivery.EventsPerSecond = tm.eventsPerSecond(res.Delivery.Events)
	res.ExpectedEvents = res.Writes.Completed * int64(o.Watchers)
	res.Validation = validationReport(env, unsynced, unverified, 0)
	res.Self = self.finish(ctx)
	return res, nil
}

// validationReport turns the Env's violations into the report's counts.
func validationReport(env *Env, unsynced int, unverified, prevKVMissing int64) report.Validation {
	rec := env.Recorder
	for _, g := range rec.Gaps() {
		for rev := g.From; rev <= g.To; rev++ {
			env.Violations.Add(Violation{Watcher: -1, Kind: ViolationRecorderGap, Revision: rev, Detail: "the recorder's whole-keyspace watch skipped this revision"})
		}
	}
	vs := env.Violations
	v := report.Validation{
		Lost: vs.Count(ViolationReliable), Duplicated: vs.Count(ViolationUnique), OutOfOrder: vs.Count(ViolationOrdered),
		Atomic: vs.Count(ViolationAtomic), Resumable: vs.Count(ViolationResumable), Bookmarkable: vs.Count(ViolationBookmarkable),
		Unexpected: vs.Count(ViolationUnexpected), PrevKVMismatches: vs.Count(ViolationPrevKV), PrevKVMissing: prevKVMissing,
		CacheMismatches: vs.Count(ViolationCache), RecorderGaps: vs.Count(ViolationRecorderGap),
		UnsyncedWatchers: unsynced, UnverifiedEvents: unverified, HistoryEvents: rec.Events(),
		UnrecordedWrites: vs.Count(ViolationUnrecorded), RecorderScope: "keyspace",
	}
	if s := rec.Scope(); s != "" {
		v.RecorderScope = s
	}
	if err := rec.Err(); err != nil {
		v.RecorderError = err.Error()
	}
	for _, x := range vs.Samples() {
		v.Violations = append(v.Violations, report.Violation{Watcher: x.Watcher, Kind: string(x.Kind), Revision: x.Revision, Key: x.Key, Detail: x.Detail})
	}
	return v
}
