package watchload

import (
	"context"
	"errors"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// errTooLargeRV is kube-apiserver's "too large resource version": a LIST
// asked for a resourceVersion newer than the revision etcd served it at
// (k8s.io/apiserver/pkg/storage/errors.go NewTooLargeResourceVersionError).
var errTooLargeRV = errors.New("too large resource version")

// listOptions are the fields of a LIST's metav1.ListOptions that reach
// the store.
type listOptions struct {
	// resourceVersion is the LIST's resourceVersion: "" or "0" (0), or a
	// revision. Continuation pages carry none.
	resourceVersion string
	// limit is the page size; 0 means unpaginated.
	limit int64
	// continueFrom is the previous page's continue token; nil on the
	// first page.
	continueFrom *continueToken
}

// continueToken is what kube-apiserver encodes in a list's continue field:
// the key the next page starts at and the revision every page of the list
// reads at (k8s.io/apiserver/pkg/storage/continue.go EncodeContinue).
type continueToken struct {
	key      string
	revision int64
}

// listPage is one page of a LIST as the store returns it.
type listPage struct {
	// kvs are the keys of the page, in key order.
	kvs []*mvccpb.KeyValue
	// answered is true when etcd answered the range request, even if the
	// store then refused the result (errTooLargeRV).
	answered bool
	// streamed is true when the page was read with one RangeStream
	// instead of a Range.
	streamed bool
	// requests counts the etcd requests the page took: 1, or 2 for a
	// RangeStream etcd answered Unimplemented followed by its Range.
	requests int
	// readRevision is the revision the store asked etcd to read at; 0 for
	// the latest.
	readRevision int64
	// revision is the list's resourceVersion: readRevision, or etcd's
	// header revision when it read the latest.
	revision int64
	// next continues the list; nil on the last page.
	next *continueToken
}

// store is kube-apiserver's etcd3 storage of one resource as a LIST with
// the watch cache off reaches it: it turns the LIST's resourceVersion,
// limit and continue token into one etcd read over the resource's prefix
// (k8s.io/apiserver/pkg/storage/etcd3/store.go GetList; with no
// resourceVersionMatch, the legacy rules of
// k8s.io/apiserver/pkg/storage/interfaces.go ValidateListOptions). For a
// resourceVersion parsed to R and etcd at revision L, compacted at C:
//
//	rv        limit  continue  etcd read                        served at
//	"" or "0" any    -         latest, limit if any             L
//	"R"       0      -         latest, no limit                 L; R > L: too large resource version
//	"R"       > 0    -         exactly at R, limit ("exact")    R; R < C: ErrCompacted (410 Expired),
//	                                                            R > L: ErrFutureRev (too large)
//	-         > 0    {k, P}    from key k exactly at P, limit   P; P < C: ErrCompacted (410 Expired)
//
// Every page after the first continues from the last key + "\x00" at the
// first page's revision, so a list reads one consistent snapshot unless a
// compaction removes it between pages.
//
// The read is one RangeStream with the same key, range end, revision and
// limit while streams says etcd serves it (kube-apiserver 1.37's
// EtcdRangeStream gate, on by default, and etcd 3.7: every LIST of the
// model is unfiltered, so shouldStream holds; one stream per page, its
// chunks merged), else one Range; a stream answered Unimplemented marks
// RangeStream unsupported and the page is read with Range (store.go
// GetList, shouldStream, streamChunks, pagedChunks). The model's LISTs
// select nothing, so a page is never refilled with doubled limits as a
// filtered one is (pagedChunks).
type store struct {
	// stream is the watch stream whose metadata every request carries;
	// nil: none.
	stream *Stream
	// client is the connection the requests go through.
	client Client
	// prefix is the resource's key prefix, ending in "/".
	prefix string
	// streams says whether to read with RangeStream; nil never does.
	streams *rangeStreamSupport
}

// getList serves one page (store.go GetList). It returns the page even
// with an error, so that the caller can see whether etcd answered and at
// which revision the store read; its kvs then mean nothing. Errors:
// revision.ErrInvalidResourceVersion for a resourceVersion that is not
// one, etcd's ErrCompacted and ErrFutureRev, errTooLargeRV, and the
// client's.
func (s *store) getList(ctx context.Context, opts listOptions) (listPage, error) {
	var page listPage
	withRev, continueKey, err := validateListOptions(opts)
	if err != nil {
		return page, err
	}
	key := s.prefix
	if continueKey != "" {
		key = continueKey
	}
	page.readRevision = withRev
	rangeOpts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.prefix))}
	if opts.limit > 0 {
		rangeOpts = append(rangeOpts, clientv3.WithLimit(opts.limit))
	}
	if withRev > 0 {
		rangeOpts = append(rangeOpts, clientv3.WithRev(withRev))
	}
	if s.stream != nil {
		ctx = s.stream.Context(ctx)
	}
	var headerRev int64
	var more bool
	if s.streams.supported() {
		page.requests++
		sr, ok, err := rangeStream(ctx, s.client, key, rangeOpts...)
		if ok {
			page.streamed = true
			if err != nil {
				return page, err
			}
			page.answered, page.kvs, headerRev, more = true, sr.kvs, sr.headerRevision, sr.more
		} else {
			s.streams.markUnsupported()
		}
	}
	if !page.streamed {
		page.requests++
		resp, err := s.client.Get(ctx, key, rangeOpts...)
		if err != nil {
			return page, err
		}
		page.answered, page.kvs, headerRev, more = true, resp.Kvs, resp.Header.Revision, resp.More
	}
	// A pinned stream's header holds etcd's latest revision, not the one
	// it read at: the list's revision is the pinned one.
	if withRev == 0 {
		withRev = headerRev
	}
	page.revision = withRev
	if page.readRevision == 0 {
		if err := validateMinimumResourceVersion(opts.resourceVersion, withRev); err != nil {
			return page, err
		}
	}
	if more && len(page.kvs) > 0 {
		page.next = &continueToken{key: string(page.kvs[len(page.kvs)-1].Key) + "\x00", revision: withRev}
	}
	return page, nil
}

// ListExact reads every key under prefix (ending in "/") at revision rev
// through c as kube-apiserver's etcd3 store serves a recursive LIST with
// resourceVersion rev, resourceVersionMatch Exact and limit, page after
// page: the watch cache's consistency checker's read of etcd
// (k8s.io/apiserver/pkg/storage/cacher/consistency/checker.go
// calculateStoreDigest, pages of 10,000). Each page is one RangeStream
// pinned to rev with the limit while the Env's EtcdRangeStream gate is on
// and etcd serves it, else one Range (store.getList); every page after
// the first starts at the last key + "\x00", at rev. rev 0 reads the
// first page at etcd's latest revision and the rest at that one. It
// returns the keys read and the pages. Errors are etcd's (ErrCompacted,
// ErrFutureRev) or the client's.
func (e *Env) ListExact(ctx context.Context, c Client, prefix string, rev, limit int64) (keys, pages int, err error) {
	s := &store{client: c, prefix: prefix, streams: e.rangeStream}
	opts := listOptions{resourceVersion: strconv.FormatInt(rev, 10), limit: limit}
	for {
		page, err := s.getList(ctx, opts)
		if err != nil {
			return keys, pages, err
		}
		keys, pages = keys+len(page.kvs), pages+1
		if page.next == nil {
			return keys, pages, nil
		}
		opts = listOptions{limit: limit, continueFrom: page.next}
	}
}

// validateListOptions returns the revision a page reads at (0: the
// latest) and the key it starts from ("": the prefix), with no
// resourceVersionMatch: a continue token pins its revision, and a limit
// makes a resourceVersion above 0 exact
// (k8s.io/apiserver/pkg/storage/interfaces.go ValidateListOptions).
func validateListOptions(opts listOptions) (withRev int64, continueKey string, err error) {
	if c := opts.continueFrom; c != nil {
		return c.revision, c.key, nil
	}
	rv, err := revision.ParseResourceVersion(opts.resourceVersion)
	if err != nil {
		return 0, "", err
	}
	if opts.limit > 0 && rv > 0 {
		withRev = rv
	}
	return withRev, "", nil
}

// validateMinimumResourceVersion fails a list served at revision actual
// that is older than the resourceVersion it asked for with errTooLargeRV
// (store.go validateMinimumResourceVersion).
func validateMinimumResourceVersion(minimum string, actual int64) error {
	rv, err := revision.ParseResourceVersion(minimum)
	if err != nil {
		return err
	}
	if rv > actual {
		return errTooLargeRV
	}
	return nil
}

// rangeBytes returns the protobuf size of a range response, the bytes etcd
// sent for it.
func rangeBytes(resp *clientv3.GetResponse) int64 {
	return int64(proto.Size((*pb.RangeResponse)(resp)))
}
