package command_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/internal/filetest"
)

// walVersions are the etcd minor versions of the committed member data
// directories (WAL segments, snap files and db) that pkg/wal TestFixture
// -update writes (scripts/make-wal-fixtures.sh); etcd 3.4 has none.
var walVersions = []string{"3.5", "3.6", "3.7"}

func walFixture(v string) string {
	return filepath.Join("..", "..", "..", "testdata", "fixtures", "wal-"+v)
}

// TestGoldenWAL renders `wal` on the data directory of every version as a
// table and as JSON, and `space` on its db, compares them with
// testdata/golden/<version>/, renders the 3.7 one in the other formats
// (testdata/golden/wal/), and checks that no fixture file changed.
func TestGoldenWAL(t *testing.T) {
	type walCase struct {
		golden string
		args   []string
	}
	var cases []walCase
	for _, v := range walVersions {
		dir := walFixture(v)
		db := filepath.Join(dir, "member", "snap", "db")
		for _, format := range []string{"table", "json"} {
			cases = append(cases,
				walCase{filepath.Join(v, "wal."+format), []string{"wal", dir, "-w", format}},
				walCase{filepath.Join(v, "space-member."+format), []string{"space", db, "-w", format}})
		}
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"wal.markdown", []string{"-w", "markdown"}},
		{"wal.csv", []string{"-w", "csv"}},
		{"wal-namespace-top3.table", []string{"--by", "namespace", "--top", "3"}},
	} {
		cases = append(cases, walCase{filepath.Join("wal", c.name), append([]string{"wal", walFixture("3.7")}, c.args...)})
	}
	for _, v := range walVersions {
		defer filetest.Unchanged(t, walFixture(v))()
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			out, stderr, code := run(t, c.args...)
			if code != 0 {
				t.Fatalf("etcdinspect %v: exit %d: %s", c.args, code, stderr)
			}
			compareGolden(t, filepath.Join("testdata", "golden", c.golden+".golden"), out)
		})
	}
}

// TestWALDamaged runs `wal` on damaged copies of every version's data
// directory: each fault is one line on stderr naming the file and offset,
// the exit code is 1, the report is still printed, and nothing panics. A
// missing segment needs two segments: only the 3.7 directory has them
// (the real 3.5 and 3.6 members wrote one 64 MB segment).
func TestWALDamaged(t *testing.T) {
	segs := func(dir string) []string {
		names, _ := filepath.Glob(filepath.Join(dir, "member", "wal", "*.wal"))
		return names
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"torn tail", func(t *testing.T, dir string) {
			names := segs(dir)
			p := names[len(names)-1]
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			// Cut the last segment inside its records.
			if err := os.Truncate(p, fi.Size()/2+3); err != nil {
				t.Fatal(err)
			}
		}, "torn-tail"},
		{"flipped byte", func(t *testing.T, dir string) {
			names := segs(dir)
			p := names[min(2, len(names)-1)]
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "crc-mismatch"},
		{"missing segment", func(t *testing.T, dir string) {
			names := segs(dir)
			if len(names) < 3 {
				t.Skipf("%d segments: no middle segment to remove", len(names))
			}
			if err := os.Remove(names[len(names)/2]); err != nil {
				t.Fatal(err)
			}
		}, "missing-segment"},
		{"not a data directory", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "member")); err != nil {
				t.Fatal(err)
			}
		}, "no WAL segments"},
	}
	for _, v := range walVersions {
		for _, c := range cases {
			t.Run(v+"/"+c.name, func(t *testing.T) {
				dir := filetest.CopyTree(t, walFixture(v))
				c.damage(t, dir)
				defer filetest.Unchanged(t, dir)()
				out, stderr, code := run(t, "wal", dir)
				if code != 1 {
					t.Errorf("got exit %d, want 1; stderr: %s", code, stderr)
				}
				if !strings.Contains(stderr, c.want) {
					t.Errorf("stderr %q does not name %q", stderr, c.want)
				}
				if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") {
					t.Errorf("stderr shows a panic: %s", stderr)
				}
				for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
					if strings.HasPrefix(line, "fault: ") && !strings.Contains(line, ".wal offset ") && !strings.Contains(line, ".snap offset ") {
						t.Errorf("fault line %q does not name a segment and offset", line)
					}
				}
				if c.want != "no WAL segments" && !strings.Contains(out, "| fault ") {
					t.Errorf("the report has no fault row:\n%s", out)
				}
			})
		}
	}
}

// TestFlagErrors checks that the new commands' bad flags exit 2.
func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"space", "x.db", "--quota", "0"},
		{"wal", walFixture("3.7"), "--by", "pod"},
		{"wal", walFixture("3.7"), "--top", "-1"},
		{"wal", walFixture("3.7"), "--max-record-bytes", "0"},
		{"wal", walFixture("3.7"), "--max-record-bytes", "ten"},
		{"wal", walFixture("3.7"), "--max-snap-bytes", "-1GiB"},
		{"wal", walFixture("3.7"), "--max-snap-bytes", "2TiB"},
	} {
		if _, stderr, code := run(t, args...); code != 2 {
			t.Errorf("etcdinspect %v: got exit %d (%s), want 2", args, code, stderr)
		}
	}
}

// TestGoldenMembers compares the db fixtures of every version, which
// hold the same key bucket but are of four clusters, in every -w format,
// then the data directories of the WAL fixtures (3.5, 3.6 and 3.7 members
// that each ran writeLoad, each its own cluster): each time a verdict of
// different clusters, no restore source and exit 1. It checks that one
// file is not enough and that no input changed.
func TestGoldenMembers(t *testing.T) {
	var files, dirs []string
	for _, v := range fixtureVersions {
		files = append(files, fixture(v))
		defer filetest.Unchanged(t, fixture(v))()
	}
	for _, v := range walVersions {
		dirs = append(dirs, walFixture(v))
		defer filetest.Unchanged(t, walFixture(v))()
	}
	for _, format := range []string{"table", "json", "markdown", "csv"} {
		t.Run(format, func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"members", "-w", format}, files...)...)
			if code != 1 || !strings.Contains(stderr, "4 different clusters: no member to restore from") {
				t.Fatalf("got exit %d, stderr %q; want 1 and the different clusters", code, stderr)
			}
			compareGolden(t, filepath.Join("testdata", "golden", "members", "members."+format+".golden"), out)
		})
	}
	for _, format := range []string{"table", "json"} {
		t.Run("data-dirs."+format, func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"members", "-w", format}, dirs...)...)
			if code != 1 || !strings.Contains(stderr, "3 different clusters") {
				t.Fatalf("got exit %d, stderr %q; want 1 and the different clusters", code, stderr)
			}
			compareGolden(t, filepath.Join("testdata", "golden", "members", "members-data-dirs."+format+".golden"), out)
		})
	}
	if _, _, code := run(t, "members", files[0]); code != 2 {
		t.Errorf("members with one file: got exit %d, want 2", code)
	}
}

// TestGoldenMembersDiverged runs `members` on the dbs of three embedded
// members written to diverge: b applied the writes of a and one more; c
// wrote another value to cm-3 at revision 5 and two more writes after a's
// last. The golden shows the first divergent revision (5), the key that
// differs there, and the restore choice: b, the member with the highest
// consistent index among the two whose hash at the common revision (7)
// agrees, not c, whose index is higher still. members exits 1.
func TestGoldenMembersDiverged(t *testing.T) {
	golden, err := filepath.Abs(filepath.Join("testdata", "golden", "members"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(values []string) string {
		return etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
			for i, v := range values {
				if _, err := c.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%d", i), v); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	base := []string{"a0", "a1", "a2", "a3", "a4", "a5"} // revisions 2-7
	c := slices.Clone(base)
	c[3] = "diverged" // revision 5
	dbs := map[string]string{
		"member-a.db": write(base),
		"member-b.db": write(append(slices.Clone(base), "a6")),
		"member-c.db": write(append(c, "c6", "c7")),
	}
	// Relative names keep the temporary directory out of the golden.
	dir := t.TempDir()
	for name, src := range dbs {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	defer filetest.Unchanged(t, dir)()
	args := []string{"members", "member-a.db", "member-b.db", "member-c.db"}
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			out, stderr, code := run(t, append(args, "-w", format)...)
			if code != 1 || !strings.Contains(stderr, "members disagree: restore from member-b.db") {
				t.Errorf("got exit %d, stderr %q; want 1 and the member to restore from", code, stderr)
			}
			compareGolden(t, filepath.Join(golden, "members-diverged."+format+".golden"), out)
		})
	}
}

// TestGoldenWALNotDecided runs `wal` on the 3.7 WAL fixture given the db of
// another history (testdata/fixtures/etcd-3.7.db, whose consistent index
// lies past the WAL's last entry): the replay cannot be checked, so every
// write requested is "not decided" and the outcomes row says why.
func TestGoldenWALNotDecided(t *testing.T) {
	golden, err := filepath.Abs(filepath.Join("testdata", "golden", "wal", "wal-not-decided.table.golden"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(fixture("3.7"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filetest.CopyTree(t, walFixture("3.7"))
	if err := os.WriteFile(filepath.Join(dir, "member", "snap", "db"), db, 0o600); err != nil {
		t.Fatal(err)
	}
	// A relative path keeps the temporary directory out of the golden.
	t.Chdir(dir)
	defer filetest.Unchanged(t, dir)()
	out, stderr, code := run(t, "wal", ".", "--top", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// pods: keys 5, requested 9, applied 0, failed 0, not decided 9.
	if !regexp.MustCompile(`\| pods +\| +5 \| +9 \| +0 \| +0 \| +9 \|`).MatchString(out) {
		t.Errorf("the pods' 9 writes are not all not decided:\n%s", out)
	}
	compareGolden(t, golden, out)
}

// TestWALTablesWithinWidth runs `wal` on a WAL (written with etcd's own
// WAL writer) whose texts are long: a key of 150 characters, a member
// with three long client URLs, and the replay's reason. Every table line
// stays within 120 columns; the key and the member's attributes are
// printed in full below the tables.
func TestWALTablesWithinWidth(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	meta, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: proto.Uint64(0x18872ab49415b7e4), ClusterID: proto.Uint64(0xe75700c5e2c7c3ee)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := etcdwal.Create(zap.NewNop(), filepath.Join(dir, "member", "wal"), meta)
	if err != nil {
		t.Fatal(err)
	}
	key := "/registry/pods/default/" + strings.Repeat("long-pod-name-", 9)
	var urls []string
	for i := range 3 {
		urls = append(urls, fmt.Sprintf("https://member-%d.a-rather-long-domain-name.example.com:2379", i))
	}
	reqs := []*etcdserverpb.InternalRaftRequest{
		{ID: 1, ClusterMemberAttrSet: &membershippb.ClusterMemberAttrSetRequest{Member_ID: 0x18872ab49415b7e4,
			MemberAttributes: &membershippb.Attributes{Name: "member-0", ClientUrls: urls}}},
		{ID: 2, Put: &etcdserverpb.PutRequest{Key: []byte(key), Value: []byte("v")}},
	}
	var ents []*raftpb.Entry
	for i, r := range reqs {
		data, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, &raftpb.Entry{Term: proto.Uint64(1), Index: proto.Uint64(uint64(i + 1)), Data: data})
	}
	if err := w.Save(&raftpb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(uint64(len(ents)))}, ents); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	for _, format := range []string{"table", "markdown"} {
		t.Run(format, func(t *testing.T) {
			out, stderr, code := run(t, "wal", dir, "-w", format)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, line := range strings.Split(out, "\n") {
				if (strings.HasPrefix(line, "|") || strings.HasPrefix(line, "+")) && utf8.RuneCountInString(line) > 120 {
					t.Errorf("table line %d columns wide, want at most 120: %q", utf8.RuneCountInString(line), line)
				}
			}
			for _, want := range []string{"| key 1 ", "Key 1:", key, urls[2], "Outcomes not decided"} {
				if !strings.Contains(out, want) {
					t.Errorf("got output\n%s\nwant it to hold %q", out, want)
				}
			}
		})
	}
}

// TestWALTopZeroMeansAll holds wal's --top to usage's meaning: 0 shows
// every key (the 3.7 fixture's WAL writes 10 distinct keys), N the N most
// written.
func TestWALTopZeroMeansAll(t *testing.T) {
	for _, tt := range []struct {
		top      string
		wantKeys int
	}{{"0", 10}, {"3", 3}} {
		out, stderr, code := run(t, "wal", walFixture("3.7"), "--top", tt.top, "-w", "json")
		if code != 0 {
			t.Fatalf("--top %s: exit %d: %s", tt.top, code, stderr)
		}
		var r struct {
			TopKeys []json.RawMessage `json:"topKeys"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.TopKeys) != tt.wantKeys {
			t.Errorf("--top %s: got %d keys, want %d", tt.top, len(r.TopKeys), tt.wantKeys)
		}
	}
}
