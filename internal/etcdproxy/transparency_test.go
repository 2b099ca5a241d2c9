package etcdproxy_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// echoKV answers Range with the request's metadata in its header and
// trailer, and, when asked, with a status carrying details: it checks
// what the proxy carries that etcd does not use.
type echoKV struct {
	pb.UnimplementedKVServer
}

func (echoKV) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if err := grpc.SetHeader(ctx, metadata.Pairs("x-header", md.Get("x-test")[0])); err != nil {
		return nil, err
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "t-"+md.Get("x-test")[0])); err != nil {
		return nil, err
	}
	if string(r.Key) == "fail" {
		s, err := status.New(codes.FailedPrecondition, "asked to fail").WithDetails(&pb.ResponseHeader{Revision: 42})
		if err != nil {
			return nil, err
		}
		return nil, s.Err()
	}
	return &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 7}}, nil
}

// TestForwardsMetadataHeadersTrailersAndStatus checks that a call's
// metadata reaches the upstream and its header, trailer, status code,
// message and details come back unchanged.
func TestForwardsMetadataHeadersTrailersAndStatus(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterKVServer(srv, echoKV{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	p := startProxy(t, etcdproxy.Config{Upstream: "http://" + lis.Addr().String()})
	conn, err := grpc.NewClient("passthrough:///"+p.URL()[len("http://"):], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := pb.NewKVClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-test", "v1")

	var hdr, trl metadata.MD
	resp, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("k")}, grpc.Header(&hdr), grpc.Trailer(&trl))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.GetRevision() != 7 {
		t.Errorf("response revision %d, want 7", resp.Header.GetRevision())
	}
	if got := hdr.Get("x-header"); len(got) != 1 || got[0] != "v1" {
		t.Errorf("header x-header %q, want [v1]", got)
	}
	if got := trl.Get("x-trailer"); len(got) != 1 || got[0] != "t-v1" {
		t.Errorf("trailer x-trailer %q, want [t-v1]", got)
	}

	hdr, trl = nil, nil
	_, err = kv.Range(ctx, &pb.RangeRequest{Key: []byte("fail")}, grpc.Header(&hdr), grpc.Trailer(&trl))
	s := status.Convert(err)
	if s.Code() != codes.FailedPrecondition || s.Message() != "asked to fail" {
		t.Fatalf("got %v, want FailedPrecondition asked to fail", err)
	}
	if d := s.Details(); len(d) != 1 || !proto.Equal(d[0].(proto.Message), &pb.ResponseHeader{Revision: 42}) {
		t.Errorf("details %v, want the response header of revision 42", d)
	}
	if got := trl.Get("x-trailer"); len(got) != 1 || got[0] != "t-v1" {
		t.Errorf("error trailer x-trailer %q, want [t-v1]", got)
	}

	// A method the upstream does not have fails there, not in the proxy.
	err = conn.Invoke(ctx, "/etcdserverpb.KV/NoSuchMethod", &pb.RangeRequest{}, &pb.RangeResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method: got %v, want Unimplemented", err)
	}
	checkCounts(t, p.Counts(), map[rowKey]row{
		{"start", "Range", "key"}:         {2, 1, 0, 1},
		{"start", "NoSuchMethod", "call"}: {1, 0, 0, 1},
	})
}

// runTLSEtcd starts an embedded member serving clients only over TLS with
// client certificates, and returns its client URL and a client TLS
// configuration.
func runTLSEtcd(t *testing.T) (string, *tls.Config) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	files, err := etcdproc.GenerateTLS(t.TempDir(), "root")
	if err != nil {
		t.Fatal(err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	clientURL := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
	peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: files.ServerCert, KeyFile: files.ServerKey,
		TrustedCAFile: files.CA, ClientCertAuth: true}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready in 30s")
	}
	tc, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + e.Clients[0].Addr().String(), tc
}

// TestTLSUpstreamRangeStreamAndOtherServices forwards to an etcd that
// requires client certificates: clientv3's RangeStream (etcd 3.7), a
// maintenance call and gRPC health pass, and are counted.
func TestTLSUpstreamRangeStreamAndOtherServices(t *testing.T) {
	upstream, tc := runTLSEtcd(t)
	p := startProxy(t, etcdproxy.Config{Upstream: upstream, TLS: tc})
	c := newClient(t, p)
	ctx := t.Context()
	const keys = 50
	for i := range keys {
		if _, err := c.Put(ctx, "/registry/configmaps/default/cm-"+string(rune('a'+i%26))+string(rune('a'+i/26)), "x"); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := c.GetStream(ctx, "/registry/configmaps/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var chunks, got int64
	for r := range ch {
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		chunks++
		got += int64(len(r.Kvs))
	}
	if got != keys {
		t.Fatalf("range stream: got %d keys, want %d", got, keys)
	}
	if _, err := c.Status(ctx, p.URL()); err != nil {
		t.Fatal(err)
	}
	h, err := healthpb.NewHealthClient(c.ActiveConnection()).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	checkCounts(t, p.Counts(), map[rowKey]row{
		{"start", "Put", "put"}:                           {keys, keys, 0, 0},
		{"start", "RangeStream", "prefix"}:                {1, chunks, keys, 0},
		{"start", "Status", "call"}:                       {1, 1, 0, 0},
		{"start", "/grpc.health.v1.Health/Check", "call"}: {1, 1, 0, 0},
	})
}

// TestCloseEndsOpenStreams closes the proxy under an open watch and lease
// keepalive stream: both end promptly, Close returns, the counts stay.
func TestCloseEndsOpenStreams(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	p := startProxy(t, etcdproxy.Config{Upstream: srv.Endpoints[0]})
	conn, err := grpc.NewClient("passthrough:///"+p.URL()[len("http://"):], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := t.Context()
	ws, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
		CreateRequest: &pb.WatchCreateRequest{Key: []byte("/registry/")}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := ws.Recv(); err != nil || !r.Created {
		t.Fatalf("watch: got %v %v, want created", r, err)
	}
	ka, err := pb.NewLeaseClient(conn).LeaseKeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ka.Send(&pb.LeaseKeepAliveRequest{ID: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ka.Recv(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	p.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("close took %v", d)
	}
	for name, recv := range map[string]func() error{
		"watch":     func() error { _, err := ws.Recv(); return err },
		"keepalive": func() error { _, err := ka.Recv(); return err },
	} {
		errc := make(chan error, 1)
		go func() { errc <- recv() }()
		select {
		case err := <-errc:
			if c := status.Code(err); c != codes.Unavailable && c != codes.Canceled {
				t.Errorf("%s after close: got %v, want Unavailable or Canceled", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s still open 5s after close", name)
		}
	}
	r, ok := p.Counts().Get("start", "Watch", "created")
	if !ok || r.Responses != 1 {
		t.Errorf("after close: watch created row %+v, want 1 response", r)
	}
	p.Close() // a second Close is a no-op
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := pb.NewKVClient(conn).Range(cctx, &pb.RangeRequest{Key: []byte("k")}); err == nil {
		t.Error("a call after close succeeded")
	}
}

func TestStartRejectsBadUpstream(t *testing.T) {
	tests := []struct {
		name, upstream string
		wantErr        error
	}{
		{"unix scheme", "unix:///tmp/etcd.sock", etcdproxy.ErrUpstreamScheme},
		{"no scheme", "127.0.0.1:2379", nil},
		{"host as scheme", "localhost:2379", etcdproxy.ErrUpstreamScheme},
		{"no host", "http://", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := etcdproxy.Start(t.Context(), etcdproxy.Config{Upstream: tt.upstream})
			if err == nil {
				p.Close()
				t.Fatalf("started a proxy to %q", tt.upstream)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestContextEndCloses checks that the end of Start's context closes the
// proxy: its port stops accepting connections.
func TestContextEndCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	p, err := etcdproxy.Start(ctx, etcdproxy.Config{Upstream: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	addr := p.URL()[len("http://"):]
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial before cancel: %v", err)
	}
	conn.Close()
	cancel()
	waitFor(t, func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
}
