package watchload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
)

// Run seeds objects, starts the history recorder and the watchers, waits
// until they have listed, then writes on schedule for o.Duration while the
// compactor ticks on kube-apiserver's algorithm, holds o.HoldBack watchers
// back across a compaction (against etcd they must then relist; with the
// watch cache a cache that still holds their revision resumes them, as
// kube-apiserver's keeps about 75 s of events:
// k8s.io/apiserver/pkg/storage/cacher/cacher.go DefaultEventFreshDuration),
// defragments every
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
	s := NewSession(t, time.Now(), o.Logf)
	defer s.Close()
	s.OnPhase(o.OnPhase)
	s.SetAbandon(o.Abandon)
	s.SampleSelf(ctx)
	logf := s.logf
	res := &report.RunResult{Kind: report.KindRun, SchemaVersion: report.RunSchemaVersion, StartedAt: s.epoch.UTC(),
		Target: s.reportTarget(), Scenario: scenario(o)}

	// Connections outlive ctx (the Session and the defers close them), so
	// that an interrupted run can still read what it needs for its result.
	dialCtx := context.WithoutCancel(ctx)
	admin, err := s.DialAdmin(ctx)
	if err != nil {
		return nil, err
	}
	h := t.harness() // the members as the harness reaches them
	if res.Members, err = describeMembers(ctx, admin, h.Endpoints); err != nil {
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

	writerTopo, err := s.ConnectWriters(ctx, o.WriterConnections, o.PinConnections)
	if err != nil {
		return nil, err
	}
	compactConn, err := s.DialCompactor(ctx)
	if err != nil {
		return nil, err
	}
	wo := KubernetesWorkloadOptions{
		Prefix: o.Prefix, Namespaces: o.Namespaces, Pods: o.Objects, ConfigMaps: o.ConfigMaps, Events: o.Events,
		Mix: o.Mix, ResourceMix: o.ResourceMix, EventTTL: o.EventTTL, Workers: o.WriterConcurrency, Seed: o.Seed,
		NoWatchCache: o.Profile != ProfileAPIServerCache,
	}
	if o.ReusePrefix {
		wo.NamespacePrefix = fmt.Sprintf("lwbench-%08x-ns-", rand.Uint32())
	}
	if o.NamespacePrefix != "" {
		wo.NamespacePrefix = o.NamespacePrefix
	}
	wl, err := NewKubernetesWorkload(wo)
	if err != nil {
		return nil, err
	}
	if o.Cleanup {
		// Runs once the watchers, writers and recorder have been told to
		// stop and before the maintenance connection closes, on success
		// and on failure alike, even when ctx has ended.
		defer func() {
			s.stop()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if o.Abandon != nil {
				defer context.AfterFunc(o.Abandon, cancel)()
			}
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
			if o.Abandon != nil && o.Abandon.Err() != nil && cctx.Err() != nil {
				logf("cleanup: cut short by the second interrupt; what is left under %s/ is lwbench's: run again with --reuse-prefix, or delete it", o.Prefix)
			}
			res.Cleanup = &c
		}()
	} else if o.BeforeCleanup != nil {
		defer func() {
			s.stop()
			if err == nil {
				err = o.BeforeCleanup(ctx)
			}
		}()
	}
	// The history recorder, the Env and the watchers' connections; with
	// the watch cache, the caches too: they start before the seeding, as
	// kube-apiserver's exist before any client writes, and so watch the
	// seeding. The recorder starts at the next revision: every watch
	// starts at or after it.
	pinned := ""
	if o.PinConnections {
		pinned = ", each pinned to one member"
	}
	total := int64(o.WriteRate * o.Duration.Seconds())
	var rec *Recorder
	var env *Env
	var watchTopo *Topology
	var caches map[string]*watchCache
	startWatching := func(from int64) error {
		if rec, err = s.StartRecorder(dialCtx, wl.Prefixes(), o.Prefix+"/", from); err != nil {
			return err
		}
		env = s.NewEnv(total+1024, o.WriterConcurrency)
		env.setRangeStream(o.rangeStream())
		if o.PinConnections {
			env.timing.setMembers(len(t.Endpoints))
		}
		if watchTopo, err = s.ConnectWatchers(ctx, o.Connections, o.Streams, o.Profile.Source(), o.PinConnections); err != nil {
			return err
		}
		if o.Profile != ProfileAPIServerCache {
			return nil
		}
		logf("starting the watch caches of %s (LIST pages of %d, WATCH with prevKV) on %d streams over %d connections%s",
			strings.Join(o.WatchResources, ", "), o.PageSize, o.Streams, o.Connections, pinned)
		caches, err = s.StartCaches(ctx, o.WatchResources, func(k int, resource string) ReflectorOptions {
			return ReflectorOptions{ID: o.Watchers + k, Profile: ProfileAPIServerCache, Resource: resource,
				Prefix: ResourcePrefix(o.Prefix, resource), Stream: resourceStream(watchTopo, o.WatchResources, resource),
				PageSize: o.PageSize, Clock: o.Clock, Hooks: o.Hooks}
		}, o.informerWatchList(), o.SyncTimeout)
		return err
	}
	// kube-apiserver's own informers (PodSecurity's of pods) exist before
	// any client writes; with the watch cache off they reach etcd.
	var own *ownInformer
	if o.Profile == ProfileInformer {
		octx, stopOwn := context.WithCancel(ctx)
		defer stopOwn()
		own = startOwnInformer(octx, o.Prefix, writerTopo.Streams[0], o.Clock, o.rangeStream())
		if !own.waitWatching(ctx, min(o.SyncTimeout, 10*time.Second)) && ctx.Err() == nil {
			logf("kube-apiserver's own informer of %s had not listed and watched after %v; seeding all the same", own.prefix, min(o.SyncTimeout, 10*time.Second))
		}
	}
	s.ReportStatus(ctx, o.OnStatus, o.StatusInterval, o.Watchers, "seeding")
	if o.Profile == ProfileAPIServerCache {
		if err := startWatching(startRev + 1); err != nil {
			return nil, err
		}
	}
	logf("seeding %d pods, %d configmaps, %d events under %s/", o.Objects, o.ConfigMaps, o.Events, o.Prefix)
	if err := s.Seed(ctx, wl, o.WriterConcurrency); err != nil {
		if errors.Is(err, ErrObjectExists) {
			return nil, fmt.Errorf("seed objects under %s/ (it holds an earlier run's objects; choose another prefix): %w", o.Prefix, err)
		}
		return nil, fmt.Errorf("seed objects: %w", err)
	}
	if o.Profile != ProfileAPIServerCache {
		cur, err := currentRevision(ctx, admin, o.Prefix)
		if err != nil {
			return nil, fmt.Errorf("read the current revision: %w", err)
		}
		if err := startWatching(cur + 1); err != nil {
			return nil, err
		}
	}

	s.SetPhase("syncing")
	if o.Profile == ProfileAPIServerCache {
		logf("starting %d informers of %s, served by the watch caches of %d resources (events are not cached)",
			o.Watchers, strings.Join(o.WatchResources, ", "), len(caches))
	} else {
		loading := fmt.Sprintf("LIST pages of %d", o.PageSize)
		if o.informerWatchList() {
			loading = "WatchList: WATCH with sendInitialEvents"
		}
		logf("starting %d %s watchers of %s on %d streams over %d connections%s (%s, WATCH with prevKV)",
			o.Watchers, o.Profile, strings.Join(o.WatchResources, ", "), o.Streams, o.Connections, pinned, loading)
	}
	refls, err := s.StartWatchers(ctx, o.Watchers, func(i int, stream *Stream) ReflectorOptions {
		resource := o.WatchResources[i%len(o.WatchResources)]
		ro := ReflectorOptions{ID: i, Profile: o.Profile, Resource: resource, Prefix: ResourcePrefix(o.Prefix, resource),
			Stream: stream, PageSize: o.PageSize, WatchList: o.informerWatchList(), Clock: o.Clock, Hooks: o.Hooks}
		if o.Profile == ProfileAPIServerCache {
			// Client informers through kube-apiserver: served by the
			// resource's watch cache, or, for a resource it does not
			// cache, from etcd on the resource's client.
			ro.Profile, ro.PageSize = ProfileInformer, 0
			ro.Stream = resourceStream(watchTopo, o.WatchResources, resource)
			if wc := caches[resource]; wc != nil {
				// The cache answers the first list as a consistent
				// read, whatever the gate (servedBy).
				ro.servedBy, ro.WatchList = wc, false
			}
		}
		return ro
	}, o.StartConcurrency, o.SyncTimeout)
	if err != nil {
		return nil, err
	}
	if o.Profile == ProfileAPIServerCache {
		wl.UseWatchCache(cacheRevisions(caches))
	}

	chores := runChores(s.watchers.Context(), o, watchTopo, caches, logf)

	// The faults' probe connection and a connection to each member,
	// opened while every member is up: the harness's.
	var probeConn *clientv3.Client
	var memberConns []*clientv3.Client
	if len(o.Faults) > 0 {
		if probeConn, err = h.Dial(dialCtx); err != nil {
			return nil, err
		}
		defer probeConn.Close()
		for _, ep := range h.Endpoints {
			if h.DialEndpoint == nil {
				break
			}
			c, err := h.DialEndpoint(dialCtx, ep)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			memberConns = append(memberConns, c)
		}
	}

	// Writers, on schedule from now, with the compaction schedule, the
	// faults and the consistent reads alongside.
	logf("writing %d ops at %.0f/s for %v (resources %s; create/update/delete %d/%d/%d)", total, o.WriteRate, o.Duration,
		o.ResourceMix, o.Mix.CreatePercent, o.Mix.UpdatePercent, o.Mix.DeletePercent)
	writing, err := s.Write(ctx, wl, WriterOptions{Rate: o.WriteRate, Total: total, Workers: o.WriterConcurrency,
		Timeout: o.WriteTimeout, ConnMember: writerTopo.ConnMember}, "writing")
	if err != nil {
		return nil, err
	}
	var cr *consistentReader
	var crWG sync.WaitGroup
	if o.Profile == ProfileAPIServerCache && o.ConsistentListRate > 0 {
		cr = newConsistentReader(env, s.wcs)
		crWG.Add(1)
		go func() {
			defer crWG.Done()
			cr.Run(ctx, o.ConsistentListRate, o.Duration)
		}()
	}
	maint := newMaintenance(h, admin, compactConn, o, env, refls, logf, res)
	maintDone := make(chan struct{})
	go func() {
		defer close(maintDone)
		maint.run(ctx, writing.Start)
	}()
	faults := &faultRunner{t: h, admin: admin, probeConn: probeConn, memberConns: memberConns, o: o, env: env, refls: refls, rec: rec,
		streams: append(append([]*Stream(nil), watchTopo.Streams...), s.recTopo.Streams[0]), writers: writing.Writers,
		writersDone: writing.Done(), members: res.Members, logf: logf}
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		faults.run(ctx, writing.Start)
	}()
	ws := writing.Wait()
	crWG.Wait()
	<-maintDone
	<-faultsDone
	res.Faults = faults.results
	for _, r := range refls {
		r.Release()
	}
	// Interrupted (SIGINT): keep what was measured; the recorder runs on
	// (dialCtx) so that the watchers' deliveries can still be confirmed.
	interruptedAfter := env.Since() - writing.Start
	ctx, interrupted, cancel := s.AfterWrites(ctx)
	defer cancel()
	if interrupted != nil {
		o.SyncTimeout = min(o.SyncTimeout, interruptedGrace/2)
		res.Interrupted = true
	}
	res.Writes = ws

	// Final state, then wait for the recorder and every watcher to
	// confirm it. An interrupted run interrupted again gives up at the
	// step it is in (abandoned).
	step := collectConfirm
	abandoned := func(err error) error {
		if s.Abandoned() {
			return abandonedError(interrupted, time.Duration(interruptedAfter), step)
		}
		return err
	}
	s.SetPhase("confirming")
	finalRev, err := currentRevision(ctx, admin, o.Prefix)
	if err != nil {
		return nil, abandoned(fmt.Errorf("read the final revision: %w", err))
	}
	res.Final.Revision, res.Final.CompactRevision = finalRev, maint.compacted
	logf("writes done at revision %d; waiting for the watchers to confirm it", finalRev)
	unsynced := s.Confirm(ctx, finalRev, o.ProgressRequestPeriod, o.SyncTimeout)
	if err := abandoned(nil); err != nil {
		return nil, err
	}
	logChores(chores, logf)
	if own != nil {
		logf("kube-apiserver's own informer of %s (PodSecurity admission): %d lists, %d events", own.prefix, own.lists.Load(), own.events.Load())
	}
	step = collectValidate
	s.SetPhase("validating")
	s.Validate(ctx, o.ProgressRequestPeriod)
	if err := abandoned(nil); err != nil {
		return nil, err
	}
	step = collectFinal
	if size, err := memberSize(ctx, admin, h.Endpoints[0]); err == nil {
		res.DBSize.EndBytes, res.DBSize.EndInUseBytes = size.Bytes, size.InUseBytes
	}
	memberSizes(ctx, admin, h.Endpoints, res.Members)
	if cr != nil {
		res.ConsistentReads = cr.Result()
	}
	if err := s.collect(ctx, res, o, unsynced); err != nil {
		return nil, abandoned(err)
	}
	if err := abandoned(nil); err != nil {
		return nil, err
	}
	memberStats(res.Members, env, watchTopo, writerTopo, refls)
	res.Self = s.SelfStats(ctx)
	res.Warnings = report.BusyWarnings(res.Self)
	res.Verdict = report.RunVerdict(res)
	if interrupted != nil {
		return res, fmt.Errorf("run stopped after %s of writes: the result holds what was measured until then: %w", time.Duration(interruptedAfter).Round(time.Millisecond), interrupted)
	}
	return res, nil
}

// The steps an interrupted run still takes to hand back its result, in
// order; abandonedError names those not taken.
const (
	collectConfirm  = iota // the watchers confirm the final revision
	collectValidate        // every watch validated against the history
	collectFinal           // final counts, cache comparison, sizes
)

// collectSteps say what each collection step gathers, by step.
var collectSteps = []string{
	collectConfirm:  "the watchers' confirmation of the final revision",
	collectValidate: "the validation of every watch against the recorded history",
	collectFinal:    "the final object counts, the comparison of every cache with etcd and the db sizes",
}

// abandonedError is Run's error when an interrupted run (interrupted,
// after writing for after) was interrupted again at step: it names what
// was not collected (ErrAbandoned) and wraps the interruption.
func abandonedError(interrupted error, after time.Duration, step int) error {
	if interrupted == nil { // both signals came once the writes had ended
		interrupted = context.Canceled
	}
	return fmt.Errorf("run stopped after %s of writes, then interrupted again: %w: %s; no result: %w",
		after.Round(time.Millisecond), ErrAbandoned, strings.Join(collectSteps[step:], ", "), interrupted)
}

// cacheRevisions returns, for each resource, the revision its watch cache
// has seen (its resourceVersion, moved by events and progress
// notifications), or false when kube-apiserver keeps no cache of it: the
// cache's object when a write starts is the one kube-apiserver's
// GuaranteedUpdate and Delete start from (KubernetesWorkload.UseWatchCache).
func cacheRevisions(caches map[string]*watchCache) func(resource string) (int64, bool) {
	return func(resource string) (int64, bool) {
		wc := caches[resource]
		if wc == nil {
			return 0, false
		}
		return wc.rv.Load(), true
	}
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

// resourceStream is the stream of resource's etcd client: kube-apiserver
// gives each resource's storage a client of its own
// (k8s.io/apiserver/pkg/storage/storagebackend/factory/etcd3.go
// newETCD3Storage), whose watches share one stream; resource k of
// resources (without repeats) uses stream k mod the topology's streams.
func resourceStream(topo *Topology, resources []string, resource string) *Stream {
	var seen []string
	for _, r := range resources {
		if !slices.Contains(seen, r) {
			seen = append(seen, r)
		}
	}
	return topo.StreamFor(slices.Index(seen, resource))
}

// logChores logs what kube-apiserver's chores did, if anything.
func logChores(chores []*resourceChores, logf func(string, ...any)) {
	var polls, checks, mismatches, errs int64
	for _, c := range chores {
		polls += c.countPolls.Load()
		checks += c.checks.Load()
		mismatches += c.checkMismatches.Load()
		errs += c.checkErrors.Load()
	}
	if polls+checks > 0 {
		logf("kube-apiserver's own reads: %d object count polls, %d cache consistency checks (%d failed, %d errors)", polls, checks, mismatches, errs)
	}
}
