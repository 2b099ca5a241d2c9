package wal

import (
	"context"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/internal/filetest"
)

// TestReadRealEtcd runs writeLoad against real etcd processes of 3.5 (whose
// WAL also carries v2 store requests), 3.6 and 3.7, stops them, and checks that
// Read counts what was written, decodes every entry, finds no fault and
// leaves the data directory unchanged.
func TestReadRealEtcd(t *testing.T) {
	for _, version := range []string{"3.5.35", "3.6.16", "3.7.3"} {
		t.Run(version, func(t *testing.T) {
			dir, w := makeRealDataDir(t, version)
			defer filetest.Unchanged(t, dir)()
			rep, err := Read(t.Context(), dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkCounts(t, rep, w)
			t.Logf("etcd %s: kinds %+v", version, rep.Kinds)
		})
	}
}

// makeRealDataDir runs writeLoad against a real etcd process of release
// and stops it; it returns the member's data directory.
func makeRealDataDir(t *testing.T, release string) (string, written) {
	t.Helper()
	bin := etcdtest.EtcdBinaries(t, release)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := etcdproc.Start(ctx, etcdproc.Config{BinDir: bin, Dir: t.TempDir(), UnsafeNoFsync: true,
		ExtraArgs: []string{"--snapshot-count=10"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	w := writeLoad(t, ctx, cli)
	cli.Close()
	c.Stop()
	return c.Members[0].DataDir, w
}
