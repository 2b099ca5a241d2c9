package command_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
)

// TestEveryOpenPathIsBounded gives every command that opens a file or a
// data directory a FIFO, a symbolic link to /dev/zero, a 20 GiB sparse
// file of zeros and a directory without a member: each must answer with
// one line and a non-zero exit within 2 s, without a panic, and without
// allocating more than a bound that does not grow with the input (the
// sparse file is 20 GiB; a reader that trusted its size or read it whole
// would allocate gigabytes, or take minutes).
func TestEveryOpenPathIsBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(20 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	emptyDir := t.TempDir()
	// A data directory whose member/snap/db and member/wal are the same
	// hostile inputs.
	dataDir := t.TempDir()
	for _, d := range []string{"member/snap", "member/wal"} {
		if err := os.MkdirAll(filepath.Join(dataDir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(sparse, filepath.Join(dataDir, "member/snap/db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sparse, filepath.Join(dataDir, "member/wal/0000000000000000-0000000000000000.wal")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dataDir, "member/snap/0000000000000002-0000000000000016.snap")); err != nil {
		t.Fatal(err)
	}

	commands := [][]string{
		{"status", "%"}, {"usage", "%"}, {"keys", "%"}, {"get", "%", "/registry/pods/default/a"},
		{"history", "%", "/registry/pods/default/a"}, {"compaction", "%", "--at", "5"}, {"leases", "%"},
		{"meta", "%"}, {"space", "%"}, {"verify", "%"}, {"diff", "%", fixture("3.7")},
		{"members", "%", fixture("3.7")}, {"wal", "%"},
	}
	inputs := map[string]string{"FIFO": fifo, "/dev/zero link": zero, "20 GiB sparse file": sparse,
		"empty directory": emptyDir, "hostile data directory": dataDir}
	const maxAllocBytes = 256 << 20
	for _, c := range commands {
		for name, path := range inputs {
			args := make([]string, len(c))
			for i, a := range c {
				args[i] = strings.Replace(a, "%", path, 1)
			}
			t.Run(c[0]+"/"+name, func(t *testing.T) {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				start := time.Now()
				type result struct {
					stdout, stderr string
					code           int
				}
				done := make(chan result, 1)
				go func() {
					out, stderr, code := run(t, args...)
					done <- result{out, stderr, code}
				}()
				var r result
				select {
				case r = <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("etcdinspect %s still running after 10 s", strings.Join(args, " "))
				}
				elapsed := time.Since(start)
				runtime.ReadMemStats(&after)
				if r.code == 0 || strings.Count(r.stderr, "\n") < 1 || strings.Contains(r.stderr, "goroutine ") {
					t.Errorf("exit %d, stderr %q: want a non-zero exit and no panic", r.code, r.stderr)
				}
				// wal reports each fault on a line of its own and reads on; the
				// other commands stop at the first error.
				if c[0] != "wal" && c[0] != "members" && strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("stderr %q: want one line", r.stderr)
				}
				if elapsed > 2*time.Second {
					t.Errorf("took %v, want at most 2 s", elapsed)
				}
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > maxAllocBytes {
					t.Errorf("allocated %d bytes, want at most %d", alloc, maxAllocBytes)
				}
			})
		}
	}
}

// TestLockWaitObeysInterrupt holds the lock a running member would hold
// on a copy of a fixture and cancels the command while it waits for it
// with a long --lock-timeout: it must exit 130 within 2 s.
func TestLockWaitObeysInterrupt(t *testing.T) {
	b, err := os.ReadFile(fixture("3.7"))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"status", "usage", "verify", "space"} {
		t.Run(c, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			root := command.NewRootCommand()
			var out, errOut bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&errOut)
			done := make(chan int, 1)
			go func() { done <- cli.RunContext(ctx, root, []string{c, db, "--lock-timeout", "1m"}, &errOut) }()
			time.Sleep(300 * time.Millisecond)
			cancel()
			start := time.Now()
			select {
			case code := <-done:
				if code != cli.ExitInterrupted {
					t.Errorf("exit %d, want %d (stderr %q)", code, cli.ExitInterrupted, errOut.String())
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("stopped %v after the interrupt, want at most 2 s", d)
				}
				if out.Len() != 0 {
					t.Errorf("stdout %q, want nothing", out.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("still waiting for the lock 10 s after the interrupt")
			}
		})
	}
}
