package watchload_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestModelRequestShapes runs the model through a counting proxy and
// checks the shapes of what it sends etcd against what kube-apiserver
// 1.37.2 was measured to send by `lwbench conformance`
// (results/kube/README.md): creates without an Else branch, updates and
// deletes reading the key back in one; watches without progress_notify in
// both profiles (a client's watch through kube-apiserver with the cache
// off, and the cacher's own watch, which asks for progress explicitly);
// the compactor's compare-and-swap on compact_rev_key's version, first
// on a missing key, and its Compact without waiting for the deletion
// (k8s.io/apiserver/pkg/storage/etcd3/compact.go). The harness reaches
// etcd directly (Target.Harness), so the proxy sees the model alone.
func TestModelRequestShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	for _, profile := range []watchload.Profile{watchload.ProfileInformer, watchload.ProfileAPIServerCache} {
		t.Run(string(profile), func(t *testing.T) {
			srv := etcdtest.RunEtcd(t)
			p, err := etcdproxy.Start(t.Context(), etcdproxy.Config{Upstream: srv.Endpoints[0]})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			dialer := func(url string) watchload.Dialer {
				return func(ctx context.Context) (*clientv3.Client, error) {
					return clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
				}
			}
			tg := watchload.Target{Endpoints: []string{p.URL()}, Embedded: true, Dial: dialer(p.URL()),
				Harness: &watchload.Harness{Endpoints: srv.Endpoints, Dial: dialer(srv.Endpoints[0])}}
			o := smallRun(profile)
			o.HoldBack, o.Defragment, o.PhysicalCompaction = 0, false, false
			if _, err := watchload.Run(t.Context(), tg, o); err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int64{}
			for _, r := range p.Counts() {
				kinds[r.Method+" "+r.Kind] += r.Requests
			}
			for _, k := range []string{"Txn if mod_revision=0 then put", "Txn if mod_revision=? then put else range", "Txn if mod_revision=? then delete else range"} {
				if kinds[k] == 0 {
					t.Errorf("no %q sent; sent %v", k, kinds)
				}
			}
			if n := kinds["Txn if mod_revision=0 then put else range"]; n != 0 {
				t.Errorf("%d creates with an Else branch, which kube-apiserver never sends", n)
			}
			var notify, plain int64
			for k, n := range kinds {
				if strings.HasPrefix(k, "Watch create prefix") {
					if strings.Contains(k, "progress_notify") {
						notify += n
					} else {
						plain += n
					}
				}
			}
			if notify != 0 || plain == 0 {
				t.Errorf("%s profile: %d watches with progress_notify, %d without; want none with", profile, notify, plain)
			}
			if n := kinds["Txn if version=0 then put else range"]; n != 1 {
				t.Errorf("%d compactor transactions on a missing compact_rev_key, want 1", n)
			}
			if kinds["Txn if version=? then put else range"] == 0 || kinds["Compact compact"] == 0 || kinds["Compact compact physical"] != 0 {
				t.Errorf("compactor: %d transactions on compact_rev_key's version, %d logical and %d physical Compacts; want some, some and none",
					kinds["Txn if version=? then put else range"], kinds["Compact compact"], kinds["Compact compact physical"])
			}
			if profile == watchload.ProfileAPIServerCache && kinds["Watch progress"] == 0 {
				t.Errorf("apiserver-cache profile: no progress request; the cacher asks for progress explicitly")
			}
		})
	}
}
