package etcdproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// Config describes a Proxy.
type Config struct {
	// Upstream is the URL of the etcd endpoint every call is forwarded to:
	// "http://host:port" or "https://host:port" (a client URL as etcd's
	// --advertise-client-urls lists it). Required.
	Upstream string
	// TLS is the client TLS configuration for an https Upstream; nil means
	// the system roots and no client certificate. It is ignored for http.
	TLS *tls.Config
	// Listen is the address the proxy listens on; empty means
	// "127.0.0.1:0", a free loopback port.
	Listen string
	// Counter receives the counts; nil means a new Counter of the proxy's
	// own. Proxies of several members may share one.
	Counter *Counter
	// CloseTimeout bounds how long Close waits for in-flight calls to
	// return after cancelling them; 0 means 5 seconds.
	CloseTimeout time.Duration
	// Prefixes are the key prefixes (kube-apiserver's --etcd-prefix)
	// below which a key's first segment names its resource (Row.Resource);
	// nil means keyspace.KnownPrefixes.
	Prefixes []string
}

// Proxy is a running counting proxy in front of one etcd endpoint. It
// speaks plain gRPC over HTTP/2 without TLS (h2c), which is what clientv3
// and kube-apiserver dial for an http:// endpoint.
type Proxy struct {
	counter      *Counter
	lis          net.Listener
	srv          *grpc.Server
	target       string
	creds        credentials.TransportCredentials
	closeTimeout time.Duration
	prefixes     []string // Config.Prefixes without trailing slashes

	handlers sync.WaitGroup
	mu       sync.Mutex
	closed   bool
	conns    map[*downstream]struct{}
	served   chan struct{}
}

// Start listens on cfg.Listen and forwards every gRPC call it accepts to
// cfg.Upstream until ctx ends or Close is called. It returns an error if
// the upstream URL is not http or https or the address cannot be listened
// on; it does not dial etcd: each downstream connection gets its own
// upstream connection, dialed lazily, so etcd sees as many client
// connections as it would without the proxy.
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	u, err := url.Parse(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("etcd proxy upstream %q: %w", cfg.Upstream, err)
	}
	var creds credentials.TransportCredentials
	switch u.Scheme {
	case "http":
		creds = insecure.NewCredentials()
	case "https":
		tc := &tls.Config{}
		if cfg.TLS != nil {
			tc = cfg.TLS.Clone()
		}
		creds = credentials.NewTLS(tc)
	default:
		return nil, fmt.Errorf("etcd proxy upstream %q: %w", cfg.Upstream, ErrUpstreamScheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("etcd proxy upstream %q: no host", cfg.Upstream)
	}
	addr := cfg.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("etcd proxy listen on %s: %w", addr, err)
	}
	p := &Proxy{
		counter:      cfg.Counter,
		lis:          lis,
		target:       "passthrough:///" + u.Host,
		creds:        creds,
		closeTimeout: cfg.CloseTimeout,
		prefixes:     trimPrefixes(cfg.Prefixes),
		conns:        map[*downstream]struct{}{},
		served:       make(chan struct{}),
	}
	if p.counter == nil {
		p.counter = NewCounter()
	}
	if p.closeTimeout == 0 {
		p.closeTimeout = 5 * time.Second
	}
	p.srv = grpc.NewServer(
		grpc.UnknownServiceHandler(p.handle),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.StatsHandler(connTagger{p}),
		grpc.MaxRecvMsgSize(math.MaxInt32),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(math.MaxUint32),
		// etcd's own policy (server/etcdserver/api/v3rpc/grpc.go), but
		// also allowing pings without streams: clientv3 sends them.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(lis) // returns after Stop; nothing to report then
	}()
	go func() {
		select {
		case <-ctx.Done():
			p.Close()
		case <-p.served:
		}
	}()
	return p, nil
}

// URL returns the proxy's client URL, "http://127.0.0.1:port", for
// kube-apiserver's --etcd-servers or clientv3's Endpoints.
func (p *Proxy) URL() string { return "http://" + p.lis.Addr().String() }

// Counter returns the Counter the proxy counts into.
func (p *Proxy) Counter() *Counter { return p.counter }

// SetPhase is p.Counter().SetPhase(name).
func (p *Proxy) SetPhase(name string) { p.counter.SetPhase(name) }

// Counts is p.Counter().Counts().
func (p *Proxy) Counts() Counts { return p.counter.Counts() }

// Reset is p.Counter().Reset().
func (p *Proxy) Reset() { p.counter.Reset() }

// Close stops listening, ends every call in flight (its client sees
// codes.Unavailable or Canceled), closes the upstream connections and
// waits up to Config.CloseTimeout for the proxy's goroutines. Counts stay
// readable. It is safe to call more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()

	p.srv.Stop()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for d := range conns {
		d.close()
	}
	done := make(chan struct{})
	go func() {
		p.handlers.Wait()
		<-p.served
		close(done)
	}()
	t := time.NewTimer(p.closeTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// upstreamStreamWindow and upstreamConnWindow are the HTTP/2 flow-control
// windows the proxy gives etcd on its upstream connections, in bytes:
// fixed, which turns off gRPC's window growth from its bandwidth-delay
// estimate (google.golang.org/grpc dialoptions.go StaticWindowSize;
// internal/transport http2_client.go newHTTP2Client, bdpEst, up to 16 MiB
// a stream). A stream's window
// is what etcd may send before the proxy reads it, so it bounds what
// the proxy buffers for a stream whose client reads slowly: without the
// bound, a kube-apiserver streaming 100 watch-lists' state from etcd
// (RangeStream chunks of about --max-request-bytes, 1.5 MiB, each) left
// 281 MB in the proxy's receive buffers (a heap profile of issue 21's
// 300-informer run). Messages larger than the window still pass: gRPC
// widens a stream's window for the message it is reading
// (http2_client.go adjustWindow). The connection's window is returned as
// data arrives, not as it is read, so it stalls no stream.
const (
	upstreamStreamWindow = 1 << 20
	upstreamConnWindow   = 16 << 20
)

// downstream is one client connection to the proxy and its own upstream
// connection.
type downstream struct {
	once sync.Once
	cc   *grpc.ClientConn
	err  error
}

func (d *downstream) conn(p *Proxy) (*grpc.ClientConn, error) {
	d.once.Do(func() {
		d.cc, d.err = grpc.NewClient(p.target,
			grpc.WithTransportCredentials(p.creds),
			grpc.WithStaticStreamWindowSize(upstreamStreamWindow),
			grpc.WithStaticConnWindowSize(upstreamConnWindow),
			grpc.WithDefaultCallOptions(
				grpc.ForceCodecV2(rawCodec{}),
				grpc.MaxCallRecvMsgSize(math.MaxInt32),
				grpc.MaxCallSendMsgSize(math.MaxInt32),
			))
	})
	return d.cc, d.err
}

func (d *downstream) close() {
	d.once.Do(func() { d.err = ErrClosed })
	if d.cc != nil {
		_ = d.cc.Close() // only fails when already closed
	}
}

type downstreamKey struct{}

// connTagger gives each downstream connection a *downstream in its
// context and closes its upstream connection when it ends.
type connTagger struct{ p *Proxy }

func (t connTagger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	d := &downstream{}
	t.p.mu.Lock()
	if t.p.conns != nil {
		t.p.conns[d] = struct{}{}
	} else {
		d.once.Do(func() { d.err = ErrClosed })
	}
	t.p.mu.Unlock()
	return context.WithValue(ctx, downstreamKey{}, d)
}

func (t connTagger) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); !ok {
		return
	}
	d, _ := ctx.Value(downstreamKey{}).(*downstream)
	if d == nil {
		return
	}
	t.p.mu.Lock()
	delete(t.p.conns, d)
	t.p.mu.Unlock()
	d.close()
}

func (connTagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connTagger) HandleRPC(context.Context, stats.RPCStats)                       {}

// streamDesc lets one upstream stream carry any call: a unary call is a
// stream with one message each way on the wire.
var streamDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// handle forwards one call, counting each message before it forwards it.
func (p *Proxy) handle(_ any, ss grpc.ServerStream) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return status.Error(codes.Unavailable, "etcd proxy: closed")
	}
	p.handlers.Add(1)
	p.mu.Unlock()
	defer p.handlers.Done()
	full, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "etcd proxy: no method")
	}
	method := methodName(full)
	bidi := bidirectional(method)
	d, _ := ss.Context().Value(downstreamKey{}).(*downstream)
	if d == nil {
		return status.Error(codes.Internal, "etcd proxy: connection not tagged")
	}
	cc, err := d.conn(p)
	if err != nil {
		return status.Errorf(codes.Unavailable, "etcd proxy: upstream: %v", err)
	}

	var key []byte
	var streamRow *entry
	if bidi {
		key = appendKey(key, method, kindStream)
		streamRow = p.counter.add(key, delta{requests: 1})
	}

	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	md, _ := metadata.FromIncomingContext(ss.Context())
	ctx = metadata.NewOutgoingContext(ctx, outgoing(md))
	cs, err := cc.NewStream(ctx, streamDesc, full)
	if err != nil {
		p.countError(method, streamRow, nil, key)
		return err
	}

	// lastReq is the row of the latest request message: the responses of
	// unary and server-streaming calls count there.
	var lastReq atomic.Pointer[entry]
	var ws *watches
	if method == "Watch" {
		ws = &watches{ids: map[int64]string{}}
	}
	p.handlers.Add(1) // the handler's own count is held: no race with Close's Wait
	go func() {
		defer p.handlers.Done()
		p.forwardRequests(ss, cs, method, &lastReq, ws, cancel)
	}()
	err = p.forwardResponses(ss, cs, method, bidi, &lastReq, ws)
	if err != nil {
		p.countError(method, streamRow, lastReq.Load(), key)
	}
	return err
}

// countError counts a call that ended with an error: on the stream row of
// a bidirectional stream, else on its request's row.
func (p *Proxy) countError(method string, streamRow, req *entry, scratch []byte) {
	switch {
	case streamRow != nil:
		p.counter.addTo(streamRow, false, scratch, delta{errors: 1})
	case req != nil:
		p.counter.addTo(req, false, scratch, delta{errors: 1})
	default:
		p.counter.add(appendKey(scratch[:0], method, kindNoRequest), delta{errors: 1})
	}
}

// forwardRequests copies request messages from the client to etcd until
// the client half-closes (then it half-closes upstream) or either side
// fails (then it cancels the upstream stream if the client failed). On a
// Watch stream (ws set) it notes each create request's resource before
// forwarding it, and counts a cancel request under its watch's.
func (p *Proxy) forwardRequests(ss grpc.ServerStream, cs grpc.ClientStream, method string, lastReq *atomic.Pointer[entry], ws *watches, cancel context.CancelFunc) {
	rc := requestCounter{counter: p.counter, prefixes: p.prefixes, method: method, ws: ws}
	for {
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				_ = cs.CloseSend() // never fails (grpc-go documents it)
			} else {
				cancel()
			}
			return
		}
		b, buf := bytesOf(f.data)
		lastReq.Store(rc.count(b, f.data.Len()))
		freeBuffer(buf)
		err := cs.SendMsg(&f)
		f.free()
		if err != nil {
			// The stream ended upstream; forwardResponses returns its status.
			return
		}
	}
}

// forwardResponses sends the upstream stream's header, messages and
// trailer to the client and returns the upstream status (nil for OK).
//
// A Watch response counts under the resource of its watch (ws): a
// "created" response under the oldest create request not yet answered
// (etcd answers a stream's creates in order: server/etcdserver/api/v3rpc/watch.go
// recvLoop), and it maps its watch_id to that resource; the others under
// their watch_id's, which a "canceled" or "compacted" response forgets; a
// response for watch_id -1 (progress notify all, a failed create) under
// none.
func (p *Proxy) forwardResponses(ss grpc.ServerStream, cs grpc.ClientStream, method string, bidi bool, lastReq *atomic.Pointer[entry], ws *watches) error {
	if hdr, err := cs.Header(); err == nil && len(hdr) > 0 {
		if err := ss.SendHeader(hdr); err != nil {
			return err
		}
	}
	var key []byte
	var written *writeSignal
	for {
		var f frame
		if err := cs.RecvMsg(&f); err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		d := delta{responses: 1, responseBytes: int64(f.data.Len())}
		switch method {
		case "Watch":
			b, buf := bytesOf(f.data)
			key = p.counter.countWatchResponse(ws, key, b, d)
			freeBuffer(buf)
		default:
			switch method {
			case "Range":
				b, buf := bytesOf(f.data)
				d.items = max(countField(b, rangeResponseKvs), 0)
				freeBuffer(buf)
			case "RangeStream":
				b, buf := bytesOf(f.data)
				d.items = rangeStreamKeys(b)
				freeBuffer(buf)
			case "Txn":
				b, buf := bytesOf(f.data)
				if succeeded, ok := txnSucceeded(b); ok && !succeeded {
					d.failedCompares = 1
				}
				freeBuffer(buf)
			}
			if req := lastReq.Load(); req != nil {
				key = p.counter.addTo(req, bidi, key, d)
			} else {
				p.counter.add(appendKey(key[:0], method, kindNoRequest), d)
			}
		}
		large := f.data.Len() >= writtenBeforeNextBytes
		if large {
			if written == nil {
				written = newWriteSignal()
			}
			f.data = append(f.data, written.sentinel())
		}
		err := ss.SendMsg(&f)
		f.free()
		if err != nil {
			return err
		}
		if large {
			select {
			case <-written.done:
			case <-ss.Context().Done():
				return ss.Context().Err()
			}
		}
	}
}

// writtenBeforeNextBytes is the size from which forwardResponses waits
// until a response is written to the client before it reads the next
// from etcd. gRPC's SendMsg returns once the message is queued and the
// stream's write quota (64 KiB) has room again; without the wait the
// proxy holds the queued message, the next one whole and the start of a
// third for each stream whose client reads slowly (a kube-apiserver
// reading 100 watch-lists' RangeStream chunks of about 1.5 MiB each at
// its informers' pace), with it one and the start of the next
// (upstreamStreamWindow). Smaller responses (watch events, unary
// answers) are forwarded without waiting.
const writtenBeforeNextBytes = 256 << 10

// writeSignal tells when gRPC has written a forwarded response: its
// sentinel, an empty buffer appended to the response's, is freed with
// them once loopy has written the message or its stream ended
// (google.golang.org/grpc internal/transport controlbuf.go processData,
// reader.Close), and gRPC then puts the sentinel's bytes back in its pool,
// the writeSignal, which signals done. One per stream, one message at a
// time.
type writeSignal struct {
	buf  []byte
	done chan struct{}
}

// newWriteSignal returns a writeSignal whose sentinel's capacity is above
// gRPC's pooling threshold (mem.NewBuffer does not pool a smaller one).
func newWriteSignal() *writeSignal {
	return &writeSignal{buf: make([]byte, 0, 4<<10), done: make(chan struct{}, 1)}
}

// sentinel returns a new empty buffer whose release signals done.
func (w *writeSignal) sentinel() mem.Buffer { return mem.NewBuffer(&w.buf, w) }

// Get is never called: gRPC gets no buffer from a sentinel's pool.
func (w *writeSignal) Get(length int) *[]byte {
	b := make([]byte, length)
	return &b
}

// Put signals that the sentinel's message was written (or dropped).
func (w *writeSignal) Put(*[]byte) {
	select {
	case w.done <- struct{}{}:
	default:
	}
}

// requestCounter counts the request messages of one stream, on the
// stream's request goroutine.
type requestCounter struct {
	counter  *Counter
	prefixes []string // Proxy.prefixes
	method   string
	ws       *watches // a Watch stream's; nil for other methods
	c        classifier
	key      []byte // scratch space for the row's key
}

// count counts request message b of n bytes (on the wire, with b its
// bytes) in the row of its kind and resource, and returns the row. On a
// Watch stream it notes a create request's resource before the request is
// forwarded, and counts a cancel request under its watch's resource.
func (r *requestCounter) count(b []byte, n int) *entry {
	r.key = r.c.appendRequestKind(appendKey(r.key[:0], r.method, ""), r.method, b)
	// The resource's path follows the kind and a 0 byte (appendPath), in
	// the same buffer: one buffer per stream.
	kindEnd := len(r.key)
	r.key = appendResourcePath(append(r.key, 0), r.c.key, r.prefixes)
	switch path := r.key[kindEnd+1:]; {
	case r.ws != nil:
	case string(path) == "leases":
		r.key = appendLeaseScope(r.key, r.c.key, r.prefixes)
	case (r.method == "Range" || r.method == "RangeStream") && len(r.c.rng.RangeEnd) == 0 && len(r.c.key) > 0:
		r.key = appendPrefixKeyScope(r.key, r.c.key, path, r.prefixes)
	}
	if r.ws != nil {
		switch {
		case r.c.watch.GetCreateRequest() != nil:
			r.ws.create(r.key[kindEnd+1:])
		case r.c.watch.GetCancelRequest() != nil:
			r.key = append(r.key[:kindEnd+1], r.ws.of(r.c.watch.GetCancelRequest().WatchId)...)
		}
	}
	if len(r.key) == kindEnd+1 {
		r.key = r.key[:kindEnd] // no resource
	}
	return r.counter.add(r.key, delta{requests: 1, requestBytes: int64(n)})
}

// countWatchResponse counts Watch response b with d (its size) in the row
// of its kind under the resource of its watch (ws.response), using key as
// scratch space, and returns key.
func (c *Counter) countWatchResponse(ws *watches, key, b []byte, d delta) []byte {
	w := scanWatchResponse(b)
	d.items = w.events
	key = appendPath(w.appendKind(appendKey(key[:0], "Watch", "")), ws.response(w))
	c.add(key, d)
	return key
}

// watches maps the watches of one Watch stream to their resources' paths
// (appendResourcePath). It is safe for concurrent use: requests and
// responses pass on two goroutines.
type watches struct {
	mu sync.Mutex
	// pending are the paths of the create requests not yet answered, in
	// the order sent.
	pending []string
	// ids maps the watch_id of each watch created and not yet canceled
	// to its path.
	ids map[int64]string
}

// create notes a create request for a watch of path, before it is
// forwarded.
func (ws *watches) create(path []byte) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.pending = append(ws.pending, string(path))
}

// of returns the path of watch id, "" if none is known.
func (ws *watches) of(id int64) string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.ids[id]
}

// response returns the path a Watch response counts under (see
// forwardResponses) and updates the map by it.
func (ws *watches) response(w watchResponse) string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case !w.ok:
		return ""
	case w.created:
		if len(ws.pending) == 0 {
			return ""
		}
		path := ws.pending[0]
		ws.pending = ws.pending[1:]
		if !w.canceled && w.watchID != invalidWatchID {
			ws.ids[w.watchID] = path
		}
		return path
	case w.canceled || w.compactRev > 0:
		path := ws.ids[w.watchID]
		delete(ws.ids, w.watchID)
		return path
	}
	return ws.ids[w.watchID]
}

// outgoing returns the metadata to send upstream: the client's, without
// the HTTP/2 pseudo-headers and transport headers gRPC sets itself.
func outgoing(md metadata.MD) metadata.MD {
	out := make(metadata.MD, len(md))
	for k, v := range md {
		if strings.HasPrefix(k, ":") || k == "content-type" || k == "user-agent" || k == "te" || strings.HasPrefix(k, "grpc-") {
			continue
		}
		out[k] = v
	}
	return out
}

// bytesOf returns the message's bytes as one slice: the buffer itself
// when the message arrived in one, else a copy in a buffer from gRPC's
// pool, also returned, which the caller gives back with freeBuffer once
// it no longer uses the slice.
func bytesOf(data mem.BufferSlice) ([]byte, mem.Buffer) {
	switch len(data) {
	case 0:
		return nil, nil
	case 1:
		return data[0].ReadOnlyData(), nil
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	return buf.ReadOnlyData(), buf
}

func freeBuffer(buf mem.Buffer) {
	if buf != nil {
		buf.Free()
	}
}

// frame is one gRPC message as received: its bytes, not decoded.
type frame struct{ data mem.BufferSlice }

func (f *frame) free() {
	if f.data != nil {
		f.data.Free()
		f.data = nil
	}
}

// rawCodec passes messages through as bytes. Unmarshal keeps a reference
// to the received buffers and Marshal hands them on, so forwarding copies
// nothing; gRPC frees the buffers once they are written. Its name makes
// upstream requests carry content-type application/grpc+proto, which etcd
// serves as it serves application/grpc.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("etcd proxy codec: cannot marshal %T", v)
	}
	data := f.data
	f.data = nil
	return data, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("etcd proxy codec: cannot unmarshal into %T", v)
	}
	data.Ref()
	f.data = data
	return nil
}
