// Package etcdtest runs real embedded etcd members for tests: loopback
// ports chosen by the kernel, data in t.TempDir, no fsync, no logs, stopped
// by t.Cleanup. Tests that use it are skipped under -short.
package etcdtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/embedetcd"
	"github.com/kubestore/etcdkit/internal/etcdproc"
)

// Options adjust the member RunEtcd starts; the zero value is fine.
type Options struct {
	// WatchProgressNotifyInterval is etcd's
	// --watch-progress-notify-interval; 0 keeps 10 minutes.
	WatchProgressNotifyInterval time.Duration
	// SnapshotCount is etcd's --snapshot-count; 0 keeps its default.
	SnapshotCount uint64
	// QuotaBackendBytes is etcd's --quota-backend-bytes; 0 keeps 2 GiB.
	QuotaBackendBytes int64
	// ClusterToken is etcd's --initial-cluster-token (embedetcd.Config);
	// members started with different tokens are of different clusters.
	ClusterToken string
}

// RunEtcd starts an embedded member for the test and stops it when the test
// ends. It skips the test under -short and fails it if etcd does not start.
func RunEtcd(t testing.TB, opts ...Options) *embedetcd.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := embedetcd.Start(ctx, embedetcd.Config{
		Dir:                         t.TempDir(),
		UnsafeNoFsync:               true,
		WatchProgressNotifyInterval: o.WatchProgressNotifyInterval,
		SnapshotCount:               o.SnapshotCount,
		QuotaBackendBytes:           o.QuotaBackendBytes,
		ClusterToken:                o.ClusterToken,
	})
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// NewClient returns a client of srv, closed when the test ends.
func NewClient(t testing.TB, srv *embedetcd.Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   srv.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ClientAt returns a client of endpoint (a URL: an etcd, or a proxy in
// front of one), closed when the test ends.
func ClientAt(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// CreateDB runs an embedded member, lets fill write to it, stops the member
// and returns the path of a copy of its bbolt database, which no process
// holds open. fill gets a context that ends with the test; opts are
// RunEtcd's.
func CreateDB(t testing.TB, fill func(ctx context.Context, c *clientv3.Client), opts ...Options) string {
	t.Helper()
	srv := RunEtcd(t, opts...)
	c := NewClient(t, srv)
	fill(t.Context(), c)
	c.Close()
	// The cluster version's raft entry counts in the consistent index:
	// the db must hold it whatever the machine's load.
	if err := srv.WaitClusterVersion(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	data, err := os.ReadFile(srv.DBPath())
	if err != nil {
		t.Fatalf("read db: %v", err)
	}
	path := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("write db copy: %v", err)
	}
	return path
}

// EtcdBinaries returns the directory holding real etcd, etcdctl and etcdutl
// binaries of version (etcdproc.Binaries: built once per machine from the Go
// module proxy by scripts/build-etcd.sh into the user's cache, under a lock
// that parallel test binaries share; the build's progress goes to the test
// log). It skips the test under -short. When the binaries cannot be built
// (etcdproc.ErrNoBinaries) it skips the test saying why, except under CI
// (the CI environment variable set), where a missing binary fails it: CI
// must not pass by skipping the tests that need real etcd processes.
func EtcdBinaries(t testing.TB, version string) string {
	t.Helper()
	return etcdBinaries(t, version)
}

// BuildOtherEtcdEnv is the environment variable that lets a test build an
// etcd release other than the one every test run builds (3.7.3, the
// client's): ETCDKIT_BUILD_ETCD_RELEASES=1.
const BuildOtherEtcdEnv = "ETCDKIT_BUILD_ETCD_RELEASES"

// OtherEtcdBinaries is EtcdBinaries for a release the test compares
// against (3.5, 3.6): each is a build of one to several minutes on 2 cores,
// too much to add to every fresh test run, so the test is skipped, saying
// how to build it, when the release is not cached yet, unless
// BuildOtherEtcdEnv=1 asks for the build. .ci/run links in the releases
// the machine's cache holds, as it does kube-apiserver.
func OtherEtcdBinaries(t testing.TB, version string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd processes; skipped under -short")
	}
	if !etcdproc.Cached(version) && os.Getenv(BuildOtherEtcdEnv) != "1" {
		t.Skipf("etcd %s is not in %s: build it with `scripts/build-etcd.sh %s %s` or set %s=1 to let the test build it",
			version, etcdproc.CacheDir(), version, etcdproc.CacheDir(), BuildOtherEtcdEnv)
	}
	return etcdBinaries(t, version)
}

func etcdBinaries(t testing.TB, version string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd processes; skipped under -short")
	}
	dir, err := etcdproc.Binaries(t.Context(), version, etcdproc.LogWriter(t.Logf))
	if errors.Is(err, etcdproc.ErrNoBinaries) && os.Getenv("CI") == "" {
		t.Skipf("etcd %s binaries cannot be built here: %v", version, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
