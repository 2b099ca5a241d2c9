package watchload

import (
	"context"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// WatcherSyncPageSize is the Range limit of the initial-events sync when
// etcd does not serve RangeStream (k8s.io/apiserver/pkg/storage/etcd3/
// watcher.go defaultWatcherMaxLimit, store.go maxLimit).
const WatcherSyncPageSize = 10000

// syncInitialEvents is what kube-apiserver's etcd3 watcher reads from etcd
// for a WATCH with sendInitialEvents=true, the watch-list of client-go's
// WatchListClient, with the watch cache off
// (k8s.io/apiserver/pkg/storage/etcd3/watcher.go Watch,
// getStartWatchResourceVersion, startWatching, sync, syncStreamRecursive,
// syncPaginated). For a resourceVersion R > 0 it first reads etcd's
// current revision L (store.go GetCurrentResourceVersion: a Range of the
// resource's prefix key without its trailing "/", limit 1) and fails with
// errTooLargeRV when R > L. Then, whatever R, it reads every key of the
// prefix at the latest revision: one RangeStream without revision or
// limit while etcd serves it, else Range pages of WatcherSyncPageSize,
// the first at the latest, the others pinned to its revision. The watch
// that follows starts from the revision read + 1. With the cache off a
// watch-list therefore never answers 410 Expired, and R is only a lower
// bound: a worked example, etcd at 900, compacted at 850:
//
//	watch rv="800" sendInitialEvents  -> Range "/registry/pods" limit 1: L = 900 >= 800
//	                                  -> RangeStream "/registry/pods/" at the latest: revision 900
//	                                  -> Watch from 901 prefix prev_kv
//
// The returned list's attempt has WatchList set, Limit 0, Pages the range
// requests of the read (the current-revision read excluded) and Revision
// the revision read; its Err is the error, nil on success.
func (s *store) syncInitialEvents(ctx context.Context, rv string) pagedList {
	res := pagedList{attempt: ListAttempt{ResourceVersion: rv, WatchList: true}}
	minimum, err := revision.ParseResourceVersion(rv)
	if err != nil {
		res.attempt.Err = err
		return res
	}
	ctx = s.stream.Context(ctx)
	if minimum > 0 {
		resp, err := s.client.Get(ctx, strings.TrimSuffix(s.prefix, "/"), clientv3.WithLimit(1))
		if err != nil {
			res.attempt.Err = err
			return res
		}
		if minimum > resp.Header.Revision {
			res.attempt.Err = errTooLargeRV
			return res
		}
	}
	end := clientv3.GetPrefixRangeEnd(s.prefix)
	if s.streams.supported() {
		sr, ok, err := rangeStream(ctx, s.client, s.prefix, clientv3.WithRange(end))
		if ok {
			res.attempt.Streamed = true
			if err != nil {
				res.attempt.Err = err
				return res
			}
			res.attempt.Pages++
			res.add(sr.kvs)
			res.attempt.Revision = sr.headerRevision
			return res
		}
		s.streams.markUnsupported()
		res.attempt.Pages++
	}
	key := s.prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(WatcherSyncPageSize)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.client.Get(ctx, key, opts...)
		if err != nil {
			res.items, res.attempt.Err = nil, err
			return res
		}
		res.attempt.Pages++
		res.add(resp.Kvs)
		if rev == 0 {
			rev = resp.Header.Revision
		}
		if !resp.More || len(resp.Kvs) == 0 {
			res.attempt.Revision = rev
			return res
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
