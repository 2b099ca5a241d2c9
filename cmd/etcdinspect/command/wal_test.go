package command_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// walFixture is a member data directory written by an embedded etcd 3.7
// (pkg/wal TestFixture -update).
var walFixture = filepath.Join("..", "..", "..", "testdata", "fixtures", "wal-3.7")

// TestGoldenWAL renders `wal` on the fixture in every -w format and checks
// that no fixture file changed.
func TestGoldenWAL(t *testing.T) {
	before := dirSum(t, walFixture)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"wal.table", []string{"-w", "table"}},
		{"wal.json", []string{"-w", "json"}},
		{"wal.markdown", []string{"-w", "markdown"}},
		{"wal.csv", []string{"-w", "csv"}},
		{"wal-namespace-top3.table", []string{"--by", "namespace", "--top", "3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"wal", walFixture}, c.args...)
			out, stderr, code := run(t, args...)
			if code != 0 {
				t.Fatalf("etcdinspect %v: exit %d: %s", args, code, stderr)
			}
			compareGolden(t, filepath.Join("testdata", "golden", "wal", c.name+".golden"), out)
		})
	}
	if after := dirSum(t, walFixture); after != before {
		t.Errorf("the WAL fixture changed")
	}
}

// TestWALDamaged runs `wal` on damaged copies of the fixture: each fault
// is one line on stderr naming the file and offset, the exit code is 1,
// the report is still printed, and nothing panics.
func TestWALDamaged(t *testing.T) {
	seg := func(dir string, i int) string {
		names, _ := filepath.Glob(filepath.Join(dir, "member", "wal", "*.wal"))
		if i < 0 {
			i += len(names)
		}
		return names[i]
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"torn tail", func(t *testing.T, dir string) {
			p := seg(dir, -1)
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
			p := seg(dir, 2)
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
			if err := os.Remove(seg(dir, 3)); err != nil {
				t.Fatal(err)
			}
		}, "missing-segment"},
		{"not a data directory", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "member")); err != nil {
				t.Fatal(err)
			}
		}, "no WAL segments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyTree(t, walFixture, dir)
			c.damage(t, dir)
			before := dirSum(t, dir)
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
				if strings.HasPrefix(line, "fault: ") && !strings.Contains(line, ".wal offset ") {
					t.Errorf("fault line %q does not name a segment and offset", line)
				}
			}
			if c.want != "no WAL segments" && !strings.Contains(out, "| fault ") {
				t.Errorf("the report has no fault row:\n%s", out)
			}
			if dirSum(t, dir) != before {
				t.Errorf("the damaged copy changed")
			}
		})
	}
}

// dirSum hashes every file under dir, names included.
func dirSum(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		sum := fileSum(t, p)
		b.WriteString(p)
		b.Write(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFlagErrors checks that the new commands' bad flags exit 2.
func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"space", "x.db", "--quota", "0"},
		{"wal", walFixture, "--by", "pod"},
		{"wal", walFixture, "--top", "-1"},
	} {
		if _, stderr, code := run(t, args...); code != 2 {
			t.Errorf("etcdinspect %v: got exit %d (%s), want 2", args, code, stderr)
		}
	}
}

// TestGoldenMembers compares the members of the 3.5, 3.6 and 3.7
// fixtures, which hold the same key bucket, in every -w format, and checks
// that one file is not enough.
func TestGoldenMembers(t *testing.T) {
	files := []string{fixture("3.5"), fixture("3.6"), fixture("3.7")}
	for _, format := range []string{"table", "json", "markdown", "csv"} {
		t.Run(format, func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"members", "-w", format}, files...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			compareGolden(t, filepath.Join("testdata", "golden", "members", "members."+format+".golden"), out)
		})
	}
	if _, _, code := run(t, "members", files[0]); code != 2 {
		t.Errorf("members with one file: got exit %d, want 2", code)
	}
}
