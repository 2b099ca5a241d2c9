package experiment

import (
	"context"
	"fmt"
	"time"

	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// load is one Kubernetes prefix on a session's member: pods seeded with
// kube-apiserver's encoding and transactions, a history recorder from the
// end of the seeding on, and, per case, writers updating the pods and
// informers watching them (a watchload.Case).
type load struct {
	s          *session
	ws         *watchload.Session // a Child of the session's: the writers' connections and the recorder
	prefix     string             // the Kubernetes prefix, e.g. /registry/n1000
	podsPrefix string             // e.g. /registry/n1000/pods/
	pods       int
	wl         *watchload.KubernetesWorkload
	workers    int
	kvs        []watchload.KV // the writers' connections, for writes of the experiment's own
	seededAt   int64          // the revision after seeding
}

// newLoad seeds pods under prefix and starts recording the history.
func newLoad(ctx context.Context, s *session, prefix string, pods, namespaces int, seed uint64) (*load, error) {
	l := &load{s: s, ws: s.ws.Child(), prefix: prefix,
		podsPrefix: watchload.ResourcePrefix(prefix, watchload.ResourcePods), pods: pods, workers: 16}
	writerTopo, err := l.ws.ConnectWriters(ctx, 2, false)
	if err != nil {
		l.close()
		return nil, err
	}
	for _, c := range writerTopo.Conns {
		l.kvs = append(l.kvs, c)
	}
	l.wl, err = watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{
		Prefix: prefix, Namespaces: namespaces, Pods: pods, Workers: l.workers, Seed: seed,
		Mix:         watchload.Mix{CreatePercent: 10, UpdatePercent: 80, DeletePercent: 10},
		ResourceMix: watchload.ResourceMix{PodsPercent: 100},
	})
	if err != nil {
		l.close()
		return nil, err
	}
	start := time.Now()
	if err := l.ws.Seed(ctx, l.wl, 32); err != nil {
		l.close()
		return nil, fmt.Errorf("seed %d pods under %s: %w", pods, prefix, err)
	}
	s.mark(MarkPhase, fmt.Sprintf("seed %d pods", pods), start, time.Now(), 0)
	if l.seededAt, err = s.revision(ctx); err != nil {
		l.close()
		return nil, err
	}
	// The recorder outlives ctx's cancellation until the load closes.
	if _, err = l.ws.StartRecorder(context.WithoutCancel(ctx), []string{l.podsPrefix}, "", l.seededAt+1); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// close stops the recorder and closes the connections.
func (l *load) close() { l.ws.Close() }

// watcherOptions shape a case's informers.
type watcherOptions struct {
	watchers, conns int
	pageSize        int64 // 0: unpaginated
	syncTimeout     time.Duration
}

// startCase starts n informers of the pods (listing all at once) and
// waits until they have listed; maxWrites bounds the writes the case may
// make.
func (l *load) startCase(ctx context.Context, o watcherOptions, maxWrites int64) (*watchload.Case, error) {
	return l.ws.StartCase(ctx, watchload.CaseOptions{Watchers: o.watchers, Connections: o.conns, SyncTimeout: o.syncTimeout,
		RingCapacity: maxWrites + 1024, Writers: l.workers,
		Watcher: func(i int, st *watchload.Stream) watchload.ReflectorOptions {
			return watchload.ReflectorOptions{ID: i, Profile: watchload.ProfileInformer, Resource: watchload.ResourcePods,
				Prefix: l.podsPrefix, Stream: st, PageSize: o.pageSize, Unpaginated: o.pageSize == 0}
		}})
}

// write starts the case's writers updating the pods at rate, at most
// total ops, until the case stops them; they outlive ctx's cancellation.
func (l *load) write(ctx context.Context, c *watchload.Case, rate float64, total int64) error {
	return c.Write(context.WithoutCancel(ctx), l.wl, watchload.WriterOptions{Rate: rate, Total: total, Workers: l.workers, Timeout: 10 * time.Second})
}

// finish stops the case's writers, waits until every watcher has seen
// the final revision, and validates the case (watchload.Case.Validate):
// the writes and the experiment's view of the validation, in which a
// watcher that never confirmed the end counts as unverified. The caller
// closes the case.
func (l *load) finish(ctx context.Context, c *watchload.Case) (report.WriteStats, Validation, error) {
	ws := c.StopWrites()
	final, err := l.s.revision(ctx)
	if err != nil {
		return ws, Validation{}, err
	}
	unsynced := c.Confirm(ctx, final, 100*time.Millisecond, 30*time.Second)
	v, err := c.Validate(ctx, 100*time.Millisecond, unsynced)
	if err != nil {
		return ws, Validation{}, err
	}
	return ws, fromReport(v), nil
}
