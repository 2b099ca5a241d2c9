package apiserverproc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// orphanParentEnv makes the test binary, run again by
// TestProcessDiesWithItsCaller, a caller that starts a child and then
// sleeps until it is killed.
const orphanParentEnv = "ETCDKIT_TEST_ORPHAN_PARENT_DIR"

// TestProcessDiesWithItsCaller: a caller killed with SIGKILL (no Stop,
// no cleanup) takes the processes it started with it; before ChildAttr
// set Pdeathsig, a killed lwbench left its control plane running.
func TestProcessDiesWithItsCaller(t *testing.T) {
	if dir := os.Getenv(orphanParentEnv); dir != "" {
		p, err := StartProcess("sleeper", "/bin/sleep", []string{"120"}, nil, dir, filepath.Join(dir, "log"), time.Second)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(p.PID())
		time.Sleep(2 * time.Minute)
		os.Exit(0)
	}
	dir := t.TempDir()
	parent := exec.Command(os.Args[0], "-test.run", "^TestProcessDiesWithItsCaller$")
	parent.Env = append(os.Environ(), orphanParentEnv+"="+dir)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil || pid <= 0 {
		t.Fatalf("the caller printed %q (%v, %v), want its child's PID", line, err, perr)
	}
	defer syscall.Kill(pid, syscall.SIGKILL) // if the test fails: not left behind
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("child %d not running before its caller is killed: %v", pid, err)
	}
	parent.Process.Kill()
	parent.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		// Gone from the process table once reaped: by init, as an
		// orphan, which takes a moment; a zombie still answers Kill 0.
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(b), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running 10 s after its caller was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
