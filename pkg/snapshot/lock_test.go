package snapshot_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// defragmented returns a copy of the fixture as a defragmentation leaves
// it: the same buckets and entries, rewritten page by page into a new,
// smaller file (bbolt's Compact, which etcd's defrag follows).
func defragmented(t *testing.T, from string) []byte {
	t.Helper()
	src, err := bolt.Open(from, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(t.TempDir(), "defragmented.db")
	dst, err := bolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bolt.Compact(dst, src, 0); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// holdLock takes the exclusive flock a running member holds on path and
// returns the function that releases it.
func holdLock(t *testing.T, path string) func() {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	var released bool
	release := func() {
		if !released {
			released = true
			f.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// TestOpenReadsTheFileAsItIsAfterTheLockWait replaces a db while Open
// waits for the lock a "member" holds, as a member that keeps committing
// or defragments does, then releases the lock: Open must read the file as
// it is after the wait, never mix the meta page read before with pages
// written meanwhile.
func TestOpenReadsTheFileAsItIsAfterTheLockWait(t *testing.T) {
	orig, err := os.ReadFile(fixture("3.7"))
	if err != nil {
		t.Fatal(err)
	}
	after := defragmented(t, fixture("3.7"))
	if len(after) == len(orig) {
		t.Fatalf("the defragmented copy is as long as the original (%d bytes)", len(orig))
	}
	tests := []struct {
		name    string
		replace func(t *testing.T, path string)
	}{
		{"rewritten in place", func(t *testing.T, path string) {
			if err := os.WriteFile(path, after, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"renamed over", func(t *testing.T, path string) {
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, after, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			if err := os.WriteFile(path, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			release := holdLock(t, path)
			type result struct {
				db  *snapshot.DB
				err error
			}
			opened := make(chan result, 1)
			go func() {
				db, err := snapshot.Open(path, snapshot.Options{LockTimeout: time.Minute})
				opened <- result{db, err}
			}()
			time.Sleep(300 * time.Millisecond) // Open is waiting for the lock
			tt.replace(t, path)
			release()
			var r result
			select {
			case r = <-opened:
			case <-time.After(30 * time.Second):
				t.Fatal("Open still waiting 30s after the lock was released")
			}
			if r.err != nil {
				t.Fatalf("Open: %v", r.err)
			}
			defer r.db.Close()
			if got := r.db.SizeBytes(); got != int64(len(after)) {
				t.Errorf("opened %d bytes, want the %d bytes the file has after the wait", got, len(after))
			}
			st, _, err := r.db.Status(t.Context(), keyspace.Parser{})
			if err != nil {
				t.Fatalf("Status: %v", err)
			}
			if !st.Check.OK {
				t.Errorf("consistency check of the file after the wait: %v", st.Check.Errors)
			}
		})
	}
}

// copyFixture returns a copy of a fixture in the test's directory.
func copyFixture(t *testing.T, v string) string {
	t.Helper()
	b, err := os.ReadFile(fixture(v))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
