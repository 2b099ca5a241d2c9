package watchload

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/clockwait"
)

// histEntry is one event of the recorded history.
type histEntry struct {
	rev    int64
	key    string
	put    bool // false: delete
	create bool // a put that created the key
}

// history is an append-only, revision-ordered log of the events under one
// prefix. One goroutine appends; any number read the published prefix
// without locks. Entries live in fixed chunks so that appending never moves
// what readers hold.
type history struct {
	dir [histMaxChunks]atomic.Pointer[[histChunk]histEntry]
	n   atomic.Int64 // published entries
}

const (
	histChunk     = 4096
	histMaxChunks = 1 << 16 // 268M events
)

var errHistoryFull = errors.New("recorded history is full")

// append publishes e; only the recorder calls it.
func (h *history) append(e histEntry) error {
	i := h.n.Load()
	c := i / histChunk
	if c >= histMaxChunks {
		return errHistoryFull
	}
	chunk := h.dir[c].Load()
	if chunk == nil {
		chunk = new([histChunk]histEntry)
		h.dir[c].Store(chunk)
	}
	chunk[i%histChunk] = e
	h.n.Store(i + 1)
	return nil
}

// len returns the number of published entries.
func (h *history) len() int64 { return h.n.Load() }

// at returns entry i < len().
func (h *history) at(i int64) *histEntry {
	return &h.dir[i/histChunk].Load()[i%histChunk]
}

// search returns the index of the first published entry with revision >=
// rev, or len() if there is none.
func (h *history) search(rev int64) int64 {
	n := h.len()
	return int64(sort.Search(int(n), func(i int) bool { return h.at(int64(i)).rev >= rev }))
}

// Recorder is the oracle the watchers are validated against: one watch on
// the whole key space, from a revision on, that records every event under
// the watched prefixes. Because it watches every key, every revision from
// its start on must reach it (etcd bumps the revision only for a
// transaction that changed at least one key: server/storage/mvcc/
// kvstore_txn.go End), so a revision it never sees
// is itself a lost event, which it reports. It should run on a connection
// of its own, never held back. A Recorder is safe for concurrent use.
//
// A user whose role covers only the benchmark's prefix may not watch the
// whole key space; with FallbackScope set, the recorder then watches that
// prefix instead (Scope reports it), and a skipped revision can no longer
// be told from another client's write elsewhere.
type Recorder struct {
	// FallbackScope, if set, is the key prefix watched instead of the
	// whole key space when etcd denies the latter (permission denied). Set
	// it before Run; it must cover every recorded prefix.
	FallbackScope string
	// Within, if set, narrows what is recorded to the keys under one of
	// these prefixes (each also under a recorded prefix, e.g. one run's
	// namespaces, "/registry/pods/lwbench-1a2b3c4d-ns-0/"), so that other
	// clients' writes under the recorded prefixes of a cluster the run
	// shares are neither history nor lost events. Set it before Run.
	Within []string

	stream   *Stream
	prefixes []string
	hist     []*history
	scope    atomic.Pointer[string] // nil: the whole key space

	// watermark is the highest revision up to which the history is
	// complete: every event at or below it has been recorded.
	watermark watermark
	from      atomic.Int64 // the first revision recorded; 0 before Run
	lastRev   int64        // recorder goroutine only

	intern map[string]string // recorder goroutine only
	events atomic.Int64

	mu      sync.Mutex
	gaps    []RevisionGap
	err     error
	started bool
	// stopped is closed when Run returns.
	stopped chan struct{}
	// watching is closed once etcd has created the recorder's first
	// watch: from then on no compaction can pass its start unseen.
	watching     chan struct{}
	watchingOnce sync.Once
}

// RevisionGap is a range of revisions the recorder's watch skipped.
type RevisionGap struct {
	// From and To are the first and last missing revisions.
	From, To int64
}

// NewRecorder returns a recorder of the events under prefixes (each ending
// in "/", none a prefix of another) watching on stream.
func NewRecorder(stream *Stream, prefixes []string) *Recorder {
	r := &Recorder{stream: stream, prefixes: prefixes, intern: map[string]string{}, stopped: make(chan struct{}), watching: make(chan struct{})}
	for range prefixes {
		r.hist = append(r.hist, &history{})
	}
	return r
}

// history returns the history of prefix, nil if it is not recorded.
func (r *Recorder) history(prefix string) *history {
	for i, p := range r.prefixes {
		if p == prefix {
			return r.hist[i]
		}
	}
	return nil
}

// Scope returns what the recorder watches: "" for the whole key space, or
// the FallbackScope prefix it fell back to.
func (r *Recorder) Scope() string {
	if p := r.scope.Load(); p != nil {
		return *p
	}
	return ""
}

// Watching is closed once etcd has created the recorder's first watch
// (its created response): a compaction after that cannot remove a
// revision the recorder has not read. Stopped is closed when Run returns.
func (r *Recorder) Watching() <-chan struct{} { return r.watching }

// Stopped is closed when Run has returned (Err says why, if it failed).
func (r *Recorder) Stopped() <-chan struct{} { return r.stopped }

// Watermark returns the revision up to which the history is complete.
func (r *Recorder) Watermark() int64 { return r.watermark.Load() }

// Events returns the number of events recorded.
func (r *Recorder) Events() int64 { return r.events.Load() }

// Gaps returns the revision ranges the recorder's watch skipped, in order.
func (r *Recorder) Gaps() []RevisionGap {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RevisionGap(nil), r.gaps...)
}

// Err returns the error that stopped the recorder, if any: its watch was
// compacted (the history is then incomplete) or the history is full.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Run records every event from revision from on until ctx ends. It
// resumes a watch that etcd or the connection ended, from the revision
// after the last one recorded; it returns an error if that revision has
// been compacted or the history is full, and nil when ctx ends.
func (r *Recorder) Run(ctx context.Context, from int64) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("recorder already started")
	}
	r.started = true
	r.mu.Unlock()
	defer close(r.stopped)
	r.from.Store(from)
	r.lastRev = from - 1
	r.setWatermark(from - 1)
	for ctx.Err() == nil {
		err := r.watch(ctx, r.lastRev+1)
		if ctx.Err() != nil {
			return nil
		}
		if r.FallbackScope != "" && r.scope.Load() == nil && isPermissionDenied(err) {
			scope := r.FallbackScope
			r.scope.Store(&scope)
			continue
		}
		var ce *CompactedError
		if errors.As(err, &ce) || errors.Is(err, errHistoryFull) {
			r.mu.Lock()
			r.err = fmt.Errorf("history recorder: %w", err)
			r.mu.Unlock()
			return r.err
		}
		if !clockwait.SleepReal(ctx, 50*time.Millisecond) {
			return nil
		}
	}
	return nil
}

func (r *Recorder) watch(ctx context.Context, from int64) error {
	wctx, cancel := context.WithCancel(r.stream.Context(ctx))
	defer cancel()
	key, opts := "\x00", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithRev(from), clientv3.WithProgressNotify(), clientv3.WithCreatedNotify()}
	whole := true
	if scope := r.Scope(); scope != "" {
		key, opts[0], whole = scope, clientv3.WithPrefix(), false
	}
	wch := r.stream.Client.Watch(wctx, key, opts...)
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return &CompactedError{From: from, CompactRevision: resp.CompactRevision}
		}
		if err := resp.Err(); err != nil {
			return err
		}
		if resp.Created {
			r.watchingOnce.Do(func() { close(r.watching) })
			continue
		}
		if resp.IsProgressNotify() {
			if rev := resp.Header.Revision; rev > r.lastRev {
				// Every revision has an event on a whole-keyspace watch:
				// a progress notification past the last event means the
				// events in between never came.
				if whole {
					r.gap(r.lastRev+1, rev)
				}
				r.lastRev = rev
				r.setWatermark(rev)
			}
			continue
		}
		for _, ev := range resp.Events {
			if err := r.record(ev, whole); err != nil {
				return err
			}
		}
		r.setWatermark(r.lastRev)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("recorder watch closed")
}

func (r *Recorder) record(ev *clientv3.Event, whole bool) error {
	rev := ev.Kv.ModRevision
	if whole && rev > r.lastRev+1 {
		r.gap(r.lastRev+1, rev-1)
	}
	if rev > r.lastRev {
		r.lastRev = rev
	}
	key := ev.Kv.Key
	if len(r.Within) > 0 && !hasAnyPrefix(key, r.Within) {
		return nil
	}
	for i, p := range r.prefixes {
		if len(key) < len(p) || string(key[:len(p)]) != p {
			continue
		}
		k, ok := r.intern[string(key)]
		if !ok {
			k = string(key)
			r.intern[k] = k
		}
		r.events.Add(1)
		return r.hist[i].append(histEntry{rev: rev, key: k, put: ev.Type == mvccpb.PUT, create: ev.IsCreate()})
	}
	return nil
}

// hasAnyPrefix reports whether key starts with one of prefixes.
func hasAnyPrefix(key []byte, prefixes []string) bool {
	for _, p := range prefixes {
		if len(key) >= len(p) && string(key[:len(p)]) == p {
			return true
		}
	}
	return false
}

func (r *Recorder) gap(from, to int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gaps = append(r.gaps, RevisionGap{From: from, To: to})
}

func (r *Recorder) setWatermark(rev int64) { r.watermark.Store(rev) }

// WaitFor blocks until the history is complete up to rev, requesting
// progress notifications on the recorder's stream every period while it
// waits. It returns ctx's error if ctx ends first, the recorder's error if
// it failed, and errRecorderStopped if it stopped (its Run's ctx ended)
// short of rev.
func (r *Recorder) WaitFor(ctx context.Context, rev int64, period time.Duration) error {
	ch, withdraw := r.watermark.wait(rev)
	defer withdraw()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := r.Err(); err != nil {
			return err
		}
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-r.stopped:
			select {
			case <-ch:
				return nil
			default:
			}
			if err := r.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%w at revision %d, short of %d", errRecorderStopped, r.watermark.Load(), rev)
		case <-t.C:
			r.stream.RequestProgress(ctx) // best effort: etcd answers once synced
		}
	}
}

// errRecorderStopped is WaitFor's error when the recorder stopped before
// reaching the revision waited for.
var errRecorderStopped = errors.New("history recorder stopped")

// Quiet reports whether the history of prefix holds no event at the
// revisions after+1 to upTo: a watch of prefix that has seen everything up
// to after has then seen everything up to upTo. It is false when prefix is
// not recorded (NewRecorder), the history does not reach back to after+1
// (the recorder started later) or is not complete to upTo yet (Watermark).
func (r *Recorder) Quiet(prefix string, after, upTo int64) bool {
	h := r.history(prefix)
	if h == nil || r.from.Load() == 0 || after+1 < r.from.Load() || r.Watermark() < upTo {
		return false
	}
	i := h.search(after + 1)
	return i == h.len() || h.at(i).rev > upTo
}

// hasRevision reports whether the history holds an event at revision rev
// under any recorded prefix.
func (r *Recorder) hasRevision(rev int64) bool {
	for _, h := range r.hist {
		if i := h.search(rev); i < h.len() && h.at(i).rev == rev {
			return true
		}
	}
	return false
}

// isPermissionDenied reports whether err is etcd's answer to a request
// the user's roles do not allow.
func isPermissionDenied(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrGRPCPermissionDenied) ||
		(err != nil && strings.Contains(err.Error(), rpctypes.ErrGRPCPermissionDenied.Error()))
}
