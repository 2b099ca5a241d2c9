package snapshot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// TestFileTruncatedWhileReadIsAClearError truncates a db after Open has
// mapped it, as a process writing the file would: every reader must
// return ErrTruncated saying the file shrank, not a fault's "invalid
// memory address or nil pointer dereference".
func TestFileTruncatedWhileReadIsAClearError(t *testing.T) {
	readers := []struct {
		name string
		read func(context.Context, *snapshot.DB) error
	}{
		{"usage", func(ctx context.Context, db *snapshot.DB) error {
			_, err := db.Usage(ctx, keyspace.Parser{})
			return err
		}},
		{"status", func(ctx context.Context, db *snapshot.DB) error {
			_, _, err := db.Status(ctx, keyspace.Parser{})
			return err
		}},
		{"check", func(_ context.Context, db *snapshot.DB) error {
			c, err := db.Check()
			if err == nil && !c.OK {
				return errors.New(strings.Join(c.Errors, "; "))
			}
			return err
		}},
		{"meta buckets", func(_ context.Context, db *snapshot.DB) error {
			_, err := db.ClusterInfo()
			return err
		}},
	}
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			path := copyFixture(t, "3.7")
			db, err := snapshot.Open(path, snapshot.Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := os.Truncate(path, 2*4096); err != nil {
				t.Fatal(err)
			}
			err = r.read(t.Context(), db)
			if !errors.Is(err, snapshot.ErrTruncated) || !strings.Contains(err.Error(), "shrank") ||
				!strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "nil pointer") {
				t.Fatalf("error %v: want ErrTruncated naming the file and saying it shrank", err)
			}
		})
	}
}

// TestOpenDataDirThatCannotBeRead opens data directories whose
// member/snap/db exists but cannot be reached: the error must say why
// rather than claim there is no member/snap/db.
func TestOpenDataDirThatCannotBeRead(t *testing.T) {
	db, err := os.ReadFile(fixture("3.7"))
	if err != nil {
		t.Fatal(err)
	}
	dataDir := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "member", "snap"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "member", "snap", "db"), db, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tests := []struct {
		name    string
		make    func(t *testing.T) string
		wantMsg string
	}{
		{"no member/snap/db", func(t *testing.T) string { return t.TempDir() }, "a directory without member/snap/db"},
		{"member/ a symlink loop", func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.Symlink("member", filepath.Join(dir, "member")); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "too many levels of symbolic links"},
		{"member/ a file", func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "member"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "not a directory"},
		{"member/ unreadable", func(t *testing.T) string {
			if os.Geteuid() == 0 {
				t.Skip("root reads a directory whatever its permissions")
			}
			dir := dataDir(t)
			member := filepath.Join(dir, "member")
			if err := os.Chmod(member, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(member, 0o700) })
			return dir
		}, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.make(t)
			db, err := snapshot.Open(dir, snapshot.Options{})
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q: want it to name %s and say %q", err, dir, tt.wantMsg)
			}
		})
	}
}
