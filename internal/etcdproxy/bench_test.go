package etcdproxy_test

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// BenchmarkRange lists 100 keys of 1 KiB directly and through the proxy;
// the difference is the proxy's cost per call.
func BenchmarkRange(b *testing.B) {
	srv := etcdtest.RunEtcd(b)
	p, err := etcdproxy.Start(b.Context(), etcdproxy.Config{Upstream: srv.Endpoints[0]})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	direct := etcdtest.NewClient(b, srv)
	value := string(make([]byte, 1024))
	for i := range 100 {
		if _, err := direct.Put(b.Context(), fmt.Sprintf("/registry/pods/default/p-%03d", i), value); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, endpoint string }{{"direct", srv.Endpoints[0]}, {"proxy", p.URL()}} {
		b.Run(tc.name, func(b *testing.B) {
			c, err := clientv3.New(clientv3.Config{Endpoints: []string{tc.endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			for b.Loop() {
				r, err := c.Get(b.Context(), "/registry/pods/", clientv3.WithPrefix(), clientv3.WithLimit(500))
				if err != nil || len(r.Kvs) != 100 {
					b.Fatalf("got %d keys, %v", len(r.Kvs), err)
				}
			}
		})
	}
}
