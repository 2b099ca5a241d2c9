package wal

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "regenerate testdata/fixtures/wal-3.7 from an embedded etcd")

// fixtureDir is the committed member data directory (WAL and snap files
// only) that cmd/etcdinspect's golden tests read.
var fixtureDir = filepath.Join("..", "..", "testdata", "fixtures", "wal-3.7")

// TestFixture regenerates the committed WAL fixture with -update (an
// embedded etcd 3.7 member, 4 KiB segments, --snapshot-count 10, the load
// of writeLoad), and otherwise checks that it reads without faults and
// holds that load's writes.
func TestFixture(t *testing.T) {
	if *update {
		dir, _ := makeDataDir(t)
		if err := os.RemoveAll(fixtureDir); err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"wal", "snap"} {
			src := filepath.Join(dir, "member", sub)
			dst := filepath.Join(fixtureDir, "member", sub)
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			names, _ := filepath.Glob(filepath.Join(src, "*."+sub))
			for _, n := range names {
				b, err := os.ReadFile(n)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dst, filepath.Base(n)), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	before := dirSums(t, fixtureDir)
	rep, err := Read(t.Context(), fixtureDir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Faults) != 0 {
		t.Errorf("got faults %+v, want none", rep.Faults)
	}
	// writeLoad: 9 pod writes, 2 configmaps, 2 events, 1 key outside.
	if rep.Total.Writes != 14 || len(rep.Compactions) != 1 {
		t.Errorf("got %d writes and %d compactions, want 14 and 1", rep.Total.Writes, len(rep.Compactions))
	}
	if after := dirSums(t, fixtureDir); !equalSums(before, after) {
		t.Errorf("the fixture changed")
	}
}
