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
//
// The informers' lists, etcd being 3.7: with WatchList, one RangeStream
// of the whole prefix per watcher, without revision or limit, and no
// paged read (measured: "RangeStream prefix"); without, RangeStream pages
// with a limit, the first at the latest ("RangeStream prefix limit"),
// the others pinned to its revision, and no Range list at all.
func TestModelRequestShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	on, off := true, false
	for _, tc := range []struct {
		name      string
		profile   watchload.Profile
		watchList *bool
	}{
		{"informer/watchlist-on", watchload.ProfileInformer, &on},
		{"informer/watchlist-off", watchload.ProfileInformer, &off},
		{"apiserver-cache", watchload.ProfileAPIServerCache, nil},
	} {
		profile := tc.profile
		t.Run(tc.name, func(t *testing.T) {
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
			o.HoldBack, o.Defragment, o.WatchList = 0, false, tc.watchList
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
			if profile == watchload.ProfileInformer {
				checkInformerLists(t, *tc.watchList, int64(o.Watchers), kinds)
			}
		})
	}
}

// checkInformerLists checks the list requests of watchers informers,
// pods paginated at the page size, against etcd 3.7 (kinds: requests by
// "method kind", as the proxy classifies them).
func checkInformerLists(t *testing.T, watchList bool, watchers int64, kinds map[string]int64) {
	t.Helper()
	var paged, rangeLists int64
	for k, n := range kinds {
		if strings.HasPrefix(k, "RangeStream ") && strings.Contains(k, " limit") {
			paged += n
		}
		if strings.HasPrefix(k, "Range prefix limit") || strings.HasPrefix(k, "Range range") {
			rangeLists += n
		}
	}
	if rangeLists != 0 {
		t.Errorf("%d list pages read with Range; kube-apiserver 1.37 streams them from etcd 3.7: %v", rangeLists, kinds)
	}
	if watchList {
		if n := kinds["RangeStream prefix"]; n < watchers {
			t.Errorf("WatchList on: %d unlimited RangeStreams of a prefix, want one per watcher (%d): %v", n, watchers, kinds)
		}
		if paged != 0 {
			t.Errorf("WatchList on: %d RangeStreams with a limit, want none (a watch-list reads the whole prefix): %v", paged, kinds)
		}
		return
	}
	if n := kinds["RangeStream prefix limit"]; n < watchers {
		t.Errorf("WatchList off: %d first pages (RangeStream prefix limit), want one per watcher (%d): %v", n, watchers, kinds)
	}
	if n := kinds["RangeStream range limit rev"]; n == 0 {
		t.Errorf("WatchList off: no continuation page (RangeStream range limit rev) though pods take several pages: %v", kinds)
	}
	if n := kinds["RangeStream prefix"]; n != 0 {
		t.Errorf("WatchList off: %d unlimited RangeStreams, want none (no relist): %v", n, kinds)
	}
}
