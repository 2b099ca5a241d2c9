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
// informers watching them.
type load struct {
	s          *session
	ws         *watchload.Session // the writers' connections and the recorder
	prefix     string             // the Kubernetes prefix, e.g. /registry/n1000
	podsPrefix string             // e.g. /registry/n1000/pods/
	pods       int
	wl         *watchload.KubernetesWorkload
	workers    int
	kvs        []watchload.KV
	rec        *watchload.Recorder
	seededAt   int64 // the revision after seeding
}

// newLoad seeds pods under prefix and starts recording the history.
func newLoad(ctx context.Context, s *session, prefix string, pods, namespaces int, seed uint64) (*load, error) {
	l := &load{s: s, ws: watchload.NewSession(s.t, s.epoch, s.logf), prefix: prefix,
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
	if l.rec, err = l.ws.StartRecorder(context.WithoutCancel(ctx), []string{l.podsPrefix}, "", l.seededAt+1); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// close stops the recorder and closes the connections.
func (l *load) close() { l.ws.Close() }

// caseRun is one case's writers and watchers on a load.
type caseRun struct {
	l       *load
	env     *watchload.Env
	writing *watchload.Writing // nil when no writes run
	topo    *watchload.Topology
	set     *watchload.ReflectorSet
	refls   []*watchload.Reflector // set.Reflectors
}

// watcherOptions shape a case's informers.
type watcherOptions struct {
	watchers, conns int
	pageSize        int64 // 0: unpaginated
	syncTimeout     time.Duration
}

// startCase starts n informers of the pods (listing all at once) and
// waits until they have listed; maxWrites bounds the writes the case may
// make.
func (l *load) startCase(ctx context.Context, o watcherOptions, maxWrites int64) (*caseRun, error) {
	c := &caseRun{l: l, env: watchload.NewEnv(l.s.epoch, maxWrites+1024, l.workers, l.rec)}
	var err error
	c.topo, err = watchload.Connect(ctx, l.s.t.Dial, o.conns, o.conns, "")
	if err != nil {
		return nil, err
	}
	c.set = watchload.NewReflectorSet(c.env, c.topo, o.watchers, func(i int, st *watchload.Stream) watchload.ReflectorOptions {
		return watchload.ReflectorOptions{ID: i, Profile: watchload.ProfileInformer, Resource: watchload.ResourcePods,
			Prefix: l.podsPrefix, Stream: st, PageSize: o.pageSize, Unpaginated: o.pageSize == 0}
	})
	c.refls = c.set.Reflectors
	// The informers outlive ctx's cancellation until the case stops them.
	if err := c.set.Start(ctx, context.WithoutCancel(ctx), 0, o.syncTimeout); err != nil {
		c.stop(ctx)
		return nil, err
	}
	return c, nil
}

// startWriters writes at rate, at most total ops, until stopWriters.
func (c *caseRun) startWriters(ctx context.Context, rate float64, total int64) error {
	w, err := watchload.StartWriting(context.WithoutCancel(ctx), c.env, c.l.kvs, c.l.wl,
		watchload.WriterOptions{Rate: rate, Total: total, Workers: c.l.workers, Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	c.writing = w
	return nil
}

// stopWriters ends the writes and returns their counts.
func (c *caseRun) stopWriters() report.WriteStats {
	if c.writing == nil {
		return report.WriteStats{}
	}
	ws := c.writing.Stop()
	ws.Latency = c.env.WriteLatency()
	c.writing = nil
	return ws
}

// stop ends the watchers and closes their connections.
func (c *caseRun) stop(ctx context.Context) {
	c.stopWriters()
	c.set.Stop()
	c.topo.Close()
}

// finish stops the writers, waits until every watcher and the recorder
// have seen the final revision, stops the watchers, completes their
// validation and compares each cache with etcd at the watcher's last
// revision.
func (c *caseRun) finish(ctx context.Context) (report.WriteStats, Validation, error) {
	ws := c.stopWriters()
	final, err := c.l.s.revision(ctx)
	if err != nil {
		c.stop(ctx)
		return ws, Validation{}, err
	}
	unsynced := c.set.WaitSynced(ctx, final, 100*time.Millisecond, 30*time.Second)
	var last int64
	for _, r := range c.refls {
		last = max(last, r.LastRevision())
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c.l.rec.WaitFor(wctx, max(last, final), 100*time.Millisecond)
	cancel()
	c.stop(ctx)
	for _, r := range c.refls {
		r.Finish()
	}
	if err := c.set.CompareCaches(ctx, c.l.s.admin, c.env.Violations); err != nil {
		return ws, Validation{}, err
	}
	// A watcher that never confirmed the end counts as unverified.
	return ws, validation(c.env, c.refls, unsynced), nil
}

// validation counts an Env's violations (watchload.ValidationOf) over a
// case's stopped reflectors, whose unverified events it sums, of which
// unsynced did not confirm the final revision.
func validation(env *watchload.Env, refls []*watchload.Reflector, unsynced int) Validation {
	var unverified int64
	for _, r := range refls {
		unverified += r.Stats().Unverified
	}
	return fromReport(watchload.ValidationOf(env, unsynced, unverified, 0))
}

// fromReport is an experiment's view of a load's validation: the counts
// by kind, the unverified events and unsynced watchers in one count, and
// the samples.
func fromReport(rv report.Validation) Validation {
	return Validation{
		Lost: rv.Lost, Duplicated: rv.Duplicated, OutOfOrder: rv.OutOfOrder, Atomic: rv.Atomic, Resumable: rv.Resumable,
		Bookmarkable: rv.Bookmarkable, Unexpected: rv.Unexpected, PrevKV: rv.PrevKVMismatches, Cache: rv.CacheMismatches,
		RecorderGaps: rv.RecorderGaps, Unverified: rv.UnverifiedEvents + int64(rv.UnsyncedWatchers), HistoryEvents: rv.HistoryEvents,
		RecorderError: rv.RecorderError, Samples: rv.Violations,
	}
}

// add sums two validations (samples of both, up to 50).
func (v Validation) add(o Validation) Validation {
	v.Lost += o.Lost
	v.Duplicated += o.Duplicated
	v.OutOfOrder += o.OutOfOrder
	v.Atomic += o.Atomic
	v.Resumable += o.Resumable
	v.Bookmarkable += o.Bookmarkable
	v.Unexpected += o.Unexpected
	v.PrevKV += o.PrevKV
	v.Cache += o.Cache
	v.RecorderGaps = max(v.RecorderGaps, o.RecorderGaps)
	v.Unverified += o.Unverified
	v.HistoryEvents = max(v.HistoryEvents, o.HistoryEvents)
	if v.RecorderError == "" {
		v.RecorderError = o.RecorderError
	}
	for _, s := range o.Samples {
		if len(v.Samples) < 50 {
			v.Samples = append(v.Samples, s)
		}
	}
	return v
}
