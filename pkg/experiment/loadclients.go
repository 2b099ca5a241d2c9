package experiment

import (
	"context"
	"fmt"
	"path"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/parallel"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// modelLoad is a load's clients in lwbench's etcd-direct model: the pods
// seeded and written with kube-apiserver's transactions on writer
// connections of the load's own, the informers modelled reflectors.
type modelLoad struct {
	l   *load
	wl  *watchload.KubernetesWorkload
	kvs []watchload.KV // the writers' connections, for writes of the experiment's own
	// podKVs are the seeded pods as etcd holds them, read at the first
	// updatePods, which rewrites them.
	podKVs []*mvccpb.KeyValue
}

var _ loadClients = (*modelLoad)(nil)

func (m *modelLoad) seed(ctx context.Context, namespaces int, seed uint64) error {
	l := m.l
	writerTopo, err := l.ws.ConnectWriters(ctx, 2, false)
	if err != nil {
		return err
	}
	for _, c := range writerTopo.Conns {
		m.kvs = append(m.kvs, c)
	}
	m.wl, err = watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{
		Prefix: l.prefix, Namespaces: namespaces, Pods: l.pods, Workers: l.workers, Seed: seed,
		Mix: loadMix, ResourceMix: watchload.ResourceMix{PodsPercent: 100},
	})
	if err != nil {
		return err
	}
	// Divided, shard 0 alone seeds; the others meet it once it has,
	// their workload planned alike from the same seed.
	if l.s.lead() {
		if err := l.ws.Seed(ctx, m.wl, 32); err != nil {
			return fmt.Errorf("seed %d pods under %s: %w", l.pods, l.prefix, err)
		}
	}
	if err := l.s.meet(ctx, "seeded", path.Base(l.prefix)); err != nil {
		return err
	}
	if l.seededAt, err = l.s.revision(ctx); err != nil {
		return err
	}
	// The recorder outlives ctx's cancellation until the load closes.
	_, err = l.ws.StartRecorder(context.WithoutCancel(ctx), []string{l.podsPrefix}, "", l.seededAt+1)
	return err
}

// startCase: the model's reflectors, o.conns connections of one stream
// each, LIST pages of o.pageSize (0: unpaginated).
func (m *modelLoad) startCase(ctx context.Context, o watcherOptions, maxWrites int64) (watchload.ClientSet, error) {
	l := m.l
	c, err := l.ws.StartCase(ctx, watchload.CaseOptions{Watchers: o.watchers, Connections: o.conns, SyncTimeout: o.syncTimeout,
		RingCapacity: maxWrites + 1024, Writers: l.workers, Workload: m.wl,
		Watcher: func(i int, st *watchload.Stream) watchload.ReflectorOptions {
			return watchload.ReflectorOptions{ID: o.firstID + i, Profile: watchload.ProfileInformer, Resource: watchload.ResourcePods,
				Prefix: l.podsPrefix, Stream: st, PageSize: o.pageSize, Unpaginated: o.pageSize == 0}
		}})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (m *modelLoad) watchList() bool { return false }

// updatePods puts each seeded pod again as etcd holds it, one revision
// each, on the writers' connections.
func (m *modelLoad) updatePods(ctx context.Context, n, concurrency int) ([]int64, error) {
	if m.podKVs == nil {
		all, err := m.l.s.admin.Get(ctx, m.l.podsPrefix, clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("read the pods: %w", err)
		}
		m.podKVs = all.Kvs
	}
	if len(m.podKVs) == 0 {
		return nil, fmt.Errorf("no pods under %s to update", m.l.podsPrefix)
	}
	revs := make([]int64, 0, n)
	var mu sync.Mutex
	err := parallel.Each(ctx, concurrency, n, func(ctx context.Context, w, i int) error {
		src := m.podKVs[i%len(m.podKVs)]
		resp, err := m.kvs[w%len(m.kvs)].Put(ctx, string(src.Key), string(src.Value))
		if err != nil {
			return err
		}
		mu.Lock()
		revs = append(revs, resp.Header.Revision)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update pods: %w", err)
	}
	return revs, nil
}

// watchFrom watches etcd directly on a connection of its own, with
// prevKV as kube-apiserver's watches ask; the bytes are the events' keys
// and values, previous ones included.
func (m *modelLoad) watchFrom(ctx context.Context, from, until int64) (w catchupWatch, err error) {
	wc, err := m.l.s.t.Dial(ctx)
	if err != nil {
		return w, err
	}
	defer wc.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	defer func() { w.duration = time.Since(start) }()
	wch := wc.Watch(clientv3.WithRequireLeader(wctx), m.l.podsPrefix, clientv3.WithPrefix(), clientv3.WithRev(from+1), clientv3.WithPrevKV())
	var last int64
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return w, fmt.Errorf("watch from %d: %w", from+1, err)
		}
		w.responses++
		for _, ev := range resp.Events {
			w.revisions = append(w.revisions, ev.Kv.ModRevision)
			w.bytes += int64(len(ev.Kv.Key) + len(ev.Kv.Value))
			if ev.PrevKv != nil {
				w.bytes += int64(len(ev.PrevKv.Key) + len(ev.PrevKv.Value))
			}
			last = ev.Kv.ModRevision
		}
		if last >= until {
			return w, nil
		}
	}
	return w, fmt.Errorf("watch from %d ended at revision %d, before %d", from+1, last, until)
}

func (m *modelLoad) pages() pageReader { return etcdPages{kv: m.l.s.admin, prefix: m.l.podsPrefix} }

// list: a paginated list restarts when a continuation page is compacted
// (up to 10 times), as client-go's pager would relist; unpaginated, one
// Range of every pod.
func (m *modelLoad) list(ctx context.Context, pageSize int64) (catchupList, error) {
	if pageSize == 0 {
		start := time.Now()
		resp, err := m.l.s.admin.Get(ctx, m.l.podsPrefix, clientv3.WithPrefix())
		if err != nil {
			return catchupList{}, fmt.Errorf("unpaginated list: %w", err)
		}
		var bytes int64
		for _, kv := range resp.Kvs {
			bytes += int64(len(kv.Key) + len(kv.Value))
		}
		return catchupList{duration: time.Since(start), pages: 1, objects: int64(len(resp.Kvs)), bytes: bytes}, nil
	}
	lo, err := listWithFallback(ctx, m.pages(), pageSize, 0, FallbackRestart, 10)
	return catchupList{duration: lo.duration, pages: lo.requests, objects: lo.objects, bytes: lo.bytes}, err
}

func (m *modelLoad) compactions(context.Context, int64, func(int64)) <-chan struct{} { return nil }

func (m *modelLoad) counter() etcdCounter { return etcdCounter{} }

// end: the model's loads are under prefixes of their own; nothing to
// end.
func (m *modelLoad) end(context.Context) error { return nil }

func (m *modelLoad) close() {}

// apiLoad is a load's clients through real kube-apiservers of the load's
// own (or an existing cluster's, --kubeconfig): the pods seeded and
// written by client-go, the informers client-go's.
type apiLoad struct {
	l          *load
	compaction time.Duration // kube-apiserver's own compactor's interval; negative: off
	api        *kubeload.Load
	stopStack  func() // stops the load's kube-apiservers
	shared     bool   // a cluster lwbench does not own (kubeload.Stack.Shared)
}

var _ loadClients = (*apiLoad)(nil)

// seed starts the load's kube-apiservers and seeds through them
// (kubeload.NewLoad).
func (a *apiLoad) seed(ctx context.Context, namespaces int, seed uint64) error {
	l := a.l
	st, stop, err := l.s.stacks(ctx, l.s.t, l.prefix, a.compaction)
	a.stopStack = stop
	if err != nil {
		return err
	}
	l.s.apiServer(st.APIServer)
	a.shared = st.Shared
	name := path.Base(l.prefix)
	if st.EtcdPrefix != "" && st.EtcdPrefix != l.prefix {
		// Kube-apiservers every load shares (a cluster lwbench does not
		// own, or a divided experiment's coordinator's): their
		// --etcd-prefix, in namespaces of the load's own.
		l.prefix, l.podsPrefix = st.EtcdPrefix, watchload.ResourcePrefix(st.EtcdPrefix, watchload.ResourcePods)
	}
	lo := kubeload.LoadOptions{Pods: l.pods, Namespaces: namespaces, Mix: loadMix,
		Workers: l.workers, Seed: seed, Logf: l.s.logf, NamespaceDeleteTimeout: l.s.namespaceDeleteTimeout}
	if l.s.divided() {
		// Every worker plans the same namespaces, the load's name
		// telling the loads of one run apart; shard 0 seeds them.
		lo.RunID, lo.Shard = l.s.runID+"-"+BarrierPoint(name), l.s.shard
		lo.Meet = func(ctx context.Context, point string) error { return l.s.meet(ctx, point, name) }
	}
	a.api, err = kubeload.NewLoad(ctx, l.ws, st, lo)
	if err != nil {
		return err
	}
	l.seededAt = a.api.SeededAt()
	return nil
}

// end: divided, every worker meets the others once done with the load;
// on kube-apiservers of lwbench's own that the loads share (the
// coordinator's), shard 0 then deletes the load's pods so that the next
// load lists its own alone (kubeload.Load.DeletePods), and they meet again
// before the next load starts its history. On a shared cluster close
// deletes the namespaces (shard 0's, after this meeting).
func (a *apiLoad) end(ctx context.Context) error {
	l := a.l
	if !l.s.divided() {
		return nil
	}
	name := path.Base(l.name)
	if err := l.s.meet(ctx, name, "done"); err != nil {
		return err
	}
	if a.shared {
		return nil
	}
	if l.s.lead() {
		start := time.Now()
		n, err := a.api.DeletePods(ctx)
		if err != nil {
			return err
		}
		l.s.mark(MarkPhase, fmt.Sprintf("delete %d pods", n), start, time.Now(), 0)
	}
	return l.s.meet(ctx, name, "cleaned")
}

// startCase: client-go informers with the session's WatchListClient gate,
// each on a connection of its own (o.conns does not apply); o.pageSize -1
// leaves the pages to client-go.
func (a *apiLoad) startCase(ctx context.Context, o watcherOptions, maxWrites int64) (watchload.ClientSet, error) {
	co := kubeload.CaseOptions{Informers: o.watchers, WatchList: a.l.s.watchList, SyncTimeout: o.syncTimeout, RingCapacity: maxWrites + 1024}
	if o.pageSize >= 0 {
		ps := o.pageSize
		co.PageSize = &ps
	}
	c, err := a.api.StartCase(ctx, co)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (a *apiLoad) watchList() bool { return watchListOn(a.l.s.watchList) }

func (a *apiLoad) updatePods(ctx context.Context, n, concurrency int) ([]int64, error) {
	return a.api.UpdatePods(ctx, n, concurrency)
}

// watchFrom is a client-go WATCH of the pods (kubeload.Load.WatchFrom):
// kube-apiserver reads etcd's history, or its watch cache, which may no
// longer hold the revision (410: expired).
func (a *apiLoad) watchFrom(ctx context.Context, from, until int64) (catchupWatch, error) {
	start := time.Now()
	w, err := a.api.WatchFrom(ctx, from, until)
	return catchupWatch{revisions: w.Revisions, responses: w.Bookmarks, bytes: w.Bytes, expired: w.Expired, duration: time.Since(start)}, err
}

func (a *apiLoad) pages() pageReader { return apiPages{a.api} }

func (a *apiLoad) list(ctx context.Context, pageSize int64) (catchupList, error) {
	r, err := a.api.ListPods(ctx, pageSize)
	return catchupList{duration: r.Duration, pages: r.Pages, objects: r.Objects, bytes: r.Bytes}, err
}

// compactions watches compact_rev_key (kubeload.WatchCompactions).
func (a *apiLoad) compactions(ctx context.Context, from int64, f func(int64)) <-chan struct{} {
	return kubeload.WatchCompactions(ctx, a.l.s.admin, from, f, a.l.s.logf)
}

func (a *apiLoad) counter() etcdCounter { return etcdCounter{a.api.Stack().Counter} }

// close deletes the load's namespaces on a cluster lwbench does not own
// (kubeload.Load.Close, recorded in the session) and stops the load's
// kube-apiservers.
func (a *apiLoad) close() {
	if a.api != nil {
		if c := a.api.Close(context.Background()); c != nil {
			a.l.s.cleanedUp(*c)
		}
	}
	if a.stopStack != nil {
		a.stopStack()
	}
}
