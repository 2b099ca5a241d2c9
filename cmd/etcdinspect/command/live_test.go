package command_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// writeKubernetesObjects writes pods and configmaps in two namespaces as
// kube-apiserver stores them, updates some, deletes one, compacts, and
// writes more after the compaction, so that keys hold 1 to several
// revisions on both sides of the compact revision.
func writeKubernetesObjects(t *testing.T, ctx context.Context, c *clientv3.Client) {
	t.Helper()
	codec, err := keyspace.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	gen := keyspace.NewGenerator(7)
	put := func(key string, obj runtime.Object) {
		t.Helper()
		b, err := codec.Encode(obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, key, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"default", "kube-system"} {
		for i := range 5 {
			put(fmt.Sprintf("/registry/pods/%s/p%d", ns, i), gen.Pod(ns, fmt.Sprintf("p%d", i), 0))
			put(fmt.Sprintf("/registry/configmaps/%s/cm%d", ns, i), gen.ConfigMap(ns, fmt.Sprintf("cm%d", i), 0, 300*i))
		}
	}
	for gn := 1; gn <= 2; gn++ {
		put("/registry/pods/default/p1", gen.Pod("default", "p1", gn))
		put("/registry/configmaps/kube-system/cm2", gen.ConfigMap("kube-system", "cm2", gn, 500))
	}
	if _, err := c.Delete(ctx, "/registry/pods/kube-system/p4"); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Put(ctx, "compact_rev_key", "0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	for gn := 3; gn <= 5; gn++ {
		put("/registry/pods/default/p1", gen.Pod("default", "p1", gn))
		put("/registry/pods/kube-system/p0", gen.Pod("kube-system", "p0", gn))
	}
	put("/registry/pods/default/p9", gen.Pod("default", "p9", 0))
	put("/registry/configmaps/default/cm9", gen.ConfigMap("default", "cm9", 0, 2000))
}

// usageJSON is what the live and offline usage JSON share.
type usageJSON struct {
	Source         string `json:"source"`
	ReadAtRevision int64  `json:"readAtRevision"`
	Rows           []struct {
		Class, Group, Resource, Namespace string
		Objects, Revisions                int64
		LiveEntryBytes                    int64 `json:"liveEntryBytes"`
		LiveValueBytes                    int64 `json:"liveValueBytes"`
	} `json:"rows"`
	Total struct {
		Objects, Revisions int64
		LiveEntryBytes     int64 `json:"liveEntryBytes"`
		LiveValueBytes     int64 `json:"liveValueBytes"`
	} `json:"total"`
}

// historyJSON is usage's JSON with the history figures.
type historyJSON struct {
	HistoryMethod       string `json:"historyMethod"`
	RevisionsLowerBound bool   `json:"revisionsLowerBound"`
	Rows                []historyRow
	Total               historyRow
}

type historyRow struct {
	Class, Group, Resource, Namespace string
	Objects, Revisions, Tombstones    int64
	LiveEntryBytes                    int64 `json:"liveEntryBytes"`
	LiveValueBytes                    int64 `json:"liveValueBytes"`
	HistoryEntryBytes                 int64 `json:"historyEntryBytes"`
}

// wantsValues reports whether args ask for values.
func wantsValues(args []string) bool { return slices.Contains(args, "--values") }

func runJSON(t *testing.T, v any, args ...string) string {
	t.Helper()
	out, stderr, code := run(t, append(args, "-w", "json")...)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%s: JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestLiveEqualsOffline reads a running member with --endpoints and a
// snapshot of it saved at the same revision from the file: usage's
// objects, revisions and (with --values) value and entry bytes, per
// resource and per namespace, and status's revision and compact revision
// must be equal.
func TestLiveEqualsOffline(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	writeKubernetesObjects(t, t.Context(), c)
	path := filepath.Join(t.TempDir(), "snapshot.db")
	cfg := clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if _, err := snapshot.SaveWithVersion(t.Context(), zap.NewNop(), cfg, path); err != nil {
		t.Fatalf("snapshot save: %v", err)
	}
	ep := strings.Join(srv.Endpoints, ",")

	for _, by := range []string{"resource", "namespace"} {
		t.Run(by, func(t *testing.T) {
			var on, off usageJSON
			liveOut := runJSON(t, &on, "usage", "--endpoints", ep, "--values", "--by", by)
			runJSON(t, &off, "usage", path, "--by", by)
			if on.Source != "live" || on.ReadAtRevision == 0 {
				t.Errorf("live usage: source %q, readAtRevision %d; want live and a revision", on.Source, on.ReadAtRevision)
			}
			if !strings.Contains(liveOut, `"historyMethod": "estimate"`) || strings.Contains(liveOut, "tombstones") {
				t.Errorf("live usage JSON without --history exact: want history labelled estimate and no tombstones:\n%s", liveOut)
			}
			if len(on.Rows) != len(off.Rows) {
				t.Fatalf("got %d live rows, want the %d offline rows:\nlive %+v\noffline %+v", len(on.Rows), len(off.Rows), on.Rows, off.Rows)
			}
			for i := range off.Rows {
				if on.Rows[i] != off.Rows[i] {
					t.Errorf("row %d: got live %+v, want offline %+v", i, on.Rows[i], off.Rows[i])
				}
			}
			if on.Total != off.Total {
				t.Errorf("total: got live %+v, want offline %+v", on.Total, off.Total)
			}
		})
	}

	t.Run("keys only", func(t *testing.T) {
		var on, off usageJSON
		liveOut := runJSON(t, &on, "usage", "--endpoints", ep)
		runJSON(t, &off, "usage", path)
		if strings.Contains(liveOut, "liveValueBytes") {
			t.Errorf("usage --endpoints without --values reports value bytes:\n%s", liveOut)
		}
		if on.Total.Objects != off.Total.Objects || on.Total.Revisions != off.Total.Revisions {
			t.Errorf("got live %d objects, %d revisions; want offline %d, %d", on.Total.Objects, on.Total.Revisions, off.Total.Objects, off.Total.Revisions)
		}
	})

	t.Run("tables", func(t *testing.T) {
		tests := []struct {
			args      []string
			want      []string
			wantNever []string
		}{
			{[]string{"usage", "--endpoints", ep}, []string{"Source: live, read at revision", "revisions", "lower bound", "only with --values",
				"| configmaps        |      11 |", "Read from member"}, []string{"| history", "tombstones |"}},
			{[]string{"usage", "--endpoints", ep, "--top", "1"}, []string{"| configmaps", "(other rows)"}, []string{"| pods"}},
			{[]string{"usage", "--endpoints", ep, "--values", "--by", "namespace"}, []string{"kube-system", "values", "live", "history (estimate) |"},
				[]string{"tombstones |"}},
			{[]string{"usage", "--endpoints", ep, "--history", "exact"}, []string{"| history |", "tombstones |", "exact"}, []string{"(estimate)", "lower bound"}},
			{[]string{"status", "--endpoints", ep}, []string{"(itself)", "Compact revision:", "Source: live"}, nil},
			{[]string{"space", "--endpoints", ep}, []string{"below the quota", "(member)", "Fragmentation alert:"}, nil},
		}
		for _, tc := range tests {
			out, stderr, code := run(t, tc.args...)
			t.Logf("%s:\n%s", strings.Join(tc.args, " "), out)
			if code != 0 {
				t.Errorf("%s: exit %d: %s", strings.Join(tc.args, " "), code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s: got no %q in:\n%s", strings.Join(tc.args, " "), w, out)
				}
			}
			for _, w := range tc.wantNever {
				if strings.Contains(out, w) {
					t.Errorf("%s: got %q in:\n%s", strings.Join(tc.args, " "), w, out)
				}
			}
		}
	})

	t.Run("status", func(t *testing.T) {
		var on struct {
			Source          string `json:"source"`
			ReadAtRevision  int64  `json:"readAtRevision"`
			CompactRevision int64  `json:"compactRevision"`
			Members         []struct {
				Version     string `json:"version"`
				Revision    int64  `json:"revision"`
				DBSizeBytes int64  `json:"dbSizeBytes"`
				IsLeader    bool   `json:"isLeader"`
			} `json:"members"`
		}
		var off struct{ Revision, CompactRevision int64 }
		runJSON(t, &on, "status", "--endpoints", ep)
		runJSON(t, &off, "status", path)
		if on.Source != "live" || on.ReadAtRevision != off.Revision || on.CompactRevision != off.CompactRevision || off.CompactRevision == 0 {
			t.Errorf("live status: source %q, read at %d, compact revision %d; want live, offline revision %d, compact revision %d (not 0)",
				on.Source, on.ReadAtRevision, on.CompactRevision, off.Revision, off.CompactRevision)
		}
		if len(on.Members) != 1 || on.Members[0].Revision != off.Revision || on.Members[0].DBSizeBytes == 0 || !on.Members[0].IsLeader || on.Members[0].Version == "" {
			t.Errorf("live members %+v: want one leader at revision %d with a db size and version", on.Members, off.Revision)
		}
	})

	t.Run("space", func(t *testing.T) {
		var sp struct {
			Source  string `json:"source"`
			Members []struct {
				QuotaBytes  int64  `json:"quotaBytes"`
				QuotaSource string `json:"quotaSource"`
				OverQuota   bool   `json:"overQuota"`
				DBSizeBytes int64  `json:"dbSizeBytes"`
			} `json:"members"`
		}
		runJSON(t, &sp, "space", "--endpoints", ep, "--quota", "1MiB")
		if len(sp.Members) != 1 || sp.Members[0].QuotaBytes != 1<<20 || sp.Members[0].QuotaSource != "flag" ||
			sp.Members[0].OverQuota != (sp.Members[0].DBSizeBytes+64 >= 1<<20) {
			t.Errorf("space --quota 1MiB: got %+v, want the flag's quota and etcd's NOSPACE rule", sp.Members)
		}
	})
}

// TestLiveHistoryExact: usage --history exact replays the watch from the
// compact revision and counts every entry a snapshot saved at the same
// revision holds: revisions, history entry bytes and tombstones equal the
// offline ones row by row, with keys deleted, and deleted and re-created,
// after the compaction.
func TestLiveHistoryExact(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	writeKubernetesObjects(t, t.Context(), c)
	for _, key := range []string{"/registry/pods/default/p2", "/registry/configmaps/default/cm3", "/registry/configmaps/default/cm4"} {
		if _, err := c.Delete(t.Context(), key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Put(t.Context(), "/registry/configmaps/default/cm4", "re-created"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snapshot.db")
	cfg := clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if _, err := snapshot.SaveWithVersion(t.Context(), zap.NewNop(), cfg, path); err != nil {
		t.Fatalf("snapshot save: %v", err)
	}
	ep := strings.Join(srv.Endpoints, ",")
	for _, args := range [][]string{{"--values"}, nil, {"--by", "namespace", "--values"}} {
		var on, off historyJSON
		liveOut := runJSON(t, &on, append([]string{"usage", "--endpoints", ep, "--history", "exact"}, args...)...)
		runJSON(t, &off, append([]string{"usage", path}, slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--values" })...)...)
		if on.HistoryMethod != "exact" || on.RevisionsLowerBound {
			t.Errorf("usage --history exact %v: got historyMethod %q, revisionsLowerBound %v; want exact, false", args, on.HistoryMethod, on.RevisionsLowerBound)
		}
		if off.Total.HistoryEntryBytes == 0 || off.Total.Tombstones == 0 {
			t.Fatalf("offline history %d bytes, %d tombstones: the test needs both", off.Total.HistoryEntryBytes, off.Total.Tombstones)
		}
		if len(on.Rows) != len(off.Rows) {
			t.Fatalf("%v: got %d live rows, want the %d offline rows:\n%s", args, len(on.Rows), len(off.Rows), liveOut)
		}
		for i := range off.Rows {
			if !wantsValues(args) {
				off.Rows[i].LiveEntryBytes, off.Rows[i].LiveValueBytes = 0, 0
			}
			if on.Rows[i] != off.Rows[i] {
				t.Errorf("%v row %d: got live %+v, want offline %+v", args, i, on.Rows[i], off.Rows[i])
			}
		}
	}
}

// TestLiveRevisionsLowerBound: a key deleted after the compact revision is
// invisible to a Range, so live revisions fall short of the snapshot's
// key bucket by its entries, and the result says it is a lower bound.
func TestLiveRevisionsLowerBound(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	writeKubernetesObjects(t, t.Context(), c)
	// p1 in default holds the entry kept at the compact revision and 3
	// later ones; its tombstone makes 5 entries a Range cannot see.
	if _, err := c.Delete(t.Context(), "/registry/pods/default/p1"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snapshot.db")
	cfg := clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if _, err := snapshot.SaveWithVersion(t.Context(), zap.NewNop(), cfg, path); err != nil {
		t.Fatalf("snapshot save: %v", err)
	}
	var on struct {
		usageJSON
		RevisionsLowerBound bool `json:"revisionsLowerBound"`
	}
	var off usageJSON
	runJSON(t, &on, "usage", "--endpoints", strings.Join(srv.Endpoints, ","), "--values")
	runJSON(t, &off, "usage", path)
	if on.Total.Objects != off.Total.Objects || on.Total.LiveValueBytes != off.Total.LiveValueBytes {
		t.Errorf("got live %+v, want the offline objects and value bytes %+v", on.Total, off.Total)
	}
	if got, want := on.Total.Revisions, off.Total.Revisions-5; got != want || !on.RevisionsLowerBound {
		t.Errorf("got live revisions %d (lower bound %v), want %d: the offline %d less the deleted key's 5 entries, a lower bound",
			got, on.RevisionsLowerBound, want, off.Total.Revisions)
	}
}

// TestLiveBadInput: a dead endpoint is a one-line error within the dial
// timeout, a FILE with --endpoints a usage error naming both, flags of
// the live mode without --endpoints usage errors.
func TestLiveBadInput(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  []string
	}{
		{"dead endpoint usage", []string{"usage", "--endpoints", dead}, 1, []string{"connection refused", l.Addr().String()}},
		{"dead endpoint status", []string{"status", "--endpoints", dead}, 1, []string{"connection refused"}},
		{"dead endpoint space", []string{"space", "--endpoints", dead}, 1, []string{"connection refused"}},
		{"dead endpoint keys", []string{"keys", "--endpoints", dead}, 1, []string{"connection refused"}},
		{"dead endpoint members", []string{"members", "--endpoints", dead}, 1, []string{"connection refused"}},
		{"file and endpoints keys", []string{"keys", "db", "--endpoints", dead}, 2, []string{"FILE \"db\"", "--endpoints"}},
		{"files and endpoints members", []string{"members", "db1", "db2", "--endpoints", dead}, 2, []string{"FILE \"db1\"", "--endpoints"}},
		{"values without endpoints keys", []string{"keys", "db", "--values"}, 2, []string{"--values"}},
		{"file and endpoints", []string{"usage", "db", "--endpoints", dead}, 2, []string{"FILE \"db\"", "--endpoints", "cannot be used together"}},
		{"file and endpoints status", []string{"status", "db", "--endpoints", dead}, 2, []string{"--endpoints"}},
		{"neither", []string{"space"}, 2, []string{"accepts 1 arg"}},
		{"values without endpoints", []string{"usage", "db", "--values"}, 2, []string{"--values"}},
		{"cert without key", []string{"status", "--endpoints", dead, "--cert", "c.pem"}, 2, []string{"--cert and --key"}},
		{"bad endpoint", []string{"status", "--endpoints", "10.0.0.1"}, 2, []string{"--endpoints", "host and port"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, stderr, code := run(t, tc.args...)
			if code != tc.wantCode {
				t.Errorf("got exit %d, want %d (stderr %q, stdout %s)", code, tc.wantCode, stderr, out)
			}
			if out != "" || strings.Count(stderr, "\n") != 1 {
				t.Errorf("got stdout %q and stderr %q, want nothing and one line", out, stderr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(stderr, w) {
					t.Errorf("got stderr %q, want it to contain %q", stderr, w)
				}
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %s, want an answer well within --dial-timeout", d)
			}
		})
	}
}

// TestLiveTLSMistake: an https URL for a member that serves plain HTTP is
// one line naming the mistake, as lwbench's diagnosis gives it.
func TestLiveTLSMistake(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	ep := strings.Replace(srv.Endpoints[0], "http://", "https://", 1)
	out, stderr, code := run(t, "status", "--endpoints", ep)
	if code != 1 || out != "" || !strings.Contains(stderr, "does not speak TLS: use an http:// URL") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("got exit %d, stdout %q, stderr %q; want 1, nothing, one line saying the server does not speak TLS", code, out, stderr)
	}
}

// TestLiveInterrupted: a live command whose context ends (SIGINT) prints
// nothing and exits 130.
func TestLiveInterrupted(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	for _, args := range [][]string{{"usage", "--values"}, {"status"}, {"space"}, {"keys"}, {"members"}} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			root := command.NewRootCommand()
			var out, errOut strings.Builder
			root.SetOut(&out)
			root.SetErr(&errOut)
			code := cli.RunContext(ctx, root, append(args, "--endpoints", strings.Join(srv.Endpoints, ",")), &errOut)
			if code != cli.ExitInterrupted || out.Len() != 0 || !strings.Contains(errOut.String(), "interrupted") {
				t.Errorf("got exit %d, stdout %q, stderr %q; want %d, nothing, interrupted", code, out.String(), errOut.String(), cli.ExitInterrupted)
			}
		})
	}
}

// TestLiveWithAuth: on a cluster with authentication, status and space
// need only a user with read access to compact_rev_key, members the root
// role (HashKV), usage
// read access to the whole key space, keys --prefix read access to the
// prefix; a missing permission or a wrong password is one line saying so.
func TestLiveWithAuth(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	if _, err := c.Put(ctx, "/registry/pods/default/p0", "v"); err != nil {
		t.Fatal(err)
	}
	addReadUsers(t, c)
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "nobody", "pw"); return err },
		func() error { _, err := c.RoleAdd(ctx, "pods"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "pods", "/registry/pods/", clientv3.GetPrefixRangeEnd("/registry/pods/"),
				clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, "podreader", "pw"); return err },
		func() error { _, err := c.UserGrantRole(ctx, "podreader", "pods"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
	ep := strings.Join(srv.Endpoints, ",")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"status as prober", []string{"status", "--user", "prober:pw"}, 0, ""},
		{"space as prober", []string{"space", "--user", "prober", "--password", "pw"}, 0, ""},
		{"usage as prober", []string{"usage", "--user", "prober:pw"}, 1, "permission denied: the user's role needs read access to every key"},
		{"usage as reader", []string{"usage", "--user", "reader:pw", "--values"}, 0, ""},
		{"status without a role", []string{"status", "--user", "nobody:pw"}, 1, "needs read access to the key compact_rev_key"},
		{"members as prober", []string{"members", "--user", "prober:pw"}, 1, "HashKV only to a user with the root role"},
		{"members as root", []string{"members", "--user", "root:rootpw"}, 0, ""},
		{"keys of a prefix as its reader", []string{"keys", "--user", "podreader:pw", "--prefix", "/registry/pods/", "--values"}, 0, ""},
		{"keys as its reader", []string{"keys", "--user", "podreader:pw"}, 1, "needs read access to every key"},
		{"keys of a prefix as prober", []string{"keys", "--user", "prober:pw", "--prefix", "/registry/pods/"}, 1,
			"needs read access to the prefix \"/registry/pods/\""},
		{"wrong password", []string{"status", "--user", "reader:nope"}, 1, "authentication failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := run(t, append(tc.args, "--endpoints", ep)...)
			if code != tc.wantCode {
				t.Errorf("got exit %d, want %d (stderr %q, stdout %s)", code, tc.wantCode, stderr, out)
			}
			if tc.wantErr != "" && (!strings.Contains(stderr, tc.wantErr) || strings.Count(stderr, "\n") != 1 || out != "") {
				t.Errorf("got stdout %q, stderr %q; want nothing and one line saying %q", out, stderr, tc.wantErr)
			}
			if tc.wantCode == 0 && !strings.Contains(out, "Source: live") {
				t.Errorf("got stdout %q, want a live table", out)
			}
		})
	}
}

// TestLiveInterruptedMidScan: SIGINT (the context ending) during a scan
// of one key per Range stops it within 2 s, prints what was read, marked
// partial (a line above the table, "partial": true in JSON), and exits
// 130, for usage and keys.
func TestLiveInterruptedMidScan(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	const keys = 3000
	for b := range keys / 100 {
		var ops []clientv3.Op
		for i := range 100 {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/registry/configmaps/ns%02d/cm%02d", b, i), "v"))
		}
		if _, err := c.Txn(t.Context()).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		args     []string
		wantOut  []string
		wantKeys func(out string) int
	}{
		{"usage table", []string{"usage", "--values"}, []string{"PARTIAL: interrupted while reading the keys at revision", "| configmaps |"}, nil},
		{"usage json", []string{"usage", "-w", "json"}, []string{`"partial": true`, `"partialPhase": "the keys at revision`}, func(out string) int {
			var u usageJSON
			if err := json.Unmarshal([]byte(out), &u); err != nil {
				t.Fatalf("JSON: %v\n%s", err, out)
			}
			return int(u.Total.Objects)
		}},
		{"keys table", []string{"keys"}, []string{"PARTIAL: interrupted while reading the keys at revision", "ns00/cm00"}, nil},
		{"keys json", []string{"keys", "-w", "json"}, []string{`"partial": true`}, func(out string) int {
			var k keysJSON
			if err := json.Unmarshal([]byte(out), &k); err != nil {
				t.Fatalf("JSON: %v\n%s", err, out)
			}
			return len(k.Keys)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			root := command.NewRootCommand()
			var out, errOut strings.Builder
			root.SetOut(&out)
			root.SetErr(&errOut)
			cancelledAt := make(chan time.Time, 1)
			go func() {
				time.Sleep(300 * time.Millisecond)
				cancelledAt <- time.Now()
				cancel()
			}()
			args := append(tc.args, "--max-keys-per-request", "1", "--endpoints", strings.Join(srv.Endpoints, ","))
			code := cli.RunContext(ctx, root, args, &errOut)
			var took time.Duration
			select {
			case at := <-cancelledAt:
				took = time.Since(at)
			default:
				t.Fatalf("the scan of %d Ranges ended within 300 ms (exit %d); the test needs a longer one", keys, code)
			}
			if code != cli.ExitInterrupted || !strings.Contains(errOut.String(), "interrupted") || took > 2*time.Second {
				t.Errorf("got exit %d after %s, stderr %q; want %d within 2 s, interrupted", code, took, errOut.String(), cli.ExitInterrupted)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("got no %q in the output:\n%s", w, out.String())
				}
			}
			if tc.wantKeys != nil {
				if n := tc.wantKeys(out.String()); n <= 0 || n >= keys {
					t.Errorf("got %d keys in the partial result, want some of the %d and not all", n, keys)
				}
			}
		})
	}
}

// TestLiveAcrossVersions runs a 3-member cluster of real etcd 3.5, 3.6
// and 3.7 processes: usage --endpoints refuses servers before 3.7 unless
// --allow-value-reads (their keys_only Ranges read values), and with it
// equals the offline usage of a snapshot at the same revision, row by row;
// --history exact equals the offline history; status finds every member,
// one leader, and the compact revision etcd
// wrote to the snapshot (a Range at exactly the compact revision is
// served on every version).
func TestLiveAcrossVersions(t *testing.T) {
	for _, v := range []string{"3.5.35", "3.6.16", "3.7.3"} {
		t.Run(v, func(t *testing.T) {
			bin := etcdtest.OtherEtcdBinaries(t, v)
			cl, err := etcdproc.Start(t.Context(), etcdproc.Config{BinDir: bin, Members: 3, Dir: t.TempDir(), UnsafeNoFsync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Stop)
			c, err := cl.Client()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			writeKubernetesObjects(t, t.Context(), c)
			first := cl.Endpoints()[:1]
			cfg, err := cl.ClientConfig(first...)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Logger = zap.NewNop()
			c0, err := clientv3.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			// A linearizable read on the member makes it apply every write
			// before it saves the snapshot.
			if _, err := c0.Get(t.Context(), "compact_rev_key"); err != nil {
				t.Fatal(err)
			}
			c0.Close()
			path := filepath.Join(t.TempDir(), "snapshot.db")
			if _, err := snapshot.SaveWithVersion(t.Context(), zap.NewNop(), cfg, path); err != nil {
				t.Fatalf("snapshot save: %v", err)
			}
			ep := strings.Join(cl.Endpoints(), ",")

			out, stderr, code := run(t, "usage", "--endpoints", ep)
			if old := v < "3.7"; old != (code == 1) || old && (out != "" || !strings.Contains(stderr, "--allow-value-reads") || !strings.Contains(stderr, "20386")) {
				t.Errorf("usage without --allow-value-reads on %s: got exit %d, stderr %q; want a refusal naming etcd issue 20386 and the flag only before 3.7",
					v, code, stderr)
			}

			out, stderr, code = run(t, "keys", "--endpoints", ep)
			if old := v < "3.7"; old != (code == 1) || old && (out != "" || !strings.Contains(stderr, "--allow-value-reads") || !strings.Contains(stderr, "20386")) {
				t.Errorf("keys without --allow-value-reads on %s: got exit %d, stderr %q; want a refusal naming etcd issue 20386 and the flag only before 3.7",
					v, code, stderr)
			}
			var onKeys, offKeys keysJSON
			runJSON(t, &onKeys, "keys", "--endpoints", ep, "--values", "--allow-value-reads")
			runJSON(t, &offKeys, "keys", path)
			if got, want := fmt.Sprint(decodeKeys(t, onKeys.Keys)), fmt.Sprint(decodeKeys(t, offKeys.Keys)); got != want || len(offKeys.Keys) == 0 {
				t.Errorf("keys: got live %s, want offline %s", got, want)
			}

			var mem membersJSON
			runJSON(t, &mem, "members", "--endpoints", ep)
			if !mem.HashesAgree || len(mem.Members) != 3 || mem.Members[0].Hash == 0 {
				t.Errorf("members on %s: got %+v, want 3 members whose hashes agree", v, mem)
			}

			var on, off usageJSON
			runJSON(t, &on, "usage", "--endpoints", ep, "--values", "--allow-value-reads", "--by", "namespace")
			runJSON(t, &off, "usage", path, "--by", "namespace")
			if len(on.Rows) != len(off.Rows) || on.Total != off.Total {
				t.Fatalf("got live %+v, want offline %+v", on, off)
			}
			for i := range off.Rows {
				if on.Rows[i] != off.Rows[i] {
					t.Errorf("row %d: got live %+v, want offline %+v", i, on.Rows[i], off.Rows[i])
				}
			}

			// The watch replay of --history exact, and its progress
			// requests, on every version.
			var onH, offH historyJSON
			runJSON(t, &onH, "usage", "--endpoints", ep, "--values", "--allow-value-reads", "--history", "exact")
			runJSON(t, &offH, "usage", path)
			if onH.HistoryMethod != "exact" || offH.Total.HistoryEntryBytes == 0 || onH.Total != offH.Total {
				t.Errorf("usage --history exact on %s: got total %+v (%s), want the offline %+v", v, onH.Total, onH.HistoryMethod, offH.Total)
			}

			var st struct {
				ReadAtRevision  int64 `json:"readAtRevision"`
				CompactRevision int64 `json:"compactRevision"`
				Members         []struct {
					Version  string `json:"version"`
					Error    string `json:"error"`
					IsLeader bool   `json:"isLeader"`
				} `json:"members"`
			}
			var offSt struct{ Revision, CompactRevision int64 }
			runJSON(t, &st, "status", "--endpoints", ep)
			runJSON(t, &offSt, "status", path)
			leaders := 0
			for _, m := range st.Members {
				if m.Error != "" || m.Version != v {
					t.Errorf("member %+v: want version %s and no error", m, v)
				}
				if m.IsLeader {
					leaders++
				}
			}
			if len(st.Members) != 3 || leaders != 1 || st.CompactRevision != offSt.CompactRevision || st.ReadAtRevision != offSt.Revision {
				t.Errorf("live status %+v: want 3 members, one leader, compact revision %d and revision %d as offline", st, offSt.CompactRevision, offSt.Revision)
			}
		})
	}
}

// TestLiveTLS: a member serving TLS with client certificates required is
// read with etcdctl's --cacert, --cert and --key; without the CA, or
// without the client certificate, the error is one line naming the flag
// to pass.
func TestLiveTLS(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	files, err := etcdproc.GenerateTLS(t.TempDir(), "root")
	if err != nil {
		t.Fatal(err)
	}
	files.ClientCertAuth = true
	cl, err := etcdproc.Start(t.Context(), etcdproc.Config{BinDir: bin, Dir: t.TempDir(), UnsafeNoFsync: true, TLS: &files})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	ep := cl.Endpoints()[0]
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"all flags", []string{"--cacert", files.CA, "--cert", files.ClientCert, "--key", files.ClientKey}, 0, ""},
		{"no CA", []string{"--cert", files.ClientCert, "--key", files.ClientKey}, 1, "pass its CA with --cacert"},
		{"no client certificate", []string{"--cacert", files.CA}, 1, "pass --cert and --key"},
	}
	for _, tc := range tests {
		for _, cmd := range []string{"status", "space", "usage"} {
			t.Run(tc.name+" "+cmd, func(t *testing.T) {
				out, stderr, code := run(t, append([]string{cmd, "--endpoints", ep}, tc.args...)...)
				if code != tc.wantCode {
					t.Errorf("got exit %d, want %d (stderr %q, stdout %s)", code, tc.wantCode, stderr, out)
				}
				if tc.wantErr != "" && (out != "" || !strings.Contains(stderr, tc.wantErr) || strings.Count(stderr, "\n") != 1) {
					t.Errorf("got stdout %q, stderr %q; want nothing and one line saying %q", out, stderr, tc.wantErr)
				}
				if tc.wantCode == 0 && !strings.Contains(out, "Source: live") {
					t.Errorf("got stdout %q, want a live table", out)
				}
			})
		}
	}
}

// keysJSON is the JSON of `keys -w json`, offline or live.
type keysJSON struct {
	Source         string            `json:"source"`
	ReadAtRevision int64             `json:"readAtRevision"`
	Keys           []json.RawMessage `json:"keys"`
}

// decodeKeys decodes each key of a keys JSON into a map, whose fmt.Sprint
// is in key order: the same fields compare equal whatever their order.
func decodeKeys(t *testing.T, raw []json.RawMessage) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range raw {
		var m map[string]any
		if err := json.Unmarshal(r, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestLiveKeysEqualsOffline: keys --endpoints lists the same rows as keys
// on a snapshot saved at the same revision: with --values every field,
// without it every field but the value's (absent), for the whole key
// space and with each filter.
func TestLiveKeysEqualsOffline(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	writeKubernetesObjects(t, t.Context(), c)
	path := filepath.Join(t.TempDir(), "snapshot.db")
	cfg := clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if _, err := snapshot.SaveWithVersion(t.Context(), zap.NewNop(), cfg, path); err != nil {
		t.Fatalf("snapshot save: %v", err)
	}
	ep := strings.Join(srv.Endpoints, ",")
	var offStatus struct{ Revision int64 }
	runJSON(t, &offStatus, "status", path)
	valueFields := []string{"valueBytes", "entryBytes", "encoding", "apiVersion", "kind"}

	filters := [][]string{nil, {"--prefix", "/registry/pods/"}, {"--resource", "configmaps", "-n", "kube-system"}, {"--resource", "pods"}}
	for _, filter := range filters {
		for _, values := range []bool{true, false} {
			t.Run(fmt.Sprint(filter, " values=", values), func(t *testing.T) {
				args := append([]string{"keys", "--endpoints", ep, "--max-keys-per-request", "4"}, filter...)
				if values {
					args = append(args, "--values")
				}
				var on, off keysJSON
				runJSON(t, &on, args...)
				runJSON(t, &off, append([]string{"keys", path}, filter...)...)
				if on.Source != "live" || on.ReadAtRevision != offStatus.Revision {
					t.Errorf("got source %q, readAtRevision %d; want live and the snapshot's revision %d", on.Source, on.ReadAtRevision, offStatus.Revision)
				}
				if len(on.Keys) != len(off.Keys) || len(off.Keys) == 0 {
					t.Fatalf("got %d live keys, want the %d offline keys (not 0)", len(on.Keys), len(off.Keys))
				}
				onKeys, offKeys := decodeKeys(t, on.Keys), decodeKeys(t, off.Keys)
				for i := range off.Keys {
					onKey, offKey := onKeys[i], offKeys[i]
					for _, f := range valueFields {
						if _, ok := onKey[f]; ok != values {
							t.Errorf("key %v: got %s present %v, want %v (--values %v)", onKey["key"], f, ok, values, values)
						}
						if !values {
							delete(offKey, f)
						}
					}
					if got, want := fmt.Sprint(onKey), fmt.Sprint(offKey); got != want {
						t.Errorf("key %d: got live %s, want offline %s", i, got, want)
					}
				}
			})
		}
	}

	t.Run("table", func(t *testing.T) {
		out, stderr, code := run(t, "keys", "--endpoints", ep, "--resource", "pods")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, w := range []string{"default/p1", "Source: live, read at revision", "only with --values"} {
			if !strings.Contains(out, w) {
				t.Errorf("got no %q in:\n%s", w, out)
			}
		}
		if strings.Contains(out, "| encoding") {
			t.Errorf("got an encoding column without --values:\n%s", out)
		}
	})
}

// membersJSON is what the live and offline members JSON share.
type membersJSON struct {
	Source         string `json:"source"`
	CommonRevision int64  `json:"commonRevision"`
	HashesAgree    bool   `json:"hashesAgree"`
	Members        []struct {
		Endpoint        string `json:"endpoint"`
		Path            string `json:"path"`
		Error           string `json:"error"`
		Revision        int64  `json:"revision"`
		RevisionsBehind int64  `json:"revisionsBehind"`
		Hash            uint32 `json:"hash"`
		Agrees          bool   `json:"agrees"`
	} `json:"members"`
}

// TestLiveMembers: on a 3-member cluster of etcd 3.7, members
// --endpoints hashes every member at the common revision, and each hash
// equals the one the offline members computes, at the same revision, of a
// snapshot saved from that member. A stopped member is reported, not
// hashed, and the command exits 1 after printing.
func TestLiveMembers(t *testing.T) {
	cl, _ := startKubernetesCluster(t, etcdtest.EtcdBinaries(t, "3.7.3"), 3)
	var paths []string
	for i, ep := range cl.Endpoints() {
		cfg, err := cl.ClientConfig(ep)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Logger = zap.NewNop()
		ci, err := clientv3.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// A linearizable read on the member makes it apply every write.
		if _, err := ci.Get(t.Context(), "compact_rev_key"); err != nil {
			t.Fatal(err)
		}
		ci.Close()
		path := filepath.Join(t.TempDir(), fmt.Sprintf("m%d.db", i))
		if _, err := snapshot.SaveWithVersion(t.Context(), zap.NewNop(), cfg, path); err != nil {
			t.Fatalf("snapshot save of %s: %v", ep, err)
		}
		paths = append(paths, path)
	}
	ep := strings.Join(cl.Endpoints(), ",")
	var on, off membersJSON
	runJSON(t, &on, "members", "--endpoints", ep)
	runJSON(t, &off, append([]string{"members"}, paths...)...)
	if on.Source != "live" || on.CommonRevision == 0 || on.CommonRevision != off.CommonRevision || !on.HashesAgree || !off.HashesAgree {
		t.Errorf("got live common revision %d (agree %v), want the offline %d (agree %v), not 0", on.CommonRevision, on.HashesAgree,
			off.CommonRevision, off.HashesAgree)
	}
	if len(on.Members) != 3 {
		t.Fatalf("got %d live members, want 3", len(on.Members))
	}
	offHash := map[string]uint32{}
	for i, m := range off.Members {
		offHash[cl.Endpoints()[i]] = m.Hash
	}
	for _, m := range on.Members {
		want, ok := offHash[m.Endpoint]
		if !ok || m.Error != "" || m.Hash != want || m.Hash == 0 || !m.Agrees || m.RevisionsBehind != 0 {
			t.Errorf("member at %s: got %+v, want hash %08x, the offline hash of its snapshot at revision %d, no error, no lag",
				m.Endpoint, m, want, off.CommonRevision)
		}
	}
	out, stderr, code := run(t, "members", "--endpoints", ep)
	t.Logf("members --endpoints:\n%s", out)
	if code != 0 || !strings.Contains(out, "the hashes agree at the common revision") || !strings.Contains(out, "Source: live") {
		t.Errorf("got exit %d, stderr %q, stdout:\n%s\nwant 0 and the hashes agreeing", code, stderr, out)
	}

	t.Run("a member down", func(t *testing.T) {
		leader, err := cl.Leader(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		victim := cl.Members[0]
		if victim == leader {
			victim = cl.Members[1]
		}
		if err := victim.Kill(); err != nil {
			t.Fatal(err)
		}
		out, stderr, code := run(t, "members", "--endpoints", ep, "--dial-timeout", "2s")
		t.Logf("members --endpoints, one member down:\n%s", out)
		if code != 1 || !strings.Contains(out, "NO ANSWER") || !strings.Contains(out, "2 members that answered agree") || !strings.Contains(stderr, "did not answer") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("got exit %d, stderr %q, stdout:\n%s\nwant 1, the member without an answer in the table and one line", code, stderr, out)
		}
	})
}

// addReadUsers adds, on c's cluster (before its auth is enabled), the
// root user (password rootpw), "reader" (pw) with read access to every
// key, and "prober" (pw) with read access to compact_rev_key only.
func addReadUsers(t *testing.T, c *clientv3.Client) {
	t.Helper()
	ctx := t.Context()
	steps := []func() error{
		func() error { _, err := c.RoleAdd(ctx, "root"); return err },
		func() error { _, err := c.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, "probe"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "probe", "compact_rev_key", "", clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, "prober", "pw"); return err },
		func() error { _, err := c.UserGrantRole(ctx, "prober", "probe"); return err },
		func() error { _, err := c.RoleAdd(ctx, "reader"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "reader", "\x00", "\x00", clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, "reader", "pw"); return err },
		func() error { _, err := c.UserGrantRole(ctx, "reader", "reader"); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
}

// startKubernetesCluster starts members etcd processes of bin (fsync
// off), stopped at the test's end, writes Kubernetes objects to them
// (writeKubernetesObjects) and returns the cluster and a client of it.
func startKubernetesCluster(t *testing.T, bin string, members int) (*etcdproc.Cluster, *clientv3.Client) {
	t.Helper()
	cl, err := etcdproc.Start(t.Context(), etcdproc.Config{BinDir: bin, Members: members, Dir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	c, err := cl.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	writeKubernetesObjects(t, t.Context(), c)
	return cl, c
}
