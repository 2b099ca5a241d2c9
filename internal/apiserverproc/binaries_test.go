package apiserverproc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdproc"
)

// buildScript is the script Binaries runs, from this package's directory,
// where tests run.
var buildScript = filepath.Join("..", "..", "scripts", "build-kube-apiserver.sh")

// TestBuildScriptWaitsForTheLock holds the build lock of a version as a
// first caller does while it builds, starts scripts/build-kube-apiserver.sh
// for the same version, then installs a "binary" and releases the lock: the
// script must say it waits, and then print the installed directory instead
// of building again.
func TestBuildScriptWaitsForTheLock(t *testing.T) {
	script := buildScript
	cache := t.TempDir()
	const version = "1.37.0-locktest"
	lock, err := os.OpenFile(filepath.Join(cache, "kube-apiserver-v"+version+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	errPath := filepath.Join(t.TempDir(), "stderr")
	errFile, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	stderr := func() string { b, _ := os.ReadFile(errPath); return string(b) }
	var stdout bytes.Buffer
	cmd := exec.Command("bash", script, version, cache)
	cmd.Env = etcdproc.CleanEnv()
	cmd.Stdout, cmd.Stderr = &stdout, errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(10 * time.Second)
	for !strings.Contains(stderr(), "waiting") {
		select {
		case err := <-done:
			t.Fatalf("the script ended while the lock was held (err %v): stdout %q, stderr %q", err, stdout.String(), stderr())
		case <-deadline:
			t.Fatalf("the script did not say it waits for the lock within 10s; stderr %q", stderr())
		case <-time.After(50 * time.Millisecond):
		}
	}
	dir := filepath.Join(cache, "kube-apiserver-v"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("script: %v; stderr %q", err, stderr())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("script still running 10s after the lock was released; stderr %q", stderr())
	}
	if got := strings.TrimSpace(stdout.String()); got != dir {
		t.Errorf("got stdout %q, want the installed directory %q", got, dir)
	}
	if strings.Contains(stderr(), "from the Go module proxy") {
		t.Errorf("the script built again after the lock holder finished: %q", stderr())
	}
}

// TestBuildScriptRefusesOtherLines checks that a release outside the 1.35,
// 1.36 and 1.37 lines is refused with a usage error before anything is
// built or locked.
func TestBuildScriptRefusesOtherLines(t *testing.T) {
	script := buildScript
	cache := t.TempDir()
	cmd := exec.Command("bash", script, "1.30.0", cache)
	cmd.Env = etcdproc.CleanEnv()
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("got %v, want exit status 2; output %q", err, out)
	}
	if !strings.Contains(string(out), "1.30.0") {
		t.Errorf("got output %q, want it to name the version", out)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("got %d entries in the cache, want none", len(entries))
	}
}

// TestDefaultVersionMatchesGoMod checks that DefaultVersion is the release
// of the k8s.io/client-go go.mod requires, so that the tests' client and
// server are of one release.
func TestDefaultVersionMatchesGoMod(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := "v0." + strings.TrimPrefix(DefaultVersion, "1.")
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/client-go" {
			if f[1] != want {
				t.Errorf("got k8s.io/client-go %s in go.mod, want %s to match DefaultVersion %s", f[1], want, DefaultVersion)
			}
			return
		}
	}
	t.Fatal("go.mod does not require k8s.io/client-go")
}
