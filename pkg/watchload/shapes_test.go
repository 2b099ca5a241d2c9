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
// off, and the cacher's own watch, which asks for progress explicitly).
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
			url := p.URL()
			tg := watchload.Target{Endpoints: []string{url}, Embedded: true, Dial: func(ctx context.Context) (*clientv3.Client, error) {
				return clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			}}
			o := smallRun(profile)
			o.HoldBack, o.Defragment = 0, false
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
			if profile == watchload.ProfileAPIServerCache && kinds["Watch progress"] == 0 {
				t.Errorf("apiserver-cache profile: no progress request; the cacher asks for progress explicitly")
			}
		})
	}
}

// TestCacheRequestShapes holds the apiserver-cache profile to what
// kube-apiserver 1.37.2 with its watch cache on sends etcd for N client
// informers (results/kube/README.md, watch cache on): one watch per cached
// resource whatever the number of watchers, each watcher's first list a
// consistent read of the cache (a read of the current revision, one key,
// limit 1), and progress requests only while a read waits for its cache:
// no more than the consistent reads while the writes run.
func TestCacheRequestShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	srv := etcdtest.RunEtcd(t)
	p, err := etcdproxy.Start(t.Context(), etcdproxy.Config{Upstream: srv.Endpoints[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	url := p.URL()
	tg := watchload.Target{Endpoints: []string{url}, Embedded: true, Dial: func(ctx context.Context) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	}}
	o := smallRun(watchload.ProfileAPIServerCache)
	o.HoldBack, o.Defragment, o.CompactionInterval = 0, false, -1
	o.Watchers, o.WatchResources = 8, []string{watchload.ResourcePods, watchload.ResourceConfigMaps}
	o.ConsistentListRate = 2
	o.OnPhase = p.SetPhase
	res, err := watchload.Run(t.Context(), tg, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Validation.OK() {
		t.Errorf("validation failed: %s", res.Validation.Summary())
	}
	all, writing := map[string]int64{}, map[string]int64{}
	for _, r := range p.Counts() {
		all[r.Method+" "+r.Kind] += r.Requests
		if r.Phase == "writing" {
			writing[r.Method+" "+r.Kind] += r.Requests
		}
	}
	if n := all["Watch create prefix rev prev_kv"]; n != 2 {
		t.Errorf("%d prefix watches for %d watchers of 2 resources, want 2: one per watch cache; sent %v", n, o.Watchers, all)
	}
	reads := res.ConsistentReads.Requests
	if n := all["Range key limit"]; n != int64(o.Watchers)+reads {
		t.Errorf("%d reads of the current revision, want %d: one per watcher's first list and per consistent LIST (%d)", n, int64(o.Watchers)+reads, reads)
	}
	if n, reads := writing["Watch progress"], writing["Range key limit"]; reads == 0 || n > 2*reads {
		t.Errorf("%d progress requests while writing, with %d consistent reads: want some reads, at most two requests per read, none while nobody waits", n, reads)
	}
}
