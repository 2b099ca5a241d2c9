package watchload

import (
	"context"
	"errors"
	"slices"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// errConnectionBroken is the cause of a watch that holdClient.Hold ended.
var errConnectionBroken = errors.New("connection broken to hold the watcher back")

// holdClient is the Client a reflector lists and watches through, with a
// switch that breaks its connection, for tests and for scenarios that
// hold watchers back across a compaction. Hold ends every open watch as a
// dropped connection would (responses already on their way are still
// delivered, then the channel closes) and makes every later Watch call
// wait until Release; lists pass. The reflector treats a broken watch as
// client-go treats a watch stream that closed: it watches again from its
// last revision, without a list, and so waits in Watch until Release. A
// worked timeline, the reflector at revision R when held, C compacted:
//
//	Hold                 -> the watch from W <= R ends; events up to R still arrive
//	Watch from R+1       -> waits: the reflector has stopped (parked), at R
//	compact to C > R+1
//	Release              -> the watch from R+1 starts: canceled, compact revision C
//	                        (a compaction to C <= R+1 would leave it intact)
//
// A holdClient is safe for concurrent use.
type holdClient struct {
	Client

	mu       sync.Mutex
	held     bool          // between Hold and Release
	wasHeld  bool          // Hold was ever called
	release  chan struct{} // closed by Release
	parked   chan struct{} // closed once a Watch call waits while held
	isParked bool          // parked is closed
	watches  []*heldWatch  // the open watches
	// onPark, if set, is called when a Watch call starts waiting for
	// Release, without c.mu held.
	onPark func()
}

// heldWatch is one open watch: its context, which Hold cancels.
type heldWatch struct {
	ch     clientv3.WatchChan
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newHoldClient(c Client, onPark func()) *holdClient {
	return &holdClient{Client: c, onPark: onPark}
}

// Watch watches as the wrapped client does, once the connection is not
// held: while it is, Watch waits for Release, and returns a closed channel
// if ctx ends first. The caller hands the channel to endWatch once it has
// closed.
func (c *holdClient) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	c.mu.Lock()
	for c.held {
		release := c.release
		if !c.isParked {
			c.isParked = true
			close(c.parked)
		}
		c.mu.Unlock()
		if c.onPark != nil {
			c.onPark()
		}
		select {
		case <-release:
		case <-ctx.Done():
			ch := make(chan clientv3.WatchResponse)
			close(ch)
			return ch
		}
		c.mu.Lock()
	}
	wctx, cancel := context.WithCancelCause(ctx)
	w := &heldWatch{ctx: wctx, cancel: cancel}
	c.watches = append(c.watches, w)
	c.mu.Unlock()
	ch := c.Client.Watch(wctx, key, opts...)
	c.mu.Lock()
	w.ch = ch
	c.mu.Unlock()
	return ch
}

// endWatch forgets the watch whose channel wch has closed and reports
// whether Hold ended it.
func (c *holdClient) endWatch(wch clientv3.WatchChan) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.watches, func(w *heldWatch) bool { return w.ch == wch })
	if i < 0 {
		return false
	}
	w := c.watches[i]
	c.watches = slices.Delete(c.watches, i, i+1)
	w.cancel(nil)
	return errors.Is(context.Cause(w.ctx), errConnectionBroken)
}

// Hold breaks the connection: it ends the open watches and holds every
// later Watch call until Release. It returns at once; stopped tells when
// a Watch call waits.
func (c *holdClient) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held {
		return
	}
	c.held, c.wasHeld = true, true
	c.release, c.parked, c.isParked = make(chan struct{}), make(chan struct{}), false
	for _, w := range c.watches {
		w.cancel(errConnectionBroken)
	}
}

// Release restores the connection: waiting and later Watch calls start
// their watches.
func (c *holdClient) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held {
		c.held = false
		close(c.release)
	}
}

// stopped returns, while the connection is held, a channel closed once a
// Watch call waits for Release, and whether it is held.
func (c *holdClient) stopped() (<-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parked, c.held
}

// state reports whether the connection is held now and whether it was
// ever held.
func (c *holdClient) state() (held, wasHeld bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held, c.wasHeld
}

// Hold breaks the reflector's connection (holdClient.Hold): its watch
// stops, and it does not watch again until Release. From now on, for the
// rest of the run, its events are timed apart from those of the
// reflectors never held back (report.DeliveryStats.HeldBack): those of
// the hold may arrive late by up to its length. It returns at once;
// HeldRevision waits until the reflector has stopped.
func (r *Reflector) Hold() {
	r.lat.holdBack()
	r.conn.Hold()
}

// HeldRevision waits until a held reflector has stopped (its watch ended,
// events already on their way included, or the list or pause it was in
// finished, and it waits to watch again) and returns the revision R it
// will resume after: its next watch starts from R+1, which etcd refuses
// as compacted once the compact revision is above R+1
// (revision.Compacted). It returns ctx's error if ctx ends first, and at
// once if the reflector is not held or Run has returned.
func (r *Reflector) HeldRevision(ctx context.Context) (int64, error) {
	if parked, held := r.conn.stopped(); held {
		select {
		case <-parked:
		case <-r.stopped:
		case <-ctx.Done():
			return r.lastSync.Load(), ctx.Err()
		}
	}
	return r.lastSync.Load(), nil
}

// isHeld reports whether the reflector is held back now.
func (r *Reflector) isHeld() bool {
	held, _ := r.conn.state()
	return held
}

// Release restores a held reflector's connection: it watches again from
// its last revision + 1, as client-go does after a watch stream closes:
// no relist unless that revision has been compacted meanwhile.
func (r *Reflector) Release() { r.conn.Release() }
