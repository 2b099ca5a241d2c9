package etcdproc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestThreadsStopped reads a running process (this one) as running and a
// SIGSTOPped child as stopped once the signal has taken effect.
func TestThreadsStopped(t *testing.T) {
	if stopped, err := threadsStopped(os.Getpid()); err != nil || stopped {
		t.Fatalf("this process: stopped %v, err %v; want running", stopped, err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := waitStopped(cmd.Process.Pid, pauseWait); err != nil {
		t.Fatalf("a SIGSTOPped sleep: %v", err)
	}
	if stopped, err := threadsStopped(cmd.Process.Pid); err != nil || !stopped {
		t.Fatalf("after waitStopped: stopped %v, err %v", stopped, err)
	}
	if err := waitStopped(os.Getpid(), 20*time.Millisecond); err == nil {
		t.Fatal("waitStopped returned nil for this running process")
	}
	if _, err := threadsStopped(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
