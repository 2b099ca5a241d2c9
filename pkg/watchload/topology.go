package watchload

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// Client is what a watcher needs from one etcd connection;
// *clientv3.Client satisfies it. GetStream is etcd 3.7's RangeStream
// (client/v3 kv.go), which kube-apiserver 1.37 lists with.
type Client interface {
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error)
	Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan
	RequestProgress(ctx context.Context) error
}

var _ Client = (*clientv3.Client)(nil)

// Dialer opens one new connection to the target: a *clientv3.Client with
// its own gRPC connection. The caller closes it.
type Dialer func(ctx context.Context) (*clientv3.Client, error)

// streamMetadataKey is the gRPC metadata key that separates lwbench's
// watch streams.
const streamMetadataKey = "lwbench-stream"

// Stream is one gRPC watch stream. clientv3 multiplexes every watch whose
// context carries the same outgoing gRPC metadata onto one stream of one
// connection (client/v3/watch.go streamKeyFromCtx), and a progress request
// reaches only the watches of the stream its context selects. A Stream is
// safe for concurrent use.
type Stream struct {
	// ID numbers the stream from 0.
	ID int
	// Conn is the index of the connection the stream uses.
	Conn int
	// Client is that connection.
	Client Client
	// Member is the index of the member the connection is pinned to (see
	// ConnectPinned), -1 when it may use any member.
	Member int
	md     metadata.MD
}

// NewStream returns stream id on connection conn. source, when not empty,
// is sent as the "source" metadata, as kube-apiserver's cacher does to keep
// its watches on their own stream (k8s.io/apiserver/pkg/storage/cacher/
// cacher.go, feature SeparateCacheWatchRPC).
func NewStream(id, conn int, c Client, source string) *Stream {
	md := metadata.Pairs(streamMetadataKey, strconv.Itoa(id))
	if source != "" {
		md.Set("source", source)
	}
	return &Stream{ID: id, Conn: conn, Client: c, Member: -1, md: md}
}

// Context returns ctx carrying the stream's metadata and etcd's
// require-leader flag, which kube-apiserver sets on every watch
// (k8s.io/apiserver/pkg/storage/etcd3/watcher.go), so that a member cut off
// from its cluster ends the stream's watches.
func (s *Stream) Context(ctx context.Context) context.Context {
	return clientv3.WithRequireLeader(metadata.NewOutgoingContext(ctx, s.md.Copy()))
}

// RequestProgress asks etcd for one progress notification on this stream.
// etcd answers only when every watch on the stream is synced, with a
// response of revision R meaning "every event up to R has been sent"
// (server/etcdserver/api/v3rpc/watch.go, mvcc watchable_store.go
// progressIfSync).
func (s *Stream) RequestProgress(ctx context.Context) error {
	return s.Client.RequestProgress(s.Context(ctx))
}

// Topology is a set of connections and the watch streams spread over them:
// stream i uses connection i mod len(Conns), and watcher j uses stream
// j mod len(Streams).
type Topology struct {
	// Conns are the connections, owned by the Topology.
	Conns []*clientv3.Client
	// Streams are the watch streams.
	Streams []*Stream
	// ConnMember is the member each connection is pinned to, by index
	// into the endpoints given to ConnectPinned; nil when every connection
	// may use any member.
	ConnMember []int
}

// Connect opens conns connections with dial and lays streams streams over
// them; source is passed to NewStream. On an error every connection opened
// so far is closed.
func Connect(ctx context.Context, dial Dialer, conns, streams int, source string) (*Topology, error) {
	if conns < 1 || streams < 1 {
		return nil, fmt.Errorf("connections (%d) and streams (%d) must be positive", conns, streams)
	}
	if dial == nil {
		return nil, errors.New("no dialer")
	}
	t := &Topology{}
	for range conns {
		c, err := dial(ctx)
		if err != nil {
			t.Close()
			return nil, err
		}
		t.Conns = append(t.Conns, c)
	}
	for i := range streams {
		t.Streams = append(t.Streams, NewStream(i, i%conns, t.Conns[i%conns], source))
	}
	return t, nil
}

// endpointDialer opens one new connection to the given endpoint only.
type endpointDialer func(ctx context.Context, endpoint string) (*clientv3.Client, error)

// ConnectPinned is Connect with connection i dialled to endpoints[i mod
// len(endpoints)] alone, so that what its clients see can be attributed
// to one member; such a connection does not fail over to another member,
// it waits for its own to come back.
func ConnectPinned(ctx context.Context, dial endpointDialer, endpoints []string, conns, streams int, source string) (*Topology, error) {
	if len(endpoints) == 0 || dial == nil {
		return nil, errors.New("pinned connections need endpoints and an endpoint dialer")
	}
	var next int
	t, err := Connect(ctx, func(ctx context.Context) (*clientv3.Client, error) {
		ep := endpoints[next%len(endpoints)]
		next++
		return dial(ctx, ep)
	}, conns, streams, source)
	if err != nil {
		return nil, err
	}
	t.ConnMember = make([]int, len(t.Conns))
	for i := range t.Conns {
		t.ConnMember[i] = i % len(endpoints)
	}
	for _, s := range t.Streams {
		s.Member = t.ConnMember[s.Conn]
	}
	return t, nil
}

// StreamFor returns the stream of watcher id.
func (t *Topology) StreamFor(id int) *Stream { return t.Streams[id%len(t.Streams)] }

// Close closes every connection.
func (t *Topology) Close() {
	for _, c := range t.Conns {
		c.Close()
	}
	t.Conns = nil
}
