// Package embedetcd starts a single-member etcd server in this process, on
// loopback ports chosen by the kernel, for lwbench's default target and for
// tests.
package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config describes the embedded member.
type Config struct {
	// Dir is the data directory; it must be writable. The bbolt database is
	// Dir/member/snap/db.
	Dir string
	// Name is the member name; empty means "default".
	Name string
	// ClusterToken is --initial-cluster-token; empty keeps etcd's
	// "etcd-cluster". etcd derives the member and cluster IDs from it and
	// the peer URLs, so members started with the same token (and, here,
	// the same peer URL) share their IDs: tests that need two clusters
	// give different tokens.
	ClusterToken string
	// UnsafeNoFsync disables fsync (etcd's --unsafe-no-fsync). Tests set it;
	// benchmarks must not, or their write latencies mean nothing.
	UnsafeNoFsync bool
	// QuotaBackendBytes is --quota-backend-bytes; 0 keeps etcd's 2 GiB.
	QuotaBackendBytes int64
	// WatchProgressNotifyInterval is --watch-progress-notify-interval; 0
	// keeps etcd's 10 minutes.
	WatchProgressNotifyInterval time.Duration
	// SnapshotCount is --snapshot-count, the committed entries between two
	// snapshots (member/snap/*.snap and a WAL snapshot record); 0 keeps
	// etcd's default.
	SnapshotCount uint64
	// Logger receives etcd's logs; nil discards them.
	Logger *zap.Logger
	// StartTimeout bounds how long Start waits for the member to be ready;
	// 0 means 30 seconds.
	StartTimeout time.Duration
}

// Server is a running embedded member.
type Server struct {
	etcd *embed.Etcd
	// Endpoints are the member's client URLs, e.g. "http://127.0.0.1:40123".
	Endpoints []string
	// Dir is the data directory.
	Dir string
}

// Start starts the member and waits until it serves requests. Client and
// peer URLs listen on 127.0.0.1 with port 0, so concurrent servers never
// collide. It returns an error if etcd fails to start or is not ready within
// cfg.StartTimeout (or ctx ends first); nothing is left running then.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded etcd: data directory not set")
	}
	ec := embed.NewConfig()
	ec.Dir = cfg.Dir
	if cfg.Name != "" {
		ec.Name = cfg.Name
	}
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	ec.ListenClientUrls = []url.URL{loopback}
	ec.AdvertiseClientUrls = []url.URL{loopback}
	ec.ListenPeerUrls = []url.URL{loopback}
	ec.AdvertisePeerUrls = []url.URL{loopback}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	if cfg.ClusterToken != "" {
		ec.InitialClusterToken = cfg.ClusterToken
	}
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	if cfg.SnapshotCount > 0 {
		ec.SnapshotCount = cfg.SnapshotCount
	}
	if cfg.WatchProgressNotifyInterval > 0 {
		ec.WatchProgressNotifyInterval = cfg.WatchProgressNotifyInterval
	}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", cfg.Dir, err)
	}
	timeout := cfg.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: %w", cfg.Dir, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s not ready after %v", cfg.Dir, timeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	s := &Server{etcd: e, Dir: cfg.Dir}
	for _, l := range e.Clients {
		s.Endpoints = append(s.Endpoints, "http://"+l.Addr().String())
	}
	return s, nil
}

// WaitClusterVersion waits until the member has applied the cluster
// version, at most timeout or until ctx ends. The leader proposes it after
// its first commit in a term, a raft entry of its own that can come after
// the first client writes (go.etcd.io/etcd/server/v3 etcdserver/server.go
// monitorClusterVersions); a member stopped before applying it leaves a db
// whose consistent index is one lower. Errors: the timeout's, or ctx's.
func (s *Server) WaitClusterVersion(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.etcd.Server.ClusterVersion() == nil {
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("embedded etcd in %s: no cluster version after %v", s.Dir, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// DBPath returns the path of the member's bbolt database file.
func (s *Server) DBPath() string { return filepath.Join(s.Dir, "member", "snap", "db") }

// Close stops the member and waits for it to release its files. It is safe
// to call more than once.
func (s *Server) Close() {
	if s.etcd != nil {
		s.etcd.Close()
		s.etcd = nil
	}
}
