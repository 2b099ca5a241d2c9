package kubeload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// EtcdCounter is what Run needs of a counting proxy between the
// apiservers and etcd (internal/etcdproxy): Reset forgets what it counted,
// SetPhase attributes every request it forwards from now on to phase, and
// Requests returns what it counted, by phase in the order first set.
type EtcdCounter interface {
	Reset()
	SetPhase(phase string)
	Requests() []report.EtcdRequests
}

// Stack is the real Kubernetes stack a load runs through.
type Stack struct {
	// Etcd is the etcd behind the apiservers, for the history recorder,
	// the final state and compaction checks; lwbench never writes to it
	// directly in this load.
	Etcd watchload.Target
	// RESTConfig reaches the apiservers (one of them, or a load balancer)
	// as a user allowed to read and write pods, configmaps, events and
	// namespaces.
	RESTConfig *rest.Config
	// Connections makes the informers' and writers' clientsets from
	// RESTConfig, in their connection layout; required.
	Connections *Connections
	// EtcdPrefix is the apiservers' --etcd-prefix ("" means /registry).
	EtcdPrefix string
	// APIServer describes the apiservers, echoed in the result (Version
	// is filled from /version).
	APIServer report.APIServerTarget
	// Counter counts what the apiservers send etcd; nil when no counting
	// proxy runs.
	Counter EtcdCounter
	// APIServers are the apiservers whose own /metrics Run scrapes at
	// every phase boundary and whose processes it samples; nil: none.
	APIServers []APIServer
	// Shared is true for a cluster lwbench does not own (`lwbench run
	// --kubeconfig`): Run then writes only in namespaces of its own
	// (lwbench-<random>-ns-N, refused if one exists), labels every object
	// with RunLabel and has the informers select on it, records and
	// compares only those namespaces' keys, never defragments (Etcd is
	// only read), and at the end deletes exactly the namespaces it
	// created, also when it fails or is interrupted after creating them
	// (KubeRunResult.Cleanup).
	Shared bool
}

// Options shape a load through kube-apiserver.
type Options struct {
	// Load shapes objects, writes and watchers as for the etcd-direct run
	// (watchload.Options: Objects, ConfigMaps, Events, Namespaces,
	// Watchers (the informers), WatchResources, WriteRate, Duration, Mix,
	// ResourceMix, WriterConcurrency, HoldBack, Seed, SyncTimeout, Logf).
	// The etcd-direct model's own fields (Profile, PageSize, connections
	// and streams, the compaction schedule, faults) do not apply: the real
	// clients and kube-apiserver's own compactor take their place.
	Load watchload.Options
	// WatchList sets client-go's WatchListClient gate in the informers;
	// nil keeps client-go's default (on since 1.35).
	WatchList *bool
	// HoldAt is when the held informers are held, from the start of the
	// writes; 0 means Load.Duration/5.
	HoldAt time.Duration
	// HoldFor bounds how long they are held waiting for etcd to be
	// compacted past them; 0 means until the writes end or 2.5 compaction
	// intervals (Stack.APIServer.EtcdCompactionIntervalMs), whichever is
	// longer: kube-apiserver's compactor compacts to the revision it saw
	// one tick before, so a revision is compacted one to two intervals
	// after it was written.
	HoldFor time.Duration
	// NamespaceDeleteTimeout bounds the wait for a shared cluster's
	// namespaces to be gone at the end; 0 means
	// DefaultNamespaceDeleteTimeout.
	NamespaceDeleteTimeout time.Duration
	// RunID names the run's namespaces (lwbench-<RunID>-...) and is
	// RunLabel's value on a shared cluster; "" means 8 random hex digits.
	RunID string
}

// Run seeds the load's objects through the API, starts the history
// recorder on etcd and the informers, writes through the API on the
// open-loop schedule while kube-apiserver's own compactor runs, holds
// Load.HoldBack informers back until etcd has been compacted past them
// (so that their next watch fails with 410 if it reaches etcd), and at the
// end waits until every informer's cache equals etcd's state, validates
// every informer's events against the recorded history and reports what
// every informer asked for and what etcd was asked. The delivery
// latencies are those of the informers not held back; the held ones',
// from their hold on, are Delivery.HeldBack (with the watch cache on
// kube-apiserver serves their resumed watch from its cache's history, and
// the events of the hold arrive late by up to its length).
//
// The phases (seed, sync, steady, held, released, defrag, drain) also
// begin anew at each compaction by kube-apiserver's compactor, seen as a
// change of compact_rev_key ("steady after compaction 1", ...). With
// Load.Defragment, once the held informers have been released after a
// compaction past them, every etcd member is defragmented (phase
// "defrag"). Every apiserver of Stack.APIServers has its /metrics scraped
// at each phase boundary (the increase of each counter of
// apiserverMetrics per phase) and its CPU and resident memory reported.
//
// The objects are created in namespaces of their own (lwbench-<random>-),
// which Run leaves in place, except on a shared cluster (Stack.Shared),
// where it deletes them at the end. Errors are returned only when the load could
// not be carried out; broken guarantees are results, in Validation.
func Run(ctx context.Context, st Stack, o Options) (_ *report.RunResult, err error) {
	installGates()
	lo := o.Load.Defaults()
	if err := lo.Validate(); err != nil {
		return nil, err
	}
	if st.EtcdPrefix == "" {
		st.EtcdPrefix = "/registry"
	}
	lo.Prefix = st.EtcdPrefix
	if o.HoldAt <= 0 {
		o.HoldAt = lo.Duration / 5
	}
	if o.HoldFor <= 0 {
		interval := time.Duration(st.APIServer.EtcdCompactionIntervalMs * float64(time.Millisecond))
		o.HoldFor = max(lo.Duration-o.HoldAt, interval*5/2)
	}
	if o.NamespaceDeleteTimeout <= 0 {
		o.NamespaceDeleteTimeout = DefaultNamespaceDeleteTimeout
	}
	if st.Shared {
		// Never defragment a cluster lwbench does not own; its
		// compaction is its kube-apiservers' own, as always here.
		lo.Defragment = false
	}
	if st.Counter != nil {
		st.Counter.Reset()
	}
	logf := lo.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ph := &phases{counter: st.Counter}
	phase := func(p string) { ph.set(ctx, p) }

	s := watchload.NewSession(st.Etcd, time.Now(), logf)
	defer s.Close()
	s.SampleSelf(ctx)
	api := st.APIServer
	res := &report.RunResult{Kind: report.KindRun, SchemaVersion: report.RunSchemaVersion,
		StartedAt: s.Epoch().UTC(), APIServer: &api,
		Target: report.Target{Embedded: st.Etcd.Embedded, Endpoints: st.Etcd.Endpoints, Managed: st.Etcd.Managed}}
	res.Scenario = scenario(lo, st.APIServer)
	if v, err := serverVersion(st.RESTConfig); err == nil {
		res.APIServer.Version = v
	}

	admin, err := s.DialAdmin(ctx)
	if err != nil {
		return nil, err
	}
	head, err := admin.Get(ctx, lo.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("read etcd's revision: %w", err)
	}
	if stat, err := admin.Status(ctx, st.Etcd.Endpoints[0]); err == nil {
		res.Target.EtcdVersion = stat.Version
	}

	id := o.RunID
	if id == "" {
		id = fmt.Sprintf("%08x", rand.Uint32())
	}
	nsPrefix := "lwbench-" + id + "-"
	if st.Shared {
		nsPrefix = "lwbench-" + id + "-ns-" // as watchload's ReusePrefix
	}
	plan, err := watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{
		Prefix: lo.Prefix, Namespaces: lo.Namespaces, Pods: lo.Objects, ConfigMaps: lo.ConfigMaps, Events: lo.Events,
		Mix: lo.Mix, ResourceMix: lo.ResourceMix, EventTTL: lo.EventTTL, Workers: lo.WriterConcurrency, Seed: lo.Seed,
		NamespacePrefix: nsPrefix,
	})
	if err != nil {
		return nil, err
	}
	var scope *sharedScope
	if st.Shared {
		sc := newSharedScope(id, lo.Prefix, plan)
		scope = &sc
		if err := refuseExisting(ctx, st.RESTConfig, plan.Namespaces()); err != nil {
			return nil, err
		}
	}
	var within []string
	fallback := ""
	if scope != nil {
		// A shared cluster's etcd user may not watch the whole key space.
		within, fallback = scope.keyScopes, lo.Prefix+"/"
	}
	rec, err := s.StartRecorderWithin(ctx, plan.Prefixes(), within, fallback, head.Header.Revision+1)
	if err != nil {
		return nil, err
	}
	env := s.NewEnv(1<<20, lo.WriterConcurrency)
	if len(st.APIServers) > 0 {
		m, err := startMeter(ctx, st.APIServers, "seed", logf)
		if err != nil {
			return nil, err
		}
		ph.meter = m
		defer m.halt()
	}
	wctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	compactions := watchCompactions(wctx, admin, head.Header.Revision+1, ph, s.Epoch(), logf)

	phase("seed")
	logf("seeding %d pods, %d configmaps, %d events through the API", lo.Objects, lo.ConfigMaps, lo.Events)
	wl, err := NewAPIWorkload(st.Connections, plan, lo.WriterConcurrency, lo.Seed)
	if err != nil {
		return nil, err
	}
	if scope != nil {
		wl.OwnNamespaces(map[string]string{RunLabel: scope.id})
		// Deferred before the informers' and writers' ends, so it runs
		// after them, on success, failure and interruption alike.
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.NamespaceDeleteTimeout+time.Minute)
			defer cancel()
			c := deleteNamespaces(cctx, st.RESTConfig, wl.CreatedNamespaces(), scope.selector, o.NamespaceDeleteTimeout, logf)
			if res != nil {
				res.Cleanup = c
			}
		}()
	}
	if _, err := wl.Seed(ctx, lo.WriterConcurrency); err != nil {
		return nil, err
	}

	phase("sync")
	resources := make([]string, lo.Watchers)
	for i := range resources {
		resources[i] = lo.WatchResources[i%len(lo.WatchResources)]
	}
	set, err := NewInformerSet(st.Connections, env, lo.Prefix, resources, o.WatchList)
	if err != nil {
		return nil, err
	}
	if scope != nil {
		set.SelectLabels(scope.selector)
	}
	defer set.Stop()
	logf("starting %d informers", lo.Watchers)
	if err := set.Start(ctx, lo.SyncTimeout); err != nil {
		return nil, err
	}

	phase("steady")
	logf("writing %.0f/s for %v", lo.WriteRate, lo.Duration)
	writing, err := watchload.StartWriting(ctx, env, []watchload.KV{nil}, wl, watchload.WriterOptions{
		Rate: lo.WriteRate, Total: int64(lo.WriteRate * lo.Duration.Seconds()), Workers: lo.WriterConcurrency})
	if err != nil {
		return nil, err
	}
	env.SetIntervalOrigin(writing.Start)
	if lo.HoldBack > 0 {
		res.Holds = holdAcrossCompaction(ctx, s, admin, set, min(lo.HoldBack, lo.Watchers), writing.Start+o.HoldAt, o.HoldFor, phase, logf)
		if lo.Defragment && len(res.Holds) > 0 && res.Holds[0].Compacted && ctx.Err() == nil {
			phase(PhaseDefrag)
			res.Defrag = watchload.DefragmentMembers(ctx, admin, st.Etcd.Endpoints, s.Epoch(), logf)
			phase("released")
		}
	}
	res.Writes = writing.Wait()
	res.Interrupted = ctx.Err() != nil

	phase("drain")
	cctx := context.WithoutCancel(ctx)
	final, err := admin.Get(cctx, lo.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("read etcd's final revision: %w", err)
	}
	finalRev := final.Header.Revision
	confirmTimeout := lo.SyncTimeout
	if res.Interrupted {
		// An interrupted run reports what it measured soon.
		confirmTimeout = min(confirmTimeout, 5*time.Second)
	}
	unsynced, finalRev := confirm(cctx, admin, set, lo.Prefix, scope, finalRev, confirmTimeout, logf)
	phase("stop")
	set.Stop()
	if err := rec.WaitFor(cctx, finalRev, 100*time.Millisecond); err != nil {
		logf("history recorder did not reach revision %d: %v", finalRev, err)
	}
	var unverified int64
	for _, in := range set.Informers {
		unverified += in.lw.obs.Finish()
	}
	stopWatching()
	res.Compactions = <-compactions
	if ph.meter != nil {
		res.APIServers, res.APIServerMetrics = ph.meter.finish(cctx)
	}
	res.Scenario.Defragment = res.Defrag != nil
	res.Validation = watchload.ValidationOf(env, unsynced, unverified, 0)
	summarize(res, set, s.Epoch())
	res.Intervals = env.Collect(&res.Writes, &res.Delivery)
	if st.Counter != nil {
		res.Etcd = st.Counter.Requests()
	}
	if res.Relists == nil {
		res.Relists = []report.Relist{}
	}
	if res.Compactions == nil {
		res.Compactions = []report.Compaction{}
	}
	res.APIServer.ClientConnections = st.Connections.Open()
	res.Self = s.SelfStats(cctx)
	res.Warnings = report.BusyWarnings(res.Self)
	res.Verdict = report.RunVerdict(res)
	return res, nil
}

// holdAcrossCompaction holds informers [0, n) at at (from the epoch),
// waits until etcd has been compacted past the revision each had seen
// (kube-apiserver's compactor does it, every --etcd-compaction-interval)
// or holdFor passes, then releases them.
func holdAcrossCompaction(ctx context.Context, s *watchload.Session, admin *clientv3.Client, set *InformerSet, n int, at, holdFor time.Duration,
	phase func(string), logf func(string, ...any)) []report.Hold {
	if !clockwait.SleepReal(ctx, time.Until(s.Epoch().Add(at))) {
		return nil
	}
	phase("held")
	holds := make([]report.Hold, n)
	var lowest int64
	for i := range n {
		set.Hold(i)
		holds[i] = report.Hold{Informer: i, HeldAtMs: report.Ms(time.Since(s.Epoch())), HeldRevision: set.LastRevision(i)}
		if i == 0 || holds[i].HeldRevision < lowest {
			lowest = holds[i].HeldRevision
		}
	}
	logf("holding %d informers back from revision %d until etcd is compacted past it (at most %v)", n, lowest, holdFor)
	deadline := time.Now().Add(holdFor)
	compacted := false
	for !compacted && time.Now().Before(deadline) && ctx.Err() == nil {
		// A read at lowest+1 fails exactly when a watch from it would
		// (revision.Compacted).
		_, err := admin.Get(ctx, "/", clientv3.WithRev(lowest+1), clientv3.WithLimit(1), clientv3.WithKeysOnly())
		compacted = errors.Is(err, rpctypes.ErrCompacted)
		if !compacted {
			_ = clockwait.SleepReal(ctx, 200*time.Millisecond)
		}
	}
	phase("released")
	for i := range holds {
		holds[i].Compacted = compacted
		holds[i].ReleasedAtMs = report.Ms(time.Since(s.Epoch()))
		set.Release(i)
	}
	if compacted {
		logf("released the held informers: etcd was compacted past them")
	} else {
		logf("released the held informers: no compaction came within %v (kube-apiserver's --etcd-compaction-interval; 5m by default), so their next WATCH did not meet a 410", holdFor)
	}
	return holds
}

// confirm waits until every informer's cache equals etcd's state of its
// resource at finalRev, polling, for at most timeout; it then reports the
// differences of those that did not as cache violations and returns how
// many did not, and the revision it confirmed.
//
// A write whose request was cancelled when the writes stopped may still
// commit at kube-apiserver after finalRev was read, and reach the
// informers: while the caches have not all converged, confirm moves to
// etcd's current revision once a second, so that it confirms the state
// the store settled in.
func confirm(ctx context.Context, admin *clientv3.Client, set *InformerSet, prefix string, scope *sharedScope, finalRev int64, timeout time.Duration, logf func(string, ...any)) (int, int64) {
	read := func(rev int64) (map[string]map[string]int64, error) {
		states := map[string]map[string]int64{}
		for _, in := range set.Informers {
			if states[in.Resource] != nil {
				continue
			}
			// On a shared cluster only the run's namespaces, which the
			// informers' label selector covers exactly: every object the
			// run writes there carries the label, and nothing else is
			// there.
			ps := []string{watchload.ResourcePrefix(prefix, in.Resource)}
			if scope != nil {
				ps = scope.within(ps[0])
			}
			m := map[string]int64{}
			for _, p := range ps {
				resp, err := admin.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
				if err != nil {
					return nil, fmt.Errorf("read %s at revision %d: %w", p, rev, err)
				}
				for _, kv := range resp.Kvs {
					m[string(kv.Key)] = kv.ModRevision
				}
			}
			states[in.Resource] = m
		}
		return states, nil
	}
	states, err := read(finalRev)
	if err != nil {
		logf("%v", err)
		return len(set.Informers), finalRev
	}
	deadline := time.Now().Add(timeout)
	pending := map[int]bool{}
	for _, in := range set.Informers {
		pending[in.ID] = true
	}
	for polls := 1; len(pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil; polls++ {
		for id := range pending {
			if equalCache(set.Cache(id), states[set.Informers[id].Resource]) {
				delete(pending, id)
			}
		}
		if len(pending) == 0 {
			break
		}
		_ = clockwait.SleepReal(ctx, 200*time.Millisecond)
		if polls%5 != 0 {
			continue
		}
		head, err := admin.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || head.Header.Revision <= finalRev {
			continue
		}
		if next, err := read(head.Header.Revision); err == nil {
			// The store moved after finalRev: every informer is
			// confirmed again, at the newer state.
			states, finalRev = next, head.Header.Revision
			for _, in := range set.Informers {
				pending[in.ID] = true
			}
		}
	}
	for id := range pending {
		in := set.Informers[id]
		in.lw.obs.CompareCache(finalRev, set.Cache(id), states[in.Resource])
	}
	if len(pending) > 0 {
		logf("%d informers did not reach etcd's state at revision %d within %v", len(pending), finalRev, timeout)
	}
	return len(pending), finalRev
}

func equalCache(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// proxyCounter is an etcdproxy.Counter as Run's EtcdCounter.
type proxyCounter struct{ c *etcdproxy.Counter }

// CounterOf returns c, the counter of the proxies in front of etcd's
// members, as Run's EtcdCounter.
func CounterOf(c *etcdproxy.Counter) EtcdCounter { return proxyCounter{c} }

func (p proxyCounter) SetPhase(phase string) { p.c.SetPhase(phase) }

func (p proxyCounter) Reset() {
	p.c.SetPhase("before")
	p.c.Reset()
}

func (p proxyCounter) Requests() []report.EtcdRequests {
	rows := p.c.Counts()
	out := make([]report.EtcdRequests, len(rows))
	for i, r := range rows {
		out[i] = report.EtcdRequests{Phase: r.Phase, Method: r.Method, Kind: r.Kind, Requests: r.Requests,
			RequestBytes: r.RequestBytes, Responses: r.Responses, ResponseBytes: r.ResponseBytes, Items: r.Items, Errors: r.Errors}
	}
	return out
}
