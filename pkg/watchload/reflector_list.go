package watchload

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// The reflector's LIST side: client-go's choice of resourceVersion, the
// pager and watch-list (tools/cache/reflector.go, tools/pager).

// relistResourceVersion is client-go's choice of the LIST resourceVersion
// (tools/cache/reflector.go relistResourceVersion): "" (the latest, a
// quorum read) after a list at the last one failed with 410 Expired or
// "too large resource version", "0" (any) before the first list, and the
// last revision seen otherwise.
func (r *Reflector) relistResourceVersion() string {
	switch {
	case r.unavailable:
		return ""
	case r.lastSync.Load() == 0:
		return "0"
	}
	return revision.ListResourceVersion(r.lastSync.Load())
}

// rewatchResourceVersion is client-go's choice of a watch-list's
// resourceVersion (tools/cache/reflector.go rewatchResourceVersion): ""
// (the latest, consistent) before the first list and after a 410 Expired
// or "too large resource version", the last revision seen otherwise.
func (r *Reflector) rewatchResourceVersion() string {
	if r.unavailable || r.lastSync.Load() == 0 {
		return ""
	}
	return revision.ListResourceVersion(r.lastSync.Load())
}

// isExpired reports whether err is kube-apiserver's 410 Expired: etcd's
// ErrCompacted (tools/cache/reflector.go isExpiredError).
func isExpired(err error) bool {
	return errors.Is(err, rpctypes.ErrCompacted) || errors.Is(err, rpctypes.ErrGRPCCompacted)
}

// isTooLarge reports whether err is kube-apiserver's "too large resource
// version" (tools/cache/reflector.go isTooLargeResourceVersionError).
func isTooLarge(err error) bool {
	return errors.Is(err, rpctypes.ErrFutureRev) || errors.Is(err, rpctypes.ErrGRPCFutureRev) || errors.Is(err, errTooLargeRV)
}

// list runs the LIST phase of one ListAndWatch iteration, as
// ListAndWatchWithContext does: with WatchList, a watch-list (watchList),
// and, if that failed for another reason than the end of ctx, the LIST of
// Reflector.list; without, that LIST alone: a paginated list at
// relistResourceVersion, and if etcd answers that the revision is
// compacted (410 Expired) or in the future, one immediate retry at ""
// (the latest).
func (r *Reflector) list(ctx context.Context, reason string, failed *CompactedError, pause time.Duration) ListRecord {
	rec := ListRecord{Reason: reason, At: r.env.Since(), Backoff: pause}
	if failed != nil {
		rec.FailedWatchFrom, rec.CompactRevision = failed.From, failed.CompactRevision
	}
	var res pagedList
	if r.o.WatchList {
		res = r.watchList(ctx, &rec)
	}
	if !r.o.WatchList || (res.attempt.Err != nil && ctx.Err() == nil) {
		rv := r.relistResourceVersion()
		res = r.listAt(ctx, rv)
		rec.Attempts = append(rec.Attempts, res.attempt)
		if err := res.attempt.Err; err != nil && (isExpired(err) || isTooLarge(err)) && ctx.Err() == nil {
			r.unavailable = true
			res = r.listAt(ctx, r.relistResourceVersion())
			rec.Attempts = append(rec.Attempts, res.attempt)
		}
		if res.attempt.Err == nil && rv == "0" && res.paginated {
			r.paginatedResult = true
		}
	}
	att := res.attempt
	rec.Err = att.Err
	if att.Err == nil {
		r.unavailable = false
		rec.Revision, rec.Pages, rec.Objects, rec.Bytes = att.Revision, att.Pages, att.Objects, att.Bytes
		r.cache.replace(res.items)
		r.advance(att.Revision, true)
		if r.sink != nil {
			r.sink.replaced(res.items, att.Revision)
		}
	}
	rec.Duration = r.env.Since() - rec.At
	r.mu.Lock()
	r.lists = append(r.lists, rec)
	r.mu.Unlock()
	if r.o.Hooks.OnList != nil {
		r.o.Hooks.OnList(rec)
	}
	return rec
}

// watchList is client-go's watchList (tools/cache/reflector.go) against
// kube-apiserver with the watch cache off: a watch with sendInitialEvents
// at rewatchResourceVersion, served by store.syncInitialEvents; a 410
// Expired or "too large resource version" marks the last revision
// unavailable and retries at once at "", at most once more. Each request
// is appended to rec.Attempts; the result's Err is the last one's.
func (r *Reflector) watchList(ctx context.Context, rec *ListRecord) pagedList {
	for {
		start := r.env.Since()
		res := r.storage.syncInitialEvents(ctx, r.rewatchResourceVersion())
		res.attempt.Duration = r.env.Since() - start
		rec.Attempts = append(rec.Attempts, res.attempt)
		err := res.attempt.Err
		if err == nil || r.unavailable || ctx.Err() != nil || !(isExpired(err) || isTooLarge(err)) {
			return res
		}
		r.unavailable = true
	}
}

// listAt is one pager.List at resourceVersion rv with the page size
// Reflector.list picks: with an rv other than "" and "0", and neither a
// forced page size (WatchListPageSize) nor an earlier paginated result,
// the reflector lists unpaginated so that a watch cache could serve it.
func (r *Reflector) listAt(ctx context.Context, rv string) pagedList {
	start := r.env.Since()
	p := listPager{pageSize: r.spec.pageSize, pageFn: r.listPage, fullListIfExpired: true}
	if !r.spec.forcePageSize && !r.paginatedResult && rv != "" && rv != "0" {
		p.pageSize = 0
	}
	res := p.list(ctx, listOptions{resourceVersion: rv})
	res.attempt.Duration = r.env.Since() - start
	return res
}

// listPage is the reflector's listerWatcher: the cacher's drops the
// resourceVersion, so that it always lists the latest
// (k8s.io/apiserver/pkg/storage/cacher/lister_watcher.go); a client of a
// watch cache lists from the cache.
func (r *Reflector) listPage(ctx context.Context, opts listOptions) (listPage, error) {
	if r.o.servedBy != nil {
		return r.o.servedBy.getList(ctx, opts)
	}
	if r.spec.listIgnoresRV {
		opts.resourceVersion = ""
	}
	return r.storage.getList(ctx, opts)
}
