package kubeload

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// ProfileClientGo is the scenario profile of a load through
// kube-apiserver: the watchers are client-go's informers, not a model.
const ProfileClientGo = "client-go"

// scenario is the load's scenario as the result reports it: the
// etcd-direct model's fields that do not apply are zero, and the
// compaction interval is kube-apiserver's.
func scenario(lo watchload.Options, api report.APIServerTarget) report.Scenario {
	sc := watchload.ScenarioOf(lo)
	sc.Profile = ProfileClientGo
	sc.Connections, sc.Streams, sc.WriterConnections, sc.PageSize = 0, 0, 0, 0
	sc.CompactionIntervalMs = api.EtcdCompactionIntervalMs
	sc.PhysicalCompaction, sc.Defragment = false, false
	sc.ConsistentListRatePerSecond, sc.ProgressRequestPeriod = 0, 0
	sc.WatchList = nil   // the real informers' gate is apiServer.clientWatchList
	sc.RangeStream = nil // kube-apiserver's gates are apiServer.featureGates
	return sc
}

// serverVersion asks kube-apiserver's /version.
func serverVersion(cfg *rest.Config) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("kube-apiserver /version: %w", err)
	}
	return v.GitVersion, nil
}

// rvKind names the kind of resourceVersion a request asked for: "" (the
// latest, a quorum read), "0" (any, the watch cache's) or "exact".
func rvKind(rv string) string {
	if rv == "" || rv == "0" {
		return rv
	}
	return "exact"
}

// summarize fills the result's informers, request counts and relists
// from the informers' request log.
func summarize(res *report.RunResult, set *InformerSet, epoch time.Time) {
	reqs := set.Requests()
	heldBack := map[int]bool{}
	for _, h := range res.Holds {
		heldBack[h.Informer] = true
	}
	stats := make([]report.InformerStats, len(set.Informers))
	for i, in := range set.Informers {
		stats[i] = report.InformerStats{ID: in.ID, Resource: in.Resource, CacheObjects: len(in.inf.GetStore().ListKeys()),
			LastRevision: set.LastRevision(i), HeldBack: heldBack[in.ID], Lists: 1}
	}
	type countKey struct{ verb, outcome, rv string }
	counts := map[countKey]*report.RequestCount{}
	byInformer := map[int][]Request{}
	for _, r := range reqs {
		s := &stats[set.position(r.Informer)]
		s.Requests++
		s.Events += r.Events
		s.Bookmarks += r.Bookmarks
		s.ResponseBytes += r.ResponseBytes
		k := countKey{string(r.Verb), string(r.Outcome), rvKind(r.ResourceVersion)}
		c := counts[k]
		if c == nil {
			c = &report.RequestCount{Verb: k.verb, Outcome: k.outcome, ResourceVersion: k.rv}
			counts[k] = c
		}
		c.Count++
		c.Objects += r.Objects
		c.Bytes += r.ResponseBytes
		byInformer[r.Informer] = append(byInformer[r.Informer], r)
		res.Delivery.Events += r.Events
	}
	for _, c := range counts {
		res.Requests = append(res.Requests, *c)
	}
	sort.Slice(res.Requests, func(i, j int) bool {
		a, b := res.Requests[i], res.Requests[j]
		if a.Verb != b.Verb {
			return a.Verb < b.Verb
		}
		if a.Outcome != b.Outcome {
			return a.Outcome < b.Outcome
		}
		return a.ResourceVersion < b.ResourceVersion
	})
	for id, rs := range byInformer {
		j := set.position(id)
		relists := relistsOf(id, set.Informers[j].Resource, rs)
		stats[j].Lists += len(relists)
		res.Relists = append(res.Relists, relists...)
	}
	sort.Slice(res.Relists, func(i, j int) bool {
		if res.Relists[i].AtMs != res.Relists[j].AtMs {
			return res.Relists[i].AtMs < res.Relists[j].AtMs
		}
		return res.Relists[i].Informer < res.Relists[j].Informer
	})
	res.Informers = stats
}

// relistsOf returns the LIST phases of one informer's requests (in the
// order sent) after its first: a LIST without a continue token and the
// pages that continue it, or a WATCHLIST, with the LIST and WATCHLIST
// attempts that failed before it since the previous phase (a LIST at a
// compacted resourceVersion answered 410, then one at the latest, is one
// phase of two requests). Each one's cause is the outcome of the last
// request before it that failed; it runs from its first attempt to its
// last page (or the end of a WATCHLIST's initial events); its backoff runs
// from the end of the first request that failed since the previous phase
// to its first attempt.
func relistsOf(informer int, resource string, rs []Request) []report.Relist {
	var out []report.Relist
	phases := 0
	cause := ""
	failed, expired := 0, 0
	const none = time.Duration(-1)
	causeEnd, firstAttempt := none, none // since the previous phase
	var cur *report.Relist
	flush := func() {
		if cur != nil {
			if phases > 1 {
				out = append(out, *cur)
			}
			cur = nil
		}
	}
	fail := func(r Request) {
		cause = string(r.Outcome)
		if causeEnd == none {
			causeEnd = r.Start + r.Duration
		}
	}
	for _, r := range rs {
		switch {
		case r.Verb == VerbList && r.Continue && cur != nil:
			cur.Pages++
			cur.Objects += r.Objects
			cur.Bytes += r.ResponseBytes
			cur.DurationMs = report.Ms(r.Start+r.Duration) - cur.AtMs
		case r.Verb == VerbList || r.Verb == VerbWatchList:
			if firstAttempt == none {
				firstAttempt = r.Start
			}
			if (r.Verb == VerbList && r.Outcome != OutcomeOK) || (r.Verb == VerbWatchList && r.InitialEventsEnd == 0) {
				// A failed attempt (a WATCHLIST that ended before its
				// initial events did) is no phase; its outcome is the
				// next one's cause.
				if r.Outcome != OutcomeStopped && r.Outcome != OutcomeClosed {
					fail(r)
					failed++
					if r.Outcome == OutcomeExpired {
						expired++
					}
				} else {
					firstAttempt = none
				}
				continue
			}
			flush()
			phases++
			end, bytes := r.Start+r.Duration, r.ResponseBytes
			if r.Verb == VerbWatchList {
				end, bytes = r.InitialEventsEnd, r.InitialEventsBytes
			}
			reason := cause
			if reason == "" {
				reason = report.ReasonNone
			}
			cur = &report.Relist{Informer: informer, Resource: resource, AtMs: report.Ms(firstAttempt), Reason: reason, Verb: string(r.Verb),
				ResourceVersion: r.ResourceVersion, Pages: 1, Objects: r.Objects, Bytes: bytes,
				DurationMs: report.Ms(end - firstAttempt), FailedRequests: failed, Expired: expired}
			if causeEnd != none && causeEnd <= firstAttempt {
				cur.BackoffMs = report.Ms(firstAttempt - causeEnd)
			}
			cause, failed, expired, causeEnd, firstAttempt = "", 0, 0, none, none
		default:
			flush()
			switch r.Outcome {
			case OutcomeExpired, OutcomeTooLargeRV, OutcomeThrottled, OutcomeError:
				fail(r)
			}
		}
	}
	flush()
	return out
}
