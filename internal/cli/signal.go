package cli

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// NotifyInterrupts is the context Run runs a command under: the first
// SIGINT or SIGTERM ends it (Interrupted tells which), and it carries the
// context a second signal ends (SecondInterrupt). stop releases the
// signals.
func NotifyInterrupts() (_ context.Context, stop func()) { return notifyInterrupts() }

type interruptKey struct{}

// WithInterrupt returns a copy of parent that interrupt ends, recording
// the signal for Interrupted. Its context's error stays context.Canceled.
func WithInterrupt(parent context.Context) (_ context.Context, interrupt func(os.Signal), stop context.CancelFunc) {
	var sig atomic.Value
	ctx, cancel := context.WithCancel(context.WithValue(parent, interruptKey{}, &sig))
	return ctx, func(s os.Signal) {
		sig.CompareAndSwap(nil, s)
		cancel()
	}, cancel
}

// Interrupted returns the signal that ended ctx (WithInterrupt,
// NotifyInterrupts), or nil when none did.
func Interrupted(ctx context.Context) os.Signal {
	if v, ok := ctx.Value(interruptKey{}).(*atomic.Value); ok && ctx.Err() != nil {
		s, _ := v.Load().(os.Signal)
		return s
	}
	return nil
}

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
//
// A broken standard output or error (a pipe whose reader has exited, as
// `lwbench run | head` leaves it) ends the first context too, as SIGPIPE:
// Go would otherwise end the process at the first write to it
// (os/signal: "Go programs that are not calling Notify for SIGPIPE"),
// before the command has stopped what it started and removed its
// temporary directories. Only the first context: the writes that fail
// after it do not cut that cleanup short. A SIGPIPE of a network
// connection (delivered too once notified, whatever the descriptor) ends
// nothing: the signal counts only when fd 1 or 2 polls as broken.
func notifyInterrupts() (_ context.Context, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, interruptSignals...)
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	first, interruptFirst, cancelFirst := WithInterrupt(context.Background())
	second, interruptSecond, cancelSecond := WithInterrupt(context.Background())
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-pipes:
				if outputBroken() {
					interruptFirst(s)
				}
			case <-done:
				return
			}
		}
	}()
	go func() {
		for _, interrupt := range []func(os.Signal){interruptFirst, interruptSecond} {
			select {
			case s := <-sigs:
				interrupt(s)
			case <-done:
				return
			}
		}
		signal.Reset(interruptSignals...)
	}()
	return WithSecondInterrupt(first, second), func() {
		close(done)
		signal.Stop(sigs)
		signal.Stop(pipes)
		cancelFirst()
		cancelSecond()
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

// outputBroken reports whether standard output or error is a pipe or
// socket whose reader has gone: poll(2) sets POLLERR on such a pipe's
// write end, POLLERR or POLLHUP on such a socket.
func outputBroken() bool {
	fds := []unix.PollFd{{Fd: 1}, {Fd: 2}}
	if _, err := unix.Poll(fds, 0); err != nil {
		return false
	}
	for _, f := range fds {
		if f.Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			return true
		}
	}
	return false
}
