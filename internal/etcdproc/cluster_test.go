package etcdproc_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

func startCluster(t *testing.T, cfg etcdproc.Config) *etcdproc.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c, err := etcdproc.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func TestThreeMembersSurviveLeaderKill(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	c := startCluster(t, etcdproc.Config{BinDir: bin, Members: 3, Dir: t.TempDir(), UnsafeNoFsync: true})
	cfg, err := c.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	if _, err := cli.Put(ctx, "/k", "v1"); err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := leader.PID()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	if leader.PID() != 0 {
		t.Fatalf("killed member still has PID %d", leader.PID())
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatalf("the two remaining members did not elect a leader: %v", err)
	}
	// A write may time out while the remaining members settle on the new
	// leader ("request timed out, possibly due to previous leader
	// failure"), as clients of a real cluster see; retry for a while.
	for {
		_, err := cli.Put(wctx, "/k", "v2")
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("write after losing the leader: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := leader.Restart(); err != nil {
		t.Fatal(err)
	}
	if leader.PID() == 0 || leader.PID() == pid {
		t.Fatalf("restarted member PID %d (was %d)", leader.PID(), pid)
	}
	if err := c.WaitReady(wctx); err != nil {
		t.Fatalf("restarted member did not rejoin: %v", err)
	}
	// The restarted member serves the write it missed.
	one, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	resp, err := one.Get(ctx, "/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v2" {
		t.Fatalf("restarted member: %v %v", resp, err)
	}
}

func TestPausedMemberStopsAnswering(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	c := startCluster(t, etcdproc.Config{BinDir: bin, Members: 1, Dir: t.TempDir(), UnsafeNoFsync: true})
	m := c.Members[0]
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	_, err = cli.Get(ctx, "/k")
	cancel()
	if err == nil {
		t.Fatal("a paused member answered")
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "/k"); err != nil {
		t.Fatalf("after SIGCONT: %v", err)
	}
}

func TestTLSAndPrefixUser(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	dir := t.TempDir()
	files, err := etcdproc.GenerateTLS(dir, "lwbench")
	if err != nil {
		t.Fatal(err)
	}
	files.ClientCertAuth = true
	c := startCluster(t, etcdproc.Config{BinDir: bin, Members: 1, Dir: dir, TLS: &files, UnsafeNoFsync: true})
	cfg, err := c.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx := t.Context()
	if err := etcdproc.AddPrefixUser(ctx, root, "bench", "secret", "/lwbench/"); err != nil {
		t.Fatal(err)
	}
	if err := etcdproc.EnableAuth(ctx, root, "rootpw"); err != nil {
		t.Fatal(err)
	}
	cfg.Username, cfg.Password = "bench", "secret"
	user, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	if _, err := user.Put(ctx, "/lwbench/pods/ns/a", "v"); err != nil {
		t.Fatalf("write inside the prefix: %v", err)
	}
	if _, err := user.Put(ctx, "/registry/pods/ns/a", "v"); err == nil {
		t.Fatal("a user limited to /lwbench/ wrote under /registry/")
	}
	// Without a client certificate the TLS member refuses the connection.
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(files.CA)
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("read CA: %v", err)
	}
	noCert := clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: pool}}
	bare, err := clientv3.New(noCert)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = bare.Get(ctx, "/lwbench/pods/ns/a")
		cancel()
		bare.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate was served")
	}
}

// TestPartitionedLeaderIsReplaced cuts the leader's link: the majority
// elects another and writes, the cut member answers nobody, and once
// healed it catches up. With TLS, each member serves a certificate for its
// own namespace address and clients verify it.
func TestPartitionedLeaderIsReplaced(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	if err := etcdproc.CheckNetns(); err != nil {
		t.Skipf("no partition test: %v", err)
	}
	for _, useTLS := range []bool{false, true} {
		name := "http"
		if useTLS {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := etcdproc.Config{BinDir: bin, Members: 3, Dir: dir, UnsafeNoFsync: true, Netns: true}
			if useTLS {
				files, err := etcdproc.GenerateTLS(dir, "root")
				if err != nil {
					t.Fatal(err)
				}
				files.ClientCertAuth = true
				cfg.TLS = &files
			}
			partitionLeader(t, startCluster(t, cfg), useTLS)
		})
	}
}

func partitionLeader(t *testing.T, c *etcdproc.Cluster, useTLS bool) {
	ctx := t.Context()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.HasPrefix(leader.ClientURL, "https://10."); got != useTLS {
		t.Fatalf("leader's client URL %s: https on a namespace address %v, want %v", leader.ClientURL, got, useTLS)
	}
	if err := leader.Partition(); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for _, m := range c.Members {
		if m != leader {
			rest = append(rest, m.ClientURL)
		}
	}
	cli, err := c.Client(rest...)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := cli.Put(wctx, "/k", "during partition")
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("the majority could not write without the partitioned leader: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The partitioned member cannot be reached at all.
	cutCfg, err := c.ClientConfig(leader.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	cutCfg.DialTimeout = time.Second
	cut, err := clientv3.New(cutCfg)
	if err == nil {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = cut.Get(gctx, "/k")
		cancel()
		cut.Close()
	}
	if err == nil {
		t.Fatal("the partitioned member answered")
	}
	if err := leader.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(wctx); err != nil {
		t.Fatalf("after healing: %v", err)
	}
	back, err := c.Client(leader.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	for {
		resp, err := back.Get(wctx, "/k")
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "during partition" {
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("the healed member did not catch up: %v %v", resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
