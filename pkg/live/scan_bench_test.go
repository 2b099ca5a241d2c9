package live

import (
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// BenchmarkScanMethods reads every key of an embedded etcd 3.7 member
// holding 100,000 keys of 1 KiB values, keys_only, by each way a scan may
// ask for them: pages of 1,000 and of 10,000 keys (ScanPages), one
// RangeStream (ScanStream), and one Range without a limit. The member
// runs in the benchmark's process, so ns/op and B/op are the server's
// and the client's work together. Run it with
//
//	go test ./pkg/live/ -run '^$' -bench ScanMethods -benchtime 10x
func BenchmarkScanMethods(b *testing.B) {
	const keys = 100_000
	srv := etcdtest.RunEtcd(b)
	c := etcdtest.NewClient(b, srv)
	value := strings.Repeat("v", 1024)
	for i := 0; i < keys; i += 100 {
		var ops []clientv3.Op
		for j := i; j < i+100; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/registry/configmaps/ns%d/cm%d", j%100, j), value))
		}
		if _, err := c.Txn(b.Context()).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
	check := func(b *testing.B, n int) {
		if n != keys {
			b.Fatalf("got %d keys, want %d", n, keys)
		}
	}
	for _, bc := range []struct {
		name   string
		method ScanMethod
		limit  int64
	}{
		{"pages_1000", ScanPages, 1000},
		{"pages_10000", ScanPages, 10000},
		{"stream", ScanStream, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if _, err := scan(b.Context(), c, scanRequest{keysOnly: true, limit: bc.limit, method: bc.method},
					func(*mvccpb.KeyValue) { n++ }); err != nil {
					b.Fatal(err)
				}
				check(b, n)
			}
		})
	}
	b.Run("unlimited", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.Get(b.Context(), "\x00", clientv3.WithFromKey(), clientv3.WithKeysOnly())
			if err != nil {
				b.Fatal(err)
			}
			check(b, len(resp.Kvs))
		}
	})
}
