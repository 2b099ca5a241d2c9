package watchload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Client is what a Reflector needs from etcd; *clientv3.Client satisfies it.
type Client interface {
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan
	RequestProgress(ctx context.Context) error
}

var _ Client = (*clientv3.Client)(nil)

// DefaultPageSize is client-go's pager page size (tools/pager/pager.go
// defaultPageSize), the LIST limit a reflector uses against etcd directly.
const DefaultPageSize = 500

// eventRecord is one event as a watcher received it.
type eventRecord struct {
	rev int64
	// at is the receipt time, as the offset from the run's start.
	at time.Duration
}

// session is one watch: the revision it started from and the highest
// revision the watcher was told it had seen on it (an event or a progress
// notification), which bounds what it must have received.
type session struct {
	from, covered int64
	events        []eventRecord
}

// compactedError is the end of a watch that etcd cancelled because its
// start revision had been compacted.
type compactedError struct{ from, compactRevision int64 }

func (e *compactedError) Error() string {
	return fmt.Sprintf("watch from revision %d: required revision has been compacted (compact revision %d)", e.from, e.compactRevision)
}

var errHeld = errors.New("watch stopped to hold the watcher back")

// Reflector is a client-go reflector reading etcd directly, as a client of
// kube-apiserver with the watch cache disabled would: it LISTs the prefix in
// pages of PageSize pinned to the first page's revision R, WATCHes from R+1
// with prevKV and progress notifications, applies events to its cache, and
// when etcd cancels the watch because its revision was compacted, relists
// (client-go tools/cache/reflector.go ListAndWatch; tools/pager/pager.go).
//
// It records every event's revision and receipt time and checks etcd's
// watch guarantees as it goes: ordered, unique, prevKV consistent with its
// cache.
type Reflector struct {
	id       int
	c        Client
	prefix   string
	pageSize int64
	start    time.Time

	mu        sync.Mutex
	cache     map[string]int64 // key -> mod_revision
	lastRev   int64            // highest revision the watcher knows it has seen
	lists     int
	relists   []relistRecord
	sessions  []*session
	viol      violations
	held      bool
	heldSince int64
	holdReq   chan struct{} // closed to stop the current watch
	release   chan struct{} // closed to resume
	synced    chan struct{} // closed after the first list
	syncOnce  sync.Once
}

// relistRecord is one list after a failed watch.
type relistRecord struct {
	reason                    string
	from, compactRev, listRev int64
	at, took                  time.Duration
	objects, bytes            int64
	pages                     int
}

// violations counts broken guarantees and keeps the first few.
type violations struct {
	outOfOrder, duplicated, prevKV int64
	samples                        []violation
}

type violation struct {
	kind, key, detail string
	rev               int64
}

const maxViolationSamples = 20

func (v *violations) add(kind string, rev int64, key, detail string) {
	switch kind {
	case "out-of-order":
		v.outOfOrder++
	case "duplicated":
		v.duplicated++
	case "prevKV":
		v.prevKV++
	}
	if len(v.samples) < maxViolationSamples {
		v.samples = append(v.samples, violation{kind: kind, rev: rev, key: key, detail: detail})
	}
}

// NewReflector returns a reflector over every key under prefix (which
// should end in "/"), timing events from start.
func NewReflector(id int, c Client, prefix string, pageSize int64, start time.Time) *Reflector {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	return &Reflector{id: id, c: c, prefix: prefix, pageSize: pageSize, start: start, synced: make(chan struct{})}
}

// Synced is closed once the first LIST has completed and the cache holds
// the prefix's state at its revision.
func (r *Reflector) Synced() <-chan struct{} { return r.synced }

// LastRevision returns the highest revision the reflector knows it has
// seen: its list revision, its last event, or its last progress
// notification.
func (r *Reflector) LastRevision() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastRev
}

// Hold stops the reflector's watch, as a network partition or a watch
// timeout would, and keeps it from watching until Release. It returns the
// revision the reflector will resume from, minus one.
func (r *Reflector) Hold() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.held {
		r.held = true
		r.heldSince = r.lastRev
		r.release = make(chan struct{})
		if r.holdReq != nil {
			close(r.holdReq)
			r.holdReq = nil
		}
	}
	return r.lastRev
}

// Release lets a held reflector watch again from its last revision + 1.
func (r *Reflector) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		r.held = false
		close(r.release)
	}
}

// Run lists and watches until ctx ends, then returns nil. It returns an
// error only for a failure it cannot recover from by relisting.
func (r *Reflector) Run(ctx context.Context) error {
	reason := "initial"
	var failed *compactedError
	for {
		at := time.Since(r.start)
		listRev, objects, bytes, pages, err := r.list(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// A transient failure (a defragmenting member, a lost leader):
			// back off briefly and list again, as the reflector's backoff
			// manager does.
			if !sleep(ctx, 100*time.Millisecond) {
				return nil
			}
			continue
		}
		if failed != nil {
			r.mu.Lock()
			r.relists = append(r.relists, relistRecord{
				reason: reason, from: failed.from, compactRev: failed.compactRevision, listRev: listRev,
				at: at, took: time.Since(r.start) - at, objects: objects, bytes: bytes, pages: pages,
			})
			r.mu.Unlock()
		}
		r.syncOnce.Do(func() { close(r.synced) })
		from := listRev + 1
		for {
			err = r.watch(ctx, from)
			if ctx.Err() != nil {
				return nil
			}
			var ce *compactedError
			if errors.As(err, &ce) {
				failed, reason = ce, "compacted"
				break // relist
			}
			if errors.Is(err, errHeld) {
				r.mu.Lock()
				release := r.release
				r.mu.Unlock()
				select {
				case <-release:
				case <-ctx.Done():
					return nil
				}
			} else if !sleep(ctx, 100*time.Millisecond) {
				return nil
			}
			// Resume where the watch left off, as client-go does after a
			// watch ends without an error of its own.
			from = r.LastRevision() + 1
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// list reads every key under the prefix in pages pinned to the first page's
// revision, then replaces the cache. If a later page's revision has been
// compacted meanwhile, it starts over, as client-go's pager falls back to a
// fresh list.
func (r *Reflector) list(ctx context.Context) (rev, objects, bytes int64, pages int, err error) {
	end := clientv3.GetPrefixRangeEnd(r.prefix)
restart:
	cache := make(map[string]int64, len(r.cache))
	rev, objects, bytes, pages = 0, 0, 0, 0
	key := r.prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(r.pageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := r.c.Get(ctx, key, opts...)
		if errors.Is(err, rpctypes.ErrCompacted) && rev != 0 {
			goto restart
		}
		if err != nil {
			return 0, 0, 0, 0, fmt.Errorf("list %s at revision %d: %w", r.prefix, rev, err)
		}
		pages++
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			cache[string(kv.Key)] = kv.ModRevision
			objects++
			bytes += int64(len(kv.Key) + len(kv.Value))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	r.mu.Lock()
	r.cache = cache
	r.lastRev = rev
	r.lists++
	r.mu.Unlock()
	return rev, objects, bytes, pages, nil
}

// watch watches from revision from until ctx ends, the watcher is held
// (errHeld), etcd cancels the watch (a *compactedError when its revision
// was compacted) or the channel closes.
func (r *Reflector) watch(ctx context.Context, from int64) error {
	r.mu.Lock()
	if r.held {
		r.mu.Unlock()
		return errHeld
	}
	hold := make(chan struct{})
	r.holdReq = hold
	s := &session{from: from, covered: from - 1}
	r.sessions = append(r.sessions, s)
	r.mu.Unlock()

	wctx, cancel := context.WithCancel(WatchContext(ctx))
	defer cancel()
	go func() {
		select {
		case <-hold:
			cancel()
		case <-wctx.Done():
		}
	}()
	wch := r.c.Watch(wctx, r.prefix, clientv3.WithPrefix(), clientv3.WithRev(from),
		clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	var lastEventRev int64
	keysAtRev := map[string]bool{}
	for resp := range wch {
		now := time.Since(r.start)
		if resp.CompactRevision != 0 {
			return &compactedError{from: from, compactRevision: resp.CompactRevision}
		}
		if err := resp.Err(); err != nil {
			return err
		}
		r.mu.Lock()
		if resp.IsProgressNotify() {
			if rv := resp.Header.Revision; rv > r.lastRev {
				r.lastRev = rv
			}
			s.covered = max(s.covered, resp.Header.Revision)
			r.mu.Unlock()
			continue
		}
		for _, ev := range resp.Events {
			rev, key := ev.Kv.ModRevision, string(ev.Kv.Key)
			switch {
			case rev < lastEventRev:
				r.viol.add("out-of-order", rev, key, fmt.Sprintf("after revision %d", lastEventRev))
			case rev == lastEventRev && keysAtRev[key]:
				r.viol.add("duplicated", rev, key, "")
			}
			if rev != lastEventRev {
				clear(keysAtRev)
			}
			keysAtRev[key] = true
			lastEventRev = max(lastEventRev, rev)
			r.apply(ev, rev, key)
			s.events = append(s.events, eventRecord{rev: rev, at: now})
			s.covered = max(s.covered, rev)
			if rev > r.lastRev {
				r.lastRev = rev
			}
		}
		r.mu.Unlock()
	}
	select {
	case <-hold:
		return errHeld
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("watch channel closed")
}

// apply updates the cache with one event and checks its prevKV against it.
// r.mu is held.
func (r *Reflector) apply(ev *clientv3.Event, rev int64, key string) {
	cached, ok := r.cache[key]
	switch ev.Type {
	case mvccpb.Event_PUT:
		if ev.IsCreate() {
			if ok {
				r.viol.add("prevKV", rev, key, fmt.Sprintf("created, but the cache holds mod_revision %d", cached))
			}
		} else if !ok || ev.PrevKv == nil || ev.PrevKv.ModRevision != cached {
			r.viol.add("prevKV", rev, key, fmt.Sprintf("update of mod_revision %d, cache holds %d (present %v)", prevRev(ev), cached, ok))
		}
		r.cache[key] = rev
	case mvccpb.Event_DELETE:
		if !ok || (ev.PrevKv != nil && ev.PrevKv.ModRevision != cached) {
			r.viol.add("prevKV", rev, key, fmt.Sprintf("delete of mod_revision %d, cache holds %d (present %v)", prevRev(ev), cached, ok))
		}
		delete(r.cache, key)
	}
}

func prevRev(ev *clientv3.Event) int64 {
	if ev.PrevKv == nil {
		return 0
	}
	return ev.PrevKv.ModRevision
}

// WatchContext marks ctx as kube-apiserver marks its etcd watches: they
// require a leader, so a member cut off from its cluster ends them
// (k8s.io/apiserver/pkg/storage/etcd3/watcher.go). Every watch and progress
// request of one client that uses it shares one gRPC stream.
func WatchContext(ctx context.Context) context.Context {
	return clientv3.WithRequireLeader(ctx)
}
