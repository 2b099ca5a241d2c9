package watchload

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestHoldClient breaks and restores a real connection: Hold ends the
// open watch (endWatch says so; a watch that ended otherwise is not
// reported broken), a Watch call while held waits (stopped closes, onPark
// runs) until Release and then watches from the revision it was asked
// for, and a waiting Watch call returns a closed channel when its context
// ends.
func TestHoldClient(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	prefix := "/registry/hold/"
	from := putKeys(t, c, prefix, 0, 1)
	parks := 0
	hc := newHoldClient(c, func() { parks++ })
	drain := func(wch clientv3.WatchChan) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case _, ok := <-wch:
				if !ok {
					return
				}
			case <-timeout:
				t.Fatal("the watch channel did not close")
			}
		}
	}

	// A watch that its own context ends is not broken.
	ctx, cancel := context.WithCancel(t.Context())
	wch := hc.Watch(ctx, prefix, clientv3.WithPrefix())
	cancel()
	drain(wch)
	if hc.endWatch(wch) {
		t.Error("a cancelled watch reported broken")
	}

	// Hold ends an open watch.
	wch = hc.Watch(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
	hc.Hold()
	drain(wch)
	if !hc.endWatch(wch) {
		t.Error("the watch Hold ended is not reported broken")
	}
	if held, wasHeld := hc.state(); !held || !wasHeld {
		t.Fatalf("got held %v, was held %v; want both", held, wasHeld)
	}

	// A Watch call while held waits until Release.
	parked, held := hc.stopped()
	if !held {
		t.Fatal("stopped says not held")
	}
	started := make(chan clientv3.WatchChan)
	go func() { started <- hc.Watch(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithRev(from)) }()
	select {
	case <-parked:
	case <-time.After(10 * time.Second):
		t.Fatal("the Watch call did not park")
	}
	select {
	case <-started:
		t.Fatal("Watch returned while held")
	case <-time.After(100 * time.Millisecond):
	}
	hc.Release()
	wch = <-started
	if parks != 1 {
		t.Errorf("onPark ran %d times, want 1", parks)
	}
	select {
	case resp := <-wch:
		if len(resp.Events) != 1 || resp.Events[0].Kv.ModRevision != from {
			t.Errorf("got %d events, want the one at revision %d", len(resp.Events), from)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event after Release")
	}
	if held, _ := hc.state(); held {
		t.Error("held after Release")
	}

	// A waiting Watch call ends with its context.
	hc.Hold()
	drain(wch)
	ctx, cancel = context.WithCancel(t.Context())
	done := make(chan clientv3.WatchChan)
	go func() { done <- hc.Watch(ctx, prefix, clientv3.WithPrefix()) }()
	parked, _ = hc.stopped()
	<-parked
	cancel()
	drain(<-done)
	hc.Release()
}
