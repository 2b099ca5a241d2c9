package watchload

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"
)

// rangeStreamRecheckInterval is how long kube-apiserver lists with Range
// after etcd answered a RangeStream with Unimplemented (etcd before 3.7),
// before it tries a stream again
// (k8s.io/apiserver/pkg/storage/feature/feature_support_checker.go
// rangeStreamRecheckInterval).
const rangeStreamRecheckInterval = 10 * time.Minute

// rangeStreamSupport is kube-apiserver's memory of whether etcd serves
// RangeStream, one per modelled kube-apiserver (an Env): with the
// EtcdRangeStream gate on (beta, on by default in 1.37) every unfiltered
// LIST and every initial-events sync streams until etcd answers a stream
// with Unimplemented; lists then use paginated Range for
// rangeStreamRecheckInterval and try a stream again
// (k8s.io/apiserver/pkg/storage/feature/feature_support_checker.go
// Supports, MarkUnsupported; storage/etcd3/store.go shouldStream, GetList;
// storage/etcd3/watcher.go sync). A nil *rangeStreamSupport is the gate
// off: never stream. Safe for concurrent use.
type rangeStreamSupport struct {
	clock clock.PassiveClock

	mu            sync.Mutex
	unsupportedAt time.Time // zero: supported
}

// newRangeStreamSupport returns the gate on, RangeStream assumed supported.
func newRangeStreamSupport(clk clock.PassiveClock) *rangeStreamSupport {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &rangeStreamSupport{clock: clk}
}

// supported reports whether the next list should stream.
func (f *rangeStreamSupport) supported() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unsupportedAt.IsZero() || f.clock.Since(f.unsupportedAt) >= rangeStreamRecheckInterval
}

// markUnsupported records that etcd answered a stream with Unimplemented.
func (f *rangeStreamSupport) markUnsupported() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsupportedAt = f.clock.Now()
}

// isUnimplemented reports whether err is gRPC's Unimplemented: etcd before
// 3.7 has no RangeStream method.
func isUnimplemented(err error) bool {
	return status.Code(err) == codes.Unimplemented
}

// errStreamWithoutRevision is returned for a RangeStream that ended
// without a response header (store.go streamChunks, watcher.go
// syncStreamRecursive: "completed without a revision").
var errStreamWithoutRevision = errors.New("range stream completed without a revision")

// streamedRange is what one RangeStream returned, chunks merged.
type streamedRange struct {
	kvs []*mvccpb.KeyValue
	// chunks counts the responses etcd sent.
	chunks int
	// headerRevision is the final chunk's header revision: the revision
	// an unpinned stream read at, etcd's latest for a pinned one
	// (server/etcdserver/v3_server.go rangeStream).
	headerRevision int64
	// more is true when a limit cut the range short.
	more bool
}

// rangeStream reads key..opts as one RangeStream through c and merges its
// chunks. supported is false when etcd answered Unimplemented before any
// key, the caller then falls back to Range as kube-apiserver does. Errors
// are etcd's (rpctypes.Error: ErrCompacted, ErrFutureRev, ...) or the
// context's.
func rangeStream(ctx context.Context, c Client, key string, opts ...clientv3.OpOption) (res streamedRange, supported bool, err error) {
	ch, err := c.GetStream(ctx, key, opts...)
	if err != nil {
		if isUnimplemented(err) {
			return res, false, nil
		}
		return res, true, rpctypes.Error(err)
	}
	for resp := range ch {
		if err := resp.Err(); err != nil {
			// The error is the stream's last response.
			if res.chunks == 0 && isUnimplemented(err) {
				return res, false, nil
			}
			return res, true, rpctypes.Error(err)
		}
		res.chunks++
		res.kvs = append(res.kvs, resp.Kvs...)
		if resp.Header != nil {
			res.headerRevision = resp.Header.Revision
			res.more = resp.More
		}
	}
	if res.headerRevision == 0 {
		return res, true, errStreamWithoutRevision
	}
	return res, true, nil
}
