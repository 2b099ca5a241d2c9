package main

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// buildEtcdinspect builds this command into the test's directory.
func buildEtcdinspect(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the etcdinspect binary; skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build etcdinspect with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "etcdinspect")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// copyFixture copies a fixture db into the test's directory, extended to
// size bytes (sparse) when size is larger.
func copyFixture(t *testing.T, size int64) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", "etcd-3.7.db"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if size > int64(len(b)) {
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// waitForOpen waits until process pid has path open, which it does only
// after main has started listening for signals.
func waitForOpen(t *testing.T, pid int, path string) {
	t.Helper()
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		fds, _ := os.ReadDir(fdDir)
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && target == path {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("etcdinspect did not open %s within a minute", path)
}

// TestSignalsStopWaitsAndScans sends SIGINT or SIGTERM to etcdinspect
// while it waits for the lock of a db a "member" holds, and while it
// hashes a 16 GiB (sparse) snapshot: it must stop within seconds with
// exit code 130 and one line on stderr saying it was interrupted, not
// wait for the lock timeout or the end of the hash.
func TestSignalsStopWaitsAndScans(t *testing.T) {
	bin := buildEtcdinspect(t)
	tests := []struct {
		name   string
		sig    syscall.Signal
		size   int64 // of the db; a multiple of 512 plus 32 has a trailer to hash
		locked bool
	}{
		{"SIGINT during the lock wait", syscall.SIGINT, 0, true},
		{"SIGTERM during the lock wait", syscall.SIGTERM, 0, true},
		{"SIGINT while hashing", syscall.SIGINT, 16<<30 + 32, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := copyFixture(t, tt.size)
			if tt.locked {
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bin, "status", path, "--lock-timeout", "10m")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { cmd.Process.Kill() })
			waitForOpen(t, cmd.Process.Pid, path)
			time.Sleep(300 * time.Millisecond) // well into the wait or the hash
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			var err error
			select {
			case err = <-exited:
			case <-time.After(10 * time.Second):
				t.Fatalf("still running 10s after %v", tt.sig)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 130 {
				t.Errorf("exit %v, want code 130 (stderr %q)", err, stderr.String())
			}
			if d := time.Since(sent); d > 5*time.Second {
				t.Errorf("took %v to stop", d)
			}
			if msg := stderr.String(); strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "etcdinspect: interrupted") {
				t.Errorf("stderr %q, want one line saying it was interrupted", msg)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestExporterSignals runs the exporter binary against an embedded member:
// SIGTERM, a server's normal stop, ends it with exit 0, SIGINT with 130,
// each within 2 s and after the HTTP server shut down; stdout stays
// empty.
func TestExporterSignals(t *testing.T) {
	bin := buildEtcdinspect(t)
	srv := etcdtest.RunEtcd(t)
	for _, tt := range []struct {
		sig      syscall.Signal
		wantCode int
	}{
		{syscall.SIGTERM, 0},
		{syscall.SIGINT, 130},
	} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin, "exporter", "--endpoints", strings.Join(srv.Endpoints, ","), "--listen", "127.0.0.1:0",
				"--interval", "1m", "--count-interval", "1s")
			var stdout bytes.Buffer
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout = &stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			lines := make(chan string, 100)
			go func() {
				defer close(lines)
				s := bufio.NewScanner(stderr)
				for s.Scan() {
					lines <- s.Text()
				}
			}()
			var addr string
			timeout := time.After(30 * time.Second)
			for addr == "" {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("exporter exited before serving: %v", cmd.Wait())
					}
					if _, rest, found := strings.Cut(l, "serving http://"); found {
						addr, _, _ = strings.Cut(rest, "/")
					}
				case <-timeout:
					t.Fatal("exporter did not serve within 30 s")
				}
			}
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if err := syscall.Kill(pid, tt.sig); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			var rest []string
			for l := range lines {
				rest = append(rest, l)
			}
			err = cmd.Wait()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || time.Since(sent) > 2*time.Second {
				t.Errorf("after %v: got exit %d after %s, want %d within 2 s (stderr %q)", tt.sig, code, time.Since(sent), tt.wantCode, rest)
			}
			if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
				t.Errorf("after %v: %s still serves", tt.sig, addr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}
