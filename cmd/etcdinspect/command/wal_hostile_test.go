package command_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/filetest"
	"github.com/kubestore/etcdkit/pkg/wal"
)

// hostileWALDir copies the 3.7 WAL fixture and adds files that would
// hang or exhaust a reader: a FIFO, /dev/zero and a 20 GiB sparse file,
// each as a .snap and as a segment (the sparse segment's frame claims
// 19 GiB).
func hostileWALDir(t *testing.T) string {
	t.Helper()
	dir := filetest.CopyTree(t, walFixture("3.7"))
	walDir, snapDir := filepath.Join(dir, "member", "wal"), filepath.Join(dir, "member", "snap")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(syscall.Mkfifo(filepath.Join(snapDir, "0000000000000003-0000000000000020.snap"), 0o600))
	must(os.Symlink("/dev/zero", filepath.Join(snapDir, "0000000000000003-0000000000000021.snap")))
	must(os.WriteFile(filepath.Join(snapDir, "0000000000000003-0000000000000022.snap"), nil, 0o600))
	must(os.Truncate(filepath.Join(snapDir, "0000000000000003-0000000000000022.snap"), 20<<30))
	must(syscall.Mkfifo(filepath.Join(walDir, "0000000000000006-0000000000000010.wal"), 0o600))
	must(os.Symlink("/dev/zero", filepath.Join(walDir, "0000000000000007-0000000000000010.wal")))
	must(os.WriteFile(filepath.Join(walDir, "0000000000000008-0000000000000010.wal"), binary.LittleEndian.AppendUint64(nil, 19<<30), 0o600))
	must(os.Truncate(filepath.Join(walDir, "0000000000000008-0000000000000010.wal"), 20<<30))
	return dir
}

// TestWALHostileFiles runs wal on a member holding every hostile file at
// once: it prints the report, names each file's fault on stderr, exits 1,
// within 2 s and without allocating more than a few records' worth.
func TestWALHostileFiles(t *testing.T) {
	dir := hostileWALDir(t)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	done := make(chan struct{})
	var out, stderr string
	var code int
	go func() {
		defer close(done)
		out, stderr, code = run(t, "wal", dir)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("wal did not return within 10s")
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if elapsed > 2*time.Second {
		t.Errorf("wal took %v, want at most 2s", elapsed)
	}
	if code != 1 {
		t.Errorf("got exit %d, want 1; stderr: %s", code, stderr)
	}
	for _, want := range []string{
		"0000000000000003-0000000000000020.snap offset 0: unreadable: is a FIFO",
		"0000000000000003-0000000000000021.snap offset 0: unreadable: is a symbolic link to /dev/zero: is a character device",
		"0000000000000003-0000000000000022.snap offset 0: too-large: 21474836480 bytes, over the limit of 536870912 bytes",
		"0000000000000006-0000000000000010.wal offset 0: unreadable: is a FIFO",
		"0000000000000007-0000000000000010.wal offset 0: unreadable: is a symbolic link to /dev/zero",
		"0000000000000008-0000000000000010.wal offset 0: too-large: frame claims a record of 20401094656 bytes, over the limit of 11010048 bytes",
		"hint: --max-record-bytes",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(out, "| fault ") || !strings.Contains(out, "| TOTAL ") {
		t.Errorf("the report is not printed whole:\n%s", out)
	}
	const bound = 5*wal.DefaultMaxRecordBytes + 8<<20 // pkg/wal Read's doc
	if got := after.TotalAlloc - before.TotalAlloc; got > bound {
		t.Errorf("allocated %d bytes, want at most %d", got, bound)
	}
}

// TestWALPermissionDenied runs wal as nobody (root passes over modes) on
// a copy of the 3.7 member whose member directory, wal directory or snap
// directory has mode 000: each says permission denied and exits 1; the
// unreadable snap directory is a fault, with the WAL's report printed.
func TestWALPermissionDenied(t *testing.T) {
	for _, c := range []struct {
		name, path string
		wantReport bool
	}{
		{"member dir", "member", false},
		{"wal dir", "member/wal", false},
		{"snap dir", "member/snap", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			filetest.Unprivileged(t, func(t *testing.T) {
				dir := filetest.CopyTree(t, walFixture("3.7"))
				p := filepath.Join(dir, filepath.FromSlash(c.path))
				if err := os.Chmod(p, 0); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(p, 0o755) })
				out, stderr, code := run(t, "wal", dir)
				if code != 1 || !strings.Contains(stderr, "permission denied") || strings.Contains(stderr, "no WAL segments") {
					t.Errorf("got exit %d, stderr %q; want exit 1 and permission denied", code, stderr)
				}
				if got := strings.Contains(out, "| TOTAL "); got != c.wantReport {
					t.Errorf("report printed: got %v, want %v:\n%s", got, c.wantReport, out)
				}
			})
		})
	}
}

// TestWALInterrupted: wal exits 130 when interrupted, whenever the signal
// lands: while it prints (after all the reading), and while it scans a
// long segment (within 2 s of the signal).
func TestWALInterrupted(t *testing.T) {
	// A damaged WAL too: its faults must not turn the exit into 1.
	damaged := filetest.CopyTree(t, walFixture("3.7"))
	if err := os.Truncate(filepath.Join(damaged, "member", "wal", "0000000000000005-000000000000000f.wal"), 1000); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{walFixture("3.7"), damaged} {
		t.Run("while printing "+filepath.Base(dir), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			root := command.NewRootCommand()
			var out, stderr strings.Builder
			root.SetOut(cancelOnWrite{Writer: &out, cancel: cancel})
			root.SetErr(&stderr)
			code := cli.RunContext(ctx, root, []string{"wal", dir}, &stderr)
			if code != cli.ExitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("got exit %d, stderr %q; want %d and interrupted", code, stderr.String(), cli.ExitInterrupted)
			}
			if out.Len() == 0 {
				t.Errorf("nothing was printed: the signal did not land while printing")
			}
		})
	}
	t.Run("while scanning", func(t *testing.T) {
		// 4M valid crc records: a scan of about a second.
		dir := t.TempDir()
		frame := binary.LittleEndian.AppendUint64(nil, 2|(0x80|6)<<56) // a 2-byte record, 6 bytes of padding
		frame = append(frame, 0x08, 0x04, 0, 0, 0, 0, 0, 0)            // {type: 4 (crc)}
		seg := make([]byte, 0, 4<<20*len(frame))
		for range 4 << 20 {
			seg = append(seg, frame...)
		}
		if err := os.WriteFile(filepath.Join(dir, "0000000000000000-0000000000000000.wal"), seg, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		root := command.NewRootCommand()
		var out, stderr strings.Builder
		root.SetOut(&out)
		root.SetErr(&stderr)
		signalled := make(chan time.Time, 1)
		time.AfterFunc(100*time.Millisecond, func() { signalled <- time.Now(); cancel() })
		code := cli.RunContext(ctx, root, []string{"wal", dir}, &stderr)
		if code != cli.ExitInterrupted {
			t.Fatalf("got exit %d, stderr %q; want %d", code, stderr.String(), cli.ExitInterrupted)
		}
		if d := time.Since(<-signalled); d > 2*time.Second {
			t.Errorf("exited %v after the signal, want within 2s", d)
		}
		if out.Len() != 0 {
			t.Errorf("printed a report after the signal:\n%s", out.String())
		}
	})
}
