package watchload

import (
	"fmt"
	"time"
)

// ID returns the reflector's id.
func (r *Reflector) ID() int { return r.o.ID }

// Options returns the options the reflector was made with, defaults
// filled in.
func (r *Reflector) Options() ReflectorOptions { return r.o }

// Synced is closed once the first LIST has succeeded (or, watching only,
// once the watch is created).
func (r *Reflector) Synced() <-chan struct{} { return r.synced }

// Done is closed when Run has returned.
func (r *Reflector) Done() <-chan struct{} { return r.stopped }

// LastRevision returns the reflector's lastSyncResourceVersion: its list
// revision, its last event or its last progress notification.
func (r *Reflector) LastRevision() int64 { return r.lastSync.Load() }

// Lists returns every LIST phase so far, in order.
func (r *Reflector) Lists() []ListRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ListRecord(nil), r.lists...)
}

// ReflectorStats counts what a reflector did.
type ReflectorStats struct {
	Events           int64 // events received
	ProgressNotifies int64 // progress notifications received
	Sessions         int64 // Watch calls
	PrevKVMissing    int64 // updates and deletes without prevKV
	// Lists counts LIST phases, the initial one included.
	Lists int
	// CacheObjects is the cache's size.
	CacheObjects int
	// HeldBack is true if the reflector was ever held back.
	HeldBack bool
	// Unverified counts events the history never covered.
	Unverified int64
}

// Stats returns the reflector's counters.
func (r *Reflector) Stats() ReflectorStats {
	_, wasHeld := r.conn.state()
	r.mu.Lock()
	lists := len(r.lists)
	r.mu.Unlock()
	return ReflectorStats{
		Events: r.events.Load(), ProgressNotifies: r.progressNotifies.Load(), Sessions: r.sessions.Load(),
		PrevKVMissing: r.cache.prevKVMiss.Load(), Lists: lists, CacheObjects: r.cache.len(),
		HeldBack: wasHeld, Unverified: r.val.unverified,
	}
}

// The phases of a reflector's Run, as ReflectorState reports them.
const (
	PhaseList    = "list"    // listing (or about to)
	PhaseWatch   = "watch"   // a watch is open
	PhaseHeld    = "held"    // held back, waiting for Release
	PhasePause   = "pause"   // the pause between ListAndWatch iterations
	PhaseStopped = "stopped" // Run has returned
)

// ReflectorState is what a reflector is doing at one moment: for saying
// why one did not make progress.
type ReflectorState struct {
	Phase string        // a Phase* constant
	Since time.Duration // when the phase began, since the Env's epoch
	// WatchFrom is the start revision of the current or last watch (0
	// before the first); WatchEnd why the last one ended (nil while the
	// first is open).
	WatchFrom int64
	WatchEnd  error
	// LastRevision is lastSyncResourceVersion.
	LastRevision int64
	Lists        int   // LIST phases so far
	LastListErr  error // the last LIST phase's error
	Sessions     int64 // Watch calls
	Events       int64 // events received
}

// String is one line: phase, since, revisions, counters and errors.
func (s ReflectorState) String() string {
	out := fmt.Sprintf("%s since %v, last revision %d, %d lists, %d watches (last from %d), %d events",
		s.Phase, s.Since.Round(time.Millisecond), s.LastRevision, s.Lists, s.Sessions, s.WatchFrom, s.Events)
	if s.WatchEnd != nil {
		out += fmt.Sprintf(", last watch ended: %v", s.WatchEnd)
	}
	if s.LastListErr != nil {
		out += fmt.Sprintf(", last list failed: %v", s.LastListErr)
	}
	return out
}

// State returns what the reflector is doing now.
func (r *Reflector) State() ReflectorState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := ReflectorState{Phase: r.phase, Since: r.phaseAt, WatchFrom: r.watchFrom, WatchEnd: r.watchEnd,
		LastRevision: r.lastSync.Load(), Lists: len(r.lists), Sessions: r.sessions.Load(), Events: r.events.Load()}
	if n := len(r.lists); n > 0 {
		st.LastListErr = r.lists[n-1].Err
	}
	return st
}

// setPhase records what Run does from now on.
func (r *Reflector) setPhase(phase string) {
	r.mu.Lock()
	r.phase, r.phaseAt = phase, r.env.Since()
	r.mu.Unlock()
}

// CreationLatency returns how long a watch-only reflector's first watch
// took from the Watch call to etcd's created response; 0 before that.
func (r *Reflector) CreationLatency() time.Duration { return time.Duration(r.creation.Load()) }

// Cache returns a copy of the cache (key -> mod_revision). Call it after
// Run has returned for a consistent view.
// Cache returns a copy of the cache (key -> mod_revision). Call it after
// Run has returned for a consistent view.
func (r *Reflector) Cache() map[string]int64 { return r.cache.snapshot() }
