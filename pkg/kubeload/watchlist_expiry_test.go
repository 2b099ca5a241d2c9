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
		// Informer 2: none of these counts: a 410 before any initial
		// event (the resourceVersion was compacted before it started), a
		// LIST's 410, a WATCH's; its last request has no successor.
		{Informer: 2, Seq: 0, Verb: VerbWatchList, Outcome: OutcomeExpired, Start: 0, Duration: s},
		{Informer: 2, Seq: 1, Verb: VerbList, Outcome: OutcomeExpired, Start: 2 * s, Duration: s, Objects: 500},
		{Informer: 2, Seq: 2, Verb: VerbWatch, Outcome: OutcomeExpired, Start: 4 * s, Duration: s, Events: 3},
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
	// Informer 1's three have successors, 2 s, 5 ms and 7 s after their
	// 410; informer 2's has none.
	if e.Retries != 3 || e.RetriedWithin1s != 1 {
		t.Errorf("retries = %d (within 1 s %d); want 3 (1)", e.Retries, e.RetriedWithin1s)
	}
	w := e.warning(6666 * time.Millisecond)
	for _, want := range []string{"4 WATCHLIST requests ended 410", "3 before the initial-events-end bookmark", "350 objects, 2.5 MiB",
		"5s from request to 410 (p50; max 8s)", "compaction every 6.7s", "1 of 3 retries within 1 s", "pkg/storage/etcd3/watcher.go", "reflector.go watchList"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	if w := watchListExpiriesOf(reqs[4:7]).warning(time.Minute); w != "" {
		t.Errorf("no WATCHLIST expired after initial events, yet a warning: %s", w)
	}
}
