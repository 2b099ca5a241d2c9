package compaction

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestOverlap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name string
		a, b Span
		want time.Duration
	}{
		{"disjoint", Span{at(0), at(10)}, Span{at(20), at(30)}, 0},
		{"touching", Span{at(0), at(10)}, Span{at(10), at(30)}, 0},
		{"partial", Span{at(0), at(10)}, Span{at(5), at(30)}, 5 * time.Millisecond},
		{"inside", Span{at(0), at(100)}, Span{at(20), at(30)}, 10 * time.Millisecond},
		{"reversed order", Span{at(20), at(30)}, Span{at(0), at(25)}, 5 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := Overlap(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: Overlap = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// stallKV answers at once, except between stallFrom and stallTo after its
// creation, when it blocks until stallTo (as a defragmenting member does),
// and fails every operation whose context ends first.
type stallKV struct {
	start              time.Time
	stallFrom, stallTo time.Duration
}

func (s *stallKV) wait(ctx context.Context) error {
	since := time.Since(s.start)
	if since >= s.stallFrom && since < s.stallTo {
		select {
		case <-time.After(s.stallTo - since):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (s *stallKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	return nil, s.wait(ctx)
}

func (s *stallKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return nil, s.wait(ctx)
}

func TestProbeSeriesAndWindow(t *testing.T) {
	epoch := time.Now()
	kv := &stallKV{start: epoch, stallFrom: 300 * time.Millisecond, stallTo: 700 * time.Millisecond}
	p := NewProbe(kv, ProbeOptions{Key: "k", RatePerSecond: 100, Epoch: epoch, SeriesInterval: 100 * time.Millisecond, Timeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// While the stall holds the operations due from 300 ms, Settle waits
	// for them to end; a Window taken then counts them.
	settled := make(chan ProbeWindow, 1)
	go func() {
		time.Sleep(400 * time.Millisecond)
		p.Settle(context.Background(), 450*time.Millisecond)
		settled <- p.Window(250*time.Millisecond, 450*time.Millisecond)
	}()
	p.Run(ctx)
	r := p.Result()
	if w := <-settled; w.Ops < 10 || w.MaxMs < 300 {
		t.Errorf("window over the stall taken after Settle, during the run: %+v; want its ~20 operations at ~400 ms", w)
	}
	if len(r.Series) < 9 || r.SeriesIntervalMs != 100 {
		t.Fatalf("series of %d buckets of %v ms, want about 10 of 100", len(r.Series), r.SeriesIntervalMs)
	}
	var ops int64
	for _, iv := range r.Series {
		ops += iv.Ops
	}
	if ops != r.Writes.Count+r.Reads.Count {
		t.Errorf("series holds %d operations, totals %d", ops, r.Writes.Count+r.Reads.Count)
	}
	// Operations due at 300 ms waited until 700 ms: a stall of about 400 ms
	// in the window around it, none long before it.
	during := p.Window(250*time.Millisecond, 750*time.Millisecond)
	if during.Ops == 0 || during.LongestStallMs < 300 || during.MaxMs < 300 {
		t.Errorf("window over the stall: %+v; want a stall of about 400 ms", during)
	}
	before := p.Window(0, 200*time.Millisecond)
	if before.Ops == 0 || before.LongestStallMs > 150 || before.MaxMs > 150 {
		t.Errorf("window before the stall: %+v; want no stall", before)
	}
	if len(p.Samples()) != int(r.Writes.Count+r.Reads.Count) {
		t.Errorf("kept %d samples of %d operations", len(p.Samples()), r.Writes.Count+r.Reads.Count)
	}
}

func TestProbeMaxSamples(t *testing.T) {
	kv := &stallKV{start: time.Now()}
	p := NewProbe(kv, ProbeOptions{Key: "k", RatePerSecond: 200, MaxSamples: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	p.Run(ctx)
	r := p.Result()
	if n := len(p.Samples()); n != 10 || r.DroppedSamples != r.Writes.Count+r.Reads.Count-10 {
		t.Errorf("kept %d samples, dropped %d of %d; want 10 kept", n, r.DroppedSamples, r.Writes.Count+r.Reads.Count)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		t.Error("unexpected cancel")
	}
}
