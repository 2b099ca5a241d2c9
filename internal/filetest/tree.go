package filetest

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Tree describes every entry under root, root itself included as ".":
// each directory with its mode, each regular file with its mode, size and
// SHA-256, each symbolic link with its target (not followed), anything
// else with its type. Unlike Sums it sees what a refused command must not
// leave behind either: an empty directory, a lock file. It fails the test
// if root cannot be walked or a file read.
func Tree(t testing.TB, root string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			tree[rel] = fmt.Sprintf("directory %v", m)
		case m.IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[rel] = fmt.Sprintf("file %v, %d bytes, sha256 %x", m, len(b), sha256.Sum256(b))
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			tree[rel] = "symbolic link to " + target
		default:
			tree[rel] = fmt.Sprintf("%v", m.Type())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return tree
}

// TreeUnchanged takes Tree(root) now and returns a function that, called
// later, fails the test naming every entry under root that was added,
// removed or changed since, with what it was and is. Use it as
//
//	defer filetest.TreeUnchanged(t, dir)()
func TreeUnchanged(t testing.TB, root string) func() {
	t.Helper()
	before := Tree(t, root)
	return func() {
		t.Helper()
		after := Tree(t, root)
		for _, p := range slices.Sorted(maps.Keys(before)) {
			if a, ok := after[p]; !ok {
				t.Errorf("%s: removed (was %s)", filepath.Join(root, p), before[p])
			} else if a != before[p] {
				t.Errorf("%s: changed: got %s, want %s", filepath.Join(root, p), a, before[p])
			}
		}
		for _, p := range slices.Sorted(maps.Keys(after)) {
			if _, ok := before[p]; !ok {
				t.Errorf("%s: added (%s)", filepath.Join(root, p), after[p])
			}
		}
	}
}
