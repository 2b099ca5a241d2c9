package kubeload

import (
	"fmt"
	"sort"
	"time"
)

// watchListExpiries are the WATCHLIST requests that ended 410 Expired
// after kube-apiserver had begun sending their initial events, and how
// soon each informer asked again.
//
// With the watch cache off, kube-apiserver serves a WATCHLIST itself
// (k8s.io/apiserver pkg/storage/etcd3/watcher.go startWatching): it reads
// the state from etcd at one revision and queues each object as an
// initial event into a 100-event channel that the response drains at the
// informer's pace (sync; with the EtcdRangeStream gate, on in 1.37, the
// read is a RangeStream whose chunks etcd reads at the pinned revision as
// they are asked for: go.etcd.io/etcd/server/v3 etcdserver/v3_server.go
// rangeStream), and only then opens its etcd watch at that revision + 1.
// A compaction that passes the revision in the meantime ends the request
// 410: before the initial-events-end bookmark when a RangeStream chunk
// meets it (interpretListError), after it when the etcd watch does. And
// client-go retries a WATCHLIST that ended 410 at once, without backoff
// (k8s.io/client-go tools/cache/reflector.go watchList:
// isErrorRetriableWithSideEffectsFn), so on a machine too loaded to stream
// the state within a compaction interval the retries keep it loaded.
type watchListExpiries struct {
	// Before and After count the requests that ended 410 before and
	// after their initial-events-end bookmark, with at least one initial
	// event delivered.
	Before, After int
	// Objects and Bytes are the initial events (and their response
	// bytes) the requests counted in Before delivered before their 410:
	// state sent and then thrown away.
	Objects, Bytes int64
	// Durations are the Before requests' times from sent to the 410,
	// ascending.
	Durations []time.Duration
	// Retries counts the requests (Before and After) the informer
	// followed with another request; RetriedWithin1s those it sent within
	// a second of the 410.
	Retries, RetriedWithin1s int
}

// watchListExpiriesOf finds them in the informers' request log (any
// order).
func watchListExpiriesOf(reqs []Request) watchListExpiries {
	var e watchListExpiries
	byInformer := map[int][]Request{}
	for _, r := range reqs {
		byInformer[r.Informer] = append(byInformer[r.Informer], r)
	}
	for _, rs := range byInformer {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Seq < rs[j].Seq })
		for i, r := range rs {
			if r.Verb != VerbWatchList || r.Outcome != OutcomeExpired || r.Objects == 0 {
				continue
			}
			if r.InitialEventsEnd == 0 {
				e.Before++
				e.Objects += r.Objects
				e.Bytes += r.ResponseBytes
				e.Durations = append(e.Durations, r.Duration)
			} else {
				e.After++
			}
			if i+1 < len(rs) {
				e.Retries++
				if rs[i+1].Start-(r.Start+r.Duration) < time.Second {
					e.RetriedWithin1s++
				}
			}
		}
	}
	sort.Slice(e.Durations, func(i, j int) bool { return e.Durations[i] < e.Durations[j] })
	return e
}

// warning says what the expiries cost and why, for a run whose
// kube-apiserver had the watch cache off and compacted every interval;
// "" when no WATCHLIST expired after sending initial events.
func (e watchListExpiries) warning(interval time.Duration) string {
	if e.Before+e.After == 0 {
		return ""
	}
	took := ""
	if n := len(e.Durations); n > 0 {
		took = fmt.Sprintf(", %s from request to 410 (p50; max %s)", e.Durations[n/2].Round(100*time.Millisecond), e.Durations[n-1].Round(100*time.Millisecond))
	}
	every := "with no compaction interval set"
	if interval > 0 {
		every = fmt.Sprintf("against a compaction every %s", interval.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("warning: %d WATCHLIST requests ended 410 Expired after kube-apiserver had begun sending their initial events "+
		"(%d before the initial-events-end bookmark, with %d objects, %.1f MiB, sent and thrown away%s, %s): "+
		"with the watch cache off kube-apiserver streams the state from etcd at one revision at the informer's pace and opens its etcd watch after it "+
		"(k8s.io/apiserver pkg/storage/etcd3/watcher.go sync, startWatching), so a compaction past that revision ends the request; "+
		"client-go retries such a WATCHLIST at once, without backoff (k8s.io/client-go tools/cache/reflector.go watchList), "+
		"here %d of %d retries within 1 s: while streaming the state takes longer than the compaction keeps, the informers list again and again",
		e.Before+e.After, e.Before, e.Objects, float64(e.Bytes)/(1<<20), took, every, e.RetriedWithin1s, e.Retries)
}
