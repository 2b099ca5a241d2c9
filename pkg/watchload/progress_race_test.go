package watchload

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// reproProgressEnv enables TestReproProgressNotificationBeforeEvents
// (scripts/repro-progress-overtake.sh sets it).
const reproProgressEnv = "ETCDKIT_REPRO_PROGRESS"

// TestReproProgressNotificationBeforeEvents reproduces the bookmark
// violation seen in the README's partition-follower run: a watch created
// on a gRPC stream that already carries another watch receives, before its
// own events, a progress notification at a revision R above them, and
// then the events at or below R.
//
// The mechanism (etcd v3.7.3): a progress request (clientv3
// RequestProgress) is answered for the stream as a whole, with watch id
// -1, through the watch channel, once every watch of the stream is synced
// (server/storage/mvcc/watchable_store.go progressIfSync). A watch created
// right after the request is not among them; its Created response goes
// through the control channel, which sendLoop may pick first
// (server/etcdserver/api/v3rpc/watch.go sendLoop selects between the two),
// and clientv3 broadcasts a watch id -1 notification to every watch it
// knows by then (client/v3/watch.go dispatchEvent, broadcastResponse),
// the new one included, although its events from its older start revision
// follow. lwbench's fault runner asks for progress every 100 ms on the
// stream of a watcher that is behind, which is the watcher that relists
// and watches again after the partition.
//
// It fails when etcd shows the violation, printing the sequence; it runs
// only with ETCDKIT_REPRO_PROGRESS=1, as a reproducer, since the race is
// timing-dependent: at most 300 attempts or 60 seconds.
func TestReproProgressNotificationBeforeEvents(t *testing.T) {
	if os.Getenv(reproProgressEnv) == "" {
		t.Skipf("a reproducer of an etcd race; set %s=1 (scripts/repro-progress-overtake.sh)", reproProgressEnv)
	}
	srv := etcdtest.RunEtcd(t)
	wire := &watchWire{}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   srv.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithStreamInterceptor(wire.intercept)},
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	// Events for the new watch to catch up on: it starts below them.
	first := int64(0)
	var last int64
	for i := range 300 {
		r, err := c.Put(ctx, fmt.Sprintf("/b/%03d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = r.Header.Revision
		}
		last = r.Header.Revision
	}

	// Another watch on the same stream, kept busy (prevKV costs a read
	// per event) so that the stream's sendLoop is often not waiting.
	st := NewStream(0, 0, c, "")
	sctx := st.Context(ctx)
	wa := c.Watch(sctx, "/a/", clientv3.WithPrefix(), clientv3.WithPrevKV())
	go func() {
		for range wa {
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; wctx.Err() == nil; i++ {
				c.Put(wctx, fmt.Sprintf("/a/%d-%d", w, i%100), "v")
			}
		}()
	}

	// The history the validator checks the watch against, recorded on a
	// stream of its own.
	rec := NewRecorder(NewStream(1, 0, c, ""), []string{"/b/"})
	go rec.Run(ctx, first)

	deadline := time.Now().Add(60 * time.Second)
	for attempt := 1; attempt <= 300 && time.Now().Before(deadline); attempt++ {
		wire.reset()
		vs := &Violations{}
		v := newValidator(0, rec, "/b/", vs)
		seq, bad := watchAfterProgressRequest(ctx, c, st, v, first, last)
		if !bad {
			continue
		}
		if err := rec.WaitFor(ctx, last, 100*time.Millisecond); err != nil {
			t.Fatalf("history recorder: %v", err)
		}
		v.finish()
		lost, dup, late := vs.Count(ViolationReliable), vs.Count(ViolationUnique), vs.Count(ViolationBookmarkable)
		// Every event arrived once and in order, after a notification
		// that claimed them delivered: bookmark violations only.
		if lost != 0 || dup != 0 || late == 0 || late != vs.Total() {
			t.Errorf("validator: %d lost, %d duplicated, %d bookmark violations of %d, want only bookmark violations: %+v",
				lost, dup, late, vs.Total(), vs.Samples())
		}
		t.Fatalf("etcd broke the bookmarkable guarantee (attempt %d): a watch of /b/ from revision %d (events %d..%d) received %s; "+
			"the validator counted %d bookmark violations, %d lost, %d duplicated\n"+
			"on the wire (watch 0 is the other watch on the stream; its events left out):\n%s",
			attempt, first, first, last, seq, late, lost, dup, strings.Join(wire.lines(), "\n"))
	}
	t.Logf("no progress notification arrived before the events it covers in the attempts made")
}

// watchAfterProgressRequest requests progress on st, then watches /b/
// from revision from until the event at revision to arrives, passing
// every response to v; it reports whether a progress notification at or
// above an event's revision came before that event, with the sequence.
func watchAfterProgressRequest(ctx context.Context, c *clientv3.Client, st *Stream, v *validator, from, to int64) (string, bool) {
	wctx, cancel := context.WithTimeout(st.Context(ctx), 10*time.Second)
	defer cancel()
	st.RequestProgress(ctx)
	v.startSession(from)
	wch := c.Watch(wctx, "/b/", clientv3.WithPrefix(), clientv3.WithRev(from))
	var progress int64
	var seq string
	for resp := range wch {
		v.drain()
		if resp.IsProgressNotify() {
			v.progress(resp.Header.Revision)
			progress = max(progress, resp.Header.Revision)
			continue
		}
		v.events(appendWatchEvents(nil, resp.Events))
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision <= progress && seq == "" {
				seq = fmt.Sprintf("a progress notification at revision %d (member %x) first, then the event at revision %d (%s) and the others up to %d",
					progress, resp.Header.MemberId, ev.Kv.ModRevision, ev.Kv.Key, to)
			}
			if ev.Kv.ModRevision >= to {
				return seq, seq != ""
			}
		}
	}
	return seq, seq != ""
}

// watchWire records the watch requests sent and the watch responses
// received on the gRPC streams of a client, except the event responses of
// watch 0.
type watchWire struct {
	mu  sync.Mutex
	log []string
}

func (w *watchWire) reset() {
	w.mu.Lock()
	w.log = w.log[:0]
	w.mu.Unlock()
}

func (w *watchWire) add(line string) {
	w.mu.Lock()
	if len(w.log) < 40 {
		w.log = append(w.log, line)
	}
	w.mu.Unlock()
}

func (w *watchWire) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log...)
}

func (w *watchWire) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return s, err
	}
	return &wiredStream{ClientStream: s, wire: w}, nil
}

type wiredStream struct {
	grpc.ClientStream
	wire *watchWire
}

func (s *wiredStream) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok {
		switch {
		case r.GetCreateRequest() != nil:
			s.wire.add(fmt.Sprintf("sent     create %s from revision %d", r.GetCreateRequest().Key, r.GetCreateRequest().StartRevision))
		case r.GetProgressRequest() != nil:
			s.wire.add("sent     progress request")
		case r.GetCancelRequest() != nil:
			s.wire.add(fmt.Sprintf("sent     cancel watch %d", r.GetCancelRequest().WatchId))
		}
	}
	return s.ClientStream.SendMsg(m)
}

func (s *wiredStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	r, ok := m.(*pb.WatchResponse)
	if err != nil || !ok {
		return err
	}
	switch {
	case r.Created:
		s.wire.add(fmt.Sprintf("received created watch %d at revision %d", r.WatchId, r.Header.Revision))
	case r.Canceled:
		s.wire.add(fmt.Sprintf("received canceled watch %d", r.WatchId))
	case len(r.Events) == 0:
		s.wire.add(fmt.Sprintf("received progress notification watch %d at revision %d", r.WatchId, r.Header.Revision))
	case r.WatchId != 0:
		s.wire.add(fmt.Sprintf("received watch %d events at revisions %d..%d", r.WatchId, r.Events[0].Kv.ModRevision, r.Events[len(r.Events)-1].Kv.ModRevision))
	}
	return err
}
