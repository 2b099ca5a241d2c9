package experiment

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// load is one Kubernetes prefix on a session's member: pods seeded with
// kube-apiserver's encoding and transactions, a history recorder from the
// end of the seeding on, and, per case, writers updating the pods and
// informers watching them (clients). With the session's StackFactory the
// pods are seeded and written through real kube-apiservers whose
// --etcd-prefix is the load's prefix, by client-go, and the informers are
// client-go's (api); otherwise lwbench's model writes and reads etcd
// directly (wl, kvs).
type load struct {
	s          *session
	ws         *watchload.Session // a Child of the session's: the writers' connections and the recorder
	prefix     string             // the Kubernetes prefix, e.g. /registry/n1000
	podsPrefix string             // e.g. /registry/n1000/pods/
	pods       int
	wl         *watchload.KubernetesWorkload // the model's; nil through kube-apiserver
	workers    int
	kvs        []watchload.KV // the writers' connections, for writes of the experiment's own; nil through kube-apiserver
	seededAt   int64          // the revision after seeding
	api        *kubeload.Load // through kube-apiserver; nil for the model
	stopStack  func()         // stops the load's kube-apiservers; nil for the model
}

// newLoad seeds pods under prefix and starts recording the history:
// through kube-apiservers of the load's own when the session has a
// StackFactory (kube-apiserver's compactor off: the experiment compacts),
// otherwise with the etcd-direct model.
func newLoad(ctx context.Context, s *session, prefix string, pods, namespaces int, seed uint64) (*load, error) {
	return newLoadCompacting(ctx, s, prefix, pods, namespaces, seed, -1)
}

// newLoadCompacting is newLoad whose kube-apiservers, if any, run their
// own compactor every apiCompaction (negative: off).
func newLoadCompacting(ctx context.Context, s *session, prefix string, pods, namespaces int, seed uint64, apiCompaction time.Duration) (*load, error) {
	l := &load{s: s, ws: s.ws.Child(), prefix: prefix,
		podsPrefix: watchload.ResourcePrefix(prefix, watchload.ResourcePods), pods: pods, workers: 16}
	start := time.Now()
	if err := l.seed(ctx, namespaces, seed, apiCompaction); err != nil {
		l.close()
		return nil, err
	}
	s.mark(MarkPhase, fmt.Sprintf("seed %d pods", pods), start, time.Now(), 0)
	return l, nil
}

// seed seeds the pods and starts the recorder, through kube-apiserver or
// the model.
func (l *load) seed(ctx context.Context, namespaces int, seed uint64, apiCompaction time.Duration) error {
	mix := watchload.Mix{CreatePercent: 10, UpdatePercent: 80, DeletePercent: 10}
	if l.s.stacks != nil {
		st, stop, err := l.s.stacks(ctx, l.s.t, l.prefix, apiCompaction)
		l.stopStack = stop
		if err != nil {
			return err
		}
		l.s.apiServer(st.APIServer)
		if st.Shared {
			// A cluster lwbench does not own: its kube-apiservers'
			// --etcd-prefix, in namespaces of the load's own.
			l.prefix, l.podsPrefix = st.EtcdPrefix, watchload.ResourcePrefix(st.EtcdPrefix, watchload.ResourcePods)
		}
		l.api, err = kubeload.NewLoad(ctx, l.ws, st, kubeload.LoadOptions{Pods: l.pods, Namespaces: namespaces, Mix: mix,
			Workers: l.workers, Seed: seed, Logf: l.s.logf, NamespaceDeleteTimeout: l.s.namespaceDeleteTimeout})
		if err != nil {
			return err
		}
		l.seededAt = l.api.SeededAt()
		return nil
	}
	writerTopo, err := l.ws.ConnectWriters(ctx, 2, false)
	if err != nil {
		return err
	}
	for _, c := range writerTopo.Conns {
		l.kvs = append(l.kvs, c)
	}
	l.wl, err = watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{
		Prefix: l.prefix, Namespaces: namespaces, Pods: l.pods, Workers: l.workers, Seed: seed,
		Mix: mix, ResourceMix: watchload.ResourceMix{PodsPercent: 100},
	})
	if err != nil {
		return err
	}
	if err := l.ws.Seed(ctx, l.wl, 32); err != nil {
		return fmt.Errorf("seed %d pods under %s: %w", l.pods, l.prefix, err)
	}
	if l.seededAt, err = l.s.revision(ctx); err != nil {
		return err
	}
	// The recorder outlives ctx's cancellation until the load closes.
	_, err = l.ws.StartRecorder(context.WithoutCancel(ctx), []string{l.podsPrefix}, "", l.seededAt+1)
	return err
}

// close stops the recorder and closes the connections, deletes the
// load's namespaces on a cluster lwbench does not own (kubeload.Load.Close,
// recorded in the session), and stops the load's kube-apiservers.
func (l *load) close() {
	l.ws.Close()
	if l.api != nil {
		if c := l.api.Close(context.Background()); c != nil {
			l.s.cleanedUp(*c)
		}
	}
	if l.stopStack != nil {
		l.stopStack()
	}
}

// watcherOptions shape a case's informers.
type watcherOptions struct {
	watchers, conns int
	// pageSize is the informers' LIST page size (0: unpaginated); through
	// kube-apiserver, -1 leaves it to client-go.
	pageSize    int64
	syncTimeout time.Duration
}

// startCase starts n informers of the pods (listing all at once) and
// waits until they have listed; maxWrites bounds the writes the case may
// make. Through kube-apiserver the informers are client-go's, with the
// session's WatchListClient gate, on a connection each (conns does not
// apply).
func (l *load) startCase(ctx context.Context, o watcherOptions, maxWrites int64) (clients, error) {
	if l.api != nil {
		co := kubeload.CaseOptions{Informers: o.watchers, WatchList: l.s.watchList, SyncTimeout: o.syncTimeout, RingCapacity: maxWrites + 1024}
		if o.pageSize >= 0 {
			ps := o.pageSize
			co.PageSize = &ps
		}
		c, err := l.api.StartCase(ctx, co)
		if err != nil {
			return nil, err
		}
		return &apiClients{c: c}, nil
	}
	c, err := l.ws.StartCase(ctx, watchload.CaseOptions{Watchers: o.watchers, Connections: o.conns, SyncTimeout: o.syncTimeout,
		RingCapacity: maxWrites + 1024, Writers: l.workers,
		Watcher: func(i int, st *watchload.Stream) watchload.ReflectorOptions {
			return watchload.ReflectorOptions{ID: i, Profile: watchload.ProfileInformer, Resource: watchload.ResourcePods,
				Prefix: l.podsPrefix, Stream: st, PageSize: o.pageSize, Unpaginated: o.pageSize == 0}
		}})
	if err != nil {
		return nil, err
	}
	return &modelClients{l: l, c: c}, nil
}

// finish stops the case's writers, waits until every watcher has seen the
// final revision, and validates the case (clients.validate): the writes
// and the experiment's view of the validation. The caller closes the
// case.
func (l *load) finish(ctx context.Context, c clients) (report.WriteStats, Validation, error) {
	ws := c.stopWrites()
	final, err := l.s.revision(ctx)
	if err != nil {
		return ws, Validation{}, err
	}
	v, err := c.validate(ctx, final)
	return ws, v, err
}

// counter returns the counting proxy of the load's kube-apiservers, or a
// counter that counts nothing for the model or without a proxy.
func (l *load) counter() etcdCounter {
	if l.api == nil {
		return etcdCounter{}
	}
	return etcdCounter{l.api.Stack().Counter}
}

// etcdCounter names the phases of what kube-apiserver sends etcd
// (kubeload.EtcdCounter) and reads them back; its zero value counts
// nothing.
type etcdCounter struct{ c kubeload.EtcdCounter }

// SetPhase attributes what etcd receives from now on to phase.
func (e etcdCounter) SetPhase(phase string) {
	if e.c != nil {
		e.c.SetPhase(phase)
	}
}

// ranges returns the LISTs etcd received in phase, Range and RangeStream
// requests over a prefix (etcdproxy's kinds "prefix ..."; kube-apiserver's
// reads of one key before its writes apart), and their response bytes.
func (e etcdCounter) ranges(phase string) (requests, bytes int64) {
	if e.c == nil {
		return 0, 0
	}
	for _, r := range e.c.Requests() {
		if r.Phase == phase && (r.Method == "Range" || r.Method == "RangeStream") && strings.HasPrefix(r.Kind, "prefix") {
			requests += r.Requests
			bytes += r.ResponseBytes
		}
	}
	return requests, bytes
}
