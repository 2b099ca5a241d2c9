package etcdproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// startProxy starts a proxy in front of upstream, closed when the test ends.
func startProxy(t *testing.T, cfg etcdproxy.Config) *etcdproxy.Proxy {
	t.Helper()
	p, err := etcdproxy.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newClient returns a client of the proxy, closed when the test ends.
func newClient(t *testing.T, p *etcdproxy.Proxy) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{p.URL()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rowKey names a row in failure messages and wanted counts.
type rowKey struct{ phase, method, kind string }

// row is the counts a test wants of one row; bytes are checked only for
// being zero without messages, errors not when negative.
type row struct{ requests, responses, items, errors int64 }

// checkCounts fails the test unless got has exactly the rows of want.
func checkCounts(t *testing.T, got etcdproxy.Counts, want map[rowKey]row) {
	t.Helper()
	seen := map[rowKey]bool{}
	for _, r := range got {
		k := rowKey{r.Phase, r.Method, r.Kind}
		seen[k] = true
		w, ok := want[k]
		if !ok {
			t.Errorf("unexpected row %+v", r)
			continue
		}
		g := row{r.Requests, r.Responses, r.Items, r.Errors}
		if w.errors < 0 {
			g.errors = w.errors
		}
		if g != w {
			t.Errorf("%v: got requests %d responses %d items %d errors %d, want %d %d %d %d",
				k, g.requests, g.responses, g.items, g.errors, w.requests, w.responses, w.items, w.errors)
		}
		// Empty messages (StatusRequest) are 0 bytes; bytes without
		// messages are a bug.
		if (r.Requests == 0 && r.RequestBytes != 0) || (r.Responses == 0 && r.ResponseBytes != 0) {
			t.Errorf("%v: %d bytes in %d requests, %d bytes in %d responses", k, r.RequestBytes, r.Requests, r.ResponseBytes, r.Responses)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("no row %v", k)
		}
	}
	if t.Failed() {
		for _, r := range got {
			t.Logf("%+v", r)
		}
	}
}

// TestCountsPerKindAndPhase drives a client through the proxy and checks
// every row it counts, phase by phase.
func TestCountsPerKindAndPhase(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	p := startProxy(t, etcdproxy.Config{Upstream: srv.Endpoints[0]})
	c := newClient(t, p)
	ctx := t.Context()

	// seed: three puts, then reads of every Range kind.
	p.SetPhase("seed")
	var rev int64
	for _, name := range []string{"a", "b", "c"} {
		r, err := c.Put(ctx, "/registry/pods/default/"+name, "v-"+name)
		if err != nil {
			t.Fatal(err)
		}
		rev = r.Header.Revision
	}
	gets := []struct {
		key      string
		opts     []clientv3.OpOption
		wantKeys int
	}{
		{"/registry/pods/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithLimit(2)}, 2},
		{"/registry/pods/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}, 3},
		{"/registry/pods/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}, 0},
		{"/registry/pods/default/a", nil, 1},
		{"/registry/pods/default/a", nil, 1},
		{"/registry/pods/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(rev - 1), clientv3.WithSerializable()}, 2},
	}
	for _, g := range gets {
		r, err := c.Get(ctx, g.key, g.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) != g.wantKeys {
			t.Fatalf("get %s: got %d keys, want %d", g.key, len(r.Kvs), g.wantKeys)
		}
	}

	// steady: kube-apiserver's write transactions, a lease, watches.
	p.SetPhase("steady")
	key := "/registry/pods/default/d"
	create, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "v1")).Commit()
	if err != nil || !create.Succeeded {
		t.Fatalf("create txn: %v %v", create, err)
	}
	update, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", create.Header.Revision)).
		Then(clientv3.OpPut(key, "v2")).Else(clientv3.OpGet(key)).Commit()
	if err != nil || !update.Succeeded {
		t.Fatalf("update txn: %v %v", update, err)
	}
	// A write from a stale object: its compare fails, etcd answers with
	// the Else branch's read.
	stale, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", create.Header.Revision)).
		Then(clientv3.OpPut(key, "v3")).Else(clientv3.OpGet(key)).Commit()
	if err != nil || stale.Succeeded {
		t.Fatalf("stale update txn: %v %v, want a failed compare", stale, err)
	}
	lease, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/registry/events/default/e", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}

	// Two watchers on one stream: the informer's, from a revision with
	// progress notifications, and a second one cancelled below.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w1 := c.Watch(wctx, "/registry/configmaps/", clientv3.WithPrefix(), clientv3.WithRev(rev),
		clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
	w2ctx, w2cancel := context.WithCancel(ctx)
	w2 := c.Watch(w2ctx, "/registry/configmaps/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for _, w := range []clientv3.WatchChan{w1, w2} {
		if r := <-w; !r.Created {
			t.Fatalf("first watch response %+v, want created", r)
		}
	}
	put, err := c.Put(ctx, "/registry/configmaps/default/cm", "x")
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []clientv3.WatchChan{w1, w2} {
		r := <-w
		if len(r.Events) != 1 || r.Events[0].Kv.ModRevision != put.Header.Revision {
			t.Fatalf("watcher %d: got %+v, want the put", i+1, r)
		}
	}
	if err := c.RequestProgress(wctx); err != nil {
		t.Fatal(err)
	}
	for i, w := range []clientv3.WatchChan{w1, w2} {
		if r := <-w; !r.IsProgressNotify() || r.Header.Revision != put.Header.Revision {
			t.Fatalf("watcher %d: got %+v, want a progress notification at %d", i+1, r, put.Header.Revision)
		}
	}
	w2cancel()
	waitFor(t, func() bool {
		r, _ := p.Counts().Get("steady", "Watch", "canceled")
		return r.Responses == 1
	})

	// compacted: a read and a watch below the compact revision fail.
	p.SetPhase("compacted")
	if _, err := c.Compact(ctx, put.Header.Revision); err != nil {
		t.Fatal(err)
	}
	// clientv3 maps errors to its own values; the raw stub shows the
	// status as it came over the wire.
	_, err = pb.NewKVClient(c.ActiveConnection()).Range(ctx, &pb.RangeRequest{
		Key: []byte("/registry/pods/"), RangeEnd: []byte("/registry/pods0"), Limit: 500, Revision: rev})
	if got, want := status.Convert(err), status.Convert(rpctypes.ErrGRPCCompacted); got.Code() != want.Code() || got.Message() != want.Message() {
		t.Fatalf("range at compacted revision: got %v, want %v", err, rpctypes.ErrGRPCCompacted)
	}
	w3 := c.Watch(ctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	var r clientv3.WatchResponse
	for r = range w3 {
		if r.Err() != nil {
			break
		}
	}
	if !errors.Is(r.Err(), rpctypes.ErrCompacted) || r.CompactRevision != put.Header.Revision {
		t.Fatalf("watch from compacted revision: got %v compact revision %d, want %v at %d", r.Err(), r.CompactRevision, rpctypes.ErrCompacted, put.Header.Revision)
	}

	checkCounts(t, p.Counts(), map[rowKey]row{
		{"seed", "Put", "put"}:                                     {3, 3, 0, 0},
		{"seed", "Range", "prefix limit"}:                          {1, 1, 2, 0},
		{"seed", "Range", "prefix keys_only"}:                      {1, 1, 3, 0},
		{"seed", "Range", "prefix count_only"}:                     {1, 1, 0, 0},
		{"seed", "Range", "key"}:                                   {2, 2, 2, 0},
		{"seed", "Range", "prefix rev serializable"}:               {1, 1, 2, 0},
		{"steady", "Txn", "if mod_revision=0 then put"}:            {1, 1, 0, 0},
		{"steady", "Txn", "if mod_revision=? then put else range"}: {2, 2, 0, 0},
		{"steady", "LeaseGrant", "grant ttl=60s"}:                  {1, 1, 0, 0},
		// clientv3's KeepAliveOnce (client/v3/lease.go keepAliveOnce)
		// half-closes its stream and then cancels it: etcd ends the
		// stream cleanly when the half-close reaches it first, else the
		// proxy sees the cancellation. Either is 0 or 1 errors.
		{"steady", "LeaseKeepAlive", "stream"}:                   {1, 0, 0, -1},
		{"steady", "LeaseKeepAlive", "keepalive"}:                {1, 1, 0, 0},
		{"steady", "Put", "put lease"}:                           {1, 1, 0, 0},
		{"steady", "Put", "put"}:                                 {1, 1, 0, 0},
		{"steady", "Watch", "stream"}:                            {1, 0, 0, 0},
		{"steady", "Watch", "create prefix rev progress_notify"}: {1, 0, 0, 0},
		{"steady", "Watch", "create prefix"}:                     {1, 0, 0, 0},
		{"steady", "Watch", "created"}:                           {0, 2, 0, 0},
		{"steady", "Watch", "events"}:                            {0, 2, 2, 0},
		{"steady", "Watch", "progress"}:                          {1, 0, 0, 0},
		{"steady", "Watch", "progress notify all"}:               {0, 1, 0, 0},
		{"steady", "Watch", "cancel"}:                            {1, 0, 0, 0},
		{"steady", "Watch", "canceled"}:                          {0, 1, 0, 0},
		{"compacted", "Compact", "compact"}:                      {1, 1, 0, 0},
		{"compacted", "Range", "prefix limit rev"}:               {1, 0, 0, 1},
		{"compacted", "Watch", "create prefix rev"}:              {1, 0, 0, 0},
		{"compacted", "Watch", "created"}:                        {0, 1, 0, 0},
		{"compacted", "Watch", "compacted"}:                      {0, 1, 0, 0},
	})
	// Only the stale update's compare failed.
	for _, r := range p.Counts() {
		want := int64(0)
		if r.Phase == "steady" && r.Method == "Txn" && r.Kind == "if mod_revision=? then put else range" {
			want = 1
		}
		if r.FailedCompares != want {
			t.Errorf("%s %s %q: %d failed compares, want %d", r.Phase, r.Method, r.Kind, r.FailedCompares, want)
		}
	}
	if got, want := p.Counts().Phases(), []string{"seed", "steady", "compacted"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("phases with rows %v, want %v", got, want)
	}
	if got, want := p.Counter().Phases(), []string{"start", "seed", "steady", "compacted"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("phases %v, want %v", got, want)
	}
}

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCountsPerResource writes pods and node leases through the proxy as
// kube-apiserver does, lists both and watches both on one stream: every
// row is counted under its resource, the watch responses under their own
// watch's.
func TestCountsPerResource(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	p := startProxy(t, etcdproxy.Config{Upstream: srv.Endpoints[0]})
	c := newClient(t, p)
	ctx := t.Context()
	p.SetPhase("steady")

	// Two watches with the same context share one gRPC stream.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	pods := c.Watch(wctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	leases := c.Watch(wctx, "/registry/leases/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for _, w := range []clientv3.WatchChan{pods, leases} {
		if r := <-w; !r.Created {
			t.Fatalf("first watch response %+v, want created", r)
		}
	}
	create := func(key string) {
		t.Helper()
		r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, "v")).Commit()
		if err != nil || !r.Succeeded {
			t.Fatalf("create %s: %v %v", key, r, err)
		}
	}
	create("/registry/pods/default/a")
	for _, n := range []string{"n1", "n2"} {
		create("/registry/leases/kube-node-lease/" + n)
	}
	if _, err := c.Put(ctx, "/registry/leases/kube-node-lease/n1", "renewed"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "/registry/leases/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "/registry/pods/default/a"); err != nil {
		t.Fatal(err)
	}
	var podEvents, leaseEvents int
	for podEvents < 1 || leaseEvents < 3 {
		select {
		case r := <-pods:
			podEvents += len(r.Events)
		case r := <-leases:
			leaseEvents += len(r.Events)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d pod and %d lease events, want 1 and 3", podEvents, leaseEvents)
		}
	}

	type key struct{ method, kind, resource string }
	got := map[key]etcdproxy.Row{}
	for _, r := range p.Counts() {
		if r.Phase != "steady" {
			t.Errorf("row in phase %q: %+v", r.Phase, r)
		}
		got[key{r.Method, r.Kind, r.Resource}] = r
	}
	const lease = "leases.coordination.k8s.io"
	want := []struct {
		key
		requests, responses, items int64
	}{
		{key{"Watch", "stream", ""}, 1, 0, 0},
		{key{"Watch", "create prefix", "pods"}, 1, 0, 0},
		{key{"Watch", "create prefix", lease}, 1, 0, 0},
		{key{"Watch", "created", "pods"}, 0, 1, 0},
		{key{"Watch", "created", lease}, 0, 1, 0},
		{key{"Watch", "events", "pods"}, 0, 1, 1},
		{key{"Watch", "events", lease}, 0, -1, 3}, // etcd may send two revisions' events in one response
		{key{"Txn", "if mod_revision=0 then put", "pods"}, 1, 1, 0},
		{key{"Txn", "if mod_revision=0 then put", lease}, 2, 2, 0},
		{key{"Put", "put", lease}, 1, 1, 0},
		{key{"Range", "prefix", lease}, 1, 1, 2},
		{key{"Range", "key", "pods"}, 1, 1, 1},
	}
	for _, w := range want {
		r, ok := got[w.key]
		if !ok {
			t.Errorf("no row %v", w.key)
			continue
		}
		delete(got, w.key)
		if w.responses < 0 {
			w.responses = r.Responses
		}
		if r.Requests != w.requests || r.Responses != w.responses || r.Items != w.items {
			t.Errorf("%v: got requests %d responses %d items %d, want %d %d %d", w.key, r.Requests, r.Responses, r.Items, w.requests, w.responses, w.items)
		}
	}
	for k, r := range got {
		t.Errorf("unexpected row %v: %+v", k, r)
	}
	times := p.Counter().PhaseTimes()
	if len(times) != 2 || times[1].Phase != "steady" || times[1].Duration <= 0 || times[0].Duration < 0 {
		t.Errorf("phase times %+v, want start then steady, lasting", times)
	}
}

// TestSlowReaderHoldsOneResponse streams a range of large values through
// the proxy to a client that reads the first response and then stops:
// the proxy reads the second from etcd and waits until it is written to
// the client before it reads a third, so it holds one large response for
// a stalled reader, not two (forwardResponses, writtenBeforeNextBytes).
// Once the client reads again, the whole range arrives.
func TestSlowReaderHoldsOneResponse(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	up := etcdtest.NewClient(t, srv)
	value := string(make([]byte, 400<<10))
	const keys = 40
	for i := range keys {
		if _, err := up.Put(t.Context(), fmt.Sprintf("/registry/configmaps/ns/c%02d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	p := startProxy(t, etcdproxy.Config{Upstream: srv.Endpoints[0], Prefixes: []string{"/registry"}})
	// A fixed 64 KiB window: a client whose window had grown would take
	// in a whole response it does not read.
	conn, err := grpc.NewClient(strings.TrimPrefix(p.URL(), "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(64<<10), grpc.WithStaticConnWindowSize(64<<20),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := pb.NewKVClient(conn).RangeStream(t.Context(),
		&pb.RangeRequest{Key: []byte("/registry/configmaps/"), RangeEnd: []byte("/registry/configmaps0")})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	got := len(first.RangeResponse.Kvs)
	received := func() int64 {
		var n int64
		for _, r := range p.Counter().Counts() {
			if r.Method == "RangeStream" {
				n += r.Responses
			}
		}
		return n
	}
	waitFor(t, func() bool { return received() >= 2 })
	time.Sleep(500 * time.Millisecond) // time enough to read a third, were it not held back
	if n := received(); n != 2 {
		t.Errorf("with the client stalled after the first response the proxy read %d responses from etcd, want 2", n)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		got += len(resp.RangeResponse.Kvs)
	}
	if got != keys {
		t.Errorf("got %d keys through the proxy, want %d", got, keys)
	}
}
