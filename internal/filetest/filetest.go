// Package filetest holds the file helpers of tests that read committed
// fixtures or data directories and must leave them as they found them:
// digests of a tree, a check that it did not change, and a copy of a tree
// to damage.
package filetest

import (
	"crypto/sha256"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Sums returns the SHA-256 of every regular file under root (root may
// itself be a file), keyed by the path relative to root ("." for root
// itself). It fails the test if a file cannot be read.
func Sums(t testing.TB, root string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		sums[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatalf("digest %s: %v", root, err)
	}
	return sums
}

// Unchanged takes Sums(root) now and returns a function that, called
// later, fails the test naming every file under root that was added,
// removed or changed since. Use it as
//
//	defer filetest.Unchanged(t, dir)()
func Unchanged(t testing.TB, root string) func() {
	t.Helper()
	before := Sums(t, root)
	return func() {
		t.Helper()
		after := Sums(t, root)
		for _, p := range slices.Sorted(maps.Keys(before)) {
			if a, ok := after[p]; !ok {
				t.Errorf("%s: removed", filepath.Join(root, p))
			} else if a != before[p] {
				t.Errorf("%s: changed", filepath.Join(root, p))
			}
		}
		for _, p := range slices.Sorted(maps.Keys(after)) {
			if _, ok := before[p]; !ok {
				t.Errorf("%s: added", filepath.Join(root, p))
			}
		}
	}
}

// CopyTree copies the directories and regular files under src into a new
// t.TempDir() (files mode 0600) and returns that directory, removed when
// the test ends.
func CopyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	return dst
}
