package cli

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// TestSecondInterrupt sends this process SIGINT twice: the first ends the
// command's context and not the second-interrupt context, the second ends
// that one. Before, the second SIGINT was lost (signal.NotifyContext
// stops listening after the first).
func TestSecondInterrupt(t *testing.T) {
	ctx, stop := notifyInterrupts()
	defer stop()
	second := SecondInterrupt(ctx)
	if second == nil {
		t.Fatal("got no second-interrupt context, want one")
	}
	done := func(c context.Context) bool {
		select {
		case <-c.Done():
			return true
		case <-time.After(2 * time.Second):
			return false
		}
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if !done(ctx) {
		t.Fatal("the first SIGINT did not end the command's context")
	}
	if got := Interrupted(ctx); got != syscall.SIGINT {
		t.Errorf("got Interrupted %v, want %v", got, syscall.SIGINT)
	}
	if ctx.Err() != context.Canceled {
		t.Errorf("got %v, want %v: commands tell an interruption by it", ctx.Err(), context.Canceled)
	}
	if second.Err() != nil {
		t.Fatal("the first SIGINT ended the second-interrupt context too")
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if !done(second) {
		t.Fatal("the second SIGINT did not end the second-interrupt context")
	}
}

// TestSecondInterruptAbsent: a context that does not carry one has none.
func TestSecondInterruptAbsent(t *testing.T) {
	if c := SecondInterrupt(context.Background()); c != nil {
		t.Errorf("got %v, want nil", c)
	}
}
