package command_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/internal/filetest"
)

// copyFile copies src into dir and returns the copy's path.
func copyFile(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestSnapshotTrailerVerdicts runs status and verify on a saved snapshot
// (valid trailer), a copy whose trailer was changed (invalid) and a
// member's db (no trailer): what etcdutl snapshot restore does with each,
// and the exit codes.
func TestSnapshotTrailerVerdicts(t *testing.T) {
	valid := fixture("3.7")
	invalid := copyFile(t, valid, t.TempDir())
	b, err := os.ReadFile(invalid)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff // the last byte of the sha256
	if err := os.WriteFile(invalid, b, 0o600); err != nil {
		t.Fatal(err)
	}
	member := filepath.Join(walFixture("3.7"), "member", "snap", "db")
	defer filetest.Unchanged(t, valid)()
	defer filetest.Unchanged(t, invalid)()
	for _, c := range []struct {
		name            string
		path            string
		wantStatusCode  int
		wantStatus      string
		wantVerifyCode  int
		wantVerify      string
		wantReady       bool
		wantSkipHashChk bool
	}{
		{"valid", valid, 0, "checks it and restores", 0, ": ready to restore: sha256 trailer matches, consistency check ok, revision 28", true, false},
		{"invalid", invalid, 1, "does not match the bytes before it", 1, ": NOT ready to restore: sha256 trailer does NOT match", false, false},
		{"member db", member, 0, "unless given --skip-hash-check", 0, ": ready to restore with --skip-hash-check: no sha256 trailer", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, code := run(t, "status", c.path)
			if code != c.wantStatusCode || !strings.Contains(out, c.wantStatus) {
				t.Errorf("status: got exit %d, output %q; want exit %d and %q", code, out, c.wantStatusCode, c.wantStatus)
			}
			if c.wantStatusCode != 0 && !strings.Contains(stderr, "sha256 trailer does not match") {
				t.Errorf("status: got stderr %q, want the mismatch named", stderr)
			}
			out, _, code = run(t, "verify", c.path)
			if code != c.wantVerifyCode || !strings.Contains(out, c.wantVerify) || strings.Count(out, "\n") != 1 {
				t.Errorf("verify: got exit %d, output %q; want exit %d and one line with %q", code, out, c.wantVerifyCode, c.wantVerify)
			}
			out, _, _ = run(t, "verify", c.path, "-w", "json")
			var v struct {
				Ready              bool   `json:"ready"`
				NeedsSkipHashCheck bool   `json:"needsSkipHashCheck"`
				Revision           int64  `json:"revision"`
				Restore            string `json:"restore"`
			}
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("verify -w json: %v: %s", err, out)
			}
			if v.Ready != c.wantReady || v.NeedsSkipHashCheck != c.wantSkipHashChk || v.Revision == 0 || v.Restore == "" {
				t.Errorf("verify -w json: got %+v, want ready %v, needs --skip-hash-check %v", v, c.wantReady, c.wantSkipHashChk)
			}
		})
	}
}

// spaceJSON runs space -w json with args and decodes the fields the
// tests look at.
func spaceJSON(t *testing.T, args ...string) (s struct {
	DBSizeBytes     int64  `json:"dbSizeBytes"`
	QuotaBytes      int64  `json:"quotaBytes"`
	OverQuota       bool   `json:"overQuota"`
	MaxPutBytes     int64  `json:"maxPutBytes"`
	MaxRequestBytes int64  `json:"maxRequestBytes"`
	LargestPutBytes int64  `json:"largestPutBytes"`
	LargestPutLimit string `json:"largestPutLimit"`
}) {
	t.Helper()
	out, stderr, code := run(t, append([]string{"space", fixture("3.7"), "-w", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("space %v: exit %d: %s", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSpaceFlagsTakeUnits gives --quota and --max-request-bytes in units
// and in bytes, and checks the values the verdict was computed for;
// a size that is not one is a usage error naming the flag.
func TestSpaceFlagsTakeUnits(t *testing.T) {
	for _, c := range []struct {
		args                      []string
		wantQuota, wantMaxRequest int64
	}{
		{nil, 2 << 30, 3 << 19},
		{[]string{"--quota", "8GiB"}, 8 << 30, 3 << 19},
		{[]string{"--quota", "8Gi"}, 8 << 30, 3 << 19},
		{[]string{"--quota", "2G"}, 2_000_000_000, 3 << 19},
		{[]string{"--quota", "65536"}, 65536, 3 << 19},
		{[]string{"--max-request-bytes", "10MiB"}, 2 << 30, 10 << 20},
		{[]string{"--max-request-bytes", "1.5MiB"}, 2 << 30, 3 << 19},
	} {
		s := spaceJSON(t, c.args...)
		if s.QuotaBytes != c.wantQuota || s.MaxRequestBytes != c.wantMaxRequest {
			t.Errorf("space %v: got quota %d, max request %d; want %d, %d", c.args, s.QuotaBytes, s.MaxRequestBytes, c.wantQuota, c.wantMaxRequest)
		}
	}
	for _, bad := range [][]string{{"--quota", "8XB"}, {"--quota", "-1"}, {"--quota", "0"}, {"--max-request-bytes", "lots"}} {
		_, stderr, code := run(t, append([]string{"space", fixture("3.7")}, bad...)...)
		if code != 2 || !strings.Contains(stderr, bad[0]) {
			t.Errorf("space %v: got exit %d, stderr %q; want 2 naming %s", bad, code, stderr, bad[0])
		}
	}
}

// TestSpaceNoSpaceBoundary sets the quota around the DB size: NOSPACE
// for every write while DB size + a LeaseGrant's 64 bytes reaches the
// quota (server/storage/quota.go), not only at size >= quota; and the
// largest Put admitted is --max-request-bytes' at the default quota.
func TestSpaceNoSpaceBoundary(t *testing.T) {
	size := spaceJSON(t).DBSizeBytes
	for _, c := range []struct {
		quota     int64
		wantOver  bool
		wantTable string
	}{
		{size, true, "NOSPACE: every write is refused"},
		{size + 64, true, "NOSPACE: every write is refused"},
		{size + 65, false, "NOSPACE on the next Put"},
		{size + 257, false, "below the quota"},
	} {
		q := fmt.Sprint(c.quota)
		if s := spaceJSON(t, "--quota", q); s.OverQuota != c.wantOver {
			t.Errorf("quota %d on a DB of %d: got over quota %v, want %v", c.quota, size, s.OverQuota, c.wantOver)
		}
		out, _, _ := run(t, "space", fixture("3.7"), "--quota", q)
		if !strings.Contains(out, c.wantTable) {
			t.Errorf("quota %d on a DB of %d: the table lacks %q:\n%s", c.quota, size, c.wantTable, out)
		}
	}
	s := spaceJSON(t)
	if s.LargestPutLimit != "max-request-bytes" || s.LargestPutBytes >= 3<<19 || s.LargestPutBytes < 3<<19-64 {
		t.Errorf("default limits: got largest Put %d limited by %q, want a little under 1.5 MiB, limited by max-request-bytes",
			s.LargestPutBytes, s.LargestPutLimit)
	}
}

// TestUsageRefusesAPrefixWithoutResources gives usage a --prefix one
// level too deep (/registry/pods: its namespaces would become resources)
// and one outside Kubernetes' key space: usage errors naming the flag and
// the prefix to give. /registry itself is accepted.
func TestUsageRefusesAPrefixWithoutResources(t *testing.T) {
	for _, c := range []struct {
		prefix   string
		wantCode int
		want     string
	}{
		{"/registry/pods", 2, "give --prefix /registry"},
		{"/registry/stable.example.com/crontabs", 2, "give --prefix /registry"},
		{"/other-app", 2, "not an etcd prefix of the Kubernetes key space"},
		{"/registry", 0, ""},
	} {
		out, stderr, code := run(t, "usage", fixture("3.7"), "--prefix", c.prefix)
		if code != c.wantCode || !strings.Contains(stderr, c.want) {
			t.Errorf("usage --prefix %s: got exit %d, stderr %q; want %d and %q", c.prefix, code, stderr, c.wantCode, c.want)
		}
		if c.wantCode != 0 && out != "" {
			t.Errorf("usage --prefix %s: printed a table although refused:\n%s", c.prefix, out)
		}
	}
}

// cancelOnWrite cancels a context at its first write: a signal landing
// while a command prints.
type cancelOnWrite struct {
	io.Writer
	cancel context.CancelFunc
}

func (w cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return w.Writer.Write(p)
}

// TestInterruptedWhilePrintingExits130 cancels the command's context as
// it prints (after its scan): the command exits 130, whatever it printed.
func TestInterruptedWhilePrintingExits130(t *testing.T) {
	for _, args := range [][]string{{"usage", fixture("3.7")}, {"status", fixture("3.7")}, {"space", fixture("3.7")}} {
		ctx, cancel := context.WithCancel(t.Context())
		root := command.NewRootCommand()
		var out, errOut strings.Builder
		root.SetOut(cancelOnWrite{Writer: &out, cancel: cancel})
		root.SetErr(&errOut)
		code := cli.RunContext(ctx, root, args, &errOut)
		if code != cli.ExitInterrupted || !strings.Contains(errOut.String(), "interrupted") {
			t.Errorf("%v: got exit %d, stderr %q; want %d and interrupted", args, code, errOut.String(), cli.ExitInterrupted)
		}
	}
}

// TestMembersSameFileTwice names one db twice, as a data directory and
// as its member/snap/db: a usage error saying so.
func TestMembersSameFileTwice(t *testing.T) {
	dir := walFixture("3.7")
	for _, args := range [][]string{
		{"members", dir, filepath.Join(dir, "member", "snap", "db")},
		{"members", fixture("3.7"), fixture("3.7")},
	} {
		out, stderr, code := run(t, args...)
		if code != 2 || !strings.Contains(stderr, "are the same file") || out != "" {
			t.Errorf("%v: got exit %d, stderr %q, output %q; want 2 and the same file named", args, code, stderr, out)
		}
	}
}

// TestMembersShowsWALReplay makes a data directory whose db is older
// than its WAL (the db of a snapshot taken before the last writes, put in
// the member's place): members shows the entries etcd would replay on
// start, from the member's own WAL commit index.
func TestMembersShowsWALReplay(t *testing.T) {
	srv := etcdtest.RunEtcd(t, etcdtest.Options{ClusterToken: "replay"})
	c := etcdtest.NewClient(t, srv)
	put := func(n int) {
		for i := range n {
			if _, err := c.Put(t.Context(), fmt.Sprintf("/registry/configmaps/default/cm-%d", i), "v"); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(5)
	rc, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	old, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	put(20)
	c.Close()
	srv.Close()
	behind := filepath.Join(t.TempDir(), "behind")
	if err := os.CopyFS(behind, os.DirFS(srv.Dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(behind, "member", "snap", "db"), old, 0o600); err != nil {
		t.Fatal(err)
	}
	ahead := srv.Dir
	out, stderr, code := run(t, "members", ahead, behind, "-w", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Clusters int `json:"clusters"`
		Members  []struct {
			ConsistentIndex uint64 `json:"consistentIndex"`
			ReplayEntries   uint64 `json:"replayEntries"`
			RevisionsBehind int64  `json:"revisionsBehind"`
			WAL             *struct {
				CommitIndex uint64 `json:"commitIndex"`
			} `json:"wal"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	a, b := rep.Members[0], rep.Members[1]
	if rep.Clusters != 1 || a.WAL == nil || b.WAL == nil {
		t.Fatalf("got %d clusters, WALs %v %v; want one cluster and both WALs read", rep.Clusters, a.WAL, b.WAL)
	}
	if b.ReplayEntries != b.WAL.CommitIndex-b.ConsistentIndex || b.ReplayEntries < 20 || a.ReplayEntries != 0 {
		t.Errorf("got replay %d (commit %d, consistent index %d) and %d; want the older db to replay its WAL's committed entries, the other none",
			b.ReplayEntries, b.WAL.CommitIndex, b.ConsistentIndex, a.ReplayEntries)
	}
	if b.RevisionsBehind != 20 {
		t.Errorf("got the older db %d revisions behind, want 20", b.RevisionsBehind)
	}
	out, _, _ = run(t, "members", ahead, behind)
	if !strings.Contains(out, "entries behind its own WAL's commit index") || !strings.Contains(out, "m2 LAGS") {
		t.Errorf("the table lacks the replay and lag notes:\n%s", out)
	}
}

// TestGoldenWidth holds every etcdinspect table and markdown golden to
// maxTableColumns (120): a terminal shows them without wrapping. The wal
// command's goldens are left out: its table is being reworked apart
// (issue 19, "WAL: requested versus applied").
func TestGoldenWidth(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasSuffix(base, ".json.golden") || strings.HasSuffix(base, ".csv.golden") || strings.HasSuffix(base, ".object.golden") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if n := utf8.RuneCountInString(line); n > 120 {
				t.Errorf("%s:%d is %d columns wide, want at most 120", f, i+1, n)
				break
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d goldens, want every table golden (at least 50)", checked)
	}
}

// TestLongValuesGoBelowTheTable runs status on a file whose path is
// longer than a terminal: the table stays within 120 columns and the path
// is printed below it.
func TestLongValuesGoBelowTheTable(t *testing.T) {
	path := copyFile(t, fixture("3.7"), filepath.Join(t.TempDir(), strings.Repeat("d", 100), strings.Repeat("e", 50)))
	out, stderr, code := run(t, "status", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, line := range strings.Split(out, "\n") {
		if (strings.HasPrefix(line, "|") || strings.HasPrefix(line, "+")) && utf8.RuneCountInString(line) > 120 {
			t.Errorf("table line %d columns wide, want at most 120: %q", utf8.RuneCountInString(line), line)
		}
	}
	if !strings.Contains(out, "| path ") || !strings.Contains(out, "(below)") || !strings.Contains(out, path) {
		t.Errorf("the path is not below the table:\n%s", out)
	}
}

// TestMembersAfterRestore restores a member's snapshot with the real
// `etcdutl snapshot restore`, once with the cluster's own token and peer
// URL and once with a new --initial-cluster-token: the first is the same
// cluster as the snapshot (etcd derives the same IDs), the second a
// different one, which members refuses to pick a restore source across.
func TestMembersAfterRestore(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	for i := range 5 {
		if _, err := c.Put(t.Context(), fmt.Sprintf("/registry/configmaps/default/cm-%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snap, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.Close()
	restore := func(token string) string {
		dir := filepath.Join(t.TempDir(), token)
		cmd := exec.Command(filepath.Join(bin, "etcdutl"), "snapshot", "restore", snap, "--data-dir", dir,
			"--name", "default", "--initial-cluster", "default=http://127.0.0.1:0",
			"--initial-advertise-peer-urls", "http://127.0.0.1:0", "--initial-cluster-token", token)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("etcdutl snapshot restore: %v: %s", err, out)
		}
		return dir
	}
	for _, c := range []struct {
		token        string
		wantCode     int
		wantClusters int
	}{
		{"etcd-cluster", 0, 1}, // etcd's default: the cluster's own token
		{"a-new-token", 1, 2},
	} {
		dir := restore(c.token)
		out, stderr, code := run(t, "members", srv.Dir, dir, "-w", "json")
		var rep struct {
			Clusters    int    `json:"clusters"`
			RestoreFrom string `json:"restoreFrom"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("token %s: %v: %q (stderr %s)", c.token, err, out, stderr)
		}
		if code != c.wantCode || rep.Clusters != c.wantClusters || (c.wantClusters > 1) != (rep.RestoreFrom == "") {
			t.Errorf("restored with token %s: got exit %d (%s), %d clusters, restore from %q; want exit %d, %d clusters",
				c.token, code, stderr, rep.Clusters, rep.RestoreFrom, c.wantCode, c.wantClusters)
		}
	}
}
