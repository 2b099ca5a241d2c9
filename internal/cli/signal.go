package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// ErrInterrupt is the cause (context.Cause) of a context ended by SIGINT,
// ErrTerminated of one ended by SIGTERM (NotifyInterrupts).
var (
	ErrInterrupt  = errors.New("interrupted (SIGINT)")
	ErrTerminated = errors.New("terminated (SIGTERM)")
)

// signalCause is the cause NotifyInterrupts ends its context with.
func signalCause(s os.Signal) error {
	if s == syscall.SIGTERM {
		return ErrTerminated
	}
	return ErrInterrupt
}

// NotifyInterrupts is the context Run runs a command under: the first
// SIGINT or SIGTERM ends it, with ErrInterrupt or ErrTerminated as its
// cause (context.Cause), and it carries the context a second signal ends
// (SecondInterrupt). stop releases the signals.
func NotifyInterrupts() (_ context.Context, stop func()) { return notifyInterrupts() }

// interruptSignals are the signals that interrupt a command.
var interruptSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// notifyInterrupts returns a context that the first SIGINT or SIGTERM
// ends and, carried by it (SecondInterrupt), a context that a second one
// ends. After the second, the signals take their default action again: a
// third ends the process at once. stop releases the signals.
//
// signal.NotifyContext alone cannot tell a second signal from the first:
// it stops listening once its context has ended, and the second SIGINT
// is then lost (it neither shortens what the command does to hand back
// its result, nor kills it).
func notifyInterrupts() (_ context.Context, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, interruptSignals...)
	first, cancelFirst := context.WithCancelCause(context.Background())
	second, cancelSecond := context.WithCancelCause(context.Background())
	done := make(chan struct{})
	go func() {
		for _, cancel := range []context.CancelCauseFunc{cancelFirst, cancelSecond} {
			select {
			case s := <-sigs:
				cancel(signalCause(s))
			case <-done:
				return
			}
		}
		signal.Reset(interruptSignals...)
	}()
	return WithSecondInterrupt(first, second), func() {
		close(done)
		signal.Stop(sigs)
		cancelFirst(nil)
		cancelSecond(nil)
	}
}

type secondInterruptKey struct{}

// WithSecondInterrupt returns ctx carrying second, the context a second
// SIGINT or SIGTERM ends once the first has ended ctx (Run makes both;
// tests use it with RunContext).
func WithSecondInterrupt(ctx, second context.Context) context.Context {
	return context.WithValue(ctx, secondInterruptKey{}, second)
}

// SecondInterrupt returns the context that a second SIGINT or SIGTERM
// ends, carried by ctx (WithSecondInterrupt), or nil when ctx carries
// none. A command that keeps working after the first
// signal (to hand back what it measured, to delete what it wrote) gives
// that work up when it ends, saying what it did not do.
func SecondInterrupt(ctx context.Context) context.Context {
	if c, ok := ctx.Value(secondInterruptKey{}).(context.Context); ok {
		return c
	}
	return nil
}
