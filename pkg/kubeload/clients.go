package kubeload

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// EtcdCounter is what a run through kube-apiserver (NewClients) needs of a counting proxy between the
// apiservers and etcd (internal/etcdproxy): Reset forgets what it counted,
// SetPhase attributes every request it forwards from now on to phase,
// Requests returns what it counted, by phase in the order first set, and
// Phases those phases' durations, in the same order.
type EtcdCounter interface {
	Reset()
	SetPhase(phase string)
	Requests() []report.EtcdRequests
	Phases() []report.EtcdPhase
}

// Stack is the real Kubernetes stack a run (NewClients) or an
// experiment's load (NewLoad) goes through.
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
	// EtcdTLS is how lwbench reaches the members' /metrics over https
	// (StackConfig.EtcdTLS); nil: plain.
	EtcdTLS *tls.Config
	// APIServers are the apiservers whose own /metrics a run scrapes at
	// every phase boundary and whose processes it samples; nil: none.
	APIServers []APIServer
	// Components are the control plane's other processes
	// (kube-controller-manager, kube-scheduler, KWOK), metered from /proc
	// like the apiservers (their CPU and resident set by phase); nil:
	// none.
	Components []APIServer
	// ControlPlane is the whole control plane StartStack started
	// (StackConfig.ControlPlane), which a cluster run's experiments
	// restart parts of; nil otherwise.
	ControlPlane *controlplane.ControlPlane
	// EventsEtcd are the client URLs of the etcd that stores events
	// (StackConfig.EventsEtcd); nil: the main one.
	EventsEtcd []string
	// Shared is true for a cluster lwbench does not own (`lwbench run
	// --kubeconfig`): a run then writes only in namespaces of its own
	// (lwbench-<random>-ns-N, refused if one exists), labels every object
	// with RunLabel and has the informers select on it, records and
	// compares only those namespaces' keys, never defragments (Etcd is
	// only read), and at the end deletes exactly the namespaces it
	// created, also when it fails or is interrupted after creating them
	// (RunResult.Cleanup).
	Shared bool
}

// Options shape the client set of a run through kube-apiserver beyond
// the run's own options (watchload.Options: Objects, ConfigMaps, Events,
// Namespaces, Watchers (the informers), WatchResources, WriteRate,
// Duration, Mix, ResourceMix, WriterConcurrency, HoldBack, Defragment,
// Seed, SyncTimeout, Logf). The etcd-direct model's own fields (Profile,
// PageSize, connections and streams, the compaction schedule, faults,
// Cleanup) do not apply: the real clients and kube-apiserver's own
// compactor take their place.
type Options struct {
	// WatchList sets client-go's WatchListClient gate in the informers;
	// nil keeps client-go's default (on since 1.35).
	WatchList *bool
	// HoldAt is when the held informers are held, from the start of the
	// writes; 0 means the run's Duration/5.
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
	// Cluster, if set, makes the run a whole cluster's (ClusterOptions):
	// its objects replace the run's pods, configmaps and events, its
	// churn the run's writes. Not on a shared cluster.
	Cluster *ClusterOptions
	// RunID names the run's namespaces (lwbench-<RunID>-...) and is
	// RunLabel's value on a shared cluster; "" means 8 random hex digits.
	// Required when the run is one worker's part of a load divided into
	// shards (watchload.Options.Shard): every worker must plan the same
	// namespaces.
	RunID string
}

// NewClients returns the client set (watchload.Options.Clients) of one
// run through st: the load's objects seeded and written through the API
// by client-go writers, client-go informers, the history recorder on etcd,
// kube-apiserver's own compactor, and the run's HoldBack informers held
// back until etcd has been compacted past them (so that their next watch
// fails with 410 if it reaches etcd). Confirm waits until every
// informer's cache equals etcd's state; the result reports what every
// informer asked for and what etcd was asked. The delivery latencies are
// those of the informers not held back; the held ones', from their hold
// on, are Delivery.HeldBack (with the watch cache on kube-apiserver serves
// their resumed watch from its cache's history, and the events of the hold
// arrive late by up to its length).
//
// The run's phases (seed, sync, steady, held, released, defrag, drain,
// stop) also begin anew at each compaction by kube-apiserver's compactor,
// seen as a change of compact_rev_key ("steady after compaction 1", ...);
// Stack.Counter counts etcd's requests by them. With Defragment, once the
// held informers have been released after a compaction past them, every
// etcd member is defragmented (phase "defrag"). Every apiserver of
// Stack.APIServers has its /metrics scraped at each phase boundary (the
// increase of each counter of apiserverMetrics per phase) and its CPU and
// resident memory reported.
//
// The objects are created in namespaces of their own (lwbench-<RunID>-N)
// under st.EtcdPrefix, which the run leaves in place, except on a shared
// cluster (Stack.Shared), where it deletes them at the end.
//
// A run that is one worker's part of a divided load (watchload.Options.Shard,
// with Options.RunID every worker shares) divides as the etcd-direct
// model does: it creates, writes and on a shared cluster deletes only the
// namespaces its shard owns and their objects, runs its block of the
// informers with their IDs in the whole load, keeps its totals'
// histograms (report.MergeRuns merges them), and leaves to shard 0 the
// report of kube-apiserver's compactions and the held-back informers
// (kube-apiserver's own compactor runs regardless).
func NewClients(st Stack, o Options) watchload.Clients {
	return &apiClients{st: st, o: o}
}

// apiClients are NewClients' client set.
type apiClients struct {
	st Stack
	o  Options
	r  *watchload.Script
	// metricsSkipped says why etcd's /metrics was not read, if it was not
	// for a reason a reader should know (a warning of the result).
	metricsSkipped string

	ph          *phases
	plan        *watchload.KubernetesWorkload
	scope       *sharedScope // on a shared cluster
	wl          *APIWorkload
	churn       watchload.Workload // a cluster's writes (Options.Cluster): a clusterload.Churn, or a worker's part of it
	kubelets    *KubeletWatches    // a cluster's kubelet watches
	health      *nodeHealth        // a cluster's node Leases and conditions
	rec         *watchload.Recorder
	env         *watchload.Env
	set         *InformerSet
	compactions <-chan []report.Compaction
	sampler     *etcdSampler       // etcd's /metrics and the proxy's writes over time; nil: none
	stopWatch   context.CancelFunc // ends the watch of compactions
	confirmed   int64              // the revision Confirm confirmed
	unverified  int64              // events Validate could not verify
}

var _ watchload.Clients = (*apiClients)(nil)

// Begin adopts the apiservers' prefix, plans the objects in namespaces
// of the run's own (refused on a shared cluster if one exists), resets
// the counter, follows the run's phases and starts the apiservers' meter.
func (a *apiClients) Begin(ctx context.Context, r *watchload.Script) error {
	installGates()
	a.r = r
	st, o := &a.st, &a.o
	if st.EtcdPrefix == "" {
		st.EtcdPrefix = "/registry"
	}
	lo := &r.Options
	lo.Prefix = st.EtcdPrefix
	// The apiservers' own keys are under it; the run writes only in
	// namespaces of its own.
	lo.ReusePrefix = true
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
	api := st.APIServer
	res := r.Result
	res.APIServer = &api
	res.Scenario = scenario(*lo, st.APIServer)
	if v, err := serverVersion(st.RESTConfig); err == nil {
		res.APIServer.Version = v
	}
	if stat, err := r.Admin.Status(ctx, st.Etcd.Endpoints[0]); err == nil {
		res.Target.EtcdVersion = stat.Version
	}

	id := o.RunID
	if id == "" {
		if lo.Shard.Count > 1 {
			return fmt.Errorf("worker %s: a load divided into shards needs a run ID every worker shares (kubeload.Options.RunID): each plans the namespaces of all", lo.Shard)
		}
		id = fmt.Sprintf("%08x", rand.Uint32())
	}
	nsPrefix := "lwbench-" + id + "-"
	if st.Shared {
		nsPrefix = "lwbench-" + id + "-ns-" // as watchload's ReusePrefix
	}
	if a.o.Cluster != nil {
		if c := a.o.Cluster; lo.Shard.Count > 1 && (c.FillerBytes > 0 || c.DefragAt > 0 || c.Restart != "" || len(st.EventsEtcd) > 0) {
			return fmt.Errorf("worker %s: a cluster's experiments (filler, defragmentation at a time, restart, events etcd) are not divided into shards", lo.Shard)
		}
		if st.Shared {
			return fmt.Errorf("a cluster's load (--nodes) needs a control plane lwbench starts, not a shared cluster")
		}
		if a.o.Cluster.Plan == nil || a.o.Cluster.PodChurn <= 0 {
			return fmt.Errorf("a cluster's load needs a plan and a pod churn above 0")
		}
		res.Cluster = clusterScenario(a.o.Cluster)
		res.Cluster.EventsEtcd = st.EventsEtcd
		// A worker of a divided load watches as its kubelets its block
		// of the nodes that have them (startKubeletWatches).
		res.Cluster.KubeletWatchNodes = lo.Shard.Len(res.Cluster.KubeletWatchNodes)
		// The cluster's objects and churn replace the run's own.
		res.Scenario.Objects, res.Scenario.ConfigMaps, res.Scenario.Events = 0, 0, 0
		res.Scenario.WriteRatePerSecond = a.o.Cluster.PodChurn / a.o.Cluster.Plan.PodsPerOp()
	}
	var err error
	a.plan, err = watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{
		Prefix: lo.Prefix, Namespaces: lo.Namespaces, Pods: lo.Objects, ConfigMaps: lo.ConfigMaps, Events: lo.Events,
		Mix: lo.Mix, ResourceMix: lo.ResourceMix, EventTTL: lo.EventTTL, Workers: lo.WriterConcurrency, Seed: lo.Seed,
		NamespacePrefix: nsPrefix, Shard: lo.Shard,
	})
	if err != nil {
		return err
	}
	if st.Shared {
		// The scope is the whole load's (every worker's informers see
		// every shard's objects); each worker checks the namespaces it
		// will create, all before any is created (watchload.Run meets
		// at BarrierBegin after Begin).
		sc := newSharedScope(id, lo.Prefix, a.plan)
		a.scope = &sc
		own := slices.DeleteFunc(a.plan.Namespaces(), func(ns string) bool { return !a.plan.Owns(watchload.Op{Namespace: ns}) })
		if err := refuseExisting(ctx, st.RESTConfig, own); err != nil {
			return err
		}
	}
	a.ph = &phases{counter: st.Counter}
	r.Session.OnPhase(func(p string) { a.ph.set(ctx, p) })
	if len(st.APIServers)+len(st.Components) > 0 {
		m, err := startMeter(ctx, append(append([]APIServer(nil), st.APIServers...), st.Components...), watchload.PhaseSeed, r.Logf)
		if err != nil {
			return err
		}
		a.ph.meter = m
	}
	return nil
}

// Seed starts the history recorder (within the run's namespaces on a
// shared cluster, whose etcd user may not watch the whole key space) and
// the watch of kube-apiserver's compactions, then seeds through the API.
func (a *apiClients) Seed(ctx context.Context) error {
	r, lo, s := a.r, a.r.Options, a.r.Session
	var within []string
	fallback := ""
	if a.scope != nil {
		within, fallback = a.scope.keyScopes, lo.Prefix+"/"
	}
	var err error
	// The recorder outlives ctx, so that an interrupted run can still
	// confirm what the informers received.
	if a.rec, err = s.StartRecorderWithin(context.WithoutCancel(ctx), a.plan.Prefixes(), within, fallback, r.Start+1); err != nil {
		return err
	}
	a.env = s.NewEnv(1<<20, lo.WriterConcurrency)
	if lo.Shard.Count > 1 {
		a.env.KeepHistograms() // the workers' results merge (report.MergeRuns)
	}
	if lo.Shard.Index == 0 {
		wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		a.stopWatch = stop
		a.compactions = watchCompactions(wctx, r.Admin, r.Start+1, a.ph, s.Epoch(), r.Logf)
	} else {
		// kube-apiserver's compactions are reported once, by shard 0.
		none := make(chan []report.Compaction, 1)
		none <- nil
		a.stopWatch, a.compactions = func() {}, none
	}
	a.startSampler(ctx)

	if a.o.Cluster != nil {
		return a.seedCluster(ctx)
	}
	of := ""
	if lo.Shard.Count > 1 {
		from, to := lo.Shard.Range(lo.Namespaces)
		of = fmt.Sprintf(" (shard %s: those of namespaces %d to %d of %d)", lo.Shard, from, to-1, lo.Namespaces)
	}
	r.Logf("seeding %d pods, %d configmaps, %d events through the API%s", lo.Objects, lo.ConfigMaps, lo.Events, of)
	if a.wl, err = NewAPIWorkload(a.st.Connections, a.plan, lo.WriterConcurrency, lo.Seed); err != nil {
		return err
	}
	if a.scope != nil {
		a.wl.OwnNamespaces(map[string]string{RunLabel: a.scope.id})
	}
	_, err = a.wl.Seed(ctx, lo.WriterConcurrency)
	return err
}

// StartInformers starts the client-go informers, Watchers of them over
// WatchResources in turn (a worker of a divided load its block of them,
// each with its ID and resource in the whole load), and waits until they
// have synced.
func (a *apiClients) StartInformers(ctx context.Context) (err error) {
	lo := a.r.Options
	from, to := lo.Shard.Range(lo.Watchers)
	resources := make([]string, to-from)
	for j := range resources {
		resources[j] = lo.WatchResources[(from+j)%len(lo.WatchResources)]
	}
	if a.set, err = NewInformerBlock(a.st.Connections, a.env, lo.Prefix, from, resources, a.o.WatchList); err != nil {
		return err
	}
	if a.scope != nil {
		a.set.SelectLabels(a.scope.selector)
	}
	a.set.StartConcurrency = lo.StartConcurrency
	of := ""
	if lo.Shard.Count > 1 {
		of = fmt.Sprintf(" (informers %d to %d of %d: shard %s)", from, to-1, lo.Watchers, lo.Shard)
	}
	a.r.Logf("starting %d informers%s", len(resources), of)
	if err := a.set.Start(ctx, lo.SyncTimeout); err != nil {
		return err
	}
	if a.o.Cluster != nil {
		return a.startKubeletWatches(ctx)
	}
	return nil
}

// StartWrites starts the API writers.
func (a *apiClients) StartWrites(ctx context.Context) (*watchload.Writing, error) {
	lo := a.r.Options
	if a.churn != nil {
		return a.startChurn(ctx)
	}
	a.r.Logf("writing %.0f/s for %v", lo.WriteRate, lo.Duration)
	return a.r.Session.Write(ctx, a.wl, watchload.WriterOptions{Rate: lo.WriteRate, Total: int64(lo.WriteRate * lo.Duration.Seconds()),
		Workers: lo.WriterConcurrency}, watchload.PhaseSteady)
}

// Maintain holds HoldBack informers back across a compaction by
// kube-apiserver (holdAcrossCompaction) and, with Defragment, once they
// were released after one, defragments every member. Of a divided load,
// shard 0 alone does, with the first informers of the load.
func (a *apiClients) Maintain(ctx context.Context, w *watchload.Writing) {
	r, lo, s := a.r, a.r.Options, a.r.Session
	if c := a.o.Cluster; c != nil && (c.DefragAt > 0 || c.Restart != "") {
		a.clusterEvents(ctx, w)
		return
	}
	if lo.HoldBack <= 0 || lo.Shard.Index != 0 {
		return
	}
	res := r.Result
	res.Holds = holdAcrossCompaction(ctx, s, r.Admin, a.set, min(lo.HoldBack, len(a.set.Informers)), w.Start+a.o.HoldAt, a.o.HoldFor, s.SetPhase, r.Logf)
	if lo.Defragment && len(res.Holds) > 0 && res.Holds[0].Compacted && ctx.Err() == nil {
		s.SetPhase(PhaseDefrag)
		res.Defrag = watchload.DefragmentMembers(ctx, r.Admin, a.st.Etcd.Endpoints, s.Epoch(), r.Logf)
		s.SetPhase("released")
	}
}

// Confirm waits until every informer's cache equals etcd's state
// (confirm).
func (a *apiClients) Confirm(ctx context.Context, rev int64, timeout time.Duration) (int, int64) {
	unsynced, confirmed := confirm(ctx, a.r.Admin, a.set, a.r.Options.Prefix, a.scope, rev, timeout, a.r.Logf)
	a.confirmed = confirmed
	return unsynced, confirmed
}

// Validate stops the informers, waits until the history covers the
// confirmed revision and every event they delivered (the store may have
// moved on after Confirm) and completes each informer's validation.
func (a *apiClients) Validate(ctx context.Context) {
	a.set.Stop()
	last := max(a.confirmed, a.set.LastRevisionOfAll())
	if err := a.rec.WaitFor(ctx, last, 100*time.Millisecond); err != nil {
		a.r.Logf("history recorder did not reach revision %d: %v", last, err)
	}
	for _, in := range a.set.Informers {
		a.unverified += in.lw.obs.Finish()
	}
}

// Collect gathers the compactions seen, the apiservers' usage and
// metrics, the validation, the informers' figures and what etcd was
// asked.
func (a *apiClients) Collect(ctx context.Context, unsynced int) error {
	res := a.r.Result
	a.stopWatch()
	if a.health != nil {
		res.Cluster.NodeHealth = a.health.finish()
	}
	if cp := a.st.ControlPlane; cp != nil && res.Cluster != nil {
		res.Cluster.Exits = componentExits(cp, a.r.Session.Epoch())
	}
	res.Compactions = <-a.compactions
	if a.sampler != nil {
		res.EtcdWrites, res.EtcdMetrics = a.sampler.finish(ctx)
	}
	if a.metricsSkipped != "" {
		res.Warnings = append(res.Warnings, a.metricsSkipped)
	}
	if a.ph.meter != nil {
		res.APIServers, res.APIServerMetrics = a.ph.meter.finish(ctx)
		if n := len(a.st.APIServers); len(res.APIServers) > n {
			res.Components, res.APIServers = res.APIServers[n:], res.APIServers[:n]
		}
	}
	res.Scenario.Defragment = res.Defrag != nil
	if lo := a.r.Options; lo.Shard.Count > 1 {
		// Every worker's scenario is the load's (report.MergeRuns
		// merges only equal ones): it asks for the defragmentation,
		// which shard 0 alone carries out once its held informers
		// were released after a compaction (Maintain).
		res.Scenario.Defragment = lo.Defragment && lo.HoldBack > 0
	}
	res.Validation = watchload.ValidationOf(a.env, unsynced, a.unverified, 0)
	summarize(res, a.set, a.r.Session.Epoch())
	if api := a.st.APIServer; !api.WatchCache {
		interval := time.Duration(api.EtcdCompactionIntervalMs * float64(time.Millisecond))
		res.Warnings = append(res.Warnings, watchListExpiriesOf(a.set.Requests()).warnings(interval)...)
	}
	res.Intervals = a.env.Collect(&res.Writes, &res.Delivery)
	if a.st.Counter != nil {
		res.Etcd = a.st.Counter.Requests()
		res.EtcdPhases = a.st.Counter.Phases()
	}
	res.PeriodicTraffic = a.periodicTraffic(res)
	if res.Relists == nil {
		res.Relists = []report.Relist{}
	}
	if res.Compactions == nil {
		res.Compactions = []report.Compaction{}
	}
	res.APIServer.ClientConnections = a.st.Connections.Open()
	if a.kubelets != nil {
		a.kubelets.Stop()
		res.Cluster.KubeletWatchObjects = a.kubelets.Events.Load()
	}
	return nil
}

// Stop stops the informers, the watches of compactions and of the
// nodes' health, and the meter.
func (a *apiClients) Stop() {
	if a.set != nil {
		a.set.Stop()
	}
	if a.stopWatch != nil {
		a.stopWatch()
	}
	if a.sampler != nil {
		a.sampler.halt()
		a.sampler.release()
	}
	if a.kubelets != nil {
		a.kubelets.Stop()
	}
	if a.health != nil {
		a.health.cancel()
	}
	if a.ph != nil && a.ph.meter != nil {
		a.ph.meter.halt()
	}
}

// CleanUp, on a shared cluster, deletes exactly the namespaces the run
// created (result's Cleanup).
func (a *apiClients) CleanUp(ctx context.Context) {
	if a.scope == nil || a.wl == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, a.o.NamespaceDeleteTimeout+time.Minute)
	defer cancel()
	a.r.Result.Cleanup = deleteNamespaces(cctx, a.st.RESTConfig, a.wl.CreatedNamespaces(), a.scope.selector, a.o.NamespaceDeleteTimeout, a.r.Logf)
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
		holds[i] = report.Hold{Informer: set.Informers[i].ID, HeldAtMs: report.Ms(time.Since(s.Epoch())), HeldRevision: set.LastRevision(i)}
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
// resource at the revision the informer has reached, polling, for at
// most timeout; it then reports the differences of those that did not as
// cache violations and returns how many did not, and the highest
// revision it confirmed a cache at (at least finalRev).
//
// The revision an informer has reached is the last one its watch
// delivered (an event or a bookmark: listWatch.LastRevision), and at
// least finalRev, the revision every write of the load was committed at:
// an informer below finalRev whose resource did not change since matches
// etcd at finalRev. A cache is read between two readings of that
// revision, and only when both agree, so it holds no event past it. The
// store may go on moving meanwhile, as a cluster's does while its
// controllers settle after the churn, or when a write whose request was
// cancelled as the writes stopped still commits: each cache is held
// against etcd at its own revision, never at a head it has not reached or
// has passed, unless a compaction passed that revision (kube-apiserver
// compacts every interval, and an informer whose resource stopped
// changing stays at its last event's revision: without the watch cache
// no bookmark moves it): then against the latest state, which a cache
// equal to it holds. etcd's state is read once per resource and revision
// per poll (a keys-only Range at that revision). The differences of a
// cache that did not match in time are reported only against the state
// at its own revision: against a later one they are not violations, and
// when that revision was compacted the informer is counted unsynced
// alone.
func confirm(ctx context.Context, admin *clientv3.Client, set *InformerSet, prefix string, scope *sharedScope, finalRev int64, timeout time.Duration, logf func(string, ...any)) (int, int64) {
	type at struct {
		resource string
		rev      int64
	}
	// read reads the resource's state at rev; with orLatest, the latest
	// state once a compaction passed rev.
	read := func(resource string, rev int64, orLatest bool) (map[string]int64, int64, error) {
		// On a shared cluster only the run's namespaces, which the
		// informers' label selector covers exactly: every object the
		// run writes there carries the label, and nothing else is there.
		ps := []string{watchload.ResourcePrefix(prefix, resource)}
		if scope != nil {
			ps = scope.within(ps[0])
		}
		if !orLatest {
			m, err := stateAtRev(ctx, admin, ps, &rev)
			return m, rev, err
		}
		return stateAt(ctx, admin, ps, rev)
	}
	// snapshot returns the cache of the set's informer j and the
	// revision it holds, ok false when an event arrived while the cache
	// was read.
	snapshot := func(j int) (map[string]int64, int64, bool) {
		lw := set.Informers[j].lw
		r := lw.LastRevision()
		cache := set.Cache(j)
		return cache, max(r, finalRev), lw.LastRevision() == r
	}
	deadline := time.Now().Add(timeout)
	pending := map[int]bool{} // by position in the set
	for j := range set.Informers {
		pending[j] = true
	}
	confirmed := finalRev
	var readErr error
	for len(pending) > 0 && ctx.Err() == nil {
		type state struct {
			keys map[string]int64
			rev  int64 // read at
		}
		states := map[at]state{}
		for j := range pending {
			cache, rev, ok := snapshot(j)
			if !ok {
				continue
			}
			k := at{set.Informers[j].Resource, rev}
			st, ok := states[k]
			if !ok {
				keys, readRev, err := read(k.resource, k.rev, true)
				if err != nil {
					readErr = err
					continue
				}
				st = state{keys, readRev}
				states[k] = st
			}
			if equalCache(cache, st.keys) {
				delete(pending, j)
				confirmed = max(confirmed, st.rev)
			}
		}
		if len(pending) == 0 || !time.Now().Before(deadline) {
			break
		}
		_ = clockwait.SleepReal(ctx, 200*time.Millisecond)
	}
	if readErr != nil {
		logf("%v", readErr)
	}
	for j := range pending {
		in := set.Informers[j]
		// Held against its own revision only: a cache that has not
		// caught up differs from a later state without breaking any
		// guarantee (it is unsynced, counted as such).
		cache, rev, _ := snapshot(j)
		st, _, err := read(in.Resource, rev, false)
		if err != nil {
			logf("informer %d: %v", in.ID, err)
			continue
		}
		in.lw.obs.CompareCache(rev, cache, st)
	}
	if len(pending) > 0 {
		logf("%d informers did not reach etcd's state at their revision (at least %d) within %v", len(pending), finalRev, timeout)
	}
	return len(pending), confirmed
}

// stateAt reads the keys under prefixes and their mod_revisions at rev,
// keys only, and returns the revision read at: rev, or, when a compaction
// passed rev (rpctypes.ErrCompacted), the latest revision, read at
// instead (every prefix at the same one). Its errors are the reads'.
func stateAt(ctx context.Context, admin *clientv3.Client, prefixes []string, rev int64) (map[string]int64, int64, error) {
	m, err := stateAtRev(ctx, admin, prefixes, &rev)
	if errors.Is(err, rpctypes.ErrCompacted) {
		rev = 0
		m, err = stateAtRev(ctx, admin, prefixes, &rev)
	}
	return m, rev, err
}

// stateAtRev reads the state at *rev; a zero *rev reads the latest and
// sets *rev to its revision.
func stateAtRev(ctx context.Context, admin *clientv3.Client, prefixes []string, rev *int64) (map[string]int64, error) {
	m := map[string]int64{}
	for _, p := range prefixes {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
		if *rev > 0 {
			opts = append(opts, clientv3.WithRev(*rev))
		}
		resp, err := admin.Get(ctx, p, opts...)
		if err != nil {
			if *rev == 0 {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			return nil, fmt.Errorf("read %s at revision %d: %w", p, *rev, err)
		}
		if *rev == 0 {
			*rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			m[string(kv.Key)] = kv.ModRevision
		}
	}
	return m, nil
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

// proxyCounter is an etcdproxy.Counter as a Stack's Counter.
type proxyCounter struct{ c *etcdproxy.Counter }

// CounterOf returns c, the counter of the proxies in front of etcd's
// members, as a Stack's Counter.
func CounterOf(c *etcdproxy.Counter) EtcdCounter { return proxyCounter{c} }

func (p proxyCounter) SetPhase(phase string) { p.c.SetPhase(phase) }

// scopedCounter is an EtcdCounter that also gives its rows by Lease
// namespace and name and with reads of prefix keys apart, for
// report.PeriodicTrafficOf.
type scopedCounter interface {
	ScopedRequests() []report.EtcdRequests
}

var _ scopedCounter = proxyCounter{}

// startSampler starts sampling, on a cluster lwbench owns, the first
// member's /metrics when lwbench started it, and the proxy's writes per
// resource when one counts (etcdSampler); not in a worker of a divided
// load, whose etcd is whoever started it to read (the coordinator of
// lwbench run --workers reads it by phase of the whole load).
func (a *apiClients) startSampler(ctx context.Context) {
	st := a.st
	if st.Shared || a.r.Options.Shard.Count > 1 {
		return
	}
	endpoint := ""
	if st.Etcd.Managed && len(st.Etcd.Endpoints) > 0 {
		endpoint = st.Etcd.Endpoints[0]
		if h := st.Etcd.Harness; h != nil && len(h.Endpoints) > 0 {
			endpoint = h.Endpoints[0]
		}
	}
	var status etcdStatusFunc
	closeStatus := func() {}
	if endpoint != "" && st.Etcd.Embedded && len(st.EventsEtcd) > 0 {
		// Both members run in this process and serve one Prometheus
		// registry: etcd's db size gauges read package state that the
		// last backend opened sets (go.etcd.io/etcd/server/v3 storage/
		// mvcc/kvstore.go reportDbTotalSizeInBytes), the events etcd's,
		// and its counters add both members up. The main member's
		// sizes come from its Status instead.
		status, closeStatus = a.statusOf(endpoint)
		a.metricsSkipped = "etcd's counters by phase not read: with --events-etcd both embedded members serve this process's one Prometheus registry, " +
			"whose db size is the member opened last (go.etcd.io/etcd/server/v3 storage/mvcc/kvstore.go) and whose counters add both up; " +
			"the main member's db size over time comes from its Maintenance Status"
	}
	if endpoint == "" && st.Counter == nil {
		return
	}
	a.sampler = startEtcdSampler(ctx, st.Counter, a.ph.current, a.r.Session.Epoch(), etcdSampleEvery, endpoint, st.EtcdTLS, status)
	a.sampler.release = closeStatus
}

// statusOf returns an etcdStatusFunc that asks the member at endpoint
// for its Status on a connection of the harness's (watchload.Target's
// Harness, or its own dialer), dialled at the first call, each call
// bounded by etcdSampleEvery, and the func that closes that connection
// (once; later calls do nothing).
func (a *apiClients) statusOf(endpoint string) (etcdStatusFunc, func()) {
	dial := a.st.Etcd.Dial
	if h := a.st.Etcd.Harness; h != nil {
		dial = h.Dial
	}
	var cli *clientv3.Client
	status := func(ctx context.Context) (*etcdScrape, error) {
		if cli == nil {
			c, err := dial(ctx)
			if err != nil {
				return nil, err
			}
			cli = c
		}
		sctx, cancel := context.WithTimeout(ctx, etcdSampleEvery)
		defer cancel()
		st, err := cli.Status(sctx, endpoint)
		if err != nil {
			return nil, err
		}
		return &etcdScrape{at: time.Now(), values: map[string]float64{etcdDBSize: float64(st.DbSize), etcdDBSizeInUse: float64(st.DbSizeInUse)}}, nil
	}
	var once sync.Once
	return status, func() {
		once.Do(func() {
			if cli != nil {
				cli.Close()
			}
		})
	}
}

// periodicTraffic finds a cluster's periodic etcd traffic in the
// proxy's rows (report.PeriodicTrafficOf); nil without a cluster's load
// or a proxy.
func (a *apiClients) periodicTraffic(res *report.RunResult) []report.PeriodicTraffic {
	sc, ok := a.st.Counter.(scopedCounter)
	if !ok || a.o.Cluster == nil || a.o.Cluster.Plan == nil {
		return nil
	}
	return report.PeriodicTrafficOf(report.PeriodicInput{Requests: sc.ScopedRequests(), Phases: res.EtcdPhases,
		Compactions: res.Compactions, Nodes: a.o.Cluster.Plan.Nodes, APIServers: max(a.st.APIServer.Servers, 1),
		CompactionIntervalMs: a.st.APIServer.EtcdCompactionIntervalMs, APIServerVersion: a.st.APIServer.Version,
		EndpointReconcilerNone: a.st.APIServer.Managed, KWOK: a.st.ControlPlane != nil})
}

func (p proxyCounter) Reset() {
	p.c.SetPhase("before")
	p.c.Reset()
}

func (p proxyCounter) Requests() []report.EtcdRequests {
	return etcdRequests(p.c.Counts().ByResource())
}

// ScopedRequests returns the counts as Requests does, with the rows of
// Leases by namespace (and kube-system's by name) and reads of resource
// prefix keys apart (etcdproxy.Row's Namespace, Name, PrefixKey).
func (p proxyCounter) ScopedRequests() []report.EtcdRequests { return etcdRequests(p.c.Counts()) }

// etcdRequests converts the proxy's rows.
func etcdRequests(rows etcdproxy.Counts) []report.EtcdRequests {
	out := make([]report.EtcdRequests, len(rows))
	for i, r := range rows {
		out[i] = report.EtcdRequests{Phase: r.Phase, Method: r.Method, Kind: r.Kind, Resource: r.Resource, Namespace: r.Namespace,
			Name: r.Name, PrefixKey: r.PrefixKey, Requests: r.Requests, RequestBytes: r.RequestBytes, Responses: r.Responses,
			ResponseBytes: r.ResponseBytes, Items: r.Items, Errors: r.Errors, FailedCompares: r.FailedCompares}
	}
	return out
}

func (p proxyCounter) Phases() []report.EtcdPhase {
	times := p.c.PhaseTimes()
	out := make([]report.EtcdPhase, len(times))
	for i, t := range times {
		out[i] = report.EtcdPhase{Phase: t.Phase, StartedAt: t.Start.UTC(), DurationMs: report.Ms(t.Duration)}
	}
	return out
}
