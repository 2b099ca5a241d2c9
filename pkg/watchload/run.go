package watchload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
)

// Progress is a live view of a run.
type Progress struct {
	Phase            string        // seeding, syncing, writing, confirming...
	Elapsed          time.Duration // since the run began
	WritesPlanned    int64         // writes scheduled in all
	WritesDone       int64         // writes that succeeded so far
	WriteErrors      int64         // writes that failed so far
	Events           int64         // events received by all watchers
	Relists          int           // LIST phases after the first
	Violations       int64         // violations found so far
	SyncedWatchers   int           // watchers past their first LIST
	Watchers         int           // watchers in all
	RecorderRevision int64         // revision the history is complete to
}

// Target is the etcd a run drives.
type Target struct {
	// Endpoints are the members' client URLs, one per member; each is
	// defragmented in turn (the leader last), and the first is queried
	// for sizes and metrics.
	Endpoints []string
	// Embedded is true when the member runs in this process.
	Embedded bool
	// Managed is true when lwbench started the members (embedded or
	// processes) and stops them afterwards.
	Managed bool
	// Dial opens a new connection to every endpoint; a run opens
	// Connections + WriterConnections + 2 (the history recorder and the
	// maintenance connection), and with faults one more for the probe
	// and one to each endpoint (DialEndpoint), and closes them.
	Dial Dialer
	// DialEndpoint opens a connection to one endpoint only, for
	// Options.PinConnections.
	DialEndpoint EndpointDialer
	// Members control the member processes, one per endpoint in the same
	// order, when the run may inject faults; nil otherwise.
	Members []MemberControl
}

// Run seeds objects, starts the history recorder and the watchers, waits
// until they have listed, then writes on schedule for o.Duration while the
// compactor ticks on kube-apiserver's algorithm, holds o.HoldBack watchers
// back across a compaction so that they must relist, defragments every
// member once (one at a time, the leader last), injects o.Faults and
// measures the recovery from each, and (apiserver-cache) serves consistent
// LISTs from the caches. At the end it waits until every watcher confirms
// the final revision, validates every watch against the recorded history,
// compares every cache with etcd, and, with o.Cleanup, deletes what it
// wrote. Before writing anything it refuses a prefix that holds keys
// unless o.ReusePrefix (ErrPrefixNotEmpty). Errors are returned only when
// the run could not be carried out (seeding failed, the target is
// unreachable); broken watch guarantees are results, in
// RunResult.Validation.
func Run(ctx context.Context, t Target, o Options) (_ *report.RunResult, err error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := checkTarget(t, o); err != nil {
		return nil, err
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	epoch := time.Now()
	res := &report.RunResult{
		Kind:          report.KindRun,
		SchemaVersion: report.RunSchemaVersion,
		StartedAt:     epoch.UTC(),
		Target:        report.Target{Embedded: t.Embedded, Endpoints: t.Endpoints, Managed: t.Managed},
		Scenario:      scenario(o),
	}
	self := startSelfSampler(ctx, t.Embedded, t.Endpoints[0])

	// Connections outlive ctx (each is closed by its defer), so that an
	// interrupted run can still read what it needs for its result.
	dialCtx := context.WithoutCancel(ctx)

	// The maintenance connection, to every member: status, compaction,
	// defragmentation, the final reads and the cleanup.
	admin, err := t.Dial(dialCtx)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if res.Members, err = describeMembers(ctx, admin, t.Endpoints); err != nil {
		return nil, err
	}
	res.Target.EtcdVersion = res.Members[0].Version

	// Nothing is written before the prefix is known to be empty (or its
	// reuse allowed).
	head, err := admin.Get(ctx, o.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("count the keys under %s/: %w", o.Prefix, err)
	}
	if head.Count > 0 && !o.ReusePrefix {
		return nil, fmt.Errorf("%w: %s/ holds %d keys (an earlier run's, or another client's); choose another prefix or reuse it explicitly",
			ErrPrefixNotEmpty, o.Prefix, head.Count)
	}
	startRev := head.Header.Revision

	writerTopo, err := o.connect(dialCtx, t, o.WriterConnections, o.WriterConnections, "")
	if err != nil {
		return nil, err
	}
	defer writerTopo.Close()
	kvs := make([]KV, len(writerTopo.Conns))
	for i, c := range writerTopo.Conns {
		kvs[i] = c
	}

	wo := KubernetesWorkloadOptions{
		Prefix: o.Prefix, Namespaces: o.Namespaces, Pods: o.Objects, ConfigMaps: o.ConfigMaps, Events: o.Events,
		Mix: o.Mix, ResourceMix: o.ResourceMix, EventTTL: o.EventTTL, Workers: o.WriterConcurrency, Seed: o.Seed,
	}
	if o.ReusePrefix {
		wo.NamespacePrefix = fmt.Sprintf("lwbench-%08x-ns-", rand.Uint32())
	}
	wl, err := NewKubernetesWorkload(wo)
	if err != nil {
		return nil, err
	}
	if o.Cleanup {
		// Runs once the watchers, writers and recorder have stopped (their
		// deferred stops run first) and before the maintenance
		// connection closes, on success and on failure alike, even when
		// ctx has ended.
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if err == nil && o.BeforeCleanup != nil {
				if berr := o.BeforeCleanup(cctx); berr != nil {
					err = berr
				}
			}
			extra := []string{o.Prefix + "/" + keyspace.CompactRevKey, probeKey(o.Prefix), faultKey(o.Prefix)}
			c := cleanup(cctx, admin, wl, extra, startRev, o.Prefix, o.ReusePrefix)
			logf("cleanup: deleted %d keys and revoked %d leases lwbench wrote; %d keys left under %s/", c.KeysDeleted, c.LeasesRevoked, c.KeysLeft, o.Prefix)
			if c.Error != "" {
				logf("cleanup: %s", c.Error)
			}
			res.Cleanup = &c
		}()
	} else if o.BeforeCleanup != nil {
		defer func() {
			if err == nil {
				err = o.BeforeCleanup(ctx)
			}
		}()
	}
	live := &liveState{o: o, start: epoch, phase: "seeding"}
	stopProgress := live.report(ctx)
	defer stopProgress()
	logf("seeding %d pods, %d configmaps, %d events under %s/", o.Objects, o.ConfigMaps, o.Events, o.Prefix)
	if _, err := wl.Seed(ctx, kvs, o.WriterConcurrency); err != nil {
		if errors.Is(err, ErrObjectExists) {
			return nil, fmt.Errorf("seed objects under %s/ (it holds an earlier run's objects; choose another prefix): %w", o.Prefix, err)
		}
		return nil, fmt.Errorf("seed objects: %w", err)
	}

	// The history recorder, on a connection of its own to every member,
	// from the next revision on: every watcher lists at or after it.
	recTopo, err := Connect(dialCtx, t.Dial, 1, 1, "")
	if err != nil {
		return nil, err
	}
	defer recTopo.Close()
	cur, err := currentRevision(ctx, admin, o.Prefix)
	if err != nil {
		return nil, fmt.Errorf("read the current revision: %w", err)
	}
	rec := NewRecorder(recTopo.Streams[0], wl.Prefixes())
	rec.FallbackScope = o.Prefix + "/"
	total := int64(o.WriteRate * o.Duration.Seconds())
	env := NewEnv(epoch, total+1024, o.WriterConcurrency, rec)
	if o.PinConnections {
		env.timing.setMembers(len(t.Endpoints))
	}
	rctx, stopRecorder := context.WithCancel(ctx)
	defer stopRecorder()
	var recWG sync.WaitGroup
	recWG.Add(1)
	go func() {
		defer recWG.Done()
		rec.Run(rctx, cur+1)
	}()

	// Watchers.
	watchTopo, err := o.connect(dialCtx, t, o.Connections, o.Streams, o.Profile.Source())
	if err != nil {
		return nil, err
	}
	defer watchTopo.Close()
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	refls := make([]*Reflector, o.Watchers)
	for i := range refls {
		resource := o.WatchResources[i%len(o.WatchResources)]
		refls[i] = NewReflector(env, ReflectorOptions{
			ID: i, Profile: o.Profile, Resource: resource, Prefix: ResourcePrefix(o.Prefix, resource),
			Stream: watchTopo.StreamFor(i), PageSize: o.PageSize, Clock: o.Clock, Hooks: o.Hooks,
		})
	}
	live.setWatchers(refls, rec)
	live.setPhase("syncing")
	pinned := ""
	if o.PinConnections {
		pinned = ", each pinned to one member"
	}
	logf("starting %d %s watchers of %s on %d streams over %d connections%s (LIST pages of %d, WATCH with prevKV)",
		o.Watchers, o.Profile, strings.Join(o.WatchResources, ", "), o.Streams, o.Connections, pinned, o.PageSize)
	var wwg sync.WaitGroup
	if err := startReflectors(ctx, wctx, refls, o.StartConcurrency, o.SyncTimeout, &wwg); err != nil {
		return nil, err
	}

	// The faults' probe connection and a connection to each member,
	// opened while every member is up.
	var probeConn *clientv3.Client
	var memberConns []*clientv3.Client
	if len(o.Faults) > 0 {
		if probeConn, err = t.Dial(dialCtx); err != nil {
			return nil, err
		}
		defer probeConn.Close()
		for _, ep := range t.Endpoints {
			if t.DialEndpoint == nil {
				break
			}
			c, err := t.DialEndpoint(ctx, ep)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			memberConns = append(memberConns, c)
		}
	}

	// Writers, on schedule from now.
	writers, err := NewWriters(env, kvs, wl, WriterOptions{Rate: o.WriteRate, Total: total, Workers: o.WriterConcurrency,
		Timeout: o.WriteTimeout, ConnMember: writerTopo.ConnMember})
	if err != nil {
		return nil, err
	}
	live.setWriters(writers, total)
	writeStart := env.Since()
	env.SetIntervalOrigin(writeStart)
	live.setPhase("writing")
	logf("writing %d ops at %.0f/s for %v (resources %s; create/update/delete %d/%d/%d)", total, o.WriteRate, o.Duration,
		o.ResourceMix, o.Mix.CreatePercent, o.Mix.UpdatePercent, o.Mix.DeletePercent)
	writeCtx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	writeDone := make(chan report.WriteStats, 1)
	writersFinished := make(chan struct{})
	go func() {
		ws := writers.Run(writeCtx)
		close(writersFinished)
		writeDone <- ws
	}()

	var cr *ConsistentReader
	var crWG sync.WaitGroup
	if o.Profile == ProfileAPIServerCache && o.ConsistentListRate > 0 {
		reqs := map[*Stream]*ProgressRequester{}
		for _, s := range watchTopo.Streams {
			reqs[s] = NewProgressRequester(s, o.Clock)
			go reqs[s].Run(wctx)
		}
		cr = NewConsistentReader(env, refls, reqs, DefaultPageSize)
		crWG.Add(1)
		go func() {
			defer crWG.Done()
			cr.Run(writeCtx, o.ConsistentListRate, o.Duration)
		}()
	}

	maint := newMaintenance(t, admin, o, env, refls, logf, res)
	maintDone := make(chan struct{})
	go func() {
		defer close(maintDone)
		maint.run(ctx, writeStart+o.Duration-env.Since())
	}()
	faults := &faultRunner{t: t, admin: admin, probeConn: probeConn, memberConns: memberConns, o: o, env: env, refls: refls, rec: rec,
		streams: append(append([]*Stream(nil), watchTopo.Streams...), recTopo.Streams[0]), writers: writers,
		writersDone: writersFinished, members: res.Members, logf: logf}
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		faults.run(ctx, writeStart)
	}()

	var ws report.WriteStats
	select {
	case ws = <-writeDone:
	case <-ctx.Done():
		stopWriters()
		ws = <-writeDone
	}
	crWG.Wait()
	<-maintDone
	<-faultsDone
	res.Faults = faults.results
	for _, r := range refls {
		r.Release()
	}
	// Interrupted (SIGINT): keep what was measured. The rest of the run
	// confirms, validates and collects under a bounded context of its
	// own, and the result goes back with the interruption as its error.
	interrupted, interruptedAfter := ctx.Err(), env.Since()-writeStart
	if interrupted != nil {
		logf("interrupted: collecting what was measured so far (at most %s)", interruptedGrace)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), interruptedGrace)
		defer cancel()
		o.SyncTimeout = min(o.SyncTimeout, interruptedGrace/2)
		res.Interrupted = true
	}
	res.Writes = ws

	// Final state, then wait for the recorder and every watcher to
	// confirm it.
	live.setPhase("confirming")
	finalRev, err := currentRevision(ctx, admin, o.Prefix)
	if err != nil {
		return nil, fmt.Errorf("read the final revision: %w", err)
	}
	res.Final.Revision, res.Final.CompactRevision = finalRev, maint.compacted
	logf("writes done at revision %d; waiting for the watchers to confirm it", finalRev)
	if err := rec.WaitFor(ctx, finalRev, o.ProgressRequestPeriod); err != nil && ctx.Err() == nil {
		logf("history recorder did not reach revision %d: %v", finalRev, err)
	}
	unsynced := waitSynced(ctx, watchTopo.Streams, refls, finalRev, o.ProgressRequestPeriod, o.SyncTimeout)
	stopWatchers()
	wwg.Wait()
	finishValidation(ctx, rec, refls, o.ProgressRequestPeriod, logf)
	stopRecorder()
	recWG.Wait()
	if size, err := memberSize(ctx, admin, t.Endpoints[0]); err == nil {
		res.DBSize.EndBytes, res.DBSize.EndInUseBytes = size.Bytes, size.InUseBytes
	}
	memberSizes(ctx, admin, t.Endpoints, res.Members)
	if cr != nil {
		res.ConsistentReads = cr.Result()
	}
	if err := collect(ctx, res, env, admin, o, refls, unsynced); err != nil {
		return nil, err
	}
	memberStats(res.Members, env, watchTopo, writerTopo, refls)
	res.Self = self.finish(ctx)
	if interrupted != nil {
		return res, fmt.Errorf("run %w after %s of writes: the result holds what was measured until then", interrupted, time.Duration(interruptedAfter).Round(time.Millisecond))
	}
	return res, nil
}

// interruptedGrace bounds what an interrupted run still does to hand back
// its result: confirm, validate and collect.
const interruptedGrace = 20 * time.Second

// checkTarget checks what the options need from the target.
func checkTarget(t Target, o Options) error {
	switch {
	case len(t.Endpoints) == 0 || t.Dial == nil:
		return errors.New("target needs endpoints and a dialer")
	case o.PinConnections && t.DialEndpoint == nil:
		return errors.New("pinned connections need a target that dials one endpoint")
	case len(o.Faults) > 0 && len(t.Members) != len(t.Endpoints):
		return fmt.Errorf("%w: faults need a cluster whose member processes lwbench started", ErrNoFaults)
	}
	for _, f := range o.Faults {
		if !f.Kind.Leader() && len(t.Members) < 2 {
			return fmt.Errorf("%w: %s needs at least two members", ErrNoFaults, f.Kind)
		}
	}
	return nil
}

// connect opens a topology to every endpoint, or pinned to one endpoint
// per connection with o.PinConnections.
func (o Options) connect(ctx context.Context, t Target, conns, streams int, source string) (*Topology, error) {
	if o.PinConnections {
		return ConnectPinned(ctx, t.DialEndpoint, t.Endpoints, conns, streams, source)
	}
	return Connect(ctx, t.Dial, conns, streams, source)
}

// currentRevision returns etcd's current revision, read with a
// linearizable get of one key under the prefix (a user limited to the
// prefix may read nothing else).
func currentRevision(ctx context.Context, c *clientv3.Client, prefix string) (int64, error) {
	resp, err := c.Get(ctx, prefix+"/")
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

func scenario(o Options) report.Scenario {
	return report.Scenario{
		Profile: string(o.Profile), Prefix: o.Prefix, Objects: o.Objects, ConfigMaps: o.ConfigMaps, Events: o.Events,
		Namespaces: o.Namespaces, Watchers: o.Watchers, WatchResources: o.WatchResources,
		Connections: o.Connections, Streams: o.Streams, WriterConnections: o.WriterConnections,
		WriteRatePerSecond: o.WriteRate, DurationMs: report.Ms(o.Duration), PageSize: o.PageSize,
		ResourceMix: report.ResourceMix{PodsPercent: o.ResourceMix.PodsPercent, ConfigMapsPercent: o.ResourceMix.ConfigMapsPercent,
			EventsPercent: o.ResourceMix.EventsPercent},
		CompactionIntervalMs: report.Ms(o.CompactionInterval), CreatePercent: o.Mix.CreatePercent,
		UpdatePercent: o.Mix.UpdatePercent, DeletePercent: o.Mix.DeletePercent,
		WriterConcurrency: o.WriterConcurrency, HeldBackWatchers: o.HoldBack, Seed: o.Seed,
		Defragment: o.Defragment, PhysicalCompaction: o.PhysicalCompaction,
		ProgressRequestPeriod: report.Ms(o.ProgressRequestPeriod), EventTTLMs: report.Ms(o.EventTTL),
		ConsistentListRatePerSecond: consistentRate(o), StartConcurrency: max(o.StartConcurrency, 0),
		ReusePrefix: o.ReusePrefix, PinConnections: o.PinConnections, CompactRevKey: compactRevKeyName(o),
		Faults: plannedFaults(o.Faults),
	}
}

func plannedFaults(faults []Fault) []report.PlannedFault {
	var out []report.PlannedFault
	for _, f := range faults {
		out = append(out, report.PlannedFault{Kind: string(f.Kind), AtMs: report.Ms(f.At), DurationMs: report.Ms(f.Duration)})
	}
	return out
}

func consistentRate(o Options) float64 {
	if o.Profile != ProfileAPIServerCache {
		return 0
	}
	return max(o.ConsistentListRate, 0)
}

// startReflectors runs every reflector under wctx, at most concurrency
// listing at once, and waits until all have synced or timeout passes.
func startReflectors(ctx, wctx context.Context, refls []*Reflector, concurrency int, timeout time.Duration, wg *sync.WaitGroup) error {
	if concurrency <= 0 {
		concurrency = len(refls)
	}
	sem := make(chan struct{}, concurrency)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, r := range refls {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("watchers did not list within %v", timeout)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Run(wctx)
		}()
		go func() {
			select {
			case <-r.Synced():
			case <-r.Done():
			}
			<-sem
		}()
	}
	for _, r := range refls {
		select {
		case <-r.Synced():
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("watcher %d did not list within %v", r.ID(), timeout)
		}
	}
	return nil
}

// finishValidation waits until the history covers every stopped
// reflector's last revision (lease expiries may have moved etcd on after
// the final revision), then completes each reflector's validation.
func finishValidation(ctx context.Context, rec *Recorder, refls []*Reflector, period time.Duration, logf func(string, ...any)) {
	var last int64
	for _, r := range refls {
		last = max(last, r.LastRevision())
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := rec.WaitFor(wctx, last, period); err != nil {
		logf("history recorder did not reach revision %d: %v", last, err)
	}
	for _, r := range refls {
		r.Finish()
	}
}

// waitSynced requests progress notifications on every stream until every
// reflector has seen revision rev or the timeout passes, and returns how
// many did not.
func waitSynced(ctx context.Context, streams []*Stream, refls []*Reflector, rev int64, period, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		behind := map[int]bool{}
		for _, r := range refls {
			if r.LastRevision() < rev {
				behind[r.Options().Stream.ID] = true
			}
		}
		n := 0
		for _, r := range refls {
			if r.LastRevision() < rev {
				n++
			}
		}
		if n == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		for _, s := range streams {
			if behind[s.ID] {
				s.RequestProgress(ctx) // one request reaches every watch on the stream
			}
		}
		sleepCtx(ctx, period)
	}
}

// collect fills the result from the Env and the reflectors, which have
// stopped: delivery and write latencies, lists, and the validation,
// including each cache against etcd's state at the reflector's last
// revision.
func collect(ctx context.Context, res *report.RunResult, env *Env, admin *clientv3.Client, o Options, refls []*Reflector, unsynced int) error {
	tm := env.timing
	tm.mu.Lock()
	res.Writes.Latency = tm.writes.summary()
	res.Delivery.FromCommit = tm.fromCommit.summary()
	res.Delivery.FromSend = tm.fromSend.summary()
	res.Delivery.DeliveredBeforeResponse = tm.beforeResponse
	res.Delivery.TimedEvents, res.Delivery.UntimedEvents = tm.timed, tm.untimed
	tm.mu.Unlock()
	res.Intervals = tm.series()

	initial := newHistogram()
	var unverified, missing int64
	for _, r := range refls {
		st := r.Stats()
		ro := r.Options()
		res.Delivery.Events += st.Events
		unverified += st.Unverified
		missing += st.PrevKVMissing
		res.Watchers = append(res.Watchers, report.WatcherStats{
			ID: ro.ID, Resource: ro.Resource, Stream: ro.Stream.ID, Connection: ro.Stream.Conn, Events: st.Events,
			Lists: st.Lists, Sessions: st.Sessions, ProgressNotifies: st.ProgressNotifies, LastRevision: r.LastRevision(),
			CacheObjects: st.CacheObjects, HeldBack: st.HeldBack,
		})
		for i, l := range r.Lists() {
			if i == 0 {
				res.InitialLists.Count++
				res.InitialLists.Objects += l.Objects
				res.InitialLists.Bytes += l.Bytes
				res.InitialLists.Pages += int64(l.Pages)
				initial.record(l.Duration)
				continue
			}
			res.Relists = append(res.Relists, relistReport(ro, l))
		}
	}
	res.InitialLists.Latency = initial.summary()
	res.Delivery.EventsPerSecond = tm.eventsPerSecond(res.Delivery.Events)
	if res.Relists == nil {
		res.Relists = []report.Relist{}
	}
	if res.Compaction == nil {
		res.Compaction = []report.Compaction{}
	}

	// Final state per resource, and each cache against etcd at the
	// reflector's last revision.
	for _, resource := range Resources {
		resp, err := admin.Get(ctx, ResourcePrefix(o.Prefix, resource), clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(res.Final.Revision))
		if err != nil {
			return fmt.Errorf("count %s at revision %d: %w", resource, res.Final.Revision, err)
		}
		res.Final.Resources = append(res.Final.Resources, report.ResourceCount{Resource: resource, Objects: resp.Count})
		res.Final.Objects += resp.Count
	}
	states := map[string]map[string]int64{}
	for _, r := range refls {
		ro := r.Options()
		rev := r.LastRevision()
		id := fmt.Sprintf("%s@%d", ro.Prefix, rev)
		state, ok := states[id]
		if !ok {
			resp, err := admin.Get(ctx, ro.Prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
			if err != nil {
				return fmt.Errorf("read %s at revision %d: %w", ro.Prefix, rev, err)
			}
			state = make(map[string]int64, len(resp.Kvs))
			for _, kv := range resp.Kvs {
				state[string(kv.Key)] = kv.ModRevision
			}
			states[id] = state
		}
		compareCache(env.Violations, ro.ID, rev, r.Cache(), state)
	}

	unrecordedWrites(env)
	res.Validation = validationReport(env, unsynced, unverified, missing)
	return nil
}

// unrecordedWrites reports every write still in the join's ring (the
// writes of the run, unless revisions outran the ring) whose revision is
// covered by the history but absent from it: etcd acknowledged it and the
// recorder never saw it. This also checks the recorder when it could watch
// only the prefix, where revision gaps cannot be told from other clients'
// writes.
func unrecordedWrites(env *Env) {
	rec := env.Recorder
	if rec == nil {
		return
	}
	mark := rec.Watermark()
	ring := env.timing.ring
	var missed []int64
	for i := range ring.slots {
		rev := ring.slots[i].rev.Load()
		if rev == 0 || rev > mark {
			continue
		}
		if !rec.hasRevision(rev) {
			missed = append(missed, rev)
		}
	}
	sort.Slice(missed, func(i, j int) bool { return missed[i] < missed[j] })
	for _, rev := range missed {
		env.Violations.Add(Violation{Watcher: -1, Kind: ViolationUnrecorded, Revision: rev,
			Detail: "etcd acknowledged a write at this revision; the recorder never saw it"})
	}
}

// compareCache reports every key whose presence or mod_revision differs
// between a cache and etcd's state, in key order.
func compareCache(vs *Violations, watcher int, rev int64, cache, state map[string]int64) {
	var keys []string
	for k, want := range state {
		if got, ok := cache[k]; !ok || got != want {
			keys = append(keys, k)
		}
	}
	for k := range cache {
		if _, ok := state[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, inEtcd := state[k]
		got, cached := cache[k]
		detail := fmt.Sprintf("at revision %d etcd holds mod_revision %d (present %v), the cache %d (present %v)", rev, want, inEtcd, got, cached)
		vs.Add(Violation{Watcher: watcher, Kind: ViolationCache, Revision: max(want, got), Key: k, Detail: detail})
	}
}

func relistReport(ro ReflectorOptions, l ListRecord) report.Relist {
	rl := report.Relist{
		Watcher: ro.ID, Resource: ro.Resource, Reason: l.Reason, FromRevision: l.FailedWatchFrom, CompactRevision: l.CompactRevision,
		ListRevision: l.Revision, AtMs: report.Ms(l.At), DurationMs: report.Ms(l.Duration), BackoffMs: report.Ms(l.Backoff),
		Objects: l.Objects, Bytes: l.Bytes, Pages: l.Pages,
	}
	for _, a := range l.Attempts {
		ra := report.ListAttempt{ResourceVersion: a.ResourceVersion, Limit: a.Limit, ReadRevision: a.ReadRevision, Revision: a.Revision,
			Pages: a.Pages, Objects: a.Objects, FullListFallback: a.FullListFallback, DurationMs: report.Ms(a.Duration)}
		if a.Err != nil {
			ra.Error = listErrorName(a.Err)
		}
		rl.Attempts = append(rl.Attempts, ra)
	}
	return rl
}

// listErrorName names a list error as kube-apiserver would answer it.
func listErrorName(err error) string {
	switch {
	case isExpired(err):
		return "410 expired (compacted)"
	case isTooLarge(err):
		return "too large resource version"
	}
	return err.Error()
}

// liveState feeds Options.OnProgress.
type liveState struct {
	o       Options
	start   time.Time
	mu      sync.Mutex
	phase   string
	refls   []*Reflector
	rec     *Recorder
	writers *Writers
	planned int64
}

func (l *liveState) setPhase(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = p
}

func (l *liveState) setWatchers(r []*Reflector, rec *Recorder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refls, l.rec = r, rec
}

func (l *liveState) setWriters(w *Writers, planned int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writers, l.planned = w, planned
}

func (l *liveState) snapshot() Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := Progress{Phase: l.phase, Elapsed: time.Since(l.start), WritesPlanned: l.planned, Watchers: l.o.Watchers}
	if l.writers != nil {
		wp := l.writers.Progress()
		p.WritesDone, p.WriteErrors = wp.Completed, wp.Errors
	}
	for _, r := range l.refls {
		p.Events += r.events.Load()
		select {
		case <-r.Synced():
			p.SyncedWatchers++
		default:
		}
		r.mu.Lock()
		p.Relists += max(len(r.lists)-1, 0)
		r.mu.Unlock()
		p.Violations = r.env.Violations.Total()
	}
	if l.rec != nil {
		p.RecorderRevision = l.rec.Watermark()
	}
	return p
}

// report calls OnProgress periodically until the returned stop is called.
func (l *liveState) report(ctx context.Context) (stop func()) {
	if l.o.OnProgress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(l.o.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				l.o.OnProgress(l.snapshot())
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
