package compaction

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Span is a wall-clock interval: when an operation started and ended.
type Span struct {
	Start time.Time // when it began
	End   time.Time // when it returned
}

// Duration returns End - Start.
func (s Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Overlap returns how long two spans ran at the same time; 0 if they did
// not.
func Overlap(a, b Span) time.Duration {
	start, end := a.Start, a.End
	if b.Start.After(start) {
		start = b.Start
	}
	if b.End.Before(end) {
		end = b.End
	}
	if !end.After(start) {
		return 0
	}
	return end.Sub(start)
}

// Gate keeps compactions and defragmentations from overlapping: etcd's
// db compaction deletes in batches under the backend's batch lock, and a
// defragmentation started between two batches blocks the rest of the
// compaction, and every client, until it finishes, so the two together
// stall a member longer than either alone (bench-anchors §8.2: 2.8 s of
// defrag became 10.2 s). A Gate makes one wait for the other. Ticks must
// be physical (Compactor.Physical) for the gate to cover the deletion;
// a logical compaction returns before etcd has deleted anything. The zero
// value is ready to use; a Gate is safe for concurrent use.
type Gate struct{ mu sync.Mutex }

// Tick runs t.Tick with the gate held.
func (g *Gate) Tick(ctx context.Context, t Ticker) (TickResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return t.Tick(ctx)
}

// DefragmentAll runs DefragmentAll with the gate held, so that no tick
// through the gate runs meanwhile.
func (g *Gate) DefragmentAll(ctx context.Context, m Maintenance, endpoints []string) ([]DefragResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return DefragmentAll(ctx, m, endpoints)
}

// CompactDefragResult is one compaction followed by a defragmentation of
// one member, either in turn or overlapping.
type CompactDefragResult struct {
	// Revision is the revision compacted to.
	Revision int64
	// Compaction is the physical Compact call: from the request until
	// etcd had deleted the compacted revisions.
	Compaction Span
	// Defrag is the defragmentation, with its sizes.
	Defrag DefragResult
	// DefragSpan is when the Defragment call ran.
	DefragSpan Span
	// Overlap is how long the two ran at once; 0 when they ran in turn.
	Overlap time.Duration
}

// CompactThenDefragment compacts to rev physically and defragments
// endpoint. Without overlap, the defragmentation starts after the
// compaction has finished deleting: what operators should do. With
// overlap, the defragmentation starts `delay` after the compaction was
// requested, while etcd is still deleting in batches, and the result
// measures how long they ran together. Either error ends the call; with
// overlap the compaction's error is returned after the defragmentation
// has ended.
func CompactThenDefragment(ctx context.Context, kv KV, m Maintenance, endpoint string, rev int64, overlap bool, delay time.Duration) (CompactDefragResult, error) {
	res := CompactDefragResult{Revision: rev}
	compact := func() error {
		res.Compaction.Start = time.Now()
		_, err := kv.Compact(ctx, rev, clientv3.WithCompactPhysical())
		res.Compaction.End = time.Now()
		if err != nil {
			return fmt.Errorf("compact to revision %d: %w", rev, err)
		}
		return nil
	}
	defrag := func() error {
		var err error
		res.DefragSpan.Start = time.Now()
		res.Defrag, err = Defragment(ctx, m, endpoint)
		res.DefragSpan.End = time.Now()
		return err
	}
	if !overlap {
		if err := compact(); err != nil {
			return res, err
		}
		return res, defrag()
	}
	cerr := make(chan error, 1)
	go func() { cerr <- compact() }()
	t := time.NewTimer(delay)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		<-cerr
		return res, ctx.Err()
	}
	derr := defrag()
	err := <-cerr
	res.Overlap = Overlap(res.Compaction, res.DefragSpan)
	if derr != nil {
		return res, derr
	}
	return res, err
}
