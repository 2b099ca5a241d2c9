package kubeload

import (
	"fmt"
	"sort"
	"strings"
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
	// Retries counts the Before requests the informer followed with
	// another request; RetriedWithin1s those it sent within a second of
	// the 410. (After one, the reflector's watch ended: it lists again
	// after its backoff, k8s.io/client-go tools/cache/reflector.go
	// ListAndWatchWithContext under wait.BackoffUntil.)
	Retries, RetriedWithin1s int
	// PrevKVNil counts the watches (WATCH or WATCHLIST) kube-apiserver
	// ended with "etcd event received with PrevKv=nil"
	// (k8s.io/apiserver pkg/storage/etcd3/event.go parseEvent): etcd
	// reads an event's previous version when it sends the event and
	// leaves it out when a compaction removed it meanwhile
	// (go.etcd.io/etcd/server/v3 etcdserver/api/v3rpc/watch.go sendLoop),
	// as it does for a watch that fell behind.
	PrevKVNil int
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
			if strings.Contains(r.Err, "PrevKv=nil") {
				e.PrevKVNil++
			}
			if r.Verb != VerbWatchList || r.Outcome != OutcomeExpired || r.Objects == 0 {
				continue
			}
			if r.InitialEventsEnd != 0 {
				e.After++
				continue
			}
			e.Before++
			e.Objects += r.Objects
			e.Bytes += r.ResponseBytes
			e.Durations = append(e.Durations, r.Duration)
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

// warnings say what the expiries cost and why, for a run whose
// kube-apiserver had the watch cache off and compacted every interval
// (0: not set): one for the WATCHLIST requests that expired after
// sending initial events, one for the watches that met PrevKv=nil; none
// when neither happened.
func (e watchListExpiries) warnings(interval time.Duration) []string {
	every := "no compaction interval set"
	if interval > 0 {
		every = fmt.Sprintf("compaction every %s", interval.Round(100*time.Millisecond))
	}
	var parts []string
	if e.After > 0 {
		parts = append(parts, fmt.Sprintf("%d after their initial-events-end bookmark: kube-apiserver opens its etcd watch at the streamed state's revision + 1 "+
			"only once it has queued every initial event (startWatching), and a compaction had passed that revision by then; the reflector lists again after its backoff", e.After))
	}
	if n := len(e.Durations); n > 0 {
		parts = append(parts, fmt.Sprintf("%d before it, %d objects (%.1f MiB) sent and thrown away, %s from request to 410 (p50; max %s): "+
			"the state is streamed from etcd at one revision at the informer's pace (sync: a RangeStream with the EtcdRangeStream gate, its chunks read as they are asked for) "+
			"and a compaction passed that revision mid-stream; client-go retries such a WATCHLIST at once, without backoff (k8s.io/client-go tools/cache/reflector.go watchList), "+
			"here %d of %d within 1 s, so while streaming the state takes longer than the compaction keeps the informers stream it again and again",
			e.Before, e.Objects, float64(e.Bytes)/(1<<20), e.Durations[n/2].Round(100*time.Millisecond), e.Durations[n-1].Round(100*time.Millisecond), e.RetriedWithin1s, e.Retries))
	}
	var out []string
	if len(parts) > 0 {
		out = append(out, fmt.Sprintf("%d WATCHLIST requests ended 410 Expired after kube-apiserver had begun sending their initial events "+
			"(watch cache off, %s; k8s.io/apiserver pkg/storage/etcd3/watcher.go): %s", e.Before+e.After, every, strings.Join(parts, "; ")))
	}
	if e.PrevKVNil > 0 {
		out = append(out, fmt.Sprintf("%d watches ended with kube-apiserver's \"etcd event received with PrevKv=nil\" (k8s.io/apiserver pkg/storage/etcd3/event.go parseEvent, watch cache off, %s): "+
			"etcd reads an event's previous version as it sends the event and leaves it out once a compaction removed it, as for a watch that fell that far behind "+
			"(go.etcd.io/etcd/server/v3 etcdserver/api/v3rpc/watch.go sendLoop); the reflector lists again after its backoff", e.PrevKVNil, every))
	}
	return out
}
