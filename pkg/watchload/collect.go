package watchload

import (
	"context"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/report"
)

// collectTimings fills the writes' latency and, with d, the delivery the
// Env timed: the latencies of the watchers not held back, and d.HeldBack
// when a watcher was held back (timing). It returns the one-second
// intervals.
func collectTimings(env *Env, writes *report.WriteStats, d *report.DeliveryStats) []report.Interval {
	tm := env.timing
	tm.mu.Lock()
	keep := tm.keepHDR
	writes.Latency = tm.writes.summaryKept(keep)
	if d != nil {
		d.FromResponse, d.FromSend = tm.fromResponse.summaryKept(keep), tm.fromSend.summaryKept(keep)
		d.DeliveredBeforeResponse = tm.beforeResponse
		d.TimedEvents, d.UntimedEvents = tm.timed, tm.untimed
		d.HeldBack = nil
		if h := tm.held; h != nil {
			d.HeldBack = &report.HeldBackDelivery{Watchers: h.watchers, Events: h.events, TimedEvents: h.timed,
				FromResponse: h.fromResponse.summaryKept(keep), FromSend: h.fromSend.summaryKept(keep)}
		}
	}
	tm.mu.Unlock()
	return tm.series()
}

// scenario is the run's scenario as the result reports it.
func scenario(o Options) report.Scenario {
	return report.Scenario{
		Profile: string(o.Profile), Prefix: o.Prefix, Objects: o.Objects, ConfigMaps: o.ConfigMaps, Events: o.Events,
		Namespaces: o.Namespaces, Watchers: o.Watchers, WatchResources: o.WatchResources,
		Connections: o.Connections, Streams: o.Streams, WriterConnections: o.WriterConnections,
		WriteRatePerSecond: o.WriteRate, DurationMs: report.Ms(o.Duration), PageSize: o.PageSize, WatchList: o.WatchList, RangeStream: o.RangeStream,
		ResourceMix: report.ResourceMix{PodsPercent: o.ResourceMix.PodsPercent, ConfigMapsPercent: o.ResourceMix.ConfigMapsPercent,
			EventsPercent: o.ResourceMix.EventsPercent},
		CompactionIntervalMs: report.Ms(o.CompactionInterval), CreatePercent: o.Mix.CreatePercent,
		UpdatePercent: o.Mix.UpdatePercent, DeletePercent: o.Mix.DeletePercent,
		WriterConcurrency: o.WriterConcurrency, HeldBackWatchers: o.HoldBack, Seed: o.Seed,
		Defragment: o.Defragment, PhysicalCompaction: o.PhysicalCompaction,
		ProgressRequestPeriod: report.Ms(o.ProgressRequestPeriod), EventTTLMs: report.Ms(o.EventTTL),
		ConsistentListRatePerSecond: consistentRate(o), StartConcurrency: max(o.StartConcurrency, 0),
		ReusePrefix: o.ReusePrefix, PinConnections: o.PinConnections, CompactRevKey: CompactRevKeyName(o),
		Faults: plannedFaults(o.Faults),
	}
}

func plannedFaults(faults []Fault) []report.PlannedFault {
	var out []report.PlannedFault
	for _, f := range faults {
		out = append(out, report.PlannedFault{Kind: string(f.Kind), AtMs: report.Ms(f.At), DurationMs: report.Ms(f.Duration)})
	}
	return out
}

func consistentRate(o Options) float64 {
	if o.Profile != ProfileAPIServerCache {
		return 0
	}
	return max(o.ConsistentListRate, 0)
}

// collect fills the result from the Session's Env and its reflectors,
// which have stopped: delivery and write latencies, lists, and the
// validation, including each cache against etcd's state at the
// reflector's last revision, read on the maintenance connection.
func (s *Session) collect(ctx context.Context, res *report.RunResult, o Options, unsynced int) error {
	env, admin, refls := s.env, s.admin, s.refls
	tm := env.timing
	res.Intervals = collectTimings(env, &res.Writes, &res.Delivery)

	initial := newHistogram()
	var unverified, missing int64
	for _, r := range refls {
		st := r.Stats()
		ro := r.Options()
		res.Delivery.Events += st.Events
		unverified += st.Unverified
		missing += st.PrevKVMissing
		res.Informers = append(res.Informers, informerStats(r, st, false))
		for i, l := range r.Lists() {
			if i == 0 {
				res.InitialLists.Count++
				res.InitialLists.Objects += l.Objects
				res.InitialLists.Bytes += l.Bytes
				res.InitialLists.Pages += int64(l.Pages)
				initial.record(l.Duration)
				continue
			}
			res.Relists = append(res.Relists, relistReport(ro, l))
		}
	}
	// The watch caches: validated like the watchers, their relists are
	// etcd's; their events and lists count apart from the watchers'.
	if s.caches != nil {
		for _, r := range s.caches.Reflectors {
			st := r.Stats()
			unverified += st.Unverified
			missing += st.PrevKVMissing
			res.Informers = append(res.Informers, informerStats(r, st, true))
			for _, l := range r.Lists()[min(1, len(r.Lists())):] {
				rl := relistReport(r.Options(), l)
				rl.Cache = true
				res.Relists = append(res.Relists, rl)
			}
		}
	}
	res.InitialLists.Latency = initial.summaryKept(tm.keepHDR)
	res.Delivery.EventsPerSecond = tm.eventsPerSecond(res.Delivery.Events)
	if res.Relists == nil {
		res.Relists = []report.Relist{}
	}
	if res.Compactions == nil {
		res.Compactions = []report.Compaction{}
	}

	// Final state per resource, and each cache against etcd at the
	// reflector's last revision.
	for _, resource := range Resources {
		resp, err := admin.Get(ctx, ResourcePrefix(o.Prefix, resource), clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(res.Final.Revision))
		if err != nil {
			return fmt.Errorf("count %s at revision %d: %w", resource, res.Final.Revision, err)
		}
		res.Final.Resources = append(res.Final.Resources, report.ResourceCount{Resource: resource, Objects: resp.Count})
		res.Final.Objects += resp.Count
	}
	if err := s.watchers.CompareCaches(ctx, admin, s.rec, env.Violations, s.logf); err != nil {
		return err
	}
	if s.caches != nil {
		if err := s.caches.CompareCaches(ctx, admin, s.rec, env.Violations, s.logf); err != nil {
			return err
		}
	}

	unrecordedWrites(env)
	res.Validation = validationReport(env, unsynced, unverified, missing)
	return nil
}

// unrecordedWrites reports every write still in the join's ring (the
// writes of the run, unless revisions outran the ring) whose revision is
// covered by the history but absent from it: etcd acknowledged it and the
// recorder never saw it. This also checks the recorder when it could watch
// only the prefix, where revision gaps cannot be told from other clients'
// writes.
func unrecordedWrites(env *Env) {
	rec := env.Recorder
	if rec == nil {
		return
	}
	mark := rec.Watermark()
	ring := env.timing.ring
	var missed []int64
	for i := range ring.slots {
		rev := ring.slots[i].rev.Load()
		if rev == 0 || rev > mark {
			continue
		}
		if !rec.hasRevision(rev) {
			missed = append(missed, rev)
		}
	}
	sort.Slice(missed, func(i, j int) bool { return missed[i] < missed[j] })
	for _, rev := range missed {
		env.Violations.Add(Violation{Watcher: -1, Kind: ViolationUnrecorded, Revision: rev,
			Detail: "etcd acknowledged a write at this revision; the recorder never saw it"})
	}
}

// informerStats reports a stopped reflector: an informer, or (cache) a
// watch cache's.
func informerStats(r *Reflector, st ReflectorStats, cache bool) report.InformerStats {
	ro := r.Options()
	return report.InformerStats{
		ID: ro.ID, Resource: ro.Resource, Stream: ro.Stream.ID, Connection: ro.Stream.Conn, Events: st.Events,
		Lists: st.Lists, Sessions: st.Sessions, ProgressNotifies: st.ProgressNotifies, LastRevision: r.LastRevision(),
		CacheObjects: st.CacheObjects, HeldBack: st.HeldBack, Cache: cache,
	}
}

func relistReport(ro ReflectorOptions, l ListRecord) report.Relist {
	rl := report.Relist{
		Informer: ro.ID, Resource: ro.Resource, Reason: l.Reason, Verb: "list", FromRevision: l.FailedWatchFrom, CompactRevision: l.CompactRevision,
		ListRevision: l.Revision, AtMs: report.Ms(l.At), DurationMs: report.Ms(l.Duration), BackoffMs: report.Ms(l.Backoff),
		Objects: l.Objects, Bytes: l.Bytes, Pages: l.Pages,
	}
	for _, a := range l.Attempts {
		ra := report.ListAttempt{ResourceVersion: a.ResourceVersion, Limit: a.Limit, ReadRevision: a.ReadRevision, Revision: a.Revision,
			Pages: a.Pages, Objects: a.Objects, FullListFallback: a.FullListFallback, Streamed: a.Streamed, WatchList: a.WatchList,
			DurationMs: report.Ms(a.Duration)}
		if a.WatchList {
			rl.Verb = "watchlist"
		}
		if a.Err != nil {
			ra.Error = listErrorName(a.Err)
			rl.FailedRequests++
			if isExpired(a.Err) {
				rl.Expired++
			}
		}
		rl.Attempts = append(rl.Attempts, ra)
	}
	if len(l.Attempts) > 0 {
		rl.ResourceVersion = l.Attempts[0].ResourceVersion
	}
	return rl
}

// listErrorName names a list error as kube-apiserver would answer it.
func listErrorName(err error) string {
	switch {
	case isExpired(err):
		return "410 expired (compacted)"
	case isTooLarge(err):
		return "too large resource version"
	}
	return err.Error()
}

// validationReport adds a ViolationRecorderGap for each revision the
// recorder skipped to the Env's violations, then counts them
// (ValidationOf).
func validationReport(env *Env, unsynced int, unverified, prevKVMissing int64) report.Validation {
	for _, g := range env.Recorder.Gaps() {
		for rev := g.From; rev <= g.To; rev++ {
			env.Violations.Add(Violation{Watcher: -1, Kind: ViolationRecorderGap, Revision: rev, Detail: "the recorder's whole-keyspace watch skipped this revision"})
		}
	}
	return ValidationOf(env, unsynced, unverified, prevKVMissing)
}

// ValidationOf counts the violations found in env by kind, with the first
// of them as samples (by revision), and the recorder's state: RecorderGaps
// is the number of revisions the recorder skipped (Recorder.Gaps),
// HistoryEvents the events it recorded. unsynced (watchers that did not
// confirm the final revision), unverified (events the history never
// covered) and prevKVMissing are the caller's counts, reported as they
// are. It adds nothing to env; env must have a Recorder.
func ValidationOf(env *Env, unsynced int, unverified, prevKVMissing int64) report.Validation {
	rec := env.Recorder
	var gaps int64
	for _, g := range rec.Gaps() {
		gaps += g.To - g.From + 1
	}
	vs := env.Violations
	v := report.Validation{
		Lost: vs.Count(ViolationReliable), Duplicated: vs.Count(ViolationUnique), OutOfOrder: vs.Count(ViolationOrdered),
		Atomic: vs.Count(ViolationAtomic), Resumable: vs.Count(ViolationResumable), Bookmarkable: vs.Count(ViolationBookmarkable),
		Unexpected: vs.Count(ViolationUnexpected), PrevKVMismatches: vs.Count(ViolationPrevKV), PrevKVMissing: prevKVMissing,
		CacheMismatches: vs.Count(ViolationCache), RecorderGaps: gaps,
		UnsyncedWatchers: unsynced, UnverifiedEvents: unverified, HistoryEvents: rec.Events(),
		UnrecordedWrites: vs.Count(ViolationUnrecorded), UnparsedResourceVersions: vs.Count(ViolationUnparsedResourceVersion),
		RecorderScope: "keyspace",
	}
	if s := rec.Scope(); s != "" {
		v.RecorderScope = s
	}
	if err := rec.Err(); err != nil {
		v.RecorderError = err.Error()
	}
	for _, x := range vs.Samples() {
		v.Violations = append(v.Violations, report.Violation{Watcher: x.Watcher, Kind: string(x.Kind), Revision: x.Revision, Key: x.Key, Detail: x.Detail})
	}
	return v
}
