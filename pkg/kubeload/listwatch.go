package kubeload

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/revision"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// initialEventsEnd is the annotation of the bookmark that ends a
// WATCHLIST's initial events (k8s.io/apimachinery/pkg/apis/meta/v1
// InitialEventsAnnotationKey).
const initialEventsEnd = metav1.InitialEventsAnnotationKey

// listWatch is the ListerWatcher of one informer: client-go's reflector
// calls it exactly as it calls cache.NewListWatchFromClient's, and it
// records every request it forwards (requestLog), reports every watch
// event to the informer's Observer, and can hold the informer back: while
// held, its current watch ends as a broken connection would and every new
// LIST or WATCH waits until Release.
//
// It does not implement watchlist's IsWatchListSemanticsUnSupported, so
// client-go uses WatchList with it whenever the WatchListClient gate is on
// (k8s.io/client-go/tools/cache/reflector.go NewReflectorWithOptions).
type listWatch struct {
	id       int
	resource string // e.g. pods
	prefix   string // kube-apiserver's --etcd-prefix, e.g. /registry
	selector string // label selector of every LIST and WATCH; "": none
	// pageSize, when set, is the limit of every LIST (0: unpaginated), as
	// the reflector's WatchListPageSize would set it.
	pageSize *int64
	client   rest.Interface
	log      *requestLog
	env      *watchload.Env
	obs      *watchload.Observer

	mu       sync.Mutex
	held     bool
	released chan struct{}      // closed by Release
	current  *instrumentedWatch // the open watch, if any
	lastRV   string             // the last resourceVersion delivered
	running  sync.WaitGroup     // the watches' forwarding goroutines
}

var (
	_ cache.ListerWatcher            = (*listWatch)(nil)
	_ cache.ListerWatcherWithContext = (*listWatch)(nil)
)

// List implements cache.ListerWatcher.
func (lw *listWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch implements cache.ListerWatcher.
func (lw *listWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// waitReleased blocks while the informer is held, until Release or ctx
// ends.
func (lw *listWatch) waitReleased(ctx context.Context) error {
	for {
		lw.mu.Lock()
		held, ch := lw.held, lw.released
		lw.mu.Unlock()
		if !held {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (lw *listWatch) now() time.Duration { return time.Duration(lw.env.Now()) }

// ListWithContext implements cache.ListerWatcherWithContext: one LIST
// (page) of the resource in every namespace.
func (lw *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if err := lw.waitReleased(ctx); err != nil {
		return nil, err
	}
	if lw.selector != "" {
		opts.LabelSelector = lw.selector
	}
	if lw.pageSize != nil {
		opts.Limit = *lw.pageSize
	}
	r := lw.log.begin(Request{Informer: lw.id, Verb: VerbList, ResourceVersion: opts.ResourceVersion,
		ResourceVersionMatch: string(opts.ResourceVersionMatch), Limit: opts.Limit, Continue: opts.Continue != "", Start: lw.now()})
	obj, err := lw.client.Get().Resource(lw.resource).VersionedParams(&opts, scheme.ParameterCodec).Do(withRequest(ctx, r)).Get()
	if err != nil {
		lw.log.end(r, lw.now(), outcomeOf(err), err)
		return nil, err
	}
	n := meta.LenList(obj)
	rv := ""
	if l, lerr := meta.ListAccessor(obj); lerr == nil {
		rv = l.GetResourceVersion()
	}
	lw.log.update(func() { r.Objects, r.ResultRV = int64(n), rv })
	lw.log.end(r, lw.now(), OutcomeOK, nil)
	return obj, nil
}

// WatchWithContext implements cache.ListerWatcherWithContext: one WATCH
// of the resource in every namespace, instrumented.
func (lw *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if err := lw.waitReleased(ctx); err != nil {
		return nil, err
	}
	if lw.selector != "" {
		opts.LabelSelector = lw.selector
	}
	verb := VerbWatch
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if initial {
		verb = VerbWatchList
	}
	r := lw.log.begin(Request{Informer: lw.id, Verb: verb, ResourceVersion: opts.ResourceVersion,
		ResourceVersionMatch: string(opts.ResourceVersionMatch), Limit: opts.Limit, SendInitialEvents: initial, Start: lw.now()})
	opts.Watch = true
	wctx, cancel := context.WithCancel(ctx)
	inner, err := lw.client.Get().Resource(lw.resource).VersionedParams(&opts, scheme.ParameterCodec).Watch(withRequest(wctx, r))
	if err != nil {
		cancel()
		lw.log.end(r, lw.now(), outcomeOf(err), err)
		return nil, err
	}
	w := &instrumentedWatch{lw: lw, r: r, inner: inner, cancel: cancel, initial: initial,
		out: make(chan watch.Event), stop: make(chan struct{})}
	if !initial {
		// A watch from resourceVersion r delivers every event after r.
		from, perr := revision.ParseResourceVersion(opts.ResourceVersion)
		if perr == nil && from > 0 {
			lw.obs.StartWatch(from + 1)
		}
	}
	lw.mu.Lock()
	held := lw.held
	lw.current = w
	lw.mu.Unlock()
	lw.running.Add(1)
	go func() {
		defer lw.running.Done()
		w.run()
	}()
	if held {
		w.breakOff()
	}
	return w, nil
}

// Hold holds the informer back: its current watch ends as a broken
// connection would, and its next LIST or WATCH waits until Release. Its
// events from now on are timed apart (Observer.HoldBack).
func (lw *listWatch) Hold() {
	lw.obs.HoldBack()
	lw.mu.Lock()
	if lw.held {
		lw.mu.Unlock()
		return
	}
	lw.held, lw.released = true, make(chan struct{})
	w := lw.current
	lw.mu.Unlock()
	if w != nil {
		w.breakOff()
	}
}

// Release lets a held informer list and watch again.
func (lw *listWatch) Release() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.held {
		lw.held = false
		close(lw.released)
	}
}

// LastRV is the last resourceVersion a watch of the informer delivered.
func (lw *listWatch) LastRV() string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.lastRV
}

// instrumentedWatch forwards one watch's events to the reflector and
// records them.
type instrumentedWatch struct {
	lw      *listWatch
	r       *openRequest
	inner   watch.Interface
	cancel  context.CancelFunc
	initial bool // a WATCHLIST: initial events until the bookmark

	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
	broken   bool // ended by a hold
}

// ResultChan implements watch.Interface.
func (w *instrumentedWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface: the reflector ends the watch.
func (w *instrumentedWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.inner.Stop()
	w.cancel()
}

// breakOff ends the watch as a broken connection would: the reflector
// sees its channel close.
func (w *instrumentedWatch) breakOff() {
	w.lw.mu.Lock()
	w.broken = true
	w.lw.mu.Unlock()
	w.Stop()
}

func (w *instrumentedWatch) run() {
	defer close(w.out)
	lw, r := w.lw, w.r
	outcome := OutcomeClosed
	var werr error
	inInitial := w.initial
	for {
		var ev watch.Event
		var ok bool
		select {
		case ev, ok = <-w.inner.ResultChan():
		case <-w.stop:
			ok = false
		}
		if !ok {
			break
		}
		at := lw.env.Now()
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				break
			}
			rv := m.GetResourceVersion()
			if inInitial {
				lw.log.update(func() { r.Objects++; r.ResultRV = rv })
				break
			}
			lw.log.update(func() { r.Events++; r.ResultRV = rv })
			if rev, err := revision.ParseResourceVersion(rv); err == nil {
				key := keyspace.Build(keyspace.Key{Prefix: lw.prefix, Resource: lw.resource, Namespace: m.GetNamespace(), Name: m.GetName()})
				lw.obs.Event(key, rev, ev.Type != watch.Deleted, ev.Type == watch.Added, at)
			}
			lw.setLastRV(rv)
		case watch.Bookmark:
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				break
			}
			rv := m.GetResourceVersion()
			rev, perr := revision.ParseResourceVersion(rv)
			lw.log.update(func() { r.Bookmarks++; r.ResultRV = rv })
			if inInitial && m.GetAnnotations()[initialEventsEnd] == "true" {
				inInitial = false
				end := lw.now()
				lw.log.update(func() { r.InitialEventsEnd, r.InitialEventsBytes = end, r.bytes.Load() })
				if perr == nil {
					lw.obs.StartWatch(rev + 1)
				}
			} else if perr == nil {
				lw.obs.Progress(rev)
			}
			lw.setLastRV(rv)
		case watch.Error:
			werr = apierrors.FromObject(ev.Object)
			outcome = outcomeOf(werr)
		}
		select {
		case w.out <- ev:
		case <-w.stop:
		}
	}
	lw.mu.Lock()
	broken := w.broken
	if lw.current == w {
		lw.current = nil
	}
	lw.mu.Unlock()
	select {
	case <-w.stop:
		// Stopped by the informer (or a hold): an error the stop itself
		// caused (a canceled stream) is no outcome of the request.
		if outcome == OutcomeClosed || outcome == OutcomeError {
			outcome, werr = OutcomeStopped, nil
		}
	default:
	}
	if broken && outcome == OutcomeStopped {
		werr = errors.New("held: the watch was broken off")
	}
	lw.log.end(r, lw.now(), outcome, werr)
}

func (lw *listWatch) setLastRV(rv string) {
	lw.mu.Lock()
	lw.lastRV = rv
	lw.mu.Unlock()
}

// outcomeOf classifies a request's error.
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case apierrors.IsResourceExpired(err), apierrors.IsGone(err):
		return OutcomeExpired
	case apierrors.IsTooManyRequests(err):
		return OutcomeThrottled
	case isTooLargeRV(err):
		return OutcomeTooLargeRV
	case errors.Is(err, context.Canceled):
		return OutcomeStopped
	}
	return OutcomeError
}

// isTooLargeRV reports kube-apiserver's "too large resource version"
// error (k8s.io/apiserver/pkg/storage/errors.go NewTooLargeResourceVersionError:
// a Timeout status with the ResourceVersionTooLarge cause).
func isTooLargeRV(err error) bool {
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		return false
	}
	if d := s.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Type == metav1.CauseTypeResourceVersionTooLarge {
				return true
			}
		}
	}
	return false
}

// watching reports whether a watch of the informer is still open (its
// forwarding goroutine has not ended).
func (lw *listWatch) watching() bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.current != nil
}
