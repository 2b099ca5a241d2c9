package watchload

import (
	"context"
	"fmt"
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
	// OnStatus, if set, is called every 500 ms with a live view.
	OnStatus func(LoadStatus)
}

// Defaults returns o with zero fields set.
func (o WatchOptions) Defaults() WatchOptions {
	if o.Prefix == "" {
		o.Prefix = BenchPrefix("/lwbench", "watch", o.ValueSize, keyspace.DefaultPrefix)
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
	s := NewSession(t, time.Now(), o.Logf)
	defer s.Close()
	s.SampleSelf(ctx)
	res := &report.WatchResult{
		Kind: report.KindWatch, SchemaVersion: report.WatchSchemaVersion, StartedAt: s.epoch.UTC(), Target: s.reportTarget(),
		Scenario: report.WatchScenario{
			Prefix: o.Prefix, Watchers: o.Watchers, Streams: o.Streams, Connections: o.Connections, Keys: o.Keys,
			ValueSize: o.ValueSize, Puts: o.Puts, PutRatePerSecond: o.PutRate, PutWorkers: o.PutWorkers,
			PutConnections: o.PutConnections, PrevKV: !o.NoPrevKV, ProgressNotify: !o.NoProgressNotify, Seed: o.Seed,
		},
	}
	admin, version, err := s.writersAsAdmin(ctx, o.PutConnections)
	if err != nil {
		return nil, err
	}
	res.Target.EtcdVersion = version

	var wl Workload
	watchPrefix := o.Prefix
	if o.ValueSize > 0 {
		wl = &rawWorkload{Prefix: o.Prefix, Keys: o.Keys, ValueSize: o.ValueSize, Seed: o.Seed}
	} else {
		kw, err := NewKubernetesWorkload(KubernetesWorkloadOptions{
			Prefix: o.Prefix, Namespaces: 1, Pods: o.Keys, Mix: Mix{UpdatePercent: 100},
			ResourceMix: ResourceMix{PodsPercent: 100}, Workers: o.PutWorkers, Seed: o.Seed,
		})
		if err != nil {
			return nil, err
		}
		s.logf("seeding %d pods", o.Keys)
		if err := s.Seed(ctx, kw, o.PutWorkers); err != nil {
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
	if _, err := s.StartRecorder(context.WithoutCancel(ctx), []string{watchPrefix}, "", from); err != nil {
		return nil, err
	}
	s.NewEnv(o.Puts+1024, o.PutWorkers)
	if _, err := s.ConnectWatchers(ctx, o.Connections, o.Streams, "", false); err != nil {
		return nil, err
	}
	s.ReportStatus(ctx, o.OnStatus, 500*time.Millisecond, o.Watchers, "creating watches")
	s.logf("creating %d watches of %s on %d streams over %d connections", o.Watchers, watchPrefix, o.Streams, o.Connections)
	refls, err := s.StartWatchers(ctx, o.Watchers, func(i int, stream *Stream) ReflectorOptions {
		return ReflectorOptions{ID: i, Resource: "watch", Prefix: watchPrefix, Stream: stream, WatchOnlyFrom: from,
			NoPrevKV: o.NoPrevKV, NoProgressNotify: o.NoProgressNotify}
	}, -1, o.SyncTimeout)
	if err != nil {
		return nil, err
	}
	creation := newHistogram()
	for _, r := range refls {
		creation.record(r.CreationLatency())
	}
	res.Creation = creation.summary()

	s.logf("putting %d values at %.0f/s with %d workers over %d connections", o.Puts, o.PutRate, o.PutWorkers, o.PutConnections)
	writing, err := s.Write(ctx, wl, WriterOptions{Rate: o.PutRate, Total: o.Puts, Workers: o.PutWorkers, Timeout: o.WriteTimeout}, "putting")
	if err != nil {
		return nil, err
	}
	res.Writes = writing.Wait()
	ctx, interrupted, cancel := s.AfterWrites(ctx)
	defer cancel()
	res.Interrupted = interrupted != nil
	if interrupted != nil {
		o.SyncTimeout = min(o.SyncTimeout, interruptedGrace/2)
	}
	s.SetPhase("delivering")
	final, err := admin.Get(ctx, keyspace.CompactRevKey)
	if err != nil {
		return nil, fmt.Errorf("read the final revision: %w", err)
	}
	unsynced := s.Confirm(ctx, final.Header.Revision, 100*time.Millisecond, o.SyncTimeout)
	s.Validate(ctx, 100*time.Millisecond)

	res.Intervals = collectTimings(s.env, &res.Writes, &res.Delivery)
	var unverified int64
	for _, r := range refls {
		st := r.Stats()
		res.Delivery.Events += st.Events
		unverified += st.Unverified
	}
	res.Delivery.EventsPerSecond = s.env.timing.eventsPerSecond(res.Delivery.Events)
	res.ExpectedEvents = res.Writes.Completed * int64(o.Watchers)
	res.Validation = validationReport(s.env, unsynced, unverified, 0)
	res.Self = s.SelfStats(ctx)
	if interrupted != nil {
		return res, interruptedAfterWrites("watch", interrupted, res.Writes)
	}
	return res, nil
}
