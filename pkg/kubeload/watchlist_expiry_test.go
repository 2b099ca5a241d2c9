package kubeload

import (
	"strings"
	"testing"
	"time"
)

func TestWatchListExpiries(t *testing.T) {
	s := time.Second
	reqs := []Request{
		// Informer 1, logged out of order: a 410 mid initial events
		// retried 5 ms later, one retried 2 s later, then one that
		// synced and whose watch met the compaction after its bookmark,
		// then the last request.
		{Informer: 1, Seq: 1, Verb: VerbWatchList, Outcome: OutcomeExpired, Start: 10 * s, Duration: 3 * s, Objects: 200, ResponseBytes: 1 << 20},
		{Informer: 1, Seq: 0, Verb: VerbWatchList, Outcome: OutcomeExpired, Start: 0, Duration: 8 * s, Objects: 100, ResponseBytes: 1 << 20},
		{Informer: 1, Seq: 2, Verb: VerbWatchList, Outcome: OutcomeExpired, Start: 13*s + 5*time.Millisecond, Duration: 20 * s, Objects: 300, InitialEventsEnd: 19 * s},
		{Informer: 1, Seq: 3, Verb: VerbWatchList, Outcome: OutcomeOK, Start: 40 * s, Duration: s, Objects: 300, InitialEventsEnd: 40*s + 1},
		// Informer 2: three that are no such expiry, a 410 before any
		// initial event (the resourceVersion was compacted before it
		// started), a LIST's 410 and a WATCH kube-apiserver ended for
		// PrevKv=nil (the second warning), then a 410 mid initial events
		// with no request after it.
		{Informer: 2, Seq: 0, Verb: VerbWatchList, Outcome: OutcomeExpired, Start: 0, Duration: s},
		{Informer: 2, Seq: 1, Verb: VerbList, Outcome: OutcomeExpired, Start: 2 * s, Duration: s, Objects: 500},
		{Informer: 2, Seq: 2, Verb: VerbWatch, Outcome: OutcomeError, Start: 4 * s, Duration: s, Events: 3,
			Err: `Internal error occurred: etcd event received with PrevKv=nil (key="/registry/pods/a/b", modRevision=6254, type=PUT)`},
		{Informer: 2, Seq: 3, Verb: VerbWatchList, Outcome: OutcomeExpired, Start: 6 * s, Duration: 5 * s, Objects: 50, ResponseBytes: 1 << 19},
	}
	e := watchListExpiriesOf(reqs)
	if e.Before != 3 || e.After != 1 {
		t.Errorf("before, after = %d, %d; want 3, 1", e.Before, e.After)
	}
	if e.Objects != 350 || e.Bytes != 5<<19 {
		t.Errorf("objects, bytes = %d, %d; want 350, %d", e.Objects, e.Bytes, 5<<19)
	}
	if want := []time.Duration{3 * s, 5 * s, 8 * s}; len(e.Durations) != 3 || e.Durations[0] != want[0] || e.Durations[1] != want[1] || e.Durations[2] != want[2] {
		t.Errorf("durations = %v; want %v", e.Durations, want)
	}
	// Informer 1's two before the bookmark have successors, 2 s and 5 ms
	// after their 410; informer 2's has none.
	if e.Retries != 2 || e.RetriedWithin1s != 1 {
		t.Errorf("retries = %d (within 1 s %d); want 2 (1)", e.Retries, e.RetriedWithin1s)
	}
	ws := e.warnings(6666 * time.Millisecond)
	if len(ws) != 2 {
		t.Fatalf("%d warnings, want 2 (expiries, PrevKv=nil): %q", len(ws), ws)
	}
	w := ws[0]
	for _, want := range []string{"4 WATCHLIST requests ended 410", "compaction every 6.7s", "1 after their initial-events-end bookmark",
		"3 before it, 350 objects (2.5 MiB)", "5s from request to 410 (p50; max 8s)", "here 1 of 2 within 1 s", "pkg/storage/etcd3/watcher.go", "reflector.go watchList"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	if !strings.Contains(ws[1], "1 watches ended with kube-apiserver's \"etcd event received with PrevKv=nil\"") || !strings.Contains(ws[1], "v3rpc/watch.go sendLoop") {
		t.Errorf("PrevKv=nil warning: %s", ws[1])
	}
	// Only after the bookmark: nothing said of retries at once.
	ws = watchListExpiriesOf(reqs[2:4]).warnings(time.Minute)
	if len(ws) != 1 {
		t.Fatalf("%d warnings, want 1: %q", len(ws), ws)
	}
	if w := ws[0]; !strings.Contains(w, "1 WATCHLIST requests ended 410") || !strings.Contains(w, "after its backoff") || strings.Contains(w, "without backoff") {
		t.Errorf("one expiry after the bookmark: %s", w)
	}
	if ws := watchListExpiriesOf(reqs[4:6]).warnings(time.Minute); len(ws) != 0 {
		t.Errorf("no WATCHLIST expired after initial events, no PrevKv=nil, yet warnings: %q", ws)
	}
}
