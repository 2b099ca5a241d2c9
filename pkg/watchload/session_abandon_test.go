package watchload

import (
	"context"
	"testing"
	"time"
)

// TestAfterWritesAbandon: once the load's context has ended, AfterWrites
// gives the collection a context of its own that outlives it, and that
// the abandon context (a second SIGINT) ends at once; Abandoned says so.
// Before, nothing but the 20 s grace period ended it.
func TestAfterWritesAbandon(t *testing.T) {
	s := NewSession(Target{Endpoints: []string{"http://127.0.0.1:1"}}, time.Now(), nil)
	abandon, abandonNow := context.WithCancel(context.Background())
	s.SetAbandon(abandon)
	load, interrupt := context.WithCancel(context.Background())
	interrupt()
	cctx, interrupted, cancel := s.AfterWrites(load)
	defer cancel()
	if interrupted == nil {
		t.Fatal("got no interruption after the load's context ended")
	}
	if cctx.Err() != nil || s.Abandoned() {
		t.Fatalf("the collection's context ended (%v) or the load is abandoned (%v) before the second interrupt", cctx.Err(), s.Abandoned())
	}
	abandonNow()
	select {
	case <-cctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the collection's context did not end at the second interrupt")
	}
	if !s.Abandoned() {
		t.Error("got Abandoned false after the second interrupt, want true")
	}
}

// TestAfterWritesLive: while the load's context lives, AfterWrites hands
// it back unchanged and reports no interruption.
func TestAfterWritesLive(t *testing.T) {
	s := NewSession(Target{Endpoints: []string{"http://127.0.0.1:1"}}, time.Now(), nil)
	s.SetAbandon(context.Background())
	ctx := context.Background()
	got, interrupted, cancel := s.AfterWrites(ctx)
	defer cancel()
	if got != ctx || interrupted != nil {
		t.Errorf("got %v, %v; want the load's context and no interruption", got, interrupted)
	}
}
