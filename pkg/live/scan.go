package live

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Progress counts the work of a scan as it goes, for a progress bar: the
// keys its Ranges have returned and, once each Range of a scan has
// answered its first page, the keys that scan will return; the revisions
// a history replay has passed and will pass. Total grows when a later
// scan starts (ReadUsage reads the keys at the compact revision after
// those at ReadAtRevision), so done/total may step back once per scan.
// The zero value is ready; it is safe for concurrent use.
type Progress struct {
	done, total atomic.Int64
}

// Load returns the work done and the work known so far (total 0: not
// started).
func (p *Progress) Load() (done, total int64) {
	if p == nil {
		return 0, 0
	}
	return p.done.Load(), p.total.Load()
}

func (p *Progress) add(done, total int64) {
	if p != nil {
		p.done.Add(done)
		p.total.Add(total)
	}
}

// ScanMethod is how a scan asks for its keys (the benchmark
// BenchmarkScanMethods in scan_bench_test.go measures them).
type ScanMethod string

// The scan methods.
const (
	// ScanPages reads MaxKeysPerRequest keys per Range, each page
	// starting after the last key of the previous one: the method every
	// etcd version serves.
	ScanPages ScanMethod = "pages"
	// ScanStream reads every key with one RangeStream (etcd 3.7 and
	// later: KV.GetStream), which the server answers in chunks sized to
	// its --max-request-bytes, at one revision.
	ScanStream ScanMethod = "stream"
)

// DefaultScanMethod is the scan method used against servers that are
// all etcd 3.7 or later when the caller names none: one RangeStream.
// BenchmarkScanMethods (pkg/live/scan_bench_test.go: an embedded etcd
// 3.7.3 member holding 100,000 keys of 1 KiB values, keys_only, 2 shared
// cores, -benchtime 10x -count 3; ns/op median (min), B/op) measured
//
//	pages of 1,000 keys    2.25 s (1.73 s)  59 MB
//	pages of 10,000 keys   0.31 s (0.23 s)  67 MB
//	RangeStream            0.10 s (0.09 s)  69 MB
//	one unlimited Range    0.16 s (0.14 s)  78 MB
//
// (an earlier run beside other tests ranked them alike, every figure 2 to
// 5 times higher).
//
// Pages cost more the smaller they are: each page's Range counts every
// key from its start to the end of the range (RangeResponse.Count), so
// n keys in pages of limit count about n²/(2·limit) keys, n/(2·limit)
// walks of the whole index. RangeStream and one unlimited Range walk it
// once; the stream was the faster, and it
// answers in chunks sized to the server's --max-request-bytes where the
// unlimited Range builds one response of every key in the member's memory
// (and a values read of a large cluster would exceed any gRPC message
// limit), so the stream is the default. Servers before 3.7
// have no RangeStream: they are read in pages of MaxKeysPerRequest.
const DefaultScanMethod = ScanStream

// Streamer is the RangeStream of clientv3.KV (etcd 3.7 and later). A
// Client that is also a Streamer (a *clientv3.Client is) is read with
// ScanStream when asked.
type Streamer interface {
	GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error)
}

var _ Streamer = (*clientv3.Client)(nil)

// scanRequest is one scan: every key starting with prefix ("": every
// key) at rev (0: the current revision, pinned by the first page), keys
// only or with values.
type scanRequest struct {
	rev      int64
	prefix   string
	keysOnly bool
	limit    int64
	method   ScanMethod
	progress *Progress
}

// scanResult is what a scan tells besides its keys: the revision it read
// at, and the member that answered (its header's member ID, 0 before any
// header).
type scanResult struct {
	rev      int64
	memberID uint64
}

// member is the answering member's ID in hex, "" before any answer.
func (r scanResult) member() string {
	if r.memberID == 0 {
		return ""
	}
	return hexID(r.memberID)
}

// scan calls f for every key of r in key order and returns the revision
// read at. Pages after the first are serializable at its revision. An
// error leaves the keys f was given so far (a partial scan); an ended ctx
// is returned as ctx's error.
func scan(ctx context.Context, c Client, r scanRequest, f func(*mvccpb.KeyValue)) (scanResult, error) {
	if r.limit <= 0 {
		r.limit = DefaultMaxKeysPerRequest
	}
	key, span, access := "\x00", clientv3.WithFromKey(), "every key (from \\x00 to the end)"
	if r.prefix != "" {
		key, span, access = r.prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(r.prefix)), fmt.Sprintf("the prefix %q", r.prefix)
	}
	res := scanResult{rev: r.rev}
	fail := func(err error) (scanResult, error) {
		at := fmt.Sprintf("revision %d", r.rev)
		if r.rev == 0 {
			at = "the current revision"
		}
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case errors.Is(err, rpctypes.ErrPermissionDenied):
			err = fmt.Errorf("%w: the user's role needs read access to %s", err, access)
		}
		return res, fmt.Errorf("range from %q at %s: %w", key, at, err)
	}
	opts := func(extra ...clientv3.OpOption) []clientv3.OpOption {
		o := append([]clientv3.OpOption{span}, extra...)
		if r.keysOnly {
			o = append(o, clientv3.WithKeysOnly())
		}
		if res.rev > 0 {
			o = append(o, clientv3.WithRev(res.rev), clientv3.WithSerializable())
		}
		return o
	}
	if st, ok := c.(Streamer); ok && r.method == ScanStream {
		if r.progress != nil {
			// A stream tells its count on its last chunk only.
			resp, err := c.Get(ctx, key, opts(clientv3.WithCountOnly())...)
			if err != nil {
				return fail(err)
			}
			res.rev, res.memberID = resp.Header.Revision, resp.Header.MemberId
			r.progress.add(0, resp.Count)
		}
		ch, err := st.GetStream(ctx, key, opts()...)
		if err != nil {
			return fail(err)
		}
		for chunk := range ch {
			if err := chunk.Err(); err != nil {
				return fail(err)
			}
			if h := chunk.Header; h != nil {
				res.rev, res.memberID = h.Revision, h.MemberId
			}
			for _, kv := range chunk.Kvs {
				f(kv)
			}
			r.progress.add(int64(len(chunk.Kvs)), 0)
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		return res, nil
	}
	first := true
	for {
		resp, err := c.Get(ctx, key, opts(clientv3.WithLimit(r.limit))...)
		if err != nil {
			return fail(err)
		}
		if res.rev == 0 {
			res.rev = resp.Header.Revision
		}
		res.memberID = resp.Header.MemberId
		if first {
			// The first page counts every key of the range.
			r.progress.add(0, max(resp.Count, int64(len(resp.Kvs))))
			first = false
		}
		for _, kv := range resp.Kvs {
			f(kv)
		}
		r.progress.add(int64(len(resp.Kvs)), 0)
		if !resp.More || len(resp.Kvs) == 0 {
			return res, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
