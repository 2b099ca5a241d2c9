package apiserverproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/buildtest"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/filetest"
	"github.com/kubestore/etcdkit/internal/release"
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
	// A real version, in a cache of the test's own; a `go` that fails
	// keeps a script that did not wait from building.
	goCalls := buildtest.FakeGo(t, buildtest.Fail)
	cache := t.TempDir()
	const version = "1.37.2"
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
	if strings.Contains(stderr(), "from the Go module proxy") || len(goCalls()) > 0 {
		t.Errorf("the script built again after the lock holder finished: %q (go calls %q)", stderr(), goCalls())
	}
}

// TestBuildScriptRefusesOtherLines checks that a release outside the 1.35,
// 1.36, 1.37 and 1.38 lines is refused with a usage error before anything is
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

// TestBinariesStopsWaitingOnCancel holds the build lock of
// DefaultVersion, as another process building it does, and cancels
// Binaries once its script waits: it must return within 2 s with an error
// wrapping context.Canceled that says it was waiting, instead of waiting
// out the other build (10-40 minutes).
func TestBinariesStopsWaitingOnCancel(t *testing.T) {
	goCalls := buildtest.FakeGo(t, buildtest.Fail)
	cache := t.TempDir()
	t.Setenv("ETCDKIT_CACHE", cache)
	lock, err := os.OpenFile(filepath.Join(cache, "kube-apiserver-v"+DefaultVersion+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan struct{})
	var once sync.Once
	progress := etcdproc.LogWriter(func(format string, args ...any) {
		if strings.Contains(fmt.Sprintf(format, args...), "waiting for it") {
			once.Do(func() { close(waiting) })
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := Binaries(ctx, DefaultVersion, progress)
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("Binaries returned %v while the lock was held", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the script did not say it waits within 30 s")
	}
	cancelled := time.Now()
	cancel()
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Binaries did not return within 5 s of the cancellation")
	}
	if took := time.Since(cancelled); took > 2*time.Second {
		t.Errorf("Binaries returned %v after the cancellation, want at most 2 s", took)
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for it") {
		t.Errorf("got %v, want an error wrapping context.Canceled that says it was waiting", err)
	}
	if calls := goCalls(); len(calls) > 0 {
		t.Errorf("the script ran go while the lock was held: %q", calls)
	}
}

// TestBinariesRefusesHostileVersions: Binaries checks the version itself
// (release.Kubernetes), so no caller can hand the build script a path;
// the cache, holding a build, is left as it was.
func TestBinariesRefusesHostileVersions(t *testing.T) {
	goCalls := buildtest.FakeGo(t, buildtest.Fail)
	cache := t.TempDir()
	t.Setenv("ETCDKIT_CACHE", cache)
	bin := filepath.Join(cache, "kube-apiserver-v1.37.2", "kube-apiserver")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer filetest.TreeUnchanged(t, cache)()
	for _, v := range []string{"1.37.2/kube-apiserver", "1.37.", "1.37.999", "", "1.37.2\n"} {
		if dir, err := Binaries(context.Background(), v, nil); !errors.Is(err, release.ErrInvalid) && !errors.Is(err, release.ErrUnknown) {
			t.Errorf("Binaries(%q) = %q, %v; want an error wrapping release.ErrInvalid or ErrUnknown", v, dir, err)
		}
	}
	if calls := goCalls(); len(calls) > 0 {
		t.Errorf("a script ran go: %q", calls)
	}
}

// TestDefaultVersionIsItsLinesDefault: `--kube-apiserver 1.37` and the
// tests' kube-apiserver are the same build.
func TestDefaultVersionIsItsLinesDefault(t *testing.T) {
	minor := DefaultVersion[:strings.LastIndexByte(DefaultVersion, '.')]
	if got, err := release.Kubernetes.Resolve(minor); err != nil || got != DefaultVersion {
		t.Errorf("release.Kubernetes.Resolve(%q) = %q, %v; want DefaultVersion %q", minor, got, err, DefaultVersion)
	}
}

// TestComponentCached: a component is cached when its binary is executable
// in its own directory and, for KWOK, every stage file is beside it; a
// KWOK directory missing a stage would make kwok exit "no stages found".
func TestComponentCached(t *testing.T) {
	tests := []struct {
		name      string
		component Component
		version   string
		files     []string
		want      bool
	}{
		{"kube-controller-manager", KubeControllerManager, "1.37.2", []string{"kube-controller-manager-v1.37.2/kube-controller-manager"}, true},
		{"minor resolves", KubeScheduler, "1.37", []string{"kube-scheduler-v1.37.2/kube-scheduler"}, true},
		{"another component's directory", KubeScheduler, "1.37.2", []string{"kube-controller-manager-v1.37.2/kube-scheduler"}, false},
		{"kwok without stages", KWOK, "0.8.0", []string{"kwok-v0.8.0/kwok"}, false},
		{"kwok with stages", KWOK, "0.8.0", append([]string{"kwok-v0.8.0/kwok"}, prefixed("kwok-v0.8.0/", KWOKStageFiles)...), true},
		{"kwok missing one stage", KWOK, "v0.8.0", append([]string{"kwok-v0.8.0/kwok"}, prefixed("kwok-v0.8.0/", KWOKStageFiles[1:])...), false},
		{"invalid version", KWOK, "0.8.0/kwok", []string{"kwok-v0.8.0/kwok"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := t.TempDir()
			t.Setenv("ETCDKIT_CACHE", cache)
			for _, f := range tt.files {
				p := filepath.Join(cache, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if got := tt.component.Cached(tt.version); got != tt.want {
				t.Errorf("got %s.Cached(%q) %v, want %v", tt.component.Name(), tt.version, got, tt.want)
			}
		})
	}
}

func prefixed(prefix string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, prefix+n)
	}
	return out
}
