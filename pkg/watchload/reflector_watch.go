package watchload

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/clockwait"
)

// CompactedError ends a watch that etcd cancelled because its start
// revision had been compacted: what kube-apiserver turns into 410 Gone,
// "too old resource version" (k8s.io/apiserver/pkg/storage/etcd3/
// watcher.go).
type CompactedError struct {
	// From is the revision the watch started from; CompactRevision the
	// compact revision etcd reported.
	From, CompactRevision int64
}

// Error names the watch's start revision and the compact revision.
func (e *CompactedError) Error() string {
	return fmt.Sprintf("watch from revision %d: required revision has been compacted (compact revision %d)", e.From, e.CompactRevision)
}

var (
	errWatchTimeout = errors.New("watch timeout")
	errWatchClosed  = errors.New("watch channel closed")
)

// watch watches from the last revision, again and again after watch
// timeouts and broken connections (and, for the cacher, after other
// watch errors for up to 30 s), until the watch fails: it returns the
// reason for the next list, with the compacted watch if that was the
// failure (client-go tools/cache/reflector.go watch).
func (r *Reflector) watch(ctx context.Context) (string, *CompactedError) {
	retry := retryWithDeadline{maxRetryDuration: r.spec.internalErrorRetry, minResetPeriod: time.Minute, clock: r.clock}
	for {
		from := r.lastSync.Load() + 1
		var timeout time.Duration // none: the cacher's watch
		if !r.spec.noWatchTimeout {
			timeout = r.o.MinWatchTimeout + time.Duration(r.rand()*float64(r.o.MinWatchTimeout))
		}
		err := r.handleWatch(ctx, from, timeout)
		r.mu.Lock()
		r.watchEnd = err
		r.mu.Unlock()
		var ce *CompactedError
		switch {
		case ctx.Err() != nil:
			return "", nil
		case errors.As(err, &ce):
			if r.o.WatchOnlyFrom > 0 {
				<-ctx.Done()
				return "", nil
			}
			return ListAfterCompaction, ce
		case errors.Is(err, errWatchTimeout), errors.Is(err, errConnectionBroken):
			continue
		default:
			if r.o.WatchOnlyFrom > 0 {
				if !clockwait.Sleep(ctx, r.clock, 100*time.Millisecond) {
					return "", nil
				}
				continue
			}
			retry.after()
			if retry.shouldRetry() {
				continue
			}
			return ListAfterWatchError, nil
		}
	}
}

// handleWatch runs one watch from revision from, which ends after timeout
// (0: never; client-go tools/cache/reflector.go handleWatch). While the connection
// is held, the Watch call waits for Release.
func (r *Reflector) handleWatch(ctx context.Context, from int64, timeout time.Duration) error {
	wctx, cancel := context.WithCancel(r.o.Stream.Context(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(from)}
	if !r.o.NoPrevKV {
		opts = append(opts, clientv3.WithPrevKV())
	}
	watchOnly := r.o.WatchOnlyFrom > 0
	// Neither profile asks etcd for progress notifications unasked: an
	// informer's watch through kube-apiserver and the watch cache's own
	// watch are both created without progress_notify (the cacher asks for
	// progress explicitly when it needs it), as lwbench conformance saw
	// kube-apiserver 1.37.2 do ("Watch create prefix rev prev_kv", and
	// progress requests). Fan-out watchers (watch only) set the option as
	// etcd's benchmark does.
	if !r.o.NoProgressNotify && watchOnly {
		opts = append(opts, clientv3.WithProgressNotify())
	}
	if watchOnly {
		opts = append(opts, clientv3.WithCreatedNotify())
	}
	called := r.env.timing.now()
	wch := r.conn.Watch(wctx, r.o.Prefix, opts...)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.mu.Lock()
	r.phase, r.phaseAt, r.watchFrom = PhaseWatch, r.env.Since(), from
	r.mu.Unlock()
	r.sessions.Add(1)

	var timedOut atomic.Bool
	if timeout > 0 {
		timer := r.clock.NewTimer(timeout)
		defer timer.Stop()
		go func() {
			select {
			case <-timer.C():
				timedOut.Store(true)
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	r.val.startSession(from)
	for resp := range wch {
		at := r.env.timing.now()
		if r.o.Hooks.OnResponse != nil {
			r.o.Hooks.OnResponse(r.o.ID, &resp)
		}
		if resp.CompactRevision != 0 {
			r.conn.endWatch(wch)
			return &CompactedError{From: from, CompactRevision: resp.CompactRevision}
		}
		if resp.Canceled {
			r.conn.endWatch(wch)
			if err := resp.Err(); err != nil {
				return err
			}
			return errWatchClosed
		}
		if resp.Created {
			r.creation.CompareAndSwap(0, at-called)
			r.syncOnce.Do(func() { close(r.synced) })
			continue
		}
		r.val.drain()
		if resp.IsProgressNotify() {
			r.progressNotifies.Add(1)
			r.val.progress(resp.Header.Revision)
			r.advance(resp.Header.Revision, false)
			if r.sink != nil {
				r.sink.progress(resp.Header.Revision)
			}
			continue
		}
		r.wevs = appendWatchEvents(r.wevs[:0], resp.Events)
		r.val.events(r.wevs)
		last := int64(0)
		if !watchOnly {
			r.cache.applyAll(resp.Events)
		}
		for _, ev := range resp.Events {
			rev := ev.Kv.ModRevision
			if !r.untimed {
				r.lat.event(rev, at)
			}
			last = max(last, rev)
		}
		if !r.untimed {
			r.lat.retry()
		}
		r.events.Add(int64(len(resp.Events)))
		r.advance(last, false)
		if r.sink != nil {
			r.sink.events(resp.Events, last)
		}
	}
	switch {
	case r.conn.endWatch(wch):
		return errConnectionBroken
	case timedOut.Load():
		return errWatchTimeout
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return errWatchClosed
}
