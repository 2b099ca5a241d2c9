package output

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreparePaths checks that a missing directory is created, that no
// file is created or truncated, and that a path that cannot be written
// is an error naming it.
func TestPreparePaths(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "a", "b")
	if err := PrepareDir(missing); err != nil {
		t.Fatalf("PrepareDir(%s): %v", missing, err)
	}
	if fi, err := os.Stat(missing); err != nil || !fi.IsDir() {
		t.Errorf("PrepareDir did not create %s: %v", missing, err)
	}
	if entries, _ := os.ReadDir(missing); len(entries) != 0 {
		t.Errorf("PrepareDir left %d files in %s", len(entries), missing)
	}
	csvPath := filepath.Join(dir, "c", "intervals.csv")
	if err := PrepareFile(csvPath); err != nil {
		t.Fatalf("PrepareFile(%s): %v", csvPath, err)
	}
	if _, err := os.Stat(csvPath); !os.IsNotExist(err) {
		t.Errorf("PrepareFile created %s (%v); want only its directory", csvPath, err)
	}
	kept := filepath.Join(dir, "kept.csv")
	if err := os.WriteFile(kept, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := PrepareFile(kept); err != nil {
		t.Fatalf("PrepareFile(%s): %v", kept, err)
	}
	if b, _ := os.ReadFile(kept); string(b) != "old" {
		t.Errorf("PrepareFile changed %s to %q", kept, b)
	}
	under := filepath.Join(kept, "x")
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"PrepareDir under a file", PrepareDir(under)},
		{"PrepareFile under a file", PrepareFile(filepath.Join(under, "y.csv"))},
		{"PrepareFile of a directory", PrepareFile(dir)},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), dir) {
			t.Errorf("%s: %v, want an error naming the path", tt.name, tt.err)
		}
	}
}
