package apiserverproc

import (
	"path/filepath"
	"testing"
	"time"
)

// TestProcessSuperviseRestartStop runs a shell that exits with status 3
// after 300 ms under Supervise: its exits are recorded and it is started
// again with a new PID; Restart replaces a run without counting an exit;
// after Stop nothing starts it again.
func TestProcessSuperviseRestartStop(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProcess("crasher", "/bin/sh", []string{"-c", "sleep 0.3; exit 3"}, nil, dir, filepath.Join(dir, "log"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	first := p.PID()
	p.Supervise(50*time.Millisecond, t.Logf)
	deadline := time.Now().Add(10 * time.Second)
	for len(p.Exits()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	exits := p.Exits()
	if len(exits) < 2 || exits[0].Status != "exit status 3" {
		t.Fatalf("got exits %+v, want at least two with exit status 3", exits)
	}
	waitPID := func() int {
		for time.Now().Before(deadline) {
			if pid := p.PID(); pid != 0 {
				return pid
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("the process was not started again")
		return 0
	}
	if pid := waitPID(); pid == first {
		t.Fatalf("got PID %d after the exits, want a new run", pid)
	}

	n := len(p.Exits())
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := len(p.Exits()); got > n+1 {
		// A run may exit on its own just before Restart stops it; the
		// Restart itself must add none.
		t.Fatalf("got %d exits after Restart, want at most %d", got, n+1)
	}

	p.Stop()
	n = len(p.Exits())
	time.Sleep(600 * time.Millisecond) // longer than a run and its backoff
	if pid := p.PID(); pid != 0 {
		t.Fatalf("got PID %d after Stop, want the process stopped for good", pid)
	}
	if got := len(p.Exits()); got != n {
		t.Fatalf("got %d exits after Stop, want %d", got, n)
	}
}
