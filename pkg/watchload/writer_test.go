package watchload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// stallingKV is the real client with stalls injected before chosen puts,
// as a member that stops answering would cause.
type stallingKV struct {
	KV
	n      atomic.Int64
	stalls map[int64]time.Duration // put number (from 1) -> stall
}

func (s *stallingKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	if d, ok := s.stalls[s.n.Add(1)]; ok {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.KV.Put(ctx, key, val, opts...)
}

// recordingWorkload remembers when each op was due.
type recordingWorkload struct {
	*rawWorkload
	mu        sync.Mutex
	scheduled []time.Duration
}

func (w *recordingWorkload) Do(ctx context.Context, worker int, kv KV, op Op) (int64, bool, error) {
	w.mu.Lock()
	w.scheduled = append(w.scheduled, op.Scheduled)
	w.mu.Unlock()
	return w.rawWorkload.Do(ctx, worker, kv, op)
}

// TestWritersAreOpenLoop stalls one write for 300 ms and makes another
// time out. Op i is due at start + i/rate whatever happened before, so the
// ops queued behind the stall carry the wait in their latency (a closed
// loop would hide it), and the timed-out op is an error counted in the
// latency at the time it failed.
func TestWritersAreOpenLoop(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	const rate, total = 100.0, 60
	kv := &stallingKV{KV: c, stalls: map[int64]time.Duration{11: 300 * time.Millisecond, 51: 5 * time.Second}}
	wl := &recordingWorkload{rawWorkload: &rawWorkload{Prefix: "/open-loop/", Keys: 10, ValueSize: 8}}
	env := NewEnv(time.Now(), 1024, 1, nil)
	w, err := NewWriters(env, []KV{kv}, wl, WriterOptions{Rate: rate, Total: total, Workers: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	env.SetIntervalOrigin(env.Since())
	st := w.Run(t.Context())

	// The schedule: op i due exactly i/rate after op 0.
	for i, at := range wl.scheduled {
		if want := time.Duration(i) * time.Second / rate; at-wl.scheduled[0] != want {
			t.Fatalf("op %d due at +%v, want +%v", i, at-wl.scheduled[0], want)
		}
	}
	if st.Completed != total-1 || st.Errors != 1 || st.Timeouts != 1 || st.Unsent != 0 || len(st.ErrorSamples) != 1 {
		t.Errorf("stats %+v: want %d completed, 1 error that is a timeout", st, total-1)
	}
	lat := env.timing.writes.summary()
	if lat.Count != total {
		t.Errorf("latency counted %d ops, want all %d, the failed one included", lat.Count, total)
	}
	// Ops 11..29 were due while op 10 stalled and waited at least 100 ms:
	// more than 10% of the ops, so p90 must show it.
	if lat.P90Ms < 100 {
		t.Errorf("p90 %.1f ms: the ops queued behind the 300 ms stall were not charged for it", lat.P90Ms)
	}
	if lat.MaxMs < 1000 {
		t.Errorf("max %.1f ms: the timed-out op should count its full second", lat.MaxMs)
	}
	if iv := env.timing.series(); len(iv) == 0 || iv[0].WriteP99Ms < 250 {
		t.Errorf("interval 0 %+v: want its p99 to show the stall", iv)
	}
}

func TestWritersCountUnsentOnCancel(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	env := NewEnv(time.Now(), 1024, 2, nil)
	w, err := NewWriters(env, []KV{c}, &rawWorkload{Prefix: "/cancel/", Keys: 10, ValueSize: 8}, WriterOptions{Rate: 100, Total: 1000, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	st := w.Run(ctx)
	if st.Unsent == 0 || st.Sent+st.Unsent != st.Planned || st.Completed+st.Errors != st.Sent {
		t.Errorf("stats %+v: want sent + unsent = planned and completed + errors = sent", st)
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the run outlived its context")
	}
}

// TestRawWorkloadKeys: the keys built once are the keys formatted one by
// one, every one as long, and a key space too large to build once is
// formatted the same way.
func TestRawWorkloadKeys(t *testing.T) {
	tests := []struct {
		name    string
		wl      *rawWorkload
		i       int
		wantKey string
	}{
		{name: "padded to the key size", wl: &rawWorkload{Prefix: "/b/", Keys: 100000, KeySize: 8}, i: 42, wantKey: "/b/00042"},
		{name: "padded to the largest key", wl: &rawWorkload{Prefix: "/lwbench/put/", Keys: 1000, KeySize: 8}, i: 7, wantKey: "/lwbench/put/007"},
		{name: "last key", wl: &rawWorkload{Prefix: "/p/", Keys: 10, KeySize: 0}, i: 9, wantKey: "/p/9"},
		{name: "not built once", wl: &rawWorkload{Prefix: "/p/", Keys: rawKeysPrecomputed + 1, KeySize: 4}, i: 12, wantKey: "/p/0000012"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wl := tt.wl
			wl.once.Do(wl.init)
			if got := wl.Key(tt.i); got != tt.wantKey {
				t.Errorf("Key(%d) = %q, want %q", tt.i, got, tt.wantKey)
			}
			if wl.Keys > rawKeysPrecomputed {
				return
			}
			for i := range wl.Keys {
				if got, want := wl.Key(i), fmt.Sprintf("%s%0*d", wl.Prefix, wl.digits(), i); got != want {
					t.Fatalf("Key(%d) = %q, want %q", i, got, want)
				}
			}
			op := wl.Next(0)
			if op.Kind != OpPut || op.Shard != -1 || len(op.Key) != len(tt.wantKey) {
				t.Errorf("Next(0) = %+v: want a put to any worker of a key %d bytes long", op, len(tt.wantKey))
			}
		})
	}
}

// TestRawWorkloadPutsTheValue: a put through a client that performs
// prepared Ops (the one value, never copied) and one through a KV that
// only puts store the same value and return the revision they committed.
func TestRawWorkloadPutsTheValue(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	wl := &rawWorkload{Prefix: "/raw/", Keys: 10, ValueSize: 4096}
	for _, tt := range []struct {
		name string
		kv   KV
	}{
		{name: "prepared op", kv: c},
		{name: "put", kv: struct{ KV }{c}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := tt.kv.(opDoer); ok != (tt.name == "prepared op") {
				t.Fatalf("%T performs prepared ops: %v", tt.kv, ok)
			}
			op := wl.Next(0)
			rev, conflict, err := wl.Do(t.Context(), 0, tt.kv, op)
			if err != nil || conflict {
				t.Fatalf("Do: conflict %v, %v", conflict, err)
			}
			got, err := c.Get(t.Context(), op.Key)
			if err != nil || len(got.Kvs) != 1 {
				t.Fatalf("get %s: %v %v", op.Key, got, err)
			}
			if kv := got.Kvs[0]; kv.ModRevision != rev || string(kv.Value) != wl.value || len(kv.Value) != 4096 {
				t.Errorf("%s at revision %d, %d bytes; want revision %d, the workload's %d-byte value", op.Key, kv.ModRevision, len(kv.Value), rev, 4096)
			}
		})
	}
}
