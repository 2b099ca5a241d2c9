package live

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// HistoryMethod is how ReadUsage counts history entry bytes.
type HistoryMethod string

// The history methods.
const (
	// HistoryEstimate counts, per live key, its revisions kept less one
	// times its current entry bytes: exact when every revision of the key
	// is the size of the current one. Only with values read; deleted keys
	// are not seen.
	HistoryEstimate HistoryMethod = "estimate"
	// HistoryExact reads the entry kept at the compact revision of every
	// key (a Range with values at it) and replays a watch from the compact
	// revision plus one to ReadAtRevision: every entry the key bucket
	// holds is seen, deleted keys and tombstones included. It costs the
	// server a read of every revision since the compaction.
	HistoryExact HistoryMethod = "exact"
)

// Watcher is what HistoryExact asks of etcd besides Client: a watch and
// its progress requests (clientv3.Watcher).
type Watcher interface {
	Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan
	RequestProgress(ctx context.Context) error
}

var _ Watcher = (*clientv3.Client)(nil)

// progressRequestInterval is how often replay asks for a progress
// notification, which a member sends once the watch has caught up.
const progressRequestInterval = 100 * time.Millisecond

// replay watches every key from revision from+1 and calls f for every
// event up to revision to, in revision order, then ends the watch. It
// knows it has seen every event up to `to` from an event past it or a
// progress notification at or past it (etcd sends one only to a watch
// that has caught up: server/storage/mvcc/watchable_store.go
// progressIfSync). An ended ctx, a compaction past from, or a canceled
// watch is returned as an error.
func replay(ctx context.Context, w Watcher, from, to int64, progress *Progress, f func(*clientv3.Event)) error {
	if to <= from {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := w.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from+1))
	progress.add(0, to-from)
	last := from
	advance := func(rev int64) {
		rev = min(rev, to)
		if rev > last {
			progress.add(rev-last, 0)
			last = rev
		}
	}
	tick := time.NewTicker(progressRequestInterval)
	defer tick.Stop()
	fail := func(err error) error {
		return fmt.Errorf("replay the history from revision %d to %d (a watch): %w", from+1, to, err)
	}
	for {
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-tick.C:
			if err := w.RequestProgress(wctx); err != nil && ctx.Err() == nil {
				return fail(err)
			}
		case resp, ok := <-ch:
			switch {
			case ctx.Err() != nil:
				return fail(ctx.Err())
			case !ok:
				return fail(fmt.Errorf("the watch ended at revision %d", last))
			case resp.Err() != nil:
				return fail(resp.Err())
			}
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision > to {
					advance(to)
					return nil
				}
				f(ev)
				advance(ev.Kv.ModRevision)
			}
			if resp.IsProgressNotify() && resp.Header.GetRevision() >= to {
				advance(to)
				return nil
			}
		}
	}
}
