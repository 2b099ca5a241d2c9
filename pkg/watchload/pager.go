package watchload

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// ListAttempt is one LIST request as client-go's pager makes it, and how
// etcd served it.
type ListAttempt struct {
	// ResourceVersion is the LIST's resourceVersion as the reflector sends
	// it: "0" (any; the first list), "" (most recent: a quorum read) or a
	// revision (not older than it; with a limit, exactly it).
	ResourceVersion string
	// Limit is the page size asked for; 0 means unpaginated.
	Limit int64
	// ReadRevision is the revision the first page read at: 0 for the
	// latest. With the watch cache off, a LIST with a limit and a
	// resourceVersion above 0 reads exactly at it
	// (k8s.io/apiserver/pkg/storage/interfaces.go ValidateListOptions);
	// the cacher's lists always read the latest.
	ReadRevision int64
	// Revision is the revision the list was served at; 0 if it failed.
	Revision int64
	// Pages counts the etcd range requests (Range or RangeStream; a
	// stream counts once, however many chunks etcd sent), including a
	// fallback.
	Pages int
	// Streamed is true when etcd served the pages with RangeStream
	// (kube-apiserver 1.37's EtcdRangeStream on etcd 3.7), false when
	// with Range.
	Streamed bool
	// WatchList is true when the list was a WATCH with sendInitialEvents
	// (client-go's WatchListClient): ResourceVersion is then the watch's,
	// Limit 0, and kube-apiserver read the latest state whatever
	// ResourceVersion asked (store.go syncInitialEvents).
	WatchList bool
	// Objects counts the keys read.
	Objects int64
	// Bytes counts the key and value bytes read.
	Bytes int64
	// FullListFallback is true when a continuation page had been
	// compacted and the pager fell back to one unpaginated list at the
	// requested resourceVersion (client-go tools/pager/pager.go
	// FullListIfExpired).
	FullListFallback bool
	// Err is the error that ended it, nil on success. ErrCompacted is the
	// 410 Expired of kube-apiserver; ErrFutureRev its "too large resource
	// version".
	Err error
	// Duration is how long it took.
	Duration time.Duration
}

// listPageFunc serves one page of a LIST: the reflector's listerWatcher
// in front of the store.
type listPageFunc func(ctx context.Context, opts listOptions) (listPage, error)

// listPager is client-go's pager (tools/pager/pager.go ListPager): it
// lists in pages of pageSize, following each page's continue token, and
// when a continuation page answers 410 Expired (its revision was
// compacted between pages) it lists once more, unpaginated, at the
// resourceVersion first asked for (FullListIfExpired, which the reflector
// sets). Page size 500, 1,200 keys, compaction to C > L after page 1:
//
//	rv="0" limit=500              -> page 1 at the latest, L; continue {key, L}
//	continue {key, L} limit=500   -> ErrCompacted: 410 Expired
//	rv="0" limit=0                -> every key at the latest, one request
//
// The attempt then counts 2 pages and the keys of the full list only.
type listPager struct {
	// pageSize is the limit of every page; 0 lists in one request.
	pageSize int64
	// pageFn serves one page.
	pageFn listPageFunc
	// fullListIfExpired makes an expired continuation fall back to one
	// full list.
	fullListIfExpired bool
}

// pagedList is the outcome of listPager.list.
type pagedList struct {
	// items are the keys of every page, in key order; nil if the list
	// failed.
	items []*mvccpb.KeyValue
	// paginated is true once a continue token was followed: the server
	// honours limits (client-go's paginatedResult).
	paginated bool
	// attempt describes the requests; its Err is the list's error and its
	// Duration is left for the caller to set.
	attempt ListAttempt
}

// count counts the requests of one page etcd answered.
func (a *ListAttempt) count(page listPage) {
	if page.answered {
		a.Pages += page.requests
		a.Streamed = a.Streamed || page.streamed
	}
}

// add appends one page's keys and counts them.
func (l *pagedList) add(kvs []*mvccpb.KeyValue) {
	l.items = append(l.items, kvs...)
	for _, kv := range kvs {
		l.attempt.Objects++
		l.attempt.Bytes += int64(len(kv.Key) + len(kv.Value))
	}
}

// list lists everything opts selects; opts.limit is replaced by the
// pager's page size.
func (p *listPager) list(ctx context.Context, opts listOptions) pagedList {
	opts.limit = p.pageSize
	requested := opts
	res := pagedList{attempt: ListAttempt{ResourceVersion: opts.resourceVersion, Limit: opts.limit}}
	for {
		page, err := p.pageFn(ctx, opts)
		res.attempt.count(page)
		if opts.continueFrom == nil {
			res.attempt.ReadRevision = page.readRevision
		}
		if err != nil {
			if opts.continueFrom != nil && p.fullListIfExpired && isExpired(err) {
				return p.fullList(ctx, requested, res)
			}
			res.items, res.attempt.Err = nil, err
			return res
		}
		res.add(page.kvs)
		if page.next == nil {
			res.attempt.Revision = page.revision
			return res
		}
		// Continuation pages carry no resourceVersion: the token pins
		// them to the first page's revision.
		opts = listOptions{limit: opts.limit, continueFrom: page.next}
		res.paginated = true
	}
}

// fullList is the pager's last resort after an expired continuation: one
// unpaginated list at the requested resourceVersion, which without a
// limit means "not older than". What the pages before it read is
// dropped.
func (p *listPager) fullList(ctx context.Context, requested listOptions, res pagedList) pagedList {
	res.attempt.FullListFallback = true
	res.items, res.attempt.Objects, res.attempt.Bytes = nil, 0, 0
	page, err := p.pageFn(ctx, listOptions{resourceVersion: requested.resourceVersion})
	res.attempt.count(page)
	if err != nil {
		res.attempt.Err = err
		return res
	}
	res.add(page.kvs)
	res.attempt.Revision = page.revision
	return res
}
