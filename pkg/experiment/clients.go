package experiment

import (
	"context"
	"time"

	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// StackFactory starts real kube-apiservers in front of t with
// --etcd-prefix prefix and kube-apiserver's own compactor every
// compactionInterval (negative: off, while the experiment compacts etcd
// itself with kube-apiserver's algorithm, when it needs to), and returns
// them as a kubeload.Stack and a function that stops them, to be called
// once, also after an error.
type StackFactory func(ctx context.Context, t watchload.Target, prefix string, compactionInterval time.Duration) (kubeload.Stack, func(), error)

// clients are one case's informers and writers, started by
// load.startCase: lwbench's model of client-go reading etcd directly
// (modelClients, a watchload.Case), or real client-go informers and
// writers through kube-apiserver (apiClients, a kubeload.Case). An
// experiment's script is the same over both.
type clients interface {
	// informers returns the case's informers, informer i with ID i.
	informers() []informer
	// write starts the case's writers updating the load's pods at rate,
	// at most total writes, open loop; they outlive ctx's cancellation
	// until finish or close.
	write(ctx context.Context, rate float64, total int64) error
	// holdAll holds every informer and waits until each has stopped; it
	// returns the highest revision any of them will resume after.
	holdAll(ctx context.Context) (int64, error)
	// nudge lets idle informers learn the store's revision: the model's
	// informers ask their streams for progress notifications; client-go
	// through kube-apiserver gets bookmarks on kube-apiserver's own
	// schedule, so nudge does nothing there.
	nudge(ctx context.Context)
	// stopWrites ends the writes and returns what the writers did.
	stopWrites() report.WriteStats
	// validate waits until every informer has seen revision final, stops
	// the informers and validates the case against the load's history:
	// the experiment's view of the validation.
	validate(ctx context.Context, final int64) (Validation, error)
	// close stops what the case runs; it may be called more than once.
	close()
}

// informer is one informer of a case.
type informer interface {
	ID() int
	// Hold breaks its watch off and holds its next request until Release.
	Hold()
	Release()
	// LastRevision is the newest revision it has seen.
	LastRevision() int64
	// relists returns its LIST phases after the first, in order.
	relists() []relist
}

// relist is one LIST phase of an informer after its first.
type relist struct {
	// at is its first request, duration until its last page (or the end
	// of a WATCHLIST's initial events); both from the experiment's epoch.
	at, duration time.Duration
	// requests are its LIST (or WATCHLIST) requests, failed attempts
	// included; pages those of the attempt that succeeded.
	requests int
	pages    int64
	// objects and bytes are what it read: keys and their key and value
	// bytes (the model, from etcd), or objects and response bytes
	// (client-go, from kube-apiserver).
	objects, bytes int64
	// expired counts its requests answered 410: ErrCompacted, or older
	// than kube-apiserver's watch cache holds.
	expired int
	// backoff is the pause before it.
	backoff time.Duration
	// ok is true when it ended with the state listed.
	ok bool
}

// modelClients are the etcd-direct model's informers and writers.
type modelClients struct {
	l *load
	c *watchload.Case
}

var _ clients = (*modelClients)(nil)

func (m *modelClients) informers() []informer {
	refls := m.c.Reflectors()
	out := make([]informer, len(refls))
	for i, r := range refls {
		out[i] = modelInformer{r}
	}
	return out
}

func (m *modelClients) write(ctx context.Context, rate float64, total int64) error {
	return m.c.Write(context.WithoutCancel(ctx), m.l.wl, watchload.WriterOptions{Rate: rate, Total: total, Workers: m.l.workers, Timeout: 10 * time.Second})
}

func (m *modelClients) holdAll(ctx context.Context) (int64, error) {
	return watchload.HoldAll(ctx, m.c.Reflectors())
}

func (m *modelClients) nudge(ctx context.Context) {
	for _, st := range m.c.Streams() {
		st.RequestProgress(ctx)
	}
}

func (m *modelClients) stopWrites() report.WriteStats { return m.c.StopWrites() }

// validate: a watcher that never confirmed the end counts as unverified
// (watchload.Case.Validate).
func (m *modelClients) validate(ctx context.Context, final int64) (Validation, error) {
	unsynced := m.c.Confirm(ctx, final, 100*time.Millisecond, 30*time.Second)
	v, err := m.c.Validate(ctx, 100*time.Millisecond, unsynced)
	if err != nil {
		return Validation{}, err
	}
	return fromReport(v), nil
}

func (m *modelClients) close() { m.c.Close() }

// modelInformer is one of the model's reflectors.
type modelInformer struct{ *watchload.Reflector }

func (r modelInformer) relists() []relist {
	lists := r.Lists()
	if len(lists) < 2 {
		return nil
	}
	out := make([]relist, 0, len(lists)-1)
	for _, lr := range lists[1:] {
		rl := relist{at: lr.At, duration: lr.Duration, requests: len(lr.Attempts), pages: int64(lr.Pages), objects: lr.Objects,
			bytes: lr.Bytes, backoff: lr.Backoff, ok: lr.Err == nil && lr.Revision != 0}
		for _, a := range lr.Attempts {
			if a.Err != nil && a.Revision == 0 {
				rl.expired++
			}
		}
		out = append(out, rl)
	}
	return out
}

// apiClients are client-go informers and writers through kube-apiserver.
type apiClients struct {
	c *kubeload.Case
}

var _ clients = (*apiClients)(nil)

func (a *apiClients) informers() []informer {
	out := make([]informer, len(a.c.Informers().Informers))
	for i := range out {
		out[i] = apiInformer{c: a.c, i: i}
	}
	return out
}

func (a *apiClients) write(ctx context.Context, rate float64, total int64) error {
	return a.c.Write(context.WithoutCancel(ctx), watchload.WriterOptions{Rate: rate, Total: total, Timeout: 10 * time.Second})
}

func (a *apiClients) holdAll(ctx context.Context) (int64, error) { return a.c.HoldAll(ctx) }

func (a *apiClients) nudge(context.Context) {}

func (a *apiClients) stopWrites() report.WriteStats { return a.c.StopWrites() }

// validate: an informer whose cache did not reach etcd's state at final
// within 30 s counts as unsynced, with its differences as cache
// violations (kubeload.Case.Confirm).
func (a *apiClients) validate(ctx context.Context, final int64) (Validation, error) {
	unsynced := a.c.Confirm(ctx, final, 30*time.Second)
	return fromReport(a.c.Validate(ctx, unsynced)), nil
}

func (a *apiClients) close() { a.c.Close() }

// apiInformer is informer i of a kubeload.Case.
type apiInformer struct {
	c *kubeload.Case
	i int
}

func (a apiInformer) ID() int             { return a.i }
func (a apiInformer) Hold()               { a.c.Informers().Hold(a.i) }
func (a apiInformer) Release()            { a.c.Informers().Release(a.i) }
func (a apiInformer) LastRevision() int64 { return a.c.Informers().LastRevision(a.i) }

func (a apiInformer) relists() []relist {
	rs := a.c.Relists()[a.i]
	out := make([]relist, len(rs))
	for i, r := range rs {
		out[i] = relist{at: time.Duration(r.AtMs * float64(time.Millisecond)), duration: time.Duration(r.DurationMs * float64(time.Millisecond)),
			requests: r.Pages + r.FailedRequests, pages: int64(r.Pages), objects: r.Objects, bytes: r.Bytes, expired: r.Expired,
			backoff: time.Duration(r.BackoffMs * float64(time.Millisecond)), ok: true}
	}
	return out
}
