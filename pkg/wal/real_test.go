package wal

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestReadRealEtcd runs writeLoad against real etcd processes of 3.5 (whose
// WAL also carries v2 store requests) and 3.7, stops them, and checks that
// Read counts what was written, decodes every entry, finds no fault and
// leaves the data directory unchanged.
func TestReadRealEtcd(t *testing.T) {
	for _, version := range []string{"3.5.35", "3.7.3"} {
		t.Run(version, func(t *testing.T) {
			bin := etcdtest.EtcdBinaries(t, version)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			c, err := etcdproc.Start(ctx, etcdproc.Config{BinDir: bin, Dir: t.TempDir(), UnsafeNoFsync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Stop)
			cfg, err := c.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			cli, err := clientv3.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := writeLoad(t, ctx, cli)
			cli.Close()
			c.Stop()
			dir := c.Members[0].DataDir
			before := dirSums(t, dir)
			rep, err := Read(ctx, dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkCounts(t, rep, w)
			t.Logf("etcd %s: kinds %+v", version, rep.Kinds)
			if after := dirSums(t, dir); !equalSums(before, after) {
				t.Errorf("the data directory changed")
			}
		})
	}
}
