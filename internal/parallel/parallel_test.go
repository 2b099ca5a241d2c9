package parallel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestEachRunsEveryJobOnce(t *testing.T) {
	const n, workers = 1000, 7
	var mu sync.Mutex
	seen := make([]int, n)
	err := Each(t.Context(), workers, n, func(_ context.Context, w, i int) error {
		if w < 0 || w >= workers {
			return fmt.Errorf("worker index %d out of [0, %d)", w, workers)
		}
		mu.Lock()
		defer mu.Unlock()
		seen[i]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("job %d ran %d times", i, c)
		}
	}
}

func TestEachStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var ran atomic.Int64
	err := Each(t.Context(), 4, 1_000_000, func(ctx context.Context, _, i int) error {
		ran.Add(1)
		if i == 10 {
			return boom
		}
		return ctx.Err()
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Each returned %v, want the job's error", err)
	}
	if n := ran.Load(); n > 1000 {
		t.Fatalf("%d jobs ran after the error; the feed did not stop", n)
	}
}

func TestEachReturnsContextError(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := Each(ctx, 2, 100, func(ctx context.Context, _, _ int) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Each on a cancelled ctx returned %v", err)
	}
}

func TestEachZeroWorkersStillRuns(t *testing.T) {
	var ran atomic.Int64
	if err := Each(t.Context(), 0, 5, func(context.Context, int, int) error { ran.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 5 {
		t.Fatalf("ran %d jobs, want 5", ran.Load())
	}
}
