package watchload

import (
	"sync"
	"sync/atomic"
)

// watermark is a revision a client has reached (a reflector's
// lastSyncResourceVersion, the recorder's complete history) and the
// goroutines waiting for it to reach theirs. Load is one atomic read and
// raising it with no one waiting takes no lock, as it runs once per event.
type watermark struct {
	rev      atomic.Int64
	nwaiters atomic.Int32 // len(waiters), read without mu
	mu       sync.Mutex
	waiters  []revWaiter
}

type revWaiter struct {
	rev int64
	ch  chan struct{}
}

// Load returns the revision.
func (w *watermark) Load() int64 { return w.rev.Load() }

// Store sets the revision, lower or higher, and wakes the waits it
// satisfies.
func (w *watermark) Store(rev int64) {
	w.rev.Store(rev)
	if w.nwaiters.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := w.waiters[:0]
	for _, wt := range w.waiters {
		if wt.rev <= rev {
			close(wt.ch)
		} else {
			kept = append(kept, wt)
		}
	}
	w.waiters = kept
	w.nwaiters.Store(int32(len(kept)))
}

// wait returns a channel closed once the revision is at least rev, and a
// function that withdraws the wait.
func (w *watermark) wait(rev int64) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rev.Load() >= rev {
		close(ch)
		return ch, func() {}
	}
	w.waiters = append(w.waiters, revWaiter{rev: rev, ch: ch})
	w.nwaiters.Store(int32(len(w.waiters)))
	// A Store between the check above and nwaiters.Store may have seen no
	// waiter; it stored the revision first, so it is visible now.
	if w.rev.Load() >= rev {
		w.waiters = w.waiters[:len(w.waiters)-1]
		w.nwaiters.Store(int32(len(w.waiters)))
		close(ch)
		return ch, func() {}
	}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, wt := range w.waiters {
			if wt.ch == ch {
				w.waiters = append(w.waiters[:i], w.waiters[i+1:]...)
				w.nwaiters.Store(int32(len(w.waiters)))
				return
			}
		}
	}
}
