package kubeload_test

import (
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// causeLoad is a load of pods only whose writes outlast LimitRanger's
// 30 s liveTTL from the seeding, so that its live lookups of each
// namespace, made first by the seed's creates, come again among the
// compared phases; the writes create pods in every namespace throughout.
func causeLoad(t *testing.T) watchload.Options {
	lo := smallLoad(t, 0)
	lo.Duration = 36 * time.Second
	return lo
}

// causeRun runs causeLoad through one kube-apiserver with the watch cache
// on or off, WatchListClient off and further flags args, and returns the
// real stack's conformance rows (kubeload.Compare against no model: the
// compared phases only) by method and kind, and the result.
func causeRun(t *testing.T, watchCache bool, args []string) (map[string]report.ConformanceRow, *report.RunResult) {
	t.Helper()
	st := stack(t, apiserverproc.Config{DisableWatchCache: !watchCache, ExtraArgs: args})
	off := false
	res, err := runAPI(t.Context(), st, causeLoad(t), kubeload.Options{WatchList: &off})
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, res)
	rows := map[string]report.ConformanceRow{}
	for _, r := range kubeload.Compare(nil, res.Etcd) {
		rows[r.Method+" "+r.Kind] = r
		t.Logf("etcd: %s %s: %d requests, %d bytes", r.Method, r.Kind, r.Real, r.RealBytes)
	}
	return rows, res
}

// comparedMetric sums a kube-apiserver counter over the phases
// conformance compares (kubeload.Compare: all but seed and stop).
func comparedMetric(res *report.RunResult, name string, labels map[string]string) float64 {
	var sum float64
	for _, p := range phasesOf(res) {
		if b := kubeload.BasePhase(p); b == "seed" || b == "stop" {
			continue
		}
		sum += metricSum(res, name, p, labels)
	}
	return sum
}

// prefixLists is what the real stack's rows count of unlimited prefix
// reads, Range or RangeStream (etcd 3.7 and EtcdRangeStream: RangeStream),
// and their bytes.
func prefixLists(rows map[string]report.ConformanceRow) (n, bytes int64) {
	for _, k := range []string{"Range prefix", "RangeStream prefix"} {
		n += rows[k].Real
		bytes += rows[k].RealBytes
	}
	return n, bytes
}

// progressRequests counts the real stack's progress requests.
func progressRequests(rows map[string]report.ConformanceRow) int64 {
	return rows["Watch progress"].Real
}

// TestExtraPrefixListsAreLimitRanger switches off the cause conformance
// names for the real stack's extra unlimited prefix reads with the watch
// cache off (note: "real: also LimitRanger admission's live LIST"):
// LimitRanger admission lists each namespace's limitranges live on a pod
// create once per 30 s (k8s.io/kubernetes/plugin/pkg/admission/limitranger
// admission.go GetLimitRanges), with no hasSynced guard, while
// ResourceQuota admission's live lookup stops once its informer synced.
// With LimitRanger, kube-apiserver LISTs limitranges during the compared
// phases and sends as many more prefix reads to etcd, each a few bytes (0
// keys); with --disable-admission-plugins=LimitRanger both go, and
// resourcequotas are never listed in either run.
func TestExtraPrefixListsAreLimitRanger(t *testing.T) {
	with, withRes := causeRun(t, false, nil)
	without, withoutRes := causeRun(t, false, []string{"--disable-admission-plugins=LimitRanger"})

	namespaces := int64(causeLoad(t).Namespaces)
	lrLists := func(res *report.RunResult) float64 {
		return comparedMetric(res, "apiserver_request_total", map[string]string{"verb": "LIST", "resource": "limitranges"})
	}
	rqLists := func(res *report.RunResult) float64 {
		return comparedMetric(res, "apiserver_request_total", map[string]string{"verb": "LIST", "resource": "resourcequotas"})
	}
	if got := lrLists(withRes); got < float64(namespaces) {
		t.Errorf("with LimitRanger: got %v LISTs of limitranges, want at least one per namespace (%d)", got, namespaces)
	}
	if got := lrLists(withoutRes); got != 0 {
		t.Errorf("without LimitRanger: got %v LISTs of limitranges, want 0", got)
	}
	for name, res := range map[string]*report.RunResult{"with": withRes, "without": withoutRes} {
		if got := rqLists(res); got != 0 {
			t.Errorf("%s LimitRanger: got %v LISTs of resourcequotas, want 0 (ResourceQuota's informer has synced)", name, got)
		}
	}
	nWith, bWith := prefixLists(with)
	nWithout, bWithout := prefixLists(without)
	t.Logf("unlimited prefix reads: %d (%d bytes) with LimitRanger, %d (%d bytes) without; limitranges LISTs %v",
		nWith, bWith, nWithout, bWithout, lrLists(withRes))
	extra := nWith - nWithout
	if extra != int64(lrLists(withRes)) {
		t.Errorf("got %d more prefix reads with LimitRanger, want one per LIST of limitranges (%v)", extra, lrLists(withRes))
	}
	if extra > 0 && (bWith-bWithout)/extra > 200 {
		t.Errorf("got %d bytes per extra prefix read, want a few tens: an empty list", (bWith-bWithout)/extra)
	}
}

// TestExtraProgressRequestsAreConsistentReadsFromCache switches off, one
// at a time, what conformance names as the cause of the real stack's
// extra progress requests with the watch cache on (note: "real: also
// LimitRanger admission's live LISTs ... consistent reads served from the
// cache"). kube-apiserver's count polls are off in every run
// (--etcd-count-metric-poll-period=0), so they cannot be the cause. With
// LimitRanger its LISTs are consistent reads of the limitranges cache,
// which wait with progress requests (k8s.io/apiserver/pkg/storage/cacher
// watch_cache.go waitUntilFreshLocked); without LimitRanger, or with the
// limitranges cache off (--watch-cache-sizes=limitranges#0: the LISTs
// reach etcd as prefix reads instead), no progress request is sent.
func TestExtraProgressRequestsAreConsistentReadsFromCache(t *testing.T) {
	noPolls := "--etcd-count-metric-poll-period=0"
	namespaces := int64(causeLoad(t).Namespaces)
	tests := []struct {
		name             string
		args             []string
		wantProgress     bool
		wantPrefixLists  int64 // at least
		wantCacheReadsLR bool  // consistent reads of limitranges from the cache
	}{
		{"LimitRanger on", []string{noPolls}, true, 0, true},
		{"LimitRanger off", []string{noPolls, "--disable-admission-plugins=LimitRanger"}, false, 0, false},
		{"limitranges not cached", []string{noPolls, "--watch-cache-sizes=limitranges#0"}, false, namespaces, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, res := causeRun(t, true, tt.args)
			progress := progressRequests(rows)
			reads := comparedMetric(res, "apiserver_watch_cache_consistent_read_total", map[string]string{"resource": "limitranges"})
			n, _ := prefixLists(rows)
			t.Logf("%s: %d progress requests, %v consistent reads of limitranges from the cache, %d unlimited prefix reads", tt.name, progress, reads, n)
			if got := progress > 0; got != tt.wantProgress {
				t.Errorf("got %d progress requests, want some: %v", progress, tt.wantProgress)
			}
			if got := reads > 0; got != tt.wantCacheReadsLR {
				t.Errorf("got %v consistent reads of limitranges from the cache, want some: %v", reads, tt.wantCacheReadsLR)
			}
			if n < tt.wantPrefixLists {
				t.Errorf("got %d unlimited prefix reads, want at least %d", n, tt.wantPrefixLists)
			}
		})
	}
}
