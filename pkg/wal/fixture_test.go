package wal

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubestore/etcdkit/internal/filetest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

var update = flag.Bool("update", false, "regenerate testdata/fixtures/wal-3.{5,6,7} (scripts/make-wal-fixtures.sh)")

// fixtureVersions are the etcd releases whose member data directories
// are committed as testdata/fixtures/wal-<minor>, which cmd/etcdinspect's
// golden tests read. "" is the embedded etcd of this module (3.7.3).
var fixtureVersions = []struct {
	minor, release string
}{
	{"3.5", "3.5.35"},
	{"3.6", "3.6.16"},
	{"3.7", ""},
}

func fixtureDir(minor string) string {
	return filepath.Join("..", "..", "testdata", "fixtures", "wal-"+minor)
}

// TestFixture regenerates the committed member data directories with
// -update and otherwise checks that each reads without faults and holds
// the writes of writeLoad. Each is what one member wrote under writeLoad
// with --snapshot-count 10, stopped cleanly, keeping the WAL segments,
// the snap files and the db:
//   - wal-3.7: the embedded etcd 3.7.3 of this module with 4 KiB WAL
//     segments (etcd's SegmentSizeBytes is a variable, not a flag), so
//     the directory has several segments, which the missing-segment
//     damage needs;
//   - wal-3.5, wal-3.6: the real etcd 3.5.35 and 3.6.16 binaries
//     (scripts/build-etcd.sh), whose single segment etcd preallocates to
//     64 MB.
//
// To keep them small, the last segment is cut after its last record (the
// zeros etcd preallocated after it, which its own decoder reads as the
// end, are dropped) and the db after bbolt's high-water mark (the pages
// past it are unused; bbolt grows the file ahead of the data).
func TestFixture(t *testing.T) {
	for _, v := range fixtureVersions {
		t.Run(v.minor, func(t *testing.T) {
			dir := fixtureDir(v.minor)
			if *update {
				var src string
				if v.release == "" {
					src, _ = makeDataDir(t)
				} else {
					src, _ = makeRealDataDir(t, v.release)
				}
				writeFixture(t, src, dir)
			}
			defer filetest.Unchanged(t, dir)()
			rep, err := Read(t.Context(), dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Faults) != 0 {
				t.Errorf("got faults %+v, want none", rep.Faults)
			}
			// writeLoad: 9 pod writes, 2 configmaps, 2 events, 1 key outside.
			if rep.Total.RequestedWrites != 14 || len(rep.Compactions) != 1 || len(rep.SnapFiles) == 0 {
				t.Errorf("got %d writes requested, %d compactions, %d snap files; want 14, 1 and some",
					rep.Total.RequestedWrites, len(rep.Compactions), len(rep.SnapFiles))
			}
			// Every write of writeLoad succeeds, and each fixture's WAL
			// starts at entry 1 and ends at its db's consistent index.
			tot := rep.Total
			if tot.AppliedWrites != tot.RequestedWrites || tot.FailedWrites != 0 || tot.NotDecidedWrites != 0 {
				t.Errorf("got %d applied, %d failed, %d not decided of %d writes requested; want all applied",
					tot.AppliedWrites, tot.FailedWrites, tot.NotDecidedWrites, tot.RequestedWrites)
			}
			if rp := rep.Replay; rp.NotDecided != "" || rp.DecidedThroughIndex != rep.LastIndex || rp.ReplayRevision != rp.DBRevision {
				t.Errorf("got replay %+v, want every entry decided through %d and the db's revision reached", rp, rep.LastIndex)
			}
			db, err := snapshot.Open(filepath.Join(dir, "member", "snap", "db"), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Check(); err != nil {
				t.Errorf("the db does not check: %v", err)
			}
		})
	}
}

// writeFixture replaces dst with the WAL segments, snap files and db of
// the data directory src, the last segment cut after its last record and
// the db after its high-water mark.
func writeFixture(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	var lastSeg string
	for _, pat := range []string{"wal/*.wal", "snap/*.snap", "snap/db"} {
		names, _ := filepath.Glob(filepath.Join(src, "member", pat))
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dst, "member", filepath.Base(filepath.Dir(n)), filepath.Base(n))
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if filepath.Ext(n) == ".wal" {
				lastSeg = out // Glob sorts: the last is the newest segment
			}
		}
	}
	if lastSeg == "" {
		t.Fatalf("%s: no WAL segments", src)
	}
	fr := frames(t, lastSeg)
	end := (fr[len(fr)-1].dataEnd + 7) &^ 7 // frames are padded to 8 bytes
	if err := os.Truncate(lastSeg, end); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dst, "member", "snap", "db")
	db, err := snapshot.Open(dbPath, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := db.Status(t.Context(), keyspace.Parser{})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(dbPath, st.DBSizeBytes); err != nil {
		t.Fatal(err)
	}
}
