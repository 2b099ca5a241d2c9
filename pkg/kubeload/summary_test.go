package kubeload

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/pkg/report"
)

// TestRelistsOf: an informer's requests, in the order sent, make LIST
// phases: its first is the initial list, a LIST's continued pages belong
// to it, a failed LIST is no phase but the cause and the first attempt of
// the next, a WATCHLIST is a phase once its initial events ended, and the
// backoff runs from the end of the failed watch to the first attempt.
func TestRelistsOf(t *testing.T) {
	ms := time.Millisecond
	reqs := []Request{
		{Verb: VerbList, ResourceVersion: "0", Limit: 500, Start: 0, Duration: 10 * ms, Outcome: OutcomeOK, Objects: 500, ResponseBytes: 1000},
		{Verb: VerbList, ResourceVersion: "0", Limit: 500, Continue: true, Start: 10 * ms, Duration: 5 * ms, Outcome: OutcomeOK, Objects: 20, ResponseBytes: 40},
		{Verb: VerbWatch, ResourceVersion: "90", Start: 20 * ms, Duration: 100 * ms, Outcome: OutcomeStopped},
		{Verb: VerbWatch, ResourceVersion: "95", Start: 130 * ms, Duration: ms, Outcome: OutcomeExpired},
		{Verb: VerbList, ResourceVersion: "95", Limit: 500, Start: 140 * ms, Duration: 8 * ms, Outcome: OutcomeOK, Objects: 300, ResponseBytes: 600},
		{Verb: VerbWatch, ResourceVersion: "150", Start: 150 * ms, Duration: 50 * ms, Outcome: OutcomeClosed},
		{Verb: VerbList, ResourceVersion: "", Limit: 500, Start: 210 * ms, Duration: ms, Outcome: OutcomeThrottled},
		{Verb: VerbWatchList, ResourceVersion: "", Start: 220 * ms, Duration: time.Second, InitialEventsEnd: 250 * ms, Outcome: OutcomeStopped, Objects: 310, ResponseBytes: 900, InitialEventsBytes: 700},
	}
	got := relistsOf(3, "pods", reqs)
	want := []report.Relist{
		{Informer: 3, Resource: "pods", AtMs: 140, Reason: "expired", Verb: "list", ResourceVersion: "95", Pages: 1, Objects: 300, Bytes: 600, DurationMs: 8, BackoffMs: 9},
		{Informer: 3, Resource: "pods", AtMs: 210, Reason: "throttled", Verb: "watchlist", ResourceVersion: "", Pages: 1, Objects: 310, Bytes: 700, DurationMs: 40,
			FailedRequests: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got relists\n%+v\nwant\n%+v", got, want)
	}
}

// TestRelistsOfCompactedList: with the watch cache off, client-go's
// relist after a compacted watch first lists at its resourceVersion (410
// too), then at the latest: one phase from the first LIST to the last,
// with one failed, expired request, its backoff from the watch's 410.
func TestRelistsOfCompactedList(t *testing.T) {
	ms := time.Millisecond
	reqs := []Request{
		{Verb: VerbList, ResourceVersion: "0", Limit: 500, Start: 0, Duration: 10 * ms, Outcome: OutcomeOK, Objects: 100},
		{Verb: VerbWatch, ResourceVersion: "90", Start: 20 * ms, Duration: 100 * ms, Outcome: OutcomeExpired},
		{Verb: VerbList, ResourceVersion: "90", Limit: 500, Start: 900 * ms, Duration: 2 * ms, Outcome: OutcomeExpired},
		{Verb: VerbList, ResourceVersion: "", Limit: 500, Start: 1000 * ms, Duration: 20 * ms, Outcome: OutcomeOK, Objects: 100, ResponseBytes: 5000},
	}
	got := relistsOf(0, "pods", reqs)
	want := []report.Relist{{Informer: 0, Resource: "pods", AtMs: 900, Reason: "expired", Verb: "list", ResourceVersion: "", Pages: 1, Objects: 100,
		Bytes: 5000, DurationMs: 120, FailedRequests: 1, Expired: 1, BackoffMs: 780}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got relists\n%+v\nwant\n%+v", got, want)
	}
}

// TestCompare: rows are summed over the phases after seeding, by method
// and kind, requests and their bytes both ways; a row is within 10 % when
// |model-real| <= real/10, whatever its bytes; a watch response row counts
// responses.
func TestCompare(t *testing.T) {
	model := []report.EtcdRequests{
		{Phase: "seed", Method: "Txn", Kind: "if mod_revision=0 then put else range", Requests: 100},
		{Phase: "steady", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 60, RequestBytes: 600, Responses: 60, ResponseBytes: 60},
		{Phase: "held", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 45, RequestBytes: 450, Responses: 45, ResponseBytes: 45},
		{Phase: "steady", Method: "Watch", Kind: "events", Responses: 80, ResponseBytes: 8000},
		{Phase: "steady", Method: "Watch", Kind: "progress", Requests: 3},
	}
	real := []report.EtcdRequests{
		{Phase: "before", Method: "Range", Kind: "prefix", Requests: 7},
		{Phase: "seed", Method: "Txn", Kind: "if mod_revision=0 then put", Requests: 60},
		{Phase: "seed after compaction 1", Method: "Txn", Kind: "if mod_revision=0 then put", Requests: 40},
		{Phase: "steady after compaction 1", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 70, RequestBytes: 700, Responses: 70, ResponseBytes: 70},
		{Phase: "defrag", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 5, RequestBytes: 50, Responses: 5, ResponseBytes: 5},
		{Phase: "released after compaction 2", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 25, RequestBytes: 250, Responses: 25, ResponseBytes: 25},
		{Phase: "steady after compaction 1", Method: "Watch", Kind: "events", Responses: 100, ResponseBytes: 8000},
		{Phase: "steady after compaction 1", Method: "Range", Kind: "key limit", Requests: 40},
		{Phase: "steady after compaction 1", Method: "Txn", Kind: "if mod_revision=? then delete else range", Requests: 10},
		{Phase: "released after compaction 2", Method: "RangeStream", Kind: "prefix", Requests: 31},
	}
	model = append(model, report.EtcdRequests{Phase: "steady", Method: "Txn", Kind: "if mod_revision=? then delete else range", Requests: 8})
	got := Compare(model, real)
	want := []report.ConformanceRow{
		{Method: "Range", Kind: "key limit", Model: 0, Real: 40, Ratio: 0, Note: "not modelled: only kube-apiserver sends it"},
		{Method: "RangeStream", Kind: "prefix", Model: 0, Real: 31, Ratio: 0, Note: note(&report.ConformanceRow{Method: "RangeStream", Kind: "prefix", Real: 31})},
		{Method: "Txn", Kind: "if mod_revision=? then delete else range", Model: 8, Real: 10, Ratio: 0.8, Note: "model: with the watch cache on, a delete starts from the cached object (k8s.io/apiserver/pkg/storage/cacher/delegator.go Delete), " +
			"which is stale right after the grace-0 update and fails once (etcd3/store.go conditionalDelete); the model's cache catches up sooner than kube-apiserver's cacher, so fewer of its deletes fail"},
		{Method: "Txn", Kind: "if mod_revision=? then put else range", Model: 105, Real: 100, ModelBytes: 1155, RealBytes: 1100, Ratio: 1.05, BytesRatio: 1.05, Within10: true},
		{Method: "Watch", Kind: "events", Model: 80, Real: 100, ModelBytes: 8000, RealBytes: 8000, Ratio: 0.8, BytesRatio: 1},
		{Method: "Watch", Kind: "progress", Model: 3, Real: 0, Note: "model: its informers ask etcd for progress notifications; upstream only the watch cache does (k8s.io/apiserver/pkg/storage/cacher)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got rows\n%+v\nwant\n%+v", got, want)
	}
}

// TestCompareProgressNote: more progress requests from kube-apiserver
// than from the model (the watch cache on) are explained by LimitRanger's
// live LISTs, consistent reads from the cache that wait with progress
// requests, and not by the count polls, which start after a 30 s run.
func TestCompareProgressNote(t *testing.T) {
	model := []report.EtcdRequests{{Phase: "steady", Method: "Watch", Kind: "progress", Requests: 3}}
	real := []report.EtcdRequests{{Phase: "released", Method: "Watch", Kind: "progress", Requests: 130}}
	rows := Compare(model, real)
	if len(rows) != 1 || !strings.HasPrefix(rows[0].Note, "real: also LimitRanger admission's live LISTs") || !strings.Contains(rows[0].Note, "waitUntilFreshLocked") {
		t.Errorf("rows %+v: want the progress row explained by LimitRanger's consistent reads from the watch cache", rows)
	}
}

// TestCompareNotes: the note of a row outside 10 % names its known cause
// by the row's method and kind, and the "stop" phase (the harness
// stopping its watchers) is not compared.
func TestCompareNotes(t *testing.T) {
	tests := []struct {
		name        string
		method      string
		kind        string
		model, real int64
		wantNote    string // prefix
	}{
		{"peer endpoint lease", "LeaseGrant", "grant ttl=15s", 0, 3, "kube-apiserver's own: its peer endpoint lease"},
		{"events' lease", "LeaseGrant", "grant ttl=3660s", 2, 5, ""},
		{"compactor's first tick before the load", "Txn", "if version=0 then put else range", 1, 0, "timing: the compactor ticks"},
		{"compactions", "Compact", "compact", 2, 3, "timing: the compactor ticks"},
		{"create with an Else branch", "Txn", "if mod_revision=0 then put else range", 5, 0, "model: a txn shape kube-apiserver does not send"},
		{"count polling", "Range", "prefix count_only", 0, 64, "kube-apiserver's own: it counts every resource's objects"},
		{"not modelled", "Range", "key limit", 0, 40, "not modelled"},
		{"watch streams", "Watch", "stream", 0, 1, "gRPC watch streams: kube-apiserver gives each resource's storage an etcd client of its own"},
		{"db size monitor", "Status", "call", 0, 1, "kube-apiserver 1.35 and 1.36's own: its etcd db size monitor"},
		{"limit range lookups, Range", "Range", "prefix", 1, 11, "real: also LimitRanger admission's live LIST"},
		{"limit range lookups, RangeStream", "RangeStream", "prefix", 11, 21, "real: also LimitRanger admission's live LIST"},
		{"a Range limit more", "Range", "prefix limit", 10, 11, ""},
		{"a cancel more", "Watch", "cancel", 2, 3, "watch cancels"},
		{"many cancels more", "Watch", "cancel", 2, 30, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := []report.EtcdRequests{{Phase: "steady", Method: tt.method, Kind: tt.kind, Requests: tt.model},
				{Phase: "stop", Method: "Watch", Kind: "cancel", Requests: 9}}
			real := []report.EtcdRequests{{Phase: "steady", Method: tt.method, Kind: tt.kind, Requests: tt.real},
				{Phase: "stop", Method: "Watch", Kind: "cancel", Requests: 1}}
			rows := Compare(model, real)
			if len(rows) != 1 {
				t.Fatalf("got rows %+v; want one, the stop phase left out", rows)
			}
			if got := rows[0].Note; !strings.HasPrefix(got, tt.wantNote) || (tt.wantNote == "" && got != "") {
				t.Errorf("got note %q, want one starting %q", got, tt.wantNote)
			}
		})
	}
}

func TestSelectSettings(t *testing.T) {
	all, err := SelectSettings(nil)
	if err != nil || len(all) != 4 {
		t.Fatalf("no keys: %d settings, %v; want all 4", len(all), err)
	}
	got, err := SelectSettings([]string{"cache-on/watchlist-off", "cache-off/watchlist-on"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key() != "cache-off/watchlist-on" || got[1].Key() != "cache-on/watchlist-off" {
		t.Fatalf("got %v; want cache-off/watchlist-on then cache-on/watchlist-off, in Settings' order", got)
	}
	if got[1].Name() != "watch cache on, WatchList off" {
		t.Errorf("Name = %q", got[1].Name())
	}
	if _, err := SelectSettings([]string{"cache-on/watchlist-maybe"}); err == nil || !strings.Contains(err.Error(), "cache-on/watchlist-maybe") {
		t.Errorf("unknown key: err = %v; want one naming it", err)
	}
}

func TestBasePhase(t *testing.T) {
	tests := []struct {
		base string
		n    int
		want string
	}{
		{"steady", 0, "steady"},
		{"steady", 1, "steady after compaction 1"},
		{"released", 12, "released after compaction 12"},
		{PhaseDefrag, 2, PhaseDefrag},
	}
	for _, tt := range tests {
		got := phaseName(tt.base, tt.n)
		if got != tt.want {
			t.Errorf("phaseName(%q, %d): got %q, want %q", tt.base, tt.n, got, tt.want)
		}
		if b := BasePhase(got); b != tt.base {
			t.Errorf("BasePhase(%q): got %q, want %q", got, b, tt.base)
		}
	}
}

// TestJudgedAndPlanWrite: the model is judged on the reads and watches;
// the writes of the plan agree by construction, the compactor's
// compare-and-swap of compact_rev_key is not one of them.
func TestJudgedAndPlanWrite(t *testing.T) {
	tests := []struct {
		method, kind          string
		wantJudged, wantWrite bool
	}{
		{"Range", "key limit", true, false},
		{"RangeStream", "prefix", true, false},
		{"Watch", "progress", true, false},
		{"Txn", "if mod_revision=? then put else range", false, true},
		{"Txn", "if mod_revision=0 then put", false, true},
		{"Txn", "if version=? then put else range", false, false},
		{"Compact", "compact", false, false},
		{"LeaseGrant", "grant ttl=15s", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.kind, func(t *testing.T) {
			if got := Judged(tt.method); got != tt.wantJudged {
				t.Errorf("got Judged %v, want %v", got, tt.wantJudged)
			}
			if got := PlanWrite(tt.method, tt.kind); got != tt.wantWrite {
				t.Errorf("got PlanWrite %v, want %v", got, tt.wantWrite)
			}
		})
	}
}

// TestCompareSumsResources: Compare judges by method and kind, whatever
// the resources the counts are split over.
func TestCompareSumsResources(t *testing.T) {
	model := []report.EtcdRequests{
		{Phase: "steady", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 60, RequestBytes: 600, Responses: 60, ResponseBytes: 60},
		{Phase: "steady", Method: "Watch", Kind: "events", Responses: 80, ResponseBytes: 8000},
	}
	real := []report.EtcdRequests{
		{Phase: "steady", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 70, RequestBytes: 700, Responses: 70, ResponseBytes: 70},
		{Phase: "steady", Method: "Watch", Kind: "events", Responses: 100, ResponseBytes: 8000},
		{Phase: "steady", Method: "Range", Kind: "key", Requests: 9, RequestBytes: 90},
	}
	var split []report.EtcdRequests
	for _, r := range real {
		a, b := r, r
		a.Resource, b.Resource = "pods", "leases.coordination.k8s.io"
		a.Requests, a.RequestBytes, a.Responses, a.ResponseBytes = r.Requests/3, r.RequestBytes/3, r.Responses/3, r.ResponseBytes/3
		b.Requests, b.RequestBytes, b.Responses, b.ResponseBytes = r.Requests-a.Requests, r.RequestBytes-a.RequestBytes, r.Responses-a.Responses, r.ResponseBytes-a.ResponseBytes
		split = append(split, a, b)
	}
	if got, want := Compare(model, split), Compare(model, real); !reflect.DeepEqual(got, want) {
		t.Errorf("split by resource: got rows\n%+v\nwant\n%+v", got, want)
	}
}
