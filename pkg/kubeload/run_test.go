package kubeload_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// stack starts an embedded etcd, a counting proxy in front of it and one
// kube-apiserver in front of the proxy, with cfg's settings (BinDir, Dir
// and EtcdServers are filled in).
func stack(t testing.TB, cfg apiserverproc.Config) kubeload.Stack {
	t.Helper()
	cfg.BinDir = apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	proxy, err := etcdproxy.Start(t.Context(), etcdproxy.Config{Upstream: srv.Endpoints[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	cfg.Dir, cfg.EtcdServers = t.TempDir(), []string{proxy.URL()}
	c, err := apiserverproc.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	target := watchload.Target{Endpoints: srv.Endpoints, Embedded: true, Managed: true,
		Dial: func(ctx context.Context) (*clientv3.Client, error) {
			return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		}}
	conns, err := kubeload.NewConnections(c.RESTConfig(), kubeload.ConnectionsPerClient)
	if err != nil {
		t.Fatal(err)
	}
	return kubeload.Stack{Etcd: target, RESTConfig: c.RESTConfig(), Connections: conns, Counter: kubeload.CounterOf(proxy.Counter()), APIServers: kubeload.APIServersOf(c),
		APIServer: report.APIServerTarget{Servers: 1, Managed: true, WatchCache: !cfg.DisableWatchCache,
			EtcdCompactionIntervalMs: report.Ms(cfg.EtcdCompactionInterval)}}
}

// runAPI runs lo through st with o: the one script, watchload.Run, with
// kubeload's client set.
func runAPI(ctx context.Context, st kubeload.Stack, lo watchload.Options, o kubeload.Options) (*report.RunResult, error) {
	lo.Clients = kubeload.NewClients(st, o)
	return watchload.Run(ctx, st.Etcd, lo)
}

// smallLoad is a short load of pods only, watched by two pod informers.
func smallLoad(t *testing.T, holdBack int) watchload.Options {
	return watchload.Options{Objects: 40, ConfigMaps: -1, Events: -1, Namespaces: 2, Watchers: 2,
		WatchResources: []string{watchload.ResourcePods}, WriteRate: 25, Duration: 12 * time.Second,
		WriterConcurrency: 4, HoldBack: holdBack, ResourceMix: watchload.ResourceMix{PodsPercent: 100},
		Seed: 1, SyncTimeout: time.Minute, Logf: t.Logf}
}

// TestHeldInformerRelistsAfterCompaction holds a real client-go informer
// back while kube-apiserver's own compactor (every 2 s, watch cache off,
// so that every WATCH reaches etcd) compacts past the revision it had
// seen. On release its WATCH must fail with 410 Expired and client-go
// must relist; the relist is recorded with that cause, and nothing is
// lost: every informer's events match etcd's history and its cache
// matches etcd at the end. Each compaction begins a phase, the member is
// defragmented after the release, and kube-apiserver's own metrics, CPU
// and memory are reported.
func TestHeldInformerRelistsAfterCompaction(t *testing.T) {
	st := stack(t, apiserverproc.Config{DisableWatchCache: true, EtcdCompactionInterval: 2 * time.Second})
	off := false
	lo := smallLoad(t, 1)
	lo.Defragment = true
	res, err := runAPI(t.Context(), st, lo, kubeload.Options{WatchList: &off, HoldAt: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Holds) != 1 || !res.Holds[0].Compacted {
		t.Fatalf("got holds %+v, want one informer held until etcd was compacted past it", res.Holds)
	}
	var relisted bool
	for _, r := range res.Relists {
		t.Logf("relist: %+v", r)
		if r.Informer == 0 && r.Reason == string(kubeload.OutcomeExpired) && r.Verb == string(kubeload.VerbList) {
			relisted = true
		}
	}
	if !relisted {
		t.Errorf("informer 0 did not relist after a 410 Expired; relists %+v, requests %+v", res.Relists, res.Requests)
	}
	var expiredWatches int64
	for _, c := range res.Requests {
		t.Logf("requests: %+v", c)
		if c.Verb == string(kubeload.VerbWatch) && c.Outcome == string(kubeload.OutcomeExpired) {
			expiredWatches += c.Count
		}
	}
	if expiredWatches == 0 {
		t.Errorf("no WATCH failed with 410 Expired: %+v", res.Requests)
	}
	// What etcd saw after the release (the defragmentation follows it at
	// once): the held informer's watch reached etcd and was compacted, and
	// its relist read etcd.
	var compacted, ranges int64
	for _, e := range res.Etcd {
		if !strings.HasPrefix(e.Phase, "released") && e.Phase != kubeload.PhaseDefrag {
			continue
		}
		t.Logf("etcd: %+v", e)
		switch {
		case e.Method == "Watch" && e.Kind == "compacted":
			compacted += e.Responses
		case e.Method == "Range" || e.Method == "RangeStream":
			ranges += e.Requests
		}
	}
	if compacted == 0 || ranges == 0 {
		t.Errorf("etcd saw %d compacted watch responses and %d ranges after the release, want both", compacted, ranges)
	}
	if res.Informers[1].Lists != 1 {
		t.Errorf("informer 1, never held, listed %d times, want once", res.Informers[1].Lists)
	}
	if h := res.Delivery.HeldBack; h == nil || h.Watchers != 1 || h.Events == 0 {
		t.Errorf("got heldBack delivery %+v, want informer 0's events from its hold on (its relist's watch)", h)
	}
	checkValid(t, res)
	checkCompactionPhases(t, res)
	if d := res.Defrag; d == nil || d.Error != "" || len(d.Members) != 1 || d.Members[0].AfterBytes == 0 {
		t.Errorf("got defragmentation %+v, want one member defragmented without error", d)
	}
	checkUsage(t, res)
	// With the watch cache off and WatchListClient off, the informers'
	// LISTs (the first ones and the relist) are served by etcd.
	if got := metricSum(res, "apiserver_storage_list_total", "", map[string]string{"resource": "pods", "storage": "etcd"}); got < 3 {
		t.Errorf("got %v pod LISTs served by etcd (apiserver_storage_list_total), want at least 3: two informers and a relist", got)
	}
	if got := metricSum(res, "apiserver_storage_list_returned_objects_total", "", map[string]string{"resource": "pods", "storage": "etcd"}); got < 40 {
		t.Errorf("got %v pods returned by LISTs from etcd, want at least the 40 seeded", got)
	}
	if got := metricSum(res, "apiserver_watch_cache_events_received_total", "", nil); got != 0 {
		t.Errorf("got %v watch cache events with the watch cache off, want 0", got)
	}
}

// TestHeldInformerResumesFromWatchCache holds a real client-go informer
// back across kube-apiserver's compaction with the watch cache on: its
// resumed WATCH is served from the cache's history, which etcd's
// compaction does not shorten (k8s.io/apiserver/pkg/storage/cacher/
// watch_cache_history.go), so it does not relist and receives every event
// of the hold at the release, late by up to the hold. Those events are
// reported apart (Delivery.HeldBack), and the headline latency, the other
// informer's and its own before the hold, stays far below the hold.
func TestHeldInformerResumesFromWatchCache(t *testing.T) {
	st := stack(t, apiserverproc.Config{EtcdCompactionInterval: 2 * time.Second})
	res, err := runAPI(t.Context(), st, smallLoad(t, 1), kubeload.Options{HoldAt: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Holds) != 1 || !res.Holds[0].Compacted {
		t.Fatalf("got holds %+v, want one informer held until etcd was compacted past it", res.Holds)
	}
	hold := res.Holds[0].ReleasedAtMs - res.Holds[0].HeldAtMs
	if len(res.Relists) != 0 {
		t.Errorf("got relists %+v, want none: the watch cache serves the held informer's resumed watch", res.Relists)
	}
	d := res.Delivery
	h := d.HeldBack
	t.Logf("hold of %.0f ms; delivery %+v; held back %+v", hold, d.FromResponse, h)
	if h == nil || h.Watchers != 1 || h.Events == 0 || h.FromResponse.MaxMs < hold/2 {
		t.Fatalf("got heldBack delivery %+v, want informer 0's, its events of the %.0f ms hold late by up to the hold", h, hold)
	}
	if d.FromResponse.P99Ms > hold/5 || d.FromResponse.Count != d.TimedEvents-h.TimedEvents {
		t.Errorf("got delivery fromResponse %+v of %d timed events, want a p99 far below the %.0f ms hold, informer 0's %d events from its hold on left out",
			d.FromResponse, d.TimedEvents, hold, h.TimedEvents)
	}
	checkValid(t, res)
}

// checkCompactionPhases checks that kube-apiserver's compactions were
// seen and that the phase after the first holds etcd requests and
// apiserver metrics.
func checkCompactionPhases(t *testing.T, res *report.RunResult) {
	t.Helper()
	if len(res.Compactions) == 0 || res.Compactions[0].N != 1 || res.Compactions[0].Revision == 0 {
		t.Fatalf("got compactions %+v, want kube-apiserver's compactor seen", res.Compactions)
	}
	var etcdReqs int64
	for _, e := range res.Etcd {
		if strings.HasSuffix(e.Phase, " after compaction 1") {
			etcdReqs += e.Requests
		}
	}
	if etcdReqs == 0 {
		t.Errorf("no etcd request counted in a phase after compaction 1; phases %v", phasesOf(res))
	}
	var apiReqs float64
	for _, m := range res.APIServerMetrics {
		if m.Name == "apiserver_request_total" && strings.HasSuffix(m.Phase, " after compaction 1") {
			apiReqs += m.Value
		}
	}
	if apiReqs == 0 {
		t.Errorf("no API request (apiserver_request_total) in a phase after compaction 1")
	}
}

// checkUsage checks the apiserver's CPU and memory and the metrics every
// load makes non-zero.
func checkUsage(t *testing.T, res *report.RunResult) {
	t.Helper()
	if len(res.APIServers) != 1 {
		t.Fatalf("got %d apiserver usages, want 1", len(res.APIServers))
	}
	u := res.APIServers[0]
	var phaseCPU float64
	for _, p := range u.Phases {
		phaseCPU += p.CPUSeconds
	}
	if u.CPUSeconds <= 0 || u.PeakResidentMemoryBytes < 50<<20 || u.FinalResidentMemoryBytes <= 0 || u.PeakResidentMemoryBytes < u.FinalResidentMemoryBytes || u.PID == 0 {
		t.Errorf("got apiserver usage %+v, want CPU seconds > 0, a peak resident set of at least 50 MiB and at least the final one", u)
	}
	if d := phaseCPU - u.CPUSeconds; d > 0.01 || d < -0.01 {
		t.Errorf("CPU seconds by phase sum to %v, want the total %v", phaseCPU, u.CPUSeconds)
	}
	if got := metricSum(res, "apiserver_request_total", "", map[string]string{"verb": "POST", "resource": "pods", "code": "201"}); got < 40 {
		t.Errorf("got %v pod creations (apiserver_request_total POST pods 201), want at least the 40 seeded", got)
	}
	if got := metricSum(res, "etcd_requests_total", "", map[string]string{"operation": "create", "resource": "pods"}); got < 40 {
		t.Errorf("got %v etcd creates of pods (etcd_requests_total), want at least the 40 seeded", got)
	}
	if got := metricSum(res, "apiserver_storage_events_received_total", "", map[string]string{"resource": "pods"}); got == 0 {
		t.Errorf("kube-apiserver received no pod event from etcd watches (apiserver_storage_events_received_total)")
	}
	var watches float64
	for _, m := range res.APIServerMetrics {
		if m.Name == "apiserver_longrunning_requests" && m.Labels["verb"] == "WATCH" && m.Labels["resource"] == "pods" && m.Gauge && strings.HasPrefix(m.Phase, "steady") {
			watches = max(watches, m.Value)
		}
	}
	if watches < 2 {
		t.Errorf("got %v pod watches open at the end of steady (apiserver_longrunning_requests), want the 2 informers'", watches)
	}
}

// metricSum sums the series of name in phase ("" every phase) whose
// labels include labels.
func metricSum(res *report.RunResult, name, phase string, labels map[string]string) float64 {
	var sum float64
next:
	for _, m := range res.APIServerMetrics {
		if m.Name != name || (phase != "" && m.Phase != phase) {
			continue
		}
		for k, v := range labels {
			if m.Labels[k] != v {
				continue next
			}
		}
		sum += m.Value
	}
	return sum
}

// phasesOf returns the phases of the etcd counts, in order.
func phasesOf(res *report.RunResult) []string {
	var out []string
	for _, e := range res.Etcd {
		if len(out) == 0 || out[len(out)-1] != e.Phase {
			out = append(out, e.Phase)
		}
	}
	return out
}

// TestWatchCacheMetrics runs a short load with kube-apiserver's watch
// cache on: the cache receives the pods' events from etcd and serves the
// informers, which kube-apiserver's own metrics show.
func TestWatchCacheMetrics(t *testing.T) {
	st := stack(t, apiserverproc.Config{EtcdCompactionInterval: -1})
	lo := smallLoad(t, 0)
	lo.Duration = 3 * time.Second
	res, err := runAPI(t.Context(), st, lo, kubeload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, res)
	checkUsage(t, res)
	if len(res.Compactions) != 0 {
		t.Errorf("got compactions %+v with the compactor off", res.Compactions)
	}
	if got := metricSum(res, "apiserver_watch_cache_events_received_total", "", map[string]string{"resource": "pods"}); got < 40 {
		t.Errorf("got %v pod events received by the watch cache, want at least the 40 seeded", got)
	}
	if got := metricSum(res, "apiserver_storage_list_total", "", map[string]string{"resource": "pods", "storage": "etcd"}); got != 0 {
		t.Errorf("got %v pod LISTs served by etcd with the watch cache on, want 0", got)
	}
}

// checkValid fails the test on any broken guarantee.
func checkValid(t *testing.T, res *report.RunResult) {
	t.Helper()
	v := res.Validation
	if v.Lost != 0 || v.Duplicated != 0 || v.OutOfOrder != 0 || v.Unexpected != 0 || v.CacheMismatches != 0 || v.UnsyncedWatchers != 0 {
		t.Errorf("validation: %+v", v)
	}
	if res.Writes.Completed == 0 || res.Writes.Errors != 0 {
		t.Errorf("writes: %+v", res.Writes)
	}
	if res.Delivery.Events == 0 {
		t.Errorf("the informers received no events: %+v", res.Delivery)
	}
	if v.HistoryEvents == 0 {
		t.Errorf("the recorder recorded no history")
	}
}

// TestWatchListClientChangesTheRequests runs the same informers with
// client-go's WatchListClient on and off, the watch cache off so that
// their requests reach etcd: on, each informer's first request is a WATCH
// with sendInitialEvents=true and no LIST is sent; off, it LISTs and then
// WATCHes from the list's resourceVersion. etcd sees the difference.
func TestWatchListClientChangesTheRequests(t *testing.T) {
	st := stack(t, apiserverproc.Config{EtcdCompactionInterval: -1, DisableWatchCache: true})
	for _, on := range []bool{true, false} {
		lo := smallLoad(t, 0)
		lo.Duration = 3 * time.Second
		res, err := runAPI(t.Context(), st, lo, kubeload.Options{WatchList: &on})
		if err != nil {
			t.Fatal(err)
		}
		verbs := map[string]int64{}
		for _, c := range res.Requests {
			verbs[c.Verb] += c.Count
		}
		t.Logf("WatchListClient=%v: requests %+v", on, res.Requests)
		// The informers' initial load as etcd sees it: a WATCHLIST makes
		// kube-apiserver read the whole prefix at once; a LIST pages with
		// the reflector's limit (500).
		var limited, whole int64
		for _, e := range res.Etcd {
			if e.Phase != "sync" || (e.Method != "Range" && e.Method != "RangeStream") || !strings.HasPrefix(e.Kind, "prefix") {
				continue
			}
			t.Logf("WatchListClient=%v: etcd %+v", on, e)
			if strings.Contains(e.Kind, "limit") {
				limited += e.Requests
			} else {
				whole += e.Requests
			}
		}
		if on && (whole < 2 || limited != 0) {
			t.Errorf("WatchListClient on: etcd saw %d whole-prefix and %d limited ranges, want one whole-prefix range per informer and no limited one", whole, limited)
		}
		if !on && (limited < 2 || whole != 0) {
			t.Errorf("WatchListClient off: etcd saw %d whole-prefix and %d limited ranges, want one limited range (a page) per informer and no whole-prefix one", whole, limited)
		}
		for _, c := range res.Requests {
			if c.Outcome != string(kubeload.OutcomeOK) && c.Outcome != string(kubeload.OutcomeStopped) {
				t.Errorf("WatchListClient=%v: a request ended %q: %+v", on, c.Outcome, c)
			}
		}
		if on && (verbs[string(kubeload.VerbWatchList)] < 2 || verbs[string(kubeload.VerbList)] != 0) {
			t.Errorf("WatchListClient on: got %v, want a watchlist per informer and no list", verbs)
		}
		if !on && (verbs[string(kubeload.VerbList)] < 2 || verbs[string(kubeload.VerbWatchList)] != 0 || verbs[string(kubeload.VerbWatch)] < 2) {
			t.Errorf("WatchListClient off: got %v, want a list and a watch per informer, no watchlist", verbs)
		}
		checkValid(t, res)
	}
}
