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
)

// modelClients are Run's etcd-direct client set, the model of
// kube-apiserver in front of etcd: kube-apiserver's transactions on writer
// connections of their own, modelled reflectors as the informers (Profile:
// each an etcd watch, or, apiserver-cache, served by modelled watch caches
// that watch etcd as kube-apiserver's do), kube-apiserver's own chores
// (its own informer, count polls, consistency checks, consistent reads),
// and lwbench's own compactor on kube-apiserver's algorithm, the hold, the
// defragmentation and the faults (maintenance, faultRunner).
type modelClients struct {
	r     *Script
	wl    *KubernetesWorkload
	total int64 // the writes planned

	writerTopo, watchTopo *Topology
	compactConn           *clientv3.Client
	pinned                string // ", each pinned to one member", or ""

	rec     *Recorder
	env     *Env
	caches  map[string]*watchCache
	own     *ownInformer // kube-apiserver's own informer (ProfileInformer)
	stopOwn context.CancelFunc
	refls   []*Reflector
	chores  []*resourceChores
	cr      *consistentReader
	// The faults' probe connection and a connection to each member.
	probeConn   *clientv3.Client
	memberConns []*clientv3.Client
}

var _ Clients = (*modelClients)(nil)

// Begin checks the target, describes its members, connects the writers
// and the compactor and plans the objects.
func (m *modelClients) Begin(ctx context.Context, r *Script) (err error) {
	m.r = r
	o, s, res := r.Options, r.Session, r.Result
	if err := checkTarget(s.t, o); err != nil {
		return err
	}
	res.Scenario = scenario(o)
	if res.Members, err = describeMembers(ctx, r.Admin, s.h.Endpoints); err != nil {
		return err
	}
	res.Target.EtcdVersion = res.Members[0].Version
	if m.writerTopo, err = s.ConnectWriters(ctx, o.WriterConnections, o.PinConnections); err != nil {
		return err
	}
	if m.compactConn, err = s.DialCompactor(ctx); err != nil {
		return err
	}
	if o.PinConnections {
		m.pinned = ", each pinned to one member"
	}
	m.total = int64(o.WriteRate * o.Duration.Seconds())
	wo := KubernetesWorkloadOptions{
		Prefix: o.Prefix, Namespaces: o.Namespaces, Pods: o.Objects, ConfigMaps: o.ConfigMaps, Events: o.Events,
		Mix: o.Mix, ResourceMix: o.ResourceMix, EventTTL: o.EventTTL, Workers: o.WriterConcurrency, Seed: o.Seed,
		NoWatchCache: o.Profile != ProfileAPIServerCache, Shard: o.Shard,
	}
	if o.ReusePrefix {
		wo.NamespacePrefix = fmt.Sprintf("lwbench-%08x-ns-", rand.Uint32())
	}
	if o.NamespacePrefix != "" {
		wo.NamespacePrefix = o.NamespacePrefix
	}
	m.wl, err = NewKubernetesWorkload(wo)
	return err
}

// startWatching starts the history recorder at from, the Env and the
// watchers' connections; with the watch cache, the caches too: they
// start before the seeding, as kube-apiserver's exist before any client
// writes, and so watch the seeding.
func (m *modelClients) startWatching(ctx context.Context, from int64) (err error) {
	o, s := m.r.Options, m.r.Session
	// Connections outlive ctx (the Session closes them), so that an
	// interrupted run can still read what it needs for its result.
	if m.rec, err = s.StartRecorder(context.WithoutCancel(ctx), m.wl.Prefixes(), o.Prefix+"/", from); err != nil {
		return err
	}
	m.env = s.NewEnv(m.total+1024, o.WriterConcurrency)
	m.env.setRangeStream(o.rangeStream())
	if o.Divided() {
		m.env.KeepHistograms() // the workers' results merge (report.MergeRuns)
	}
	if o.PinConnections {
		m.env.timing.setMembers(len(s.t.Endpoints))
	}
	if m.watchTopo, err = s.ConnectWatchers(ctx, o.Connections, o.Streams, o.Profile.Source(), o.PinConnections); err != nil {
		return err
	}
	if o.Profile != ProfileAPIServerCache {
		return nil
	}
	m.r.Logf("starting the watch caches of %s (LIST pages of %d, WATCH with prevKV) on %d streams over %d connections%s",
		strings.Join(o.WatchResources, ", "), o.PageSize, o.Streams, o.Connections, m.pinned)
	m.caches, err = s.StartCaches(ctx, o.WatchResources, func(k int, resource string) ReflectorOptions {
		return ReflectorOptions{ID: o.Watchers + k, Profile: ProfileAPIServerCache, Resource: resource,
			Prefix: ResourcePrefix(o.Prefix, resource), Stream: resourceStream(m.watchTopo, o.WatchResources, resource),
			PageSize: o.PageSize, Clock: o.Clock, Hooks: o.Hooks}
	}, o.informerWatchList(), o.SyncTimeout)
	return err
}

// Seed writes the objects with kube-apiserver's transactions. The watch
// caches and the recorder start before it (they watch the seeding),
// otherwise after it; kube-apiserver's own informers (PodSecurity's of
// pods) exist before any client writes, and with the watch cache off
// they reach etcd.
func (m *modelClients) Seed(ctx context.Context) error {
	o, s := m.r.Options, m.r.Session
	if o.Profile == ProfileInformer && o.Shard.Index == 0 {
		var octx context.Context
		octx, m.stopOwn = context.WithCancel(ctx)
		m.own = startOwnInformer(octx, o.Prefix, m.writerTopo.Streams[0], o.Clock, o.rangeStream())
		if wait := min(o.SyncTimeout, 10*time.Second); !m.own.waitWatching(ctx, wait) && ctx.Err() == nil {
			m.r.Logf("kube-apiserver's own informer of %s had not listed and watched after %v; seeding all the same", m.own.prefix, wait)
		}
	}
	if o.Profile == ProfileAPIServerCache {
		if err := m.startWatching(ctx, m.r.Start+1); err != nil {
			return err
		}
	}
	m.r.Logf("seeding %d pods, %d configmaps, %d events under %s/", o.Objects, o.ConfigMaps, o.Events, o.Prefix)
	if err := s.Seed(ctx, m.wl, o.WriterConcurrency); err != nil {
		if errors.Is(err, ErrObjectExists) {
			return fmt.Errorf("seed objects under %s/ (it holds an earlier run's objects; choose another prefix): %w", o.Prefix, err)
		}
		return fmt.Errorf("seed objects: %w", err)
	}
	if o.Profile == ProfileAPIServerCache {
		return nil
	}
	cur, err := currentRevision(ctx, m.r.Admin, o.Prefix)
	if err != nil {
		return fmt.Errorf("read the current revision: %w", err)
	}
	return m.startWatching(ctx, cur+1)
}

// StartInformers starts the modelled reflectors; with the watch cache,
// client informers through kube-apiserver served by the resource's
// cache, or, for a resource it does not cache, from etcd.
func (m *modelClients) StartInformers(ctx context.Context) (err error) {
	o, s := m.r.Options, m.r.Session
	// A worker of a divided load starts its block of the informers, each
	// with its ID and resource in the whole load.
	first, last := o.Shard.Range(o.Watchers)
	n := last - first
	of := ""
	if o.Shard.Count > 1 {
		of = fmt.Sprintf(" (informers %d to %d of %d: shard %s)", first, last-1, o.Watchers, o.Shard)
	}
	if o.Profile == ProfileAPIServerCache {
		m.r.Logf("starting %d informers of %s, served by the watch caches of %d resources (events are not cached)%s",
			n, strings.Join(o.WatchResources, ", "), len(m.caches), of)
	} else {
		loading := fmt.Sprintf("LIST pages of %d", o.PageSize)
		if o.informerWatchList() {
			loading = "WatchList: WATCH with sendInitialEvents"
		}
		m.r.Logf("starting %d %s watchers of %s on %d streams over %d connections%s (%s, WATCH with prevKV)%s",
			n, o.Profile, strings.Join(o.WatchResources, ", "), o.Streams, o.Connections, m.pinned, loading, of)
	}
	m.refls, err = s.StartWatchers(ctx, n, func(i int, stream *Stream) ReflectorOptions {
		i += first
		resource := o.WatchResources[i%len(o.WatchResources)]
		ro := ReflectorOptions{ID: i, Profile: o.Profile, Resource: resource, Prefix: ResourcePrefix(o.Prefix, resource),
			Stream: stream, PageSize: o.PageSize, WatchList: o.informerWatchList(), Clock: o.Clock, Hooks: o.Hooks}
		if o.Profile == ProfileAPIServerCache {
			ro.Profile, ro.PageSize = ProfileInformer, 0
			ro.Stream = resourceStream(m.watchTopo, o.WatchResources, resource)
			if wc := m.caches[resource]; wc != nil {
				// The cache answers the first list as a consistent
				// read, whatever the gate (servedBy).
				ro.servedBy, ro.WatchList = wc, false
			}
		}
		return ro
	}, o.StartConcurrency, o.SyncTimeout)
	if err != nil {
		return err
	}
	if o.Profile == ProfileAPIServerCache {
		m.wl.UseWatchCache(cacheRevisions(m.caches))
	}
	if o.Shard.Index == 0 {
		// One kube-apiserver's periodic reads, however many workers.
		m.chores = runChores(s.watchers.Context(), o, m.watchTopo, m.caches, m.r.Logf)
	}
	return nil
}

// StartWrites opens, with faults to inject, the faults' probe
// connection and a connection to each member while every member is up
// (the harness's), then starts the writers on the writers' connections.
func (m *modelClients) StartWrites(ctx context.Context) (*Writing, error) {
	o, s := m.r.Options, m.r.Session
	if len(o.Faults) > 0 {
		dialCtx := context.WithoutCancel(ctx)
		c, err := s.h.Dial(dialCtx)
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, func() { c.Close() })
		m.probeConn = c
		for _, ep := range s.h.Endpoints {
			if s.h.DialEndpoint == nil {
				break
			}
			c, err := s.h.DialEndpoint(dialCtx, ep)
			if err != nil {
				return nil, err
			}
			s.closers = append(s.closers, func() { c.Close() })
			m.memberConns = append(m.memberConns, c)
		}
	}
	m.r.Logf("writing %d ops at %.0f/s for %v (resources %s; create/update/delete %d/%d/%d)", m.total, o.WriteRate, o.Duration,
		o.ResourceMix, o.Mix.CreatePercent, o.Mix.UpdatePercent, o.Mix.DeletePercent)
	return s.Write(ctx, m.wl, WriterOptions{Rate: o.WriteRate, Total: m.total, Workers: o.WriterConcurrency,
		Timeout: o.WriteTimeout, ConnMember: m.writerTopo.ConnMember}, PhaseSteady)
}

// Maintain runs the compaction schedule, the hold and the
// defragmentation (maintenance), the faults and, apiserver-cache, the
// consistent reads beside the writes, then releases every watcher.
func (m *modelClients) Maintain(ctx context.Context, w *Writing) {
	o, s, res := m.r.Options, m.r.Session, m.r.Result
	probeConn, memberConns := m.probeConn, m.memberConns
	defer func() {
		for _, r := range m.refls {
			r.Release()
		}
	}()
	if o.Shard.Index != 0 {
		// Shard 0 alone compacts, holds back, defragments and faults.
		return
	}
	var wg sync.WaitGroup
	if o.Profile == ProfileAPIServerCache && o.ConsistentListRate > 0 {
		m.cr = newConsistentReader(m.env, s.wcs)
		wg.Go(func() { m.cr.Run(ctx, o.ConsistentListRate, o.Duration) })
	}
	maint := newMaintenance(s.h, m.r.Admin, m.compactConn, o, m.env, m.refls, m.r.Logf, res)
	wg.Go(func() { maint.run(ctx, w.Start) })
	faults := &faultRunner{t: s.h, admin: m.r.Admin, probeConn: probeConn, memberConns: memberConns, o: o, env: m.env, refls: m.refls, rec: m.rec,
		streams: append(append([]*Stream(nil), m.watchTopo.Streams...), s.recTopo.Streams[0]), writers: w.Writers,
		writersDone: w.Done(), members: res.Members, logf: m.r.Logf}
	wg.Go(func() { faults.run(ctx, w.Start) })
	wg.Wait()
	res.Faults = faults.results
	res.Final.CompactRevision = maint.compacted
}

// Confirm waits until the recorder, every watch cache and every watcher
// have seen rev (Session.Confirm).
func (m *modelClients) Confirm(ctx context.Context, rev int64, timeout time.Duration) (int, int64) {
	return m.r.Session.Confirm(ctx, rev, m.r.Options.ProgressRequestPeriod, timeout), rev
}

// Validate stops the watchers and the caches and validates each
// (Session.Validate).
func (m *modelClients) Validate(ctx context.Context) {
	logChores(m.chores, m.r.Logf)
	if m.own != nil {
		m.r.Logf("kube-apiserver's own informer of %s (PodSecurity admission): %d lists, %d events", m.own.prefix, m.own.lists.Load(), m.own.events.Load())
	}
	m.r.Session.Validate(ctx, m.r.Options.ProgressRequestPeriod)
}

// Collect reads the members' sizes and collects the Session's figures.
func (m *modelClients) Collect(ctx context.Context, unsynced int) error {
	r, res := m.r, m.r.Result
	h := r.Session.h
	if size, err := memberSize(ctx, r.Admin, h.Endpoints[0]); err == nil {
		res.DBSize.EndBytes, res.DBSize.EndInUseBytes = size.Bytes, size.InUseBytes
	}
	memberSizes(ctx, r.Admin, h.Endpoints, res.Members)
	if m.cr != nil {
		res.ConsistentReads = m.cr.Result()
	}
	if err := r.Session.collect(ctx, res, r.Options, unsynced); err != nil {
		return err
	}
	memberStats(res.Members, m.env, m.watchTopo, m.writerTopo, m.refls)
	return nil
}

// Stop stops kube-apiserver's own informer; the Session stops the rest.
func (m *modelClients) Stop() {
	if m.stopOwn != nil {
		m.stopOwn()
	}
}

// CleanUp, with Options.Cleanup, deletes exactly what the run wrote
// under the prefix (DeleteWritten), within 2 minutes.
func (m *modelClients) CleanUp(ctx context.Context) {
	if m.r == nil || m.wl == nil || !m.r.Options.Cleanup {
		return
	}
	o := m.r.Options
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	extra := []string{o.Prefix + "/" + keyspace.CompactRevKey, probeKey(o.Prefix), faultKey(o.Prefix)}
	var settle func(context.Context)
	if o.Divided() {
		// Each worker revokes its own leases, and with them the events
		// it wrote: the keys left are counted once every worker has.
		settle = func(ctx context.Context) {
			if _, err := m.r.Meet(ctx, BarrierCleaned); err != nil {
				m.r.Logf("cleanup: counting what is left without waiting for the other workers: %v", err)
			}
		}
	}
	c := DeleteWritten(cctx, m.r.Admin, append(m.wl.Keys(), extra...), m.wl.Leases(), m.r.Start, o.Prefix, o.ReusePrefix, settle)
	m.r.Logf("cleanup: deleted %d keys and revoked %d leases lwbench wrote; %d keys left under %s/", c.KeysDeleted, c.LeasesRevoked, c.KeysLeft, o.Prefix)
	if c.Error != "" {
		m.r.Logf("cleanup: %s", c.Error)
	}
	if ctx.Err() != nil {
		m.r.Logf("cleanup: cut short by the second interrupt; what is left under %s/ is lwbench's: run again with --reuse-prefix, or delete it", o.Prefix)
	}
	m.r.Result.Cleanup = &c
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
