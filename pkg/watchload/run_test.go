package watchload_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/embedetcd"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

func target(srv *embedetcd.Server) watchload.Target {
	return watchload.Target{Endpoints: srv.Endpoints, Embedded: true, Dial: func(ctx context.Context) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	}}
}

// smallRun is a short run that compacts twice and holds watcher 0 (a pods
// watcher) back across the first compaction.
func smallRun(profile watchload.Profile) watchload.Options {
	return watchload.Options{
		Profile: profile, Objects: 120, ConfigMaps: 20, Events: 40, Namespaces: 3, Watchers: 6, Connections: 2, Streams: 3,
		WriteRate: 150, Duration: 3 * time.Second, PageSize: 50, CompactionInterval: time.Second,
		PhysicalCompaction: true, HoldBack: 1, Defragment: true, EventTTL: 2 * time.Second, Seed: 3,
	}
}

// checkCommon checks what every run must show; wantPageSize is the relists'
// page size, 0 when the held-back watcher must not relist at all.
func checkCommon(t *testing.T, res *report.RunResult, wantPageSize int64) {
	t.Helper()
	if res.SchemaVersion != report.RunSchemaVersion {
		t.Errorf("schema version %d", res.SchemaVersion)
	}
	if res.Writes.Completed != res.Writes.Planned || res.Writes.Errors != 0 {
		t.Errorf("writes: %d of %d completed, %d errors %v", res.Writes.Completed, res.Writes.Planned, res.Writes.Errors, res.Writes.ErrorSamples)
	}
	if !res.Validation.OK() {
		t.Errorf("validation failed: %s\n%+v", res.Validation.Summary(), res.Validation)
	}
	if res.Validation.HistoryEvents < res.Writes.Completed {
		t.Errorf("history recorded %d events, fewer than the %d writes", res.Validation.HistoryEvents, res.Writes.Completed)
	}
	if res.Delivery.TimedEvents == 0 || res.Delivery.FromSend.P50Ms < res.Delivery.FromResponse.P50Ms {
		t.Errorf("delivery: %+v", res.Delivery)
	}
	if res.InitialLists.Count != int64(res.Scenario.Watchers) {
		t.Errorf("%d initial lists, want one per watcher", res.InitialLists.Count)
	}
	if wantPageSize == 0 {
		if len(res.Relists) != 0 {
			t.Errorf("relists %+v: want none", res.Relists)
		}
	} else if len(res.Relists) == 0 {
		t.Fatalf("no relist although watcher 0 was held back across a compaction; compactions: %+v", res.Compactions)
	}
	for _, rl := range res.Relists {
		if rl.Informer != 0 {
			t.Errorf("watcher %d relisted; only the held-back watcher should have", rl.Informer)
		}
		for _, a := range rl.Attempts {
			if a.Limit != 0 && a.Limit != wantPageSize {
				t.Errorf("relist attempt %+v: page size %d, want %d", a, a.Limit, wantPageSize)
			}
		}
	}
	var sum int64
	for _, rc := range res.Final.Resources {
		sum += rc.Objects
	}
	if len(res.Final.Resources) != 3 || sum != res.Final.Objects {
		t.Errorf("final resources %+v do not add up to %d", res.Final.Resources, res.Final.Objects)
	}
	if len(res.Intervals) < 3 || res.Self.CPUSeconds <= 0 || res.Self.MaxRSSBytes <= 0 {
		t.Errorf("%d intervals, self %+v", len(res.Intervals), res.Self)
	}
}

// TestRunInformer runs the informer profile with client-go's
// WatchListClient off and on (the default) and checks the held-back
// informer's relist after the compaction: off, at its last revision, 410,
// then at the latest, paginated because its first list was; on, one
// watch-list at its last revision, which kube-apiserver with the watch
// cache off serves at the latest in one RangeStream.
func TestRunInformer(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name      string
		watchList *bool
		check     func(rl report.Relist) bool
	}{
		{"watchlist-off", &off, func(rl report.Relist) bool {
			return len(rl.Attempts) == 2 && rl.Attempts[0].ResourceVersion == strconv.FormatInt(rl.FromRevision-1, 10) && rl.Attempts[0].Error != "" &&
				rl.Attempts[1].ResourceVersion == "" && rl.Attempts[1].Error == "" && rl.Pages >= 2 && !rl.Attempts[1].WatchList
		}},
		{"watchlist-default", nil, func(rl report.Relist) bool {
			a := rl.Attempts
			return len(a) == 1 && a[0].WatchList && a[0].Streamed && a[0].ResourceVersion == strconv.FormatInt(rl.FromRevision-1, 10) &&
				a[0].Error == "" && a[0].Limit == 0 && rl.Pages == 1 && rl.ListRevision >= rl.CompactRevision
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := etcdtest.RunEtcd(t)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			o := smallRun(watchload.ProfileInformer)
			o.WatchList = tc.watchList
			res, err := watchload.Run(ctx, target(srv), o)
			if err != nil {
				t.Fatal(err)
			}
			checkCommon(t, res, 50)
			if wl := res.Scenario.WatchList; wl == nil || *wl != (tc.watchList == nil || *tc.watchList) {
				t.Errorf("scenario watchList %v, want %v", wl, tc.watchList)
			}
			rl := res.Relists[0]
			if rl.Reason != "compacted" || rl.CompactRevision <= rl.FromRevision || !tc.check(rl) {
				t.Errorf("relist %+v: want reason compacted and the requests of WatchList %s", rl, tc.name)
			}
			if rl.BackoffMs < 800 || rl.BackoffMs >= 1600 {
				t.Errorf("relist after %.0f ms of backoff, want client-go's first step, in [800, 1600)", rl.BackoffMs)
			}
			if res.Defrag == nil || res.Defrag.Error != "" || res.DBSize.AfterDefragBytes == 0 || res.DBSize.AfterDefragBytes > res.DBSize.AfterCompactionBytes {
				t.Errorf("defrag %+v, sizes %+v: want a defrag that did not grow the file", res.Defrag, res.DBSize)
			}
		})
	}
}

// TestRunAPIServerCache: the watchers of pods and configmaps are served
// by one watch cache per resource, events watchers by etcd; the watcher
// held back across a compaction resumes from its cache's history and
// relists nothing, as a client of kube-apiserver with the watch cache on,
// and receives the events of its hold late, which the delivery reports
// apart from the headline latency.
func TestRunAPIServerCache(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	o := smallRun(watchload.ProfileAPIServerCache)
	o.PageSize = 0 // the cacher's 10,000
	o.ConsistentListRate = 20
	res, err := watchload.Run(ctx, target(srv), o)
	if err != nil {
		t.Fatal(err)
	}
	checkCommon(t, res, 0)
	var caches []string
	for _, w := range res.Informers {
		if w.Cache {
			caches = append(caches, w.Resource)
			if w.ID < o.Watchers || w.Lists != 1 || w.Sessions != 1 {
				t.Errorf("cache %+v: want an id after the watchers', one list and one watch", w)
			}
		} else if w.ID == 0 && !w.HeldBack {
			t.Errorf("watcher 0 %+v: want it held back", w)
		}
	}
	if !slices.Equal(caches, []string{watchload.ResourcePods, watchload.ResourceConfigMaps}) {
		t.Errorf("caches of %v, want pods and configmaps (events are not cached)", caches)
	}
	cr := res.ConsistentReads
	if cr == nil || cr.Requests < 40 || cr.ServedFromCache == 0 || cr.Errors != 0 {
		t.Errorf("consistent reads %+v: want about 60 requests, served from the caches", cr)
	}
	// The held watcher resumed from its cache's history: the events of
	// its hold reached it late, by up to the hold's length. They are
	// reported apart, and the headline latency, the other watchers' and
	// its own before the hold, stays far below the hold.
	d := res.Delivery
	if h := d.HeldBack; h == nil || h.Watchers != 1 || h.Events == 0 || h.FromResponse.MaxMs < 500 {
		t.Fatalf("heldBack delivery %+v: want one watcher, whose events of the hold came late by its length (at least 500 ms)", h)
	}
	if hold := d.HeldBack.FromResponse.MaxMs; d.FromResponse.P99Ms > hold/5 || d.FromResponse.Count != d.TimedEvents-d.HeldBack.TimedEvents {
		t.Errorf("delivery fromResponse %+v of %d timed events: want a p99 far below the hold (%.0f ms) and the held watcher's %d events left out",
			d.FromResponse, d.TimedEvents, hold, d.HeldBack.TimedEvents)
	}
}

// TestRunNamespacePrefix: a run's objects live in the namespaces
// Options.NamespacePrefix names (conformance gives the model the real
// stack's), every key of every resource.
func TestRunNamespacePrefix(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	o := watchload.Options{Objects: 20, ConfigMaps: 5, Events: 5, Namespaces: 2, Watchers: 1, WriteRate: 50,
		Duration: time.Second, Seed: 3, NamespacePrefix: "lwbench-0000beef-"}
	if _, err := watchload.Run(ctx, target(srv), o); err != nil {
		t.Fatal(err)
	}
	c := etcdtest.NewClient(t, srv)
	for _, resource := range watchload.Resources {
		prefix := watchload.ResourcePrefix("/registry", resource)
		resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			t.Errorf("no %s written", resource)
		}
		for _, kv := range resp.Kvs {
			if ns := strings.TrimPrefix(string(kv.Key), prefix); !strings.HasPrefix(ns, "lwbench-0000beef-") {
				t.Errorf("key %s: want namespace lwbench-0000beef-N", kv.Key)
			}
		}
	}
}

// TestRunCatchesPlantedLoss drops one event from watcher 1's stream: the
// run must report it lost, at its revision, and the watcher's cache stale.
func TestRunCatchesPlantedLoss(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	o := smallRun(watchload.ProfileInformer)
	o.Duration, o.CompactionInterval, o.HoldBack, o.Defragment = 2*time.Second, -1, 0, false
	o.WatchResources = []string{watchload.ResourcePods}
	var dropped atomic.Int64
	var responses atomic.Int32
	o.Hooks.OnResponse = func(watcher int, resp *clientv3.WatchResponse) {
		if watcher != 1 || len(resp.Events) == 0 || responses.Add(1) != 20 {
			return
		}
		dropped.Store(resp.Events[0].Kv.ModRevision)
		resp.Events = resp.Events[1:]
	}
	res, err := watchload.Run(ctx, target(srv), o)
	if err != nil {
		t.Fatal(err)
	}
	v := res.Validation
	if v.OK() || v.Lost != 1 {
		t.Fatalf("validation %s: want exactly one lost event", v.Summary())
	}
	found := false
	for _, x := range v.Violations {
		if x.Kind == "reliable" {
			found = x.Watcher == 1 && x.Revision == dropped.Load()
		}
	}
	if !found {
		t.Errorf("violations %+v: want the loss reported for watcher 1 at revision %d", v.Violations, dropped.Load())
	}
}
