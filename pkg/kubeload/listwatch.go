package kubeload

import (
	"context"
	"errors"
	"fmt"
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
// event to the informer's Observer (or, when its resourceVersion is not a
// revision, counts it: eventRevision), and can hold the informer back:
// while held, its current watch ends as a broken connection would and
// every new LIST or WATCH waits until Release.
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
	lastRev  int64              // the last revision delivered (LastRevision)
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
		lw.startWatch(opts.ResourceVersion)
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

// startWatch tells the Observer of a WATCH from resourceVersion rv (not a
// WATCHLIST, whose start is its initial events' bookmark): a watch from
// revision r delivers every event after r. rv "" (the most recent) and
// "0" (any) are legitimate and name no start revision: no watch is
// started for the checks, which go on as if the previous watch went on
// (client-go's reflector never sends them on a WATCH: it watches from the
// resourceVersion its LIST returned, k8s.io/client-go/tools/cache/
// reflector.go watch). Any other rv that is not a revision came from
// kube-apiserver (a LIST's or an event's), and is counted.
func (lw *listWatch) startWatch(rv string) {
	from, err := revision.ParseResourceVersion(rv)
	switch {
	case err != nil:
		lw.obs.UnparsedResourceVersion("", fmt.Errorf("WATCH from %w", err))
	case from > 0:
		lw.obs.StartWatch(from + 1)
	}
}

// eventRevision is the revision of an object a watch delivered, in an
// event or a bookmark: kube-apiserver sets its resourceVersion to the
// decimal etcd revision, "" for revision 0
// (k8s.io/apiserver/pkg/storage/api_object_versioner.go UpdateObject), so
// "" and "0", which ParseResourceVersion takes for "unset", are as wrong
// as text. The error wraps revision.ErrInvalidResourceVersion and names
// the event type.
func eventRevision(typ watch.EventType, rv string) (int64, error) {
	rev, err := revision.ParseResourceVersion(rv)
	if err == nil && rev == 0 {
		err = fmt.Errorf("%w %q: not a revision", revision.ErrInvalidResourceVersion, rv)
	}
	if err != nil {
		return 0, fmt.Errorf("%s event: %w", typ, err)
	}
	return rev, nil
}

// watchEvent is the WatchEvent of one ADDED, MODIFIED or DELETED event of
// the object at key, at revision rev: client-go's events carry no create
// revision, and kube-apiserver sends ADDED for a create (or for an object
// that comes to match the watch's label selector, which lwbench's objects
// never do: their run label is set at creation).
func watchEvent(typ watch.EventType, key string, rev int64) watchload.WatchEvent {
	ev := watchload.WatchEvent{Key: []byte(key), Revision: rev, Create: typ == watch.Added}
	if typ == watch.Deleted {
		ev.Type = watchload.EventDelete
	}
	return ev
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

// LastRevision is the last revision a watch of the informer delivered,
// in an event or a bookmark (0 if none); resourceVersions that are not
// revisions are counted where they arrive and left out.
func (lw *listWatch) LastRevision() int64 {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.lastRev
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
			key := keyspace.Build(keyspace.Key{Prefix: lw.prefix, Resource: lw.resource, Namespace: m.GetNamespace(), Name: m.GetName()})
			rev, err := eventRevision(ev.Type, rv)
			if err != nil {
				lw.obs.UnparsedResourceVersion(key, err)
				break
			}
			lw.obs.Event(watchEvent(ev.Type, key, rev), at)
			lw.setLastRevision(rev)
		case watch.Bookmark:
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				break
			}
			rv := m.GetResourceVersion()
			lw.log.update(func() { r.Bookmarks++; r.ResultRV = rv })
			initialEnd := inInitial && m.GetAnnotations()[initialEventsEnd] == "true"
			if initialEnd {
				inInitial = false
				end := lw.now()
				lw.log.update(func() { r.InitialEventsEnd, r.InitialEventsBytes = end, r.bytes.Load() })
			}
			rev, err := eventRevision(ev.Type, rv)
			switch {
			case err != nil:
				lw.obs.UnparsedResourceVersion("", err)
			case initialEnd:
				lw.obs.StartWatch(rev + 1)
			default:
				lw.obs.Progress(rev)
			}
			if err == nil {
				lw.setLastRevision(rev)
			}
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

func (lw *listWatch) setLastRevision(rev int64) {
	lw.mu.Lock()
	lw.lastRev = rev
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
