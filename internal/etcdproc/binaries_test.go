package etcdproc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/version"

	"github.com/kubestore/etcdkit/internal/buildtest"
	"github.com/kubestore/etcdkit/internal/release"
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
	// A real version, in a cache of the test's own; a `go` that fails
	// keeps a script that did not wait from building.
	goCalls := buildtest.FakeGo(t, buildtest.Fail)
	cache := t.TempDir()
	const version = "3.7.3"
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
	if strings.Contains(stderr(), "from the Go module proxy") || len(goCalls()) > 0 {
		t.Errorf("build-etcd.sh built again after the lock holder finished: %q (go calls %q)", stderr(), goCalls())
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

// progressSignal is a progress writer for Binaries that closes seen once
// what the script wrote contains want.
type progressSignal struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
}

func newProgressSignal(want string) *progressSignal {
	return &progressSignal{want: want, seen: make(chan struct{})}
}

func (p *progressSignal) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	had := strings.Contains(p.buf.String(), p.want)
	p.buf.Write(b)
	if !had && strings.Contains(p.buf.String(), p.want) {
		close(p.seen)
	}
	return len(b), nil
}

// TestBinariesObeysCancellation cancels Binaries while its build script
// waits for another process's build (the test holds the lock) and while
// the build runs (a `go` that hangs): each time Binaries must return
// within 2 s with an error wrapping context.Canceled that says what the
// script was doing, the script's process group must be gone, and the
// cache must hold nothing of the script's (no temporary directory).
// Before, the wait ignored SIGINT for as long as the other build took.
func TestBinariesObeysCancellation(t *testing.T) {
	tests := []struct {
		name      string
		holdLock  bool
		goDoes    buildtest.Go
		waitFor   string // in the script's progress, before cancelling
		wantError string
	}{
		{"waiting for the lock", true, buildtest.Fail, "waiting for it", "another process is building etcd 3.7.3"},
		{"building", false, buildtest.Hang, "building etcd 3.7.3", "building etcd 3.7.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			goCalls := buildtest.FakeGo(t, tt.goDoes)
			cache := t.TempDir()
			t.Setenv("ETCDKIT_CACHE", cache)
			if tt.holdLock {
				lock, err := os.OpenFile(filepath.Join(cache, "etcd-v3.7.3.lock"), os.O_CREATE|os.O_RDWR, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				defer lock.Close()
				if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			progress := newProgressSignal(tt.waitFor)
			type result struct {
				dir string
				err error
			}
			done := make(chan result, 1)
			go func() {
				dir, err := Binaries(ctx, "3.7.3", progress)
				done <- result{dir, err}
			}()
			select {
			case <-progress.seen:
			case r := <-done:
				t.Fatalf("Binaries returned %q, %v before the script said %q", r.dir, r.err, tt.waitFor)
			case <-time.After(30 * time.Second):
				t.Fatalf("the script did not say %q within 30 s", tt.waitFor)
			}
			if tt.goDoes == buildtest.Hang {
				// The script's go is running: the build is under way.
				for deadline := time.Now().Add(10 * time.Second); len(goCalls()) == 0; time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the script did not run go within 10 s")
					}
				}
			}
			cancelled := time.Now()
			cancel()
			var r result
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Binaries did not return within 5 s of the cancellation")
			}
			if took := time.Since(cancelled); took > 2*time.Second {
				t.Errorf("Binaries returned %v after the cancellation, want at most 2 s", took)
			}
			if !errors.Is(r.err, context.Canceled) || !strings.Contains(r.err.Error(), tt.wantError) {
				t.Errorf("got %q, %v; want an error wrapping context.Canceled that says %q", r.dir, r.err, tt.wantError)
			}
			for _, call := range goCalls() {
				pid, _, _ := strings.Cut(call, " ")
				if alive(pid) {
					t.Errorf("the script's go (pid %s) still runs after Binaries returned", pid)
				}
			}
			entries, err := os.ReadDir(cache)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Name() != "etcd-v3.7.3.lock" {
					t.Errorf("got %s in the cache after the cancellation, want only the lock file", e.Name())
				}
			}
		})
	}
}

// alive reports whether process pid exists and is not a zombie, within a
// second: a killed process may take a moment to go.
func alive(pid string) bool {
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		if err != nil {
			return false
		}
		// pid (comm) state ...: the state follows the last ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && strings.HasPrefix(s[i+1:], " Z") {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
	}
}

// TestVersionsAreKnown: the versions the matrix and tests build, and the
// client's own (the default of --etcd-version), are releases
// release.Etcd accepts, each the default of its line.
func TestVersionsAreKnown(t *testing.T) {
	for _, v := range append(slices.Clone(Versions), version.Version) {
		minor := v[:strings.LastIndexByte(v, '.')]
		if got, err := release.Etcd.Resolve(minor); err != nil || got != v {
			t.Errorf("release.Etcd.Resolve(%q) = %q, %v; want %q", minor, got, err, v)
		}
	}
}
