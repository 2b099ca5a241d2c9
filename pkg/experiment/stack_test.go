package experiment_test

import (
	"context"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// throughKubeAPIServer returns quick options whose Kubernetes clients go
// through real kube-apiservers (apiserverproc.DefaultVersion, started per
// load with a counting proxy in front of the member), with kube-apiserver's
// --watch-cache watchCache and client-go's WatchListClient watchList. It
// skips the test when kube-apiserver is not available
// (apiservertest.Binaries).
func throughKubeAPIServer(t *testing.T, watchCache bool, watchList *bool) experiment.Common {
	bin := apiservertest.Binaries(t)
	c := quick(t)
	c.WatchList = watchList
	c.Stack = func(ctx context.Context, tg watchload.Target, prefix string, interval time.Duration) (kubeload.Stack, func(), error) {
		return kubeload.StartStack(ctx, tg, kubeload.StackConfig{BinDir: bin, EtcdPrefix: prefix, EtcdCompactionInterval: interval,
			WatchCache: watchCache, CountEtcd: true})
	}
	return c
}

// TestRelistStormThroughKubeAPIServer: client-go informers held back past
// a compaction relist through kube-apiserver when its watch cache is off
// (each LIST at the compacted resourceVersion answered 410, then a LIST
// at the latest that reaches etcd), and do not relist at all when the
// watch cache is on: the cache, not etcd, resumes their watches.
func TestRelistStormThroughKubeAPIServer(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name        string
		watchCache  bool
		wantRelists bool
	}{
		{"watch cache off", false, true},
		{"watch cache on", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := experiment.RelistStorm(t.Context(), experiment.RelistStormOptions{Common: throughKubeAPIServer(t, tc.watchCache, &off),
				Objects: []int{200}, PageSizes: []int64{500}})
			if err != nil {
				t.Fatal(err)
			}
			if res.APIServer == nil || res.APIServer.Version == "" || res.APIServer.WatchCache != tc.watchCache {
				t.Fatalf("result's kube-apiserver %+v, want one with watch cache %v and a version", res.APIServer, tc.watchCache)
			}
			cases := res.RelistStorm.Cases
			if len(cases) != 2 {
				t.Fatalf("got %d cases, want page size 500 and a control", len(cases))
			}
			c, control := cases[0], cases[1]
			switch {
			case tc.wantRelists && (c.Relists != c.Watchers || c.Expired < c.Watchers):
				t.Errorf("%d relists, %d LISTs answered 410 after a compaction past %d informers; want one relist each, after a 410", c.Relists, c.Expired, c.Watchers)
			case tc.wantRelists && c.EtcdRanges < int64(c.Watchers):
				t.Errorf("etcd received %d LISTs during the relists of %d informers", c.EtcdRanges, c.Watchers)
			case !tc.wantRelists && c.Relists != 0:
				t.Errorf("%d relists: the watch cache should have resumed every watch", c.Relists)
			}
			if control.Relists != 0 {
				t.Errorf("control: %d relists without a compaction", control.Relists)
			}
			for _, c := range cases {
				if c.Validation.Lost != 0 || c.Validation.Others() != 0 {
					t.Errorf("compacted %v: watch violations %+v", c.Compacted, c.Validation)
				}
			}
		})
	}
}

// TestCompactionSweepThroughKubeAPIServer: through kube-apiserver its own
// compactor compacts at the case's interval (counted from
// compact_rev_key), and never when the interval is never.
func TestCompactionSweepThroughKubeAPIServer(t *testing.T) {
	res, err := experiment.CompactionSweep(t.Context(), experiment.CompactionSweepOptions{Common: throughKubeAPIServer(t, false, nil),
		Intervals: []time.Duration{-1, time.Second}, Duration: 5 * time.Second, Objects: 200, WriteRate: 100})
	if err != nil {
		t.Fatal(err)
	}
	cases := res.CompactionSweep.Cases
	if len(cases) != 2 {
		t.Fatalf("got %d cases, want 2", len(cases))
	}
	if cases[0].Compactions != 0 {
		t.Errorf("interval never: %d compactions", cases[0].Compactions)
	}
	if cases[1].Compactions == 0 || cases[1].FinalCompactRevision == 0 {
		t.Errorf("interval 1s: %d compactions (to %d) in 5 s of writes", cases[1].Compactions, cases[1].FinalCompactRevision)
	}
	for _, c := range cases {
		if c.Validation.Lost != 0 || c.Validation.Others() != 0 {
			t.Errorf("interval %.0f ms: watch violations %+v", c.IntervalMs, c.Validation)
		}
	}
}

// TestCatchupThroughKubeAPIServer: a client-go watch resumed through
// kube-apiserver (watch cache off: from etcd's history) delivers every
// update once.
func TestCatchupThroughKubeAPIServer(t *testing.T) {
	res, err := experiment.Catchup(t.Context(), experiment.CatchupOptions{Common: throughKubeAPIServer(t, false, nil), Behind: []int64{500}, Objects: 100})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Catchup.Cases[0]
	if c.Expired || c.Events != 500 || c.Missing != 0 || c.Unexpected != 0 {
		t.Errorf("catch-up: expired %v, %d events, %d missing, %d unexpected; want the 500 updates once each", c.Expired, c.Events, c.Missing, c.Unexpected)
	}
	if c.RelistObjects != 100 || c.RelistBytes == 0 {
		t.Errorf("relist through the API read %d objects, %d bytes; want the 100 pods", c.RelistObjects, c.RelistBytes)
	}
}

// TestDefragStallThroughKubeAPIServer: the probe's twin through
// kube-apiserver runs during every defragmentation.
func TestDefragStallThroughKubeAPIServer(t *testing.T) {
	res, err := experiment.DefragStall(t.Context(), experiment.DefragStallOptions{Common: throughKubeAPIServer(t, false, nil),
		Sizes: []int64{4e6}, NoOverlap: true})
	if err != nil {
		t.Fatal(err)
	}
	c := res.DefragStall.Cases[0]
	if c.APIProbe == nil {
		t.Fatal("no probe window through kube-apiserver")
	}
	if c.APIProbe.ToMs <= c.APIProbe.FromMs {
		t.Errorf("API probe window %+v is empty", *c.APIProbe)
	}
	if tl := res.Timelines[0]; tl.APIProbe == nil || tl.APIProbe.Writes.Count == 0 || tl.APIProbe.Reads.Count == 0 {
		t.Errorf("timeline's probe through kube-apiserver: %+v, want reads and writes", tl.APIProbe)
	}
}

// TestContinuationThroughKubeAPIServer: paginated LISTs of the API (limit
// and continue tokens) under aggressive compaction expire with the watch
// cache off (kube-apiserver reads each page from etcd at the first page's
// revision: 410) and never with it on (the cache serves the continuations
// from its own snapshots, whatever etcd compacted).
func TestContinuationThroughKubeAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		watchCache  bool
		wantExpired bool
	}{
		{"watch cache off", false, true},
		{"watch cache on", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := experiment.Continuation(t.Context(), experiment.ContinuationOptions{Common: throughKubeAPIServer(t, tc.watchCache, nil),
				Objects: 300, PageSizes: []int64{30}, Lists: 2, PageDelay: 50 * time.Millisecond, CompactEvery: 5, Retain: 5})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Continuation.Cases {
				if !c.Compacting {
					continue
				}
				switch {
				case c.Compactions == 0:
					t.Errorf("%s: no compaction", c.Fallback)
				case tc.wantExpired && c.Expired != c.Lists:
					t.Errorf("%s: %d of %d lists expired; want all", c.Fallback, c.Expired, c.Lists)
				case !tc.wantExpired && c.Expired != 0:
					t.Errorf("%s: %d of %d lists expired; the watch cache should serve every continuation", c.Fallback, c.Expired, c.Lists)
				}
				if c.Failed != 0 && c.Fallback == experiment.FallbackFullList {
					t.Errorf("full-list: %d lists failed", c.Failed)
				}
			}
		})
	}
}
