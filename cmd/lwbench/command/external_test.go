package command

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/report"
)

// runLwbench runs the real root command and returns its exit code, the
// JSON result (if it printed one) and stderr.
func runLwbench(t *testing.T, args ...string) (int, *report.RunResult, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, args, &errOut)
	if out.Len() == 0 {
		return code, nil, errOut.String()
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("lwbench %v: result JSON: %v\n%s", args, err, errOut.String())
	}
	return code, &res, errOut.String()
}

// TestRunAgainstTLSClusterWithAuth drives a real etcd that requires
// client certificates and authentication, as a user whose role covers
// only /lwbench/, through etcdctl's flags: the run must pass every check
// with a recorder limited to the prefix, delete exactly what it wrote,
// refuse a prefix that holds another client's key without writing
// anything, and with --reuse-prefix leave that key alone.
func TestRunAgainstTLSClusterWithAuth(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	dir := t.TempDir()
	files, err := etcdproc.GenerateTLS(dir, "bench")
	if err != nil {
		t.Fatal(err)
	}
	files.ClientCertAuth = true
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	c, err := etcdproc.Start(ctx, etcdproc.Config{BinDir: bin, Dir: dir, TLS: &files, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cfg, err := c.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// Another client's keys, outside and (later) inside the prefix.
	if _, err := root.Put(ctx, "/registry/pods/default/web", "theirs"); err != nil {
		t.Fatal(err)
	}
	if err := etcdproc.AddPrefixUser(ctx, root, "bench", "pw", "/lwbench/"); err != nil {
		t.Fatal(err)
	}
	if err := etcdproc.EnableAuth(ctx, root, "rootpw"); err != nil {
		t.Fatal(err)
	}
	root.Close()
	cfg.Username, cfg.Password = "root", "rootpw"
	admin, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	connAs := func(user, password string) []string {
		return []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--cacert", files.CA, "--cert", files.ClientCert,
			"--key", files.ClientKey, "--user", user, "--password", password}
	}
	conn := connAs("bench", "pw")
	load := []string{"--objects", "60", "--namespaces", "2", "--watchers", "3", "--write-rate", "100", "--duration", "2s", "-w", "json"}

	t.Run("run as a user limited to the prefix", func(t *testing.T) {
		// etcd lets only the root role compact: allowed, the compactions
		// fail and are reported, and the run goes on.
		args := append(append([]string{"run"}, conn...), load...)
		args = append(args, "--allow-maintenance", "--no-defrag", "--compaction-interval", "500ms", "--hold-back", "0")
		code, res, stderr := runLwbench(t, args...)
		if code != 0 || res == nil {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		v := res.Validation
		if !v.OK() || v.Lost != 0 || v.RecorderScope != "/lwbench/" || v.HistoryEvents < res.Writes.Completed {
			t.Errorf("validation %+v: want OK with the recorder on /lwbench/", v)
		}
		if res.Target.Managed || res.Scenario.Prefix != "/lwbench" || res.Defrag != nil {
			t.Errorf("target %+v prefix %s, defrag %v: an --endpoints run must not defragment unless told", res.Target, res.Scenario.Prefix, res.Defrag)
		}
		if len(res.Compactions) == 0 || !strings.Contains(res.Compactions[0].Error, "permission denied") {
			t.Errorf("compactions %+v: want them refused to a user without the root role", res.Compactions)
		}
		cl := res.Cleanup
		// Revoking the run's leases deletes its events; the rest go one
		// by one.
		if cl == nil || cl.Error != "" || cl.KeysLeft != 0 || cl.LeasesRevoked == 0 || cl.KeysDeleted == 0 {
			t.Fatalf("cleanup %+v: want every key deleted, events with their leases", cl)
		}
		got, err := admin.Get(ctx, "/registry/pods/default/web")
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "theirs" {
			t.Errorf("the other client's key: %v %v", got, err)
		}
		if n, err := admin.Get(ctx, "/lwbench/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || n.Count != 0 {
			t.Errorf("keys left under /lwbench/: %v %v", n, err)
		}
		if l, err := admin.Leases(ctx); err != nil || len(l.Leases) != 0 {
			t.Errorf("leases left: %v %v", l, err)
		}
	})

	foreign, err := admin.Put(ctx, "/lwbench/configmaps/kube-system/theirs", "theirs")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("refuses a prefix that holds keys", func(t *testing.T) {
		before, err := admin.Get(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		code, res, stderr := runLwbench(t, append(append([]string{"run"}, conn...), load...)...)
		if code != cli.ExitError || res != nil || !strings.Contains(stderr, "--reuse-prefix") || !strings.Contains(stderr, "holds 1 keys") {
			t.Fatalf("exit %d, stderr %q: want exit %d naming --reuse-prefix", code, stderr, cli.ExitError)
		}
		after, err := admin.Get(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		if after.Header.Revision != before.Header.Revision {
			t.Errorf("revision moved from %d to %d: the refused run wrote", before.Header.Revision, after.Header.Revision)
		}
	})

	t.Run("put refuses the non-empty prefix, cleans up its own", func(t *testing.T) {
		code, _, stderr := runLwbench(t, append(append([]string{"put"}, conn...), "--writes", "50", "-w", "json")...)
		if code != cli.ExitError || !strings.Contains(stderr, "--reuse-prefix") {
			t.Errorf("put under /lwbench: exit %d, %q; want a refusal naming --reuse-prefix", code, stderr)
		}
		code, _, stderr = runLwbench(t, append(append([]string{"put"}, conn...),
			"--prefix", "/lwbench/put/", "--value-size", "8", "--keys", "200", "--writes", "400", "--write-rate", "4000", "-w", "json")...)
		if code != 0 || !strings.Contains(stderr, "cleanup: deleted the") {
			t.Fatalf("put under /lwbench/put/: exit %d:\n%s", code, stderr)
		}
		if n, err := admin.Get(ctx, "/lwbench/put/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || n.Count != 0 {
			t.Errorf("keys left under /lwbench/put/: %v %v", n, err)
		}
	})

	t.Run("reuses the prefix when told, compacting when allowed", func(t *testing.T) {
		// As root, which may compact; the compactor's key goes under the
		// prefix all the same.
		args := append(append([]string{"run"}, connAs("root", "rootpw")...), load...)
		args = append(args, "--reuse-prefix", "--allow-maintenance", "--no-defrag", "--compaction-interval", "700ms", "--duration", "3s")
		code, res, stderr := runLwbench(t, args...)
		if code != 0 || res == nil {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		if !res.Validation.OK() {
			t.Errorf("validation: %s", res.Validation.Summary())
		}
		if len(res.Compactions) == 0 || len(res.Relists) == 0 || res.Scenario.CompactRevKey != "/lwbench/compact_rev_key" {
			t.Errorf("%d compactions, %d relists, compactor key %q: want compactions under the prefix forcing a relist",
				len(res.Compactions), len(res.Relists), res.Scenario.CompactRevKey)
		}
		if res.Cleanup == nil || res.Cleanup.KeysLeft != 1 || res.Cleanup.Error != "" {
			t.Errorf("cleanup %+v: want only the other client's key left", res.Cleanup)
		}
		got, err := admin.Get(ctx, "/lwbench/configmaps/kube-system/theirs")
		if err != nil || len(got.Kvs) != 1 || got.Kvs[0].ModRevision != foreign.Header.Revision {
			t.Errorf("the other client's key under the prefix: %v %v; want it untouched at revision %d", got, err, foreign.Header.Revision)
		}
		if root, err := admin.Get(ctx, "compact_rev_key"); err != nil || len(root.Kvs) != 0 {
			t.Errorf("compact_rev_key at the root: %v %v; lwbench must not write it on a cluster it does not own", root, err)
		}
	})
}
