// Package proxytest starts an embedded etcd behind the counting proxy for
// tests. It is apart from etcdtest because the proxy imports packages
// whose own tests use etcdtest.
package proxytest

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/embedetcd"
	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// Start starts the counting proxy in front of srv, counting the resources
// under prefixes (etcdproxy.Config.Prefixes), stopped when the test ends,
// and returns it with a client of it (etcdtest.ClientAt).
func Start(t testing.TB, srv *embedetcd.Server, prefixes ...string) (*etcdproxy.Proxy, *clientv3.Client) {
	t.Helper()
	p, err := etcdproxy.Start(t.Context(), etcdproxy.Config{Upstream: srv.Endpoints[0], Prefixes: prefixes})
	if err != nil {
		t.Fatalf("etcd proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p, etcdtest.ClientAt(t, p.URL())
}
