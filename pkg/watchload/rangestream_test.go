package watchload

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// etcd36Client is the real client of an etcd 3.7 member made to refuse
// every RangeStream with gRPC Unimplemented, as an etcd before 3.7 does.
// (clientv3 keeps a stream's error unexported, so the refusal comes from
// the GetStream call rather than its first receive; kube-apiserver and the
// store treat both alike.)
type etcd36Client struct {
	*clientv3.Client
	streams atomic.Int32 // GetStream calls
}

func (c *etcd36Client) GetStream(context.Context, string, ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	c.streams.Add(1)
	return nil, status.Error(codes.Unimplemented, "unknown method RangeStream for service etcdserverpb.KV")
}

// TestRangeStreamFallback lists from an etcd without RangeStream: the
// first page's stream is refused, the page read with Range, and lists
// keep to Range for rangeStreamRecheckInterval, then try a stream again
// (k8s.io/apiserver/pkg/storage/feature/feature_support_checker.go). A
// watch-list's sync falls back to Range pages of WatcherSyncPageSize.
func TestRangeStreamFallback(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	prefix := "/registry/pods/"
	last := putKeys(t, c, prefix, 0, 7)
	old := &etcd36Client{Client: c}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	st := &store{stream: NewStream(0, 0, old, ""), client: old, prefix: prefix, streams: newRangeStreamSupport(clk)}

	tests := []struct {
		name        string
		step        time.Duration // fake time passed before the list
		wantStreams int32         // GetStream calls so far
		wantReqs    int           // etcd requests of the page
	}{
		{"first list tries a stream", 0, 1, 2},
		{"within the recheck interval: Range only", rangeStreamRecheckInterval - time.Second, 1, 1},
		{"after it: a stream again", time.Second, 2, 2},
	}
	for _, tt := range tests {
		clk.SetTime(clk.Now().Add(tt.step))
		page, err := st.getList(t.Context(), listOptions{resourceVersion: "0", limit: 3})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if page.streamed || page.requests != tt.wantReqs || len(page.kvs) != 3 || page.next == nil || page.revision != last {
			t.Errorf("%s: page streamed %v, %d requests, %d keys, next %v, revision %d; want Range, %d requests, 3 keys, a next page, revision %d",
				tt.name, page.streamed, page.requests, len(page.kvs), page.next, page.revision, tt.wantReqs, last)
		}
		if n := old.streams.Load(); n != tt.wantStreams {
			t.Errorf("%s: %d streams tried, want %d", tt.name, n, tt.wantStreams)
		}
	}

	// The last stream was refused just now: the sync reads with Range.
	a := st.syncInitialEvents(t.Context(), "").attempt
	if a.Err != nil || a.Streamed || !a.WatchList || a.Pages != 1 || a.Objects != 7 || a.Revision != last || old.streams.Load() != 2 {
		t.Errorf("watch-list sync %+v after %d streams tried; want no stream tried, one Range page (limit %d), 7 objects at %d", a, old.streams.Load(), WatcherSyncPageSize, last)
	}
}

// TestSyncInitialEvents checks the watch-list sync against etcd 3.7: one
// RangeStream of the prefix at the latest revision, whatever the
// resourceVersion up to the latest; "too large" above it.
func TestSyncInitialEvents(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	prefix := "/registry/configmaps/"
	first := putKeys(t, c, prefix, 0, 4)
	last := putKeys(t, c, prefix, 4, 9)
	st := &store{stream: NewStream(0, 0, c, ""), client: c, prefix: prefix, streams: newRangeStreamSupport(nil)}
	tests := []struct {
		rv      string
		wantErr error
	}{
		{"", nil},
		{"1", nil},
		{revisionString(first), nil},
		{revisionString(last), nil},
		{revisionString(last + 100), errTooLargeRV},
	}
	for _, tt := range tests {
		a := st.syncInitialEvents(t.Context(), tt.rv).attempt
		if !errors.Is(a.Err, tt.wantErr) {
			t.Errorf("rv %q: error %v, want %v", tt.rv, a.Err, tt.wantErr)
			continue
		}
		if tt.wantErr != nil {
			continue
		}
		if !a.Streamed || a.Pages != 1 || a.Objects != 9 || a.Revision != last || a.ReadRevision != 0 {
			t.Errorf("rv %q: %+v; want one stream of 9 objects at the latest revision %d", tt.rv, a, last)
		}
	}
}

func revisionString(rev int64) string { return strconv.FormatInt(rev, 10) }

// countingClient counts the reads a Client sends etcd.
type countingClient struct {
	Client
	streams, ranges atomic.Int32
}

func (c *countingClient) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	c.streams.Add(1)
	return c.Client.GetStream(ctx, key, opts...)
}

func (c *countingClient) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.ranges.Add(1)
	return c.Client.Get(ctx, key, opts...)
}

// TestListExact reads a prefix at an older revision in pages, as the
// watch cache's consistency checker reads etcd: with the EtcdRangeStream
// gate on, one RangeStream per page; off, or from an etcd without
// RangeStream, one Range per page (after one refused stream). Every page
// reads the revision asked for, not the keys written after it; a
// compacted revision is etcd's ErrCompacted.
func TestListExact(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	prefix := "/registry/leases/"
	first := putKeys(t, c, prefix, 0, 7)
	latest := putKeys(t, c, prefix, 7, 10)
	tests := []struct {
		name        string
		gate        bool
		client      Client
		rev         int64
		wantKeys    int
		wantPages   int
		wantStreams int32
		wantRanges  int32
	}{
		{"gate on, etcd 3.7", true, c, first, 7, 3, 3, 0},
		{"gate off", false, c, first, 7, 3, 0, 3},
		{"gate on, etcd without RangeStream", true, &etcd36Client{Client: c}, first, 7, 3, 1, 3},
		{"latest revision", true, c, 0, 10, 4, 4, 0},
	}
	for _, tt := range tests {
		env := NewEnv(time.Now(), 16, 1, nil)
		env.setRangeStream(tt.gate)
		cc := &countingClient{Client: tt.client}
		keys, pages, err := env.ListExact(t.Context(), cc, prefix, tt.rev, 3)
		if err != nil || keys != tt.wantKeys || pages != tt.wantPages || cc.streams.Load() != tt.wantStreams || cc.ranges.Load() != tt.wantRanges {
			t.Errorf("%s: got %d keys in %d pages, %d streams, %d ranges, err %v; want %d keys in %d pages, %d streams, %d ranges",
				tt.name, keys, pages, cc.streams.Load(), cc.ranges.Load(), err, tt.wantKeys, tt.wantPages, tt.wantStreams, tt.wantRanges)
		}
	}
	if _, err := c.Compact(t.Context(), latest); err != nil {
		t.Fatal(err)
	}
	env := NewEnv(time.Now(), 16, 1, nil)
	if _, _, err := env.ListExact(t.Context(), c, prefix, first, 3); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("list at compacted revision %d: got %v, want %v", first, err, rpctypes.ErrCompacted)
	}
}
