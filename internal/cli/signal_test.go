package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// TestBrokenOutputInterrupts runs this test binary as a command that
// writes a line to standard output every 10 ms until its context ends,
// then leaves a mark (its cleanup) and exits 0 when SIGPIPE ended it. The
// reader of its output exits after one line: the command must reach its
// cleanup, not be killed at its next write (Go's default for a broken
// fd 1).
func TestBrokenOutputInterrupts(t *testing.T) {
	if os.Getenv("CLI_BROKEN_OUTPUT_HELPER") != "" {
		brokenOutputHelper()
		return
	}
	mark := filepath.Join(t.TempDir(), "cleaned")
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenOutputInterrupts$")
	cmd.Env = append(os.Environ(), "CLI_BROKEN_OUTPUT_HELPER=1", "CLI_BROKEN_OUTPUT_MARK="+mark)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	out.Close()
	err = cmd.Wait()
	if err != nil {
		t.Fatalf("the command ended with %v (stderr %q), want exit 0 after its cleanup", err, stderr.String())
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the command did not clean up: %v", err)
	}
}

// brokenOutputHelper is TestBrokenOutputInterrupts' command.
func brokenOutputHelper() {
	ctx, stop := notifyInterrupts()
	defer stop()
	deadline := time.After(10 * time.Second)
	for ctx.Err() == nil {
		fmt.Println("line")
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			fmt.Fprintln(os.Stderr, "not interrupted in 10 s")
			os.Exit(3)
		}
	}
	if err := os.WriteFile(os.Getenv("CLI_BROKEN_OUTPUT_MARK"), nil, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	if s := Interrupted(ctx); s != syscall.SIGPIPE {
		fmt.Fprintf(os.Stderr, "interrupted by %v, want SIGPIPE\n", s)
		os.Exit(5)
	}
	os.Exit(0)
}

// TestSIGPIPEOfAConnection: a SIGPIPE while standard output and error are
// whole (a network connection's, which Go delivers once SIGPIPE is
// notified) interrupts nothing.
func TestSIGPIPEOfAConnection(t *testing.T) {
	if outputBroken() {
		t.Skip("this test's own output is broken")
	}
	ctx, stop := notifyInterrupts()
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGPIPE); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
		t.Fatalf("a SIGPIPE with whole output interrupted the command (%v)", Interrupted(ctx))
	case <-time.After(300 * time.Millisecond):
	}
}
