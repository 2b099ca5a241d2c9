package watchload

import (
	"context"
	"sync"
	"time"
)

// LoadStatus is a live view of a run, for a status line on a console (not
// to be confused with etcd's progress requests and notifications).
type LoadStatus struct {
	Phase            string        // seed, sync, steady, drain, stop (Run's phases)
	Elapsed          time.Duration // since the run began
	WritesPlanned    int64         // writes scheduled in all
	WritesDone       int64         // writes that succeeded so far
	WriteErrors      int64         // writes that failed so far
	Events           int64         // events received by all watchers
	Relists          int           // LIST phases after the first
	Violations       int64         // violations found so far
	SyncedWatchers   int           // watchers past their first LIST
	Watchers         int           // watchers in all
	RecorderRevision int64         // revision the history is complete to
}

// liveState is a Session's live view: what it is doing and what it has
// started, fed to an OnStatus callback.
type liveState struct {
	start    time.Time
	watchers int // the watchers planned, reported as LoadStatus.Watchers
	onPhase  []func(string)
	mu       sync.Mutex
	phase    string
	refls    []*Reflector
	rec      *Recorder
	writers  *Writers
	planned  int64
}

func (l *liveState) setPhase(p string) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
	for _, f := range l.onPhase {
		f(p)
	}
}

func (l *liveState) setWatchers(r []*Reflector, rec *Recorder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refls, l.rec = r, rec
}

func (l *liveState) setWriters(w *Writers, planned int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writers, l.planned = w, planned
}

func (l *liveState) snapshot() LoadStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := LoadStatus{Phase: l.phase, Elapsed: time.Since(l.start), WritesPlanned: l.planned, Watchers: l.watchers}
	if l.writers != nil {
		wp := l.writers.Progress()
		p.WritesDone, p.WriteErrors = wp.Completed, wp.Errors
	}
	for _, r := range l.refls {
		p.Events += r.events.Load()
		select {
		case <-r.Synced():
			p.SyncedWatchers++
		default:
		}
		r.mu.Lock()
		p.Relists += max(len(r.lists)-1, 0)
		r.mu.Unlock()
		p.Violations = r.env.Violations.Total()
	}
	if l.rec != nil {
		p.RecorderRevision = l.rec.Watermark()
	}
	return p
}

// report calls onStatus every interval until the returned stop is
// called or ctx ends; with a nil onStatus it does nothing.
func (l *liveState) report(ctx context.Context, onStatus func(LoadStatus), interval time.Duration) (stop func()) {
	if onStatus == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				onStatus(l.snapshot())
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
