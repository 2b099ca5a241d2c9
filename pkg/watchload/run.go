package watchload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
)

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
	s := NewSession(t, time.Now(), o.Logf)
	s.onPhase = o.OnPhase
	defer s.Close()
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

	writerTopo, err := s.ConnectWriters(ctx, o.WriterConnections, o.PinConnections)
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
			s.stop()
			if err == nil {
				err = o.BeforeCleanup(ctx)
			}
		}()
	}
	s.ReportProgress(ctx, o.OnProgress, o.ProgressInterval, o.Watchers, "seeding")
	logf("seeding %d pods, %d configmaps, %d events under %s/", o.Objects, o.ConfigMaps, o.Events, o.Prefix)
	if err := s.Seed(ctx, wl, o.WriterConcurrency); err != nil {
		if errors.Is(err, ErrObjectExists) {
			return nil, fmt.Errorf("seed objects under %s/ (it holds an earlier run's objects; choose another prefix): %w", o.Prefix, err)
		}
		return nil, fmt.Errorf("seed objects: %w", err)
	}

	// The history recorder, from the next revision on: every watcher
	// lists at or after it.
	cur, err := currentRevision(ctx, admin, o.Prefix)
	if err != nil {
		return nil, fmt.Errorf("read the current revision: %w", err)
	}
	rec, err := s.StartRecorder(dialCtx, wl.Prefixes(), o.Prefix+"/", cur+1)
	if err != nil {
		return nil, err
	}
	total := int64(o.WriteRate * o.Duration.Seconds())
	env := s.NewEnv(total+1024, o.WriterConcurrency)
	if o.PinConnections {
		env.timing.setMembers(len(t.Endpoints))
	}

	watchTopo, err := s.ConnectWatchers(ctx, o.Connections, o.Streams, o.Profile.Source(), o.PinConnections)
	if err != nil {
		return nil, err
	}
	s.SetPhase("syncing")
	pinned := ""
	if o.PinConnections {
		pinned = ", each pinned to one member"
	}
	loading := fmt.Sprintf("LIST pages of %d", o.PageSize)
	if o.Profile == ProfileInformer && o.informerWatchList() {
		loading = "WatchList: WATCH with sendInitialEvents"
	}
	logf("starting %d %s watchers of %s on %d streams over %d connections%s (%s, WATCH with prevKV)",
		o.Watchers, o.Profile, strings.Join(o.WatchResources, ", "), o.Streams, o.Connections, pinned, loading)
	refls, err := s.StartWatchers(ctx, o.Watchers, func(i int, stream *Stream) ReflectorOptions {
		resource := o.WatchResources[i%len(o.WatchResources)]
		return ReflectorOptions{ID: i, Profile: o.Profile, Resource: resource, Prefix: ResourcePrefix(o.Prefix, resource),
			Stream: stream, PageSize: o.PageSize, WatchList: o.Profile == ProfileInformer && o.informerWatchList(),
			Clock: o.Clock, Hooks: o.Hooks}
	}, o.StartConcurrency, o.SyncTimeout)
	if err != nil {
		return nil, err
	}
	if o.Profile == ProfileAPIServerCache {
		wl.UseWatchCache(cacheRevisions(refls))
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
			c, err := t.DialEndpoint(dialCtx, ep)
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
		reqs := map[*Stream]*progressRequester{}
		for _, st := range watchTopo.Streams {
			reqs[st] = newProgressRequester(st, o.Clock)
			go reqs[st].Run(s.watchers.Context())
		}
		cr = newConsistentReader(env, refls, reqs, DefaultPageSize)
		crWG.Add(1)
		go func() {
			defer crWG.Done()
			cr.Run(ctx, o.ConsistentListRate, o.Duration)
		}()
	}
	maint := newMaintenance(t, admin, o, env, refls, logf, res)
	maintDone := make(chan struct{})
	go func() {
		defer close(maintDone)
		maint.run(ctx, writing.Start+o.Duration-env.Since())
	}()
	faults := &faultRunner{t: t, admin: admin, probeConn: probeConn, memberConns: memberConns, o: o, env: env, refls: refls, rec: rec,
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
	// confirm it.
	s.SetPhase("confirming")
	finalRev, err := currentRevision(ctx, admin, o.Prefix)
	if err != nil {
		return nil, fmt.Errorf("read the final revision: %w", err)
	}
	res.Final.Revision, res.Final.CompactRevision = finalRev, maint.compacted
	logf("writes done at revision %d; waiting for the watchers to confirm it", finalRev)
	unsynced := s.Confirm(ctx, finalRev, o.ProgressRequestPeriod, o.SyncTimeout)
	s.Validate(ctx, o.ProgressRequestPeriod)
	if size, err := memberSize(ctx, admin, t.Endpoints[0]); err == nil {
		res.DBSize.EndBytes, res.DBSize.EndInUseBytes = size.Bytes, size.InUseBytes
	}
	memberSizes(ctx, admin, t.Endpoints, res.Members)
	if cr != nil {
		res.ConsistentReads = cr.Result()
	}
	if err := s.collect(ctx, res, o, unsynced); err != nil {
		return nil, err
	}
	memberStats(res.Members, env, watchTopo, writerTopo, refls)
	res.Self = s.selfStats(ctx)
	if interrupted != nil {
		return res, fmt.Errorf("run %w after %s of writes: the result holds what was measured until then", interrupted, time.Duration(interruptedAfter).Round(time.Millisecond))
	}
	return res, nil
}

// cacheRevisions returns the revision up to which the model's watch cache
// of a resource has applied etcd's events, or false when no watcher
// watches it. Upstream has one cacher per resource; the model's stand-in
// is the first of refls (apiserver-cache watchers) of that resource that
// is not held back (a hold is a fault the model injects on a client, not
// on the cacher), or the first if all are. What it has seen when a write
// starts stands for what kube-apiserver's cacher had seen
// (KubernetesWorkload.UseWatchCache).
func cacheRevisions(refls []*Reflector) func(resource string) (int64, bool) {
	by := map[string][]*Reflector{}
	for _, r := range refls {
		by[r.Options().Resource] = append(by[r.Options().Resource], r)
	}
	return func(resource string) (int64, bool) {
		rs := by[resource]
		if len(rs) == 0 {
			return 0, false
		}
		for _, r := range rs {
			if !r.isHeld() {
				return r.LastRevision(), true
			}
		}
		return rs[0].LastRevision(), true
	}
}

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
