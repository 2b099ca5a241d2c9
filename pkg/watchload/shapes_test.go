package watchload_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/internal/proxytest"
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
//
// off, and the cacher's own watch, which asks for progress explicitly).
//
// The informers' lists, etcd being 3.7 and the EtcdRangeStream gate on
// (kube-apiserver 1.37): with WatchList, one RangeStream of the whole
// prefix per watcher, without revision or limit, and no paged read
// (measured: "RangeStream prefix"); without, RangeStream pages with a
// limit, the first at the latest ("RangeStream prefix limit"), the others
// pinned to its revision, and no Range list at all. With the gate off
// (kube-apiserver 1.35 and 1.36, which have none), no RangeStream at all:
// with WatchList, one Range of WatcherSyncPageSize per watcher (measured
// on 1.36.3: "Range prefix limit"); without, Range pages.
func TestModelRequestShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	on, off := true, false
	for _, tc := range []struct {
		name        string
		profile     watchload.Profile
		watchList   *bool
		rangeStream *bool // nil: watchload's default, on
	}{
		{"informer/watchlist-on", watchload.ProfileInformer, &on, nil},
		{"informer/watchlist-off", watchload.ProfileInformer, &off, nil},
		{"apiserver-cache", watchload.ProfileAPIServerCache, nil, nil},
		{"informer/watchlist-on/rangestream-off", watchload.ProfileInformer, &on, &off},
		{"informer/watchlist-off/rangestream-off", watchload.ProfileInformer, &off, &off},
		{"apiserver-cache/rangestream-off", watchload.ProfileAPIServerCache, nil, &off},
	} {
		profile := tc.profile
		t.Run(tc.name, func(t *testing.T) {
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
			o.HoldBack, o.Defragment, o.PhysicalCompaction, o.WatchList = 0, false, false, tc.watchList
			o.RangeStream = tc.rangeStream
			o.OnPhase = p.SetPhase
			res, err := watchload.Run(t.Context(), tg, o)
			if err != nil {
				t.Fatal(err)
			}
			rangeStream := tc.rangeStream == nil || *tc.rangeStream
			if got := res.Scenario.RangeStream; got == nil || *got != rangeStream {
				t.Errorf("scenario rangeStream %v, want %v", got, rangeStream)
			}
			kinds := map[string]int64{}
			var creates, seedCreates int64
			for _, r := range p.Counts() {
				kinds[r.Method+" "+r.Kind] += r.Requests
				if r.Method == "Watch" && strings.HasPrefix(r.Kind, "create") {
					creates += r.Requests
					if r.Phase == etcdproxy.DefaultPhase || r.Phase == watchload.PhaseSeed {
						seedCreates += r.Requests
					}
				}
			}
			// With the watch cache off, kube-apiserver's own informer of
			// pods (PodSecurity admission) watches etcd too, from before
			// the seeding: one watch more than the watchers' (none of
			// which watches again in so short a run).
			if profile == watchload.ProfileInformer && (creates != int64(o.Watchers)+1 || seedCreates == 0) {
				t.Errorf("informer profile: %d watches created, %d of them by the seeding's end; want %d, one per watcher and kube-apiserver's own pods informer, which starts before the seeding",
					creates, seedCreates, o.Watchers+1)
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
			if !rangeStream {
				checkNoRangeStream(t, kinds)
			}
			switch {
			case profile == watchload.ProfileInformer && rangeStream:
				checkInformerLists(t, *tc.watchList, int64(o.Watchers), kinds)
			case profile == watchload.ProfileInformer:
				checkInformerRangeLists(t, *tc.watchList, int64(o.Watchers), kinds)
			}
			// Reads before writes: with the cache off every update and
			// delete reads the object first (and a pod's delete reads it
			// twice more); with it on, only deletes (the registry's
			// read) and event patches (events are never cached) do.
			reads := kinds["Range key limit"]
			txns := kinds["Txn if mod_revision=? then put else range"] + kinds["Txn if mod_revision=? then delete else range"]
			switch profile {
			case watchload.ProfileInformer:
				if reads < txns {
					t.Errorf("informer profile: %d reads for %d update and delete txns; want a read before each", reads, txns)
				}
			case watchload.ProfileAPIServerCache:
				if reads == 0 || reads >= txns {
					t.Errorf("apiserver-cache profile: %d reads for %d update and delete txns; want some (deletes, event patches), fewer than the txns", reads, txns)
				}
			}
		})
	}
}

// TestModelWriteShapes performs single ops of the model's Kubernetes
// workload through a counting proxy and checks exactly what each sends
// etcd, as kube-apiserver 1.37.2 does for the real writers' request
// (pkg/watchload/registry.go): with the watch cache off a read before
// every GuaranteedUpdate and delete; a pod's delete is two DELETE
// requests, each with the registry's read, making two updates (graceful
// deletion) and then the delete; with the cache on, the cached object
// instead of the read, and a failed transaction and another when the
// cached object is stale.
func TestModelWriteShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	const (
		read   = "Range key limit"
		create = "Txn if mod_revision=0 then put"
		update = "Txn if mod_revision=? then put else range"
		del    = "Txn if mod_revision=? then delete else range"
	)
	type counts map[string]int64
	pods := watchload.ResourceMix{PodsPercent: 100}
	cms := watchload.ResourceMix{ConfigMapsPercent: 100}
	events := watchload.ResourceMix{EventsPercent: 100}
	updates := watchload.Mix{UpdatePercent: 100}
	deletes := watchload.Mix{DeletePercent: 100}
	// Cache revisions: "off" (NoWatchCache), "current" (the cache has
	// seen everything), "seed" (it saw the objects' creation, nothing
	// after).
	tests := []struct {
		name      string
		cache     string
		resources watchload.ResourceMix
		mix       watchload.Mix
		ops       int  // ops performed, each counted alone
		tamper    bool // another client writes the object before the last op
		want      []counts
		wantSteps int // intermediate revisions of the last op
	}{
		{name: "pod update, cache off", cache: "off", resources: pods, mix: updates, ops: 1,
			want: []counts{{read: 1, update: 1}}},
		{name: "configmap update, cache off", cache: "off", resources: cms, mix: updates, ops: 1,
			want: []counts{{read: 1, update: 1}}},
		// The client's resourceVersion is out of date: GuaranteedUpdate
		// reads the object and returns 409 without a txn; client-go's
		// RetryOnConflict GETs it and updates again.
		{name: "pod update after another client's write, cache off", cache: "off", resources: pods, mix: updates, ops: 1, tamper: true,
			want: []counts{{read: 3, update: 1}}},
		{name: "event patch, cache off", cache: "off", resources: events, mix: updates, ops: 1,
			want: []counts{{read: 1, update: 1}}},
		{name: "pod delete, cache off", cache: "off", resources: pods, mix: deletes, ops: 1,
			want: []counts{{read: 5, update: 2, del: 1}}, wantSteps: 2},
		{name: "configmap delete, cache off", cache: "off", resources: cms, mix: deletes, ops: 1,
			want: []counts{{read: 2, del: 1}}},
		{name: "pod updates, cache current", cache: "current", resources: pods, mix: updates, ops: 2,
			want: []counts{{update: 1}, {update: 1}}},
		{name: "event patch, cache on", cache: "current", resources: events, mix: updates, ops: 1,
			want: []counts{{read: 1, update: 1}}},
		{name: "pod delete, cache current", cache: "current", resources: pods, mix: deletes, ops: 1,
			want: []counts{{read: 2, update: 2, del: 1}}, wantSteps: 2},
		{name: "configmap delete, cache current", cache: "current", resources: cms, mix: deletes, ops: 1,
			want: []counts{{read: 1, del: 1}}},
		// The second update's cached object is the seeded one, older than
		// the client's resourceVersion: a conflict inside tryUpdate, a
		// read, then the txn.
		{name: "pod updates, cache stale", cache: "seed", resources: pods, mix: updates, ops: 2,
			want: []counts{{update: 1}, {read: 1, update: 1}}},
		// The grace-0 update and the delete start from the seeded object:
		// each fails its comparison once and applies on the object the
		// else branch returns.
		{name: "pod delete, cache stale", cache: "seed", resources: pods, mix: deletes, ops: 1,
			want: []counts{{read: 2, update: 3, del: 2}}, wantSteps: 2},
	}
	p, c := proxytest.Start(t, etcdtest.RunEtcd(t))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wl, err := watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{
				Prefix: fmt.Sprintf("/shapes%d", i), Namespaces: 1, Pods: 1, ConfigMaps: 1, Events: 1,
				Mix: tt.mix, ResourceMix: tt.resources, Workers: 1, Seed: 1, NoWatchCache: tt.cache == "off",
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wl.Seed(t.Context(), []watchload.KV{c}, 1); err != nil {
				t.Fatal(err)
			}
			seeded, err := c.Get(t.Context(), "/")
			if err != nil {
				t.Fatal(err)
			}
			switch tt.cache {
			case "current":
				wl.UseWatchCache(func(string) (int64, bool) { return 1 << 62, true })
			case "seed":
				wl.UseWatchCache(func(string) (int64, bool) { return seeded.Header.Revision, true })
			}
			var steps []int64
			wl.ObserveCommits(func(_ int, rev int64) { steps = append(steps, rev) })
			kind := watchload.OpUpdate
			if tt.mix.DeletePercent > 0 {
				kind = watchload.OpDelete
			}
			var last, next int64
			for op := range tt.ops {
				// Events are created more often than patched, whatever the
				// mix: perform the creates first, uncounted.
				o := wl.Next(next)
				for next++; o.Kind != kind; next++ {
					p.SetPhase("setup")
					if _, _, err := wl.Do(t.Context(), 0, c, o); err != nil {
						t.Fatal(err)
					}
					o = wl.Next(next)
				}
				if tt.tamper && op == tt.ops-1 {
					p.SetPhase("setup")
					if _, err := c.Put(t.Context(), o.Key, "another client's"); err != nil {
						t.Fatal(err)
					}
				}
				steps = nil
				phase := fmt.Sprintf("%s/%d", tt.name, op)
				p.SetPhase(phase)
				rev, conflict, err := wl.Do(t.Context(), 0, c, o)
				if err != nil {
					t.Fatalf("op %d: %v", op, err)
				}
				if conflict != tt.tamper {
					t.Errorf("op %d: conflict %v, want %v", op, conflict, tt.tamper)
				}
				last = rev
				got := counts{}
				for _, r := range p.Counts() {
					if r.Phase == phase && (r.Method == "Range" || r.Method == "Txn") {
						got[r.Method+" "+r.Kind] += r.Requests
					}
				}
				want := tt.want[op]
				if !maps.Equal(got, want) {
					t.Errorf("op %d sent %v, want %v", op, got, want)
				}
			}
			if len(steps) != tt.wantSteps {
				t.Fatalf("last op committed %d intermediate revisions %v, want %d", len(steps), steps, tt.wantSteps)
			}
			for _, s := range steps {
				if s <= 0 || s >= last {
					t.Errorf("intermediate revision %d not before the op's revision %d", s, last)
				}
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
	// Creates of pods only, which read nothing before they write: every
	// read of a key is a consistent read's.
	o.Mix, o.ResourceMix = watchload.Mix{CreatePercent: 100}, watchload.ResourceMix{PodsPercent: 100}
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
		if r.Phase == watchload.PhaseSteady {
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
	if n := kinds["RangeStream prefix"]; n != 1 {
		t.Errorf("WatchList off: %d unlimited RangeStreams, want one, kube-apiserver's own pods informer's (no relist): %v", n, kinds)
	}
}

// checkNoRangeStream checks that a run with the EtcdRangeStream gate off
// sent no RangeStream at all (kinds: requests by "method kind"), as
// kube-apiserver 1.35 and 1.36 never do.
func checkNoRangeStream(t *testing.T, kinds map[string]int64) {
	t.Helper()
	for k, n := range kinds {
		if strings.HasPrefix(k, "RangeStream ") {
			t.Errorf("EtcdRangeStream off: %d %q sent; want every list read with Range: %v", n, k, kinds)
		}
	}
}

// checkInformerRangeLists checks the list requests of watchers informers
// with the EtcdRangeStream gate off (kube-apiserver 1.35, 1.36), pods
// paginated at the page size: with WatchList, each watcher's sync and
// kube-apiserver's own pods informer's (PodSecurity's, also a watch-list)
// one Range page of WatcherSyncPageSize at the latest revision ("Range
// prefix limit", measured on 1.36.3) and no unlimited Range; without,
// first pages with the page size, continuation pages pinned to the
// first's revision, and still the own informer's watch-list page.
func checkInformerRangeLists(t *testing.T, watchList bool, watchers int64, kinds map[string]int64) {
	t.Helper()
	if n := kinds["Range prefix"]; n != 0 {
		t.Errorf("EtcdRangeStream off: %d unlimited Ranges of a prefix; a watch-list's sync reads pages of %d: %v", n, watchload.WatcherSyncPageSize, kinds)
	}
	first, next := kinds["Range prefix limit"], kinds["Range range limit rev"]
	if watchList {
		if first != watchers+1 || next != 0 {
			t.Errorf("WatchList on: %d first pages (Range prefix limit), %d continuations; want %d, one per watcher and kube-apiserver's own informer, and none (%d keys fit one page): %v",
				first, next, watchers+1, watchload.WatcherSyncPageSize, kinds)
		}
		return
	}
	if first < watchers+1 || next == 0 {
		t.Errorf("WatchList off: %d first pages (Range prefix limit), %d continuations (Range range limit rev); want at least %d, one per watcher and kube-apiserver's own informer, and some, pods taking several pages: %v",
			first, next, watchers+1, kinds)
	}
}
