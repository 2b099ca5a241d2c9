package etcdproc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBuildScriptWaitsForTheLock holds the build lock of a version the way a
// first caller does while it builds, starts scripts/build-etcd.sh for the
// same version, finishes the "build" (the binaries appear) and releases the
// lock: the script must wait, say so on stderr, and then use the finished
// binaries instead of building again. Without the lock two test binaries
// built etcd into the same directory at once and both timed out.
func TestBuildScriptWaitsForTheLock(t *testing.T) {
	script, err := buildScript("build-etcd.sh")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	const version = "0.0.1-test"
	lock, err := os.OpenFile(filepath.Join(cache, "etcd-v"+version+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	// stderr is a file, read while the script writes it (a bytes.Buffer
	// would be written by exec's copying goroutine as the test reads it).
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	stderr := func() string {
		b, _ := os.ReadFile(errFile.Name())
		return string(b)
	}
	var stdout bytes.Buffer
	cmd := exec.Command("bash", script, version, cache)
	cmd.Env = CleanEnv()
	cmd.Stdout, cmd.Stderr = &stdout, errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr(), "waiting") {
		select {
		case err := <-done:
			t.Fatalf("build-etcd.sh ended while the lock was held (err %v): stdout %q, stderr %q", err, stdout.String(), stderr())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("build-etcd.sh did not say it waits for the lock within 10s; stderr %q", stderr())
		}
	}

	// The holder finishes its build: both binaries appear, then the lock goes.
	dir := filepath.Join(cache, "etcd-v"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "etcdctl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("build-etcd.sh: %v; stderr %q", err, stderr())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("build-etcd.sh still running 10s after the lock was released; stderr %q", stderr())
	}
	if got := strings.TrimSpace(stdout.String()); got != dir {
		t.Errorf("got stdout %q, want the cached directory %q", got, dir)
	}
	if strings.Contains(stderr(), "from the Go module proxy") {
		t.Errorf("build-etcd.sh built again after the lock holder finished: %q", stderr())
	}
}

// TestLogWriter checks that each non-empty line reaches the logger once.
func TestLogWriter(t *testing.T) {
	var got []string
	w := LogWriter(func(format string, args ...any) {
		got = append(got, strings.TrimSpace(strings.ReplaceAll(format, "%s", args[0].(string))))
	})
	if _, err := w.Write([]byte("one\n\ntwo\n")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"one", "two"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got lines %q, want %q", got, want)
	}
}
