package report

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/kubestore/etcdkit/pkg/shard"
)

// LatencyScopeOwnWrites is Clocks.LatencyScope of a merged result: where
// its latencies were timed.
const LatencyScopeOwnWrites = "each worker times the events its own writers wrote (one clock); " +
	"events of other workers' writes are counted, not timed"

// Clocks says whose clocks a merged result's figures were taken on.
type Clocks struct {
	// LatencyScope says which events the latencies cover and on whose
	// clock (LatencyScopeOwnWrites): every latency is one worker's, from
	// its own writer's send or response to its own informer's receipt,
	// so none crosses workers and no clock skew is in any; the events of
	// other workers' writes are in DeliveryStats.UntimedEvents.
	LatencyScope string `json:"latencyScope"`
	// CrossWorkerLatencies names the latencies timed across two workers'
	// clocks, which carry their skew: none (an empty list), as
	// LatencyScope says.
	CrossWorkerLatencies []string `json:"crossWorkerLatencies"`
	// IntervalAlignment is how the workers' one-second intervals were
	// lined up: "wall" (each worker's writes began at StartedAt plus
	// WriteStats.StartMs on its own clock; its intervals are shifted by
	// that start's offset from the earliest, to the nearest second) or
	// "index" (a worker did not record its writes' start: interval k of
	// every worker is taken to be the same second, as the workers' start
	// barrier intends).
	IntervalAlignment string `json:"intervalAlignment"`
	// WriteStartSpreadMs is, with wall alignment, the latest worker's
	// start of the writes minus the earliest's, ms, each on its own
	// clock: what the start barrier left plus the clocks' offsets (a
	// bound on neither alone). 0 with index alignment.
	WriteStartSpreadMs float64 `json:"writeStartSpreadMs"`
}

// WorkerWrites are one worker's writes.
type WorkerWrites struct {
	Planned   int64 `json:"planned"`   // writes the worker scheduled
	Completed int64 `json:"completed"` // of which succeeded
	Errors    int64 `json:"errors"`    // failed, timeouts included
}

// WorkerSummary is one worker of a merged result, as its own result said.
type WorkerSummary struct {
	Shard     shard.Shard  `json:"shard"`     // the worker's part of the load
	StartedAt time.Time    `json:"startedAt"` // when its run began, UTC, on its clock
	Verdict   string       `json:"verdict"`   // its own verdict (RunVerdict)
	Writes    WorkerWrites `json:"writes"`    // its writers' counts
	// Events are the watch events its informers received, of every
	// worker's writes; TimedEvents those of its own writes, which it
	// timed (Clocks.LatencyScope).
	Events      int64 `json:"events"`
	TimedEvents int64 `json:"timedEvents"`
	Relists     int   `json:"relists"` // its informers' relists
	// Validation is its own informers' check against etcd's history.
	Validation Validation `json:"validation"`
	Self       SelfStats  `json:"self"` // its process's resource use
	// GeneratorLimited is true when its figures were limited by the load
	// generator (GeneratorLimited of Self); GeneratorLimitedWhy says by
	// what.
	GeneratorLimited    bool   `json:"generatorLimited"`
	GeneratorLimitedWhy string `json:"generatorLimitedWhy,omitempty"`
	// ClusterModel is its part of a cluster's model (its Cluster.Model:
	// its nodes and namespaces and what it sent of them); nil for other
	// loads.
	ClusterModel *ClusterModel `json:"clusterModel,omitempty"`
}

// ErrNotOneLoad is returned (wrapped, naming the shard and what differs)
// by MergeRuns for results that are not the workers of one divided load:
// a result without a shard, another count of shards, a shard missing or
// twice, another scenario or target, or a role one worker alone holds
// (compactions, defragmentation, faults, the server-side figures) found
// in two.
var ErrNotOneLoad = errors.New("not the workers of one load")

// MergeRuns merges the results of the workers of one divided load (each
// with its Shard, every index of the same count exactly once, the same
// Scenario and target endpoints) into the result of the whole load, with
// Workers and Clocks set and Shard nil. Figures are combined as each
// field's meaning asks:
//
//   - counts are summed (writes, events, lists, consistent reads,
//     requests, cleanup, every validation counter but HistoryEvents);
//   - latencies are merged bucket by bucket (MergeLatencies): exact, and
//     an error wrapping ErrNoHDR for a latency with samples but no
//     histogram, never an average of percentiles (a latency only one
//     worker has samples of is kept as it is);
//   - rates are recomputed: ThroughputPerSecond is the completed writes
//     over the span from the earliest worker's first scheduled write to
//     the latest worker's last end, EventsPerSecond the events over the
//     span to the latest last event (each worker's reconstructed from its
//     own Events over EventsPerSecond);
//   - etcd's own figures, which every worker read of the one etcd, are
//     not summed: Final is that of the worker that read the highest
//     revision (its object counts were taken at it), its CompactRevision
//     the highest any saw; DBSize each size's largest (the compacting
//     worker alone measures the sizes around compaction and defrag, each
//     worker the end size at its own end); HistoryEvents the largest
//     (each worker recorded the one history);
//   - what one worker alone does (shard 0: compactions, defragmentation,
//     faults, the counting proxy's and the apiservers' figures) is taken
//     from the worker that has it; two that have it are ErrNotOneLoad;
//     but the model of a cluster's workers (each with Cluster.Model) each
//     count their own requests behind a counting proxy of their own, and
//     their Etcd rows are summed by phase, method, kind and resource,
//     their EtcdPhases spanning the earliest start to the latest end;
//   - Relists, Holds and violations are concatenated, Informers sorted
//     by ID; offsets from the epoch (…AtMs) are moved to the merged
//     epoch, the earliest StartedAt;
//   - Intervals are aligned on wall time (Clocks.IntervalAlignment) and
//     their counts summed; their latency quantiles (WriteP50Ms...,
//     DeliveryP50Ms..., HeldBackDeliveryP99Ms) are left 0, since
//     intervals keep no histogram and quantiles of parts do not give the
//     whole's;
//   - Self sums the additive figures (CPU, memory peaks: an upper bound
//     of the load's simultaneous peak, garbage collections) and keeps the
//     worst of the rest (the busiest machine's load average with its
//     NumCPU, the highest scheduling delay), so BusyWarnings and the
//     verdict see any worker's busy machine; each worker's own is in
//     Workers;
//   - Target and APIServer are shard 0's (the workers drove one etcd);
//     Cluster is the plan every worker planned alike, with each worker's
//     part summed (mergeCluster: pods Running, the model's counts, its
//     node and namespace blocks, which must tile the whole);
//   - Warnings are the workers' prefixed "worker i: ", then one per worker
//     limited by the generator (GeneratorLimited), and Verdict is
//     RunVerdict of the merged result.
//
// The results are not modified. Errors name the shard (or, before shards
// are known, the result's position from 1) and wrap ErrNotOneLoad or
// ErrNoHDR.
func MergeRuns(results []*RunResult) (*RunResult, error) {
	ws, err := byShard(results)
	if err != nil {
		return nil, err
	}
	first := ws[0]
	m := &RunResult{Kind: KindRun, SchemaVersion: RunSchemaVersion, StartedAt: first.StartedAt,
		Target: first.Target, APIServer: first.APIServer, Scenario: first.Scenario}
	if m.Cluster, err = mergeCluster(ws); err != nil {
		return nil, err
	}
	for _, r := range ws[1:] {
		if r.StartedAt.Before(m.StartedAt) {
			m.StartedAt = r.StartedAt
		}
	}
	// offset[i] moves worker i's offsets from its epoch to the merged one.
	offset := make([]float64, len(ws))
	for i, r := range ws {
		offset[i] = Ms(r.StartedAt.Sub(m.StartedAt))
		m.Interrupted = m.Interrupted || r.Interrupted
	}
	clocks, writeStart := alignment(ws, offset)
	m.Clocks = clocks
	if err := mergeWrites(m, ws, writeStart); err != nil {
		return nil, err
	}
	if err := mergeDelivery(m, ws, writeStart); err != nil {
		return nil, err
	}
	if err := mergeLists(m, ws, offset); err != nil {
		return nil, err
	}
	if err := mergeOneShard(m, ws, offset); err != nil {
		return nil, err
	}
	if perWorkerEtcd(ws) {
		m.Etcd, m.EtcdPhases = mergeEtcdRequests(ws), mergeEtcdPhases(ws)
	}
	if m.Members, err = mergeMembers(ws); err != nil {
		return nil, err
	}
	mergeEtcdState(m, ws)
	m.Validation = mergeValidation(ws)
	m.Intervals = mergeIntervals(ws, writeStart)
	m.Self = mergeSelf(ws)
	m.Cleanup = mergeCleanup(ws)
	m.Requests = mergeRequests(ws)
	for _, r := range ws {
		for _, w := range r.Warnings {
			m.Warnings = append(m.Warnings, fmt.Sprintf("worker %d: %s", r.Shard.Index, w))
		}
	}
	if clocks.IntervalAlignment == "index" {
		m.Warnings = append(m.Warnings, "the intervals were aligned by their index, not on wall time: not every worker recorded when its writes began (writes.startMs)")
	}
	for _, r := range ws {
		limited, why := GeneratorLimited(r.Self)
		var part *ClusterModel
		if r.Cluster != nil {
			part = r.Cluster.Model
		}
		m.Workers = append(m.Workers, WorkerSummary{ClusterModel: part,
			Shard: *r.Shard, StartedAt: r.StartedAt, Verdict: r.Verdict,
			Writes: WorkerWrites{Planned: r.Writes.Planned, Completed: r.Writes.Completed, Errors: r.Writes.Errors},
			Events: r.Delivery.Events, TimedEvents: r.Delivery.TimedEvents, Relists: len(r.Relists),
			Validation: r.Validation, Self: r.Self, GeneratorLimited: limited, GeneratorLimitedWhy: why,
		})
		if limited {
			m.Warnings = append(m.Warnings, fmt.Sprintf("figures of worker %d were limited by the generator: %s", r.Shard.Index, why))
		}
	}
	m.Verdict = RunVerdict(m)
	return m, nil
}

// byShard checks that results are the workers of one load and returns
// them by shard index.
func byShard(results []*RunResult) ([]*RunResult, error) {
	if len(results) == 0 {
		return nil, fmt.Errorf("no results to merge: %w", ErrNotOneLoad)
	}
	var ws []*RunResult
	for i, r := range results {
		switch {
		case r == nil:
			return nil, fmt.Errorf("result %d is nil", i+1)
		case r.Shard == nil:
			return nil, fmt.Errorf("result %d is not a worker's (it has no shard): %w", i+1, ErrNotOneLoad)
		}
		if err := r.Shard.Validate(); err != nil {
			return nil, fmt.Errorf("result %d: %v: %w", i+1, err, ErrNotOneLoad)
		}
		if ws == nil {
			ws = make([]*RunResult, r.Shard.Count)
		}
		sh := *r.Shard
		switch {
		case sh.Count != len(ws):
			return nil, fmt.Errorf("result %d is shard %s, the first %d/%d: a load of another number of shards: %w",
				i+1, sh, results[0].Shard.Index, len(ws), ErrNotOneLoad)
		case ws[sh.Index] != nil:
			return nil, fmt.Errorf("shard %d appears twice: %w", sh.Index, ErrNotOneLoad)
		}
		ws[sh.Index] = r
	}
	var missing []string
	for i, r := range ws {
		if r == nil {
			missing = append(missing, fmt.Sprint(i))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("shard %s of %d missing: %w", strings.Join(missing, ", "), len(ws), ErrNotOneLoad)
	}
	for _, r := range ws[1:] {
		if f := firstDifference(ws[0].Scenario, r.Scenario); f != "" {
			return nil, fmt.Errorf("shard %d ran another scenario than shard 0 (scenario.%s differs): %w", r.Shard.Index, f, ErrNotOneLoad)
		}
		a, b := slices.Sorted(slices.Values(ws[0].Target.Endpoints)), slices.Sorted(slices.Values(r.Target.Endpoints))
		if !slices.Equal(a, b) {
			return nil, fmt.Errorf("shard %d drove %v, shard 0 %v: %w", r.Shard.Index, b, a, ErrNotOneLoad)
		}
	}
	return ws, nil
}

// firstDifference returns the JSON name of the first field of a and b,
// structs of one type, that differs, "" when none does.
func firstDifference(a, b any) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			name, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return ""
}

// alignment returns how the workers' series line up and each worker's
// start of the writes, ms from the merged epoch: StartedAt plus
// WriteStats.StartMs when every worker recorded it (wall alignment), 0
// for all otherwise (index alignment).
func alignment(ws []*RunResult, offset []float64) (*Clocks, []float64) {
	c := &Clocks{LatencyScope: LatencyScopeOwnWrites, CrossWorkerLatencies: []string{}, IntervalAlignment: "wall"}
	start := make([]float64, len(ws))
	for i, r := range ws {
		if r.Writes.StartMs <= 0 {
			c.IntervalAlignment = "index"
			return c, make([]float64, len(ws))
		}
		start[i] = offset[i] + r.Writes.StartMs
	}
	c.WriteStartSpreadMs = slices.Max(start) - slices.Min(start)
	return c, start
}

// mergeLatencies is MergeLatencies naming what was merged in its error,
// except that a latency alone in having samples is returned as it is,
// with or without its HDR: nothing is merged, so it is exact (shard 0's
// roles, such as the consistent reads, are one worker's).
func mergeLatencies(what string, ls []Latency) (Latency, error) {
	var only []Latency
	for _, l := range ls {
		if l.Count > 0 {
			only = append(only, l)
		}
	}
	if len(only) == 1 {
		return only[0], nil
	}
	l, err := MergeLatencies(ls...)
	if err != nil {
		return Latency{}, fmt.Errorf("merge %s: %w", what, err)
	}
	return l, nil
}

// latencies returns f of each worker.
func latencies(ws []*RunResult, f func(*RunResult) Latency) []Latency {
	ls := make([]Latency, len(ws))
	for i, r := range ws {
		ls[i] = f(r)
	}
	return ls
}

func mergeWrites(m *RunResult, ws []*RunResult, start []float64) error {
	w := &m.Writes
	seen := map[string]bool{}
	end := math.Inf(-1)
	for i, r := range ws {
		x := r.Writes
		w.Planned += x.Planned
		w.Sent += x.Sent
		w.Completed += x.Completed
		w.Errors += x.Errors
		w.Timeouts += x.Timeouts
		w.Unsent += x.Unsent
		w.Creates += x.Creates
		w.Updates += x.Updates
		w.Deletes += x.Deletes
		w.Puts += x.Puts
		w.Conflicts += x.Conflicts
		for _, s := range x.ErrorSamples {
			if !seen[s] {
				seen[s] = true
				w.ErrorSamples = append(w.ErrorSamples, s)
			}
		}
		end = max(end, start[i]+x.DurationMs)
	}
	if m.Clocks.IntervalAlignment == "wall" {
		w.StartMs = slices.Min(start)
	}
	w.DurationMs = end - slices.Min(start)
	if w.DurationMs > 0 {
		w.ThroughputPerSecond = float64(w.Completed) / (w.DurationMs / 1000)
	}
	var err error
	w.Latency, err = mergeLatencies("writes.latency", latencies(ws, func(r *RunResult) Latency { return r.Writes.Latency }))
	return err
}

func mergeDelivery(m *RunResult, ws []*RunResult, start []float64) error {
	d := &m.Delivery
	end := math.Inf(-1)
	var held []*HeldBackDelivery
	for i, r := range ws {
		x := r.Delivery
		d.Events += x.Events
		d.TimedEvents += x.TimedEvents
		d.UntimedEvents += x.UntimedEvents
		d.DeliveredBeforeResponse += x.DeliveredBeforeResponse
		if x.EventsPerSecond > 0 {
			// EventsPerSecond is Events over the span from the first
			// write's scheduled time to the last event received.
			end = max(end, start[i]+float64(x.Events)/x.EventsPerSecond*1000)
		}
		if x.HeldBack != nil {
			held = append(held, x.HeldBack)
		}
	}
	if span := end - slices.Min(start); span > 0 {
		d.EventsPerSecond = float64(d.Events) / (span / 1000)
	}
	var err error
	if d.FromResponse, err = mergeLatencies("delivery.fromResponse", latencies(ws, func(r *RunResult) Latency { return r.Delivery.FromResponse })); err != nil {
		return err
	}
	if d.FromSend, err = mergeLatencies("delivery.fromSend", latencies(ws, func(r *RunResult) Latency { return r.Delivery.FromSend })); err != nil {
		return err
	}
	if len(held) == 0 {
		return nil
	}
	h := &HeldBackDelivery{}
	var fromResponse, fromSend []Latency
	for _, x := range held {
		h.Watchers += x.Watchers
		h.Events += x.Events
		h.TimedEvents += x.TimedEvents
		fromResponse = append(fromResponse, x.FromResponse)
		fromSend = append(fromSend, x.FromSend)
	}
	if h.FromResponse, err = mergeLatencies("delivery.heldBack.fromResponse", fromResponse); err != nil {
		return err
	}
	if h.FromSend, err = mergeLatencies("delivery.heldBack.fromSend", fromSend); err != nil {
		return err
	}
	d.HeldBack = h
	return nil
}

// mergeLists merges the initial lists, relists, informers, holds and
// consistent reads.
func mergeLists(m *RunResult, ws []*RunResult, offset []float64) error {
	var initial []Latency
	m.Relists = []Relist{}
	var reads []*ConsistentReads
	for i, r := range ws {
		l := r.InitialLists
		m.InitialLists.Count += l.Count
		m.InitialLists.Objects += l.Objects
		m.InitialLists.Bytes += l.Bytes
		m.InitialLists.Pages += l.Pages
		initial = append(initial, l.Latency)
		for _, rl := range r.Relists {
			rl.AtMs += offset[i]
			m.Relists = append(m.Relists, rl)
		}
		m.Informers = append(m.Informers, r.Informers...)
		for _, h := range r.Holds {
			h.HeldAtMs += offset[i]
			h.ReleasedAtMs += offset[i]
			m.Holds = append(m.Holds, h)
		}
		if r.ConsistentReads != nil {
			reads = append(reads, r.ConsistentReads)
		}
	}
	if m.APIServer != nil {
		// Client-go's relists are in the order they began.
		slices.SortStableFunc(m.Relists, func(a, b Relist) int { return cmp.Compare(a.AtMs, b.AtMs) })
	} else {
		slices.SortStableFunc(m.Relists, func(a, b Relist) int { return cmp.Compare(a.Informer, b.Informer) })
	}
	slices.SortStableFunc(m.Informers, func(a, b InformerStats) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortStableFunc(m.Holds, func(a, b Hold) int { return cmp.Compare(a.HeldAtMs, b.HeldAtMs) })
	var err error
	if m.InitialLists.Latency, err = mergeLatencies("initialLists.latency", initial); err != nil {
		return err
	}
	if len(reads) == 0 {
		return nil
	}
	c := &ConsistentReads{}
	var wait, whole []Latency
	for _, x := range reads {
		c.Requests += x.Requests
		c.ServedFromCache += x.ServedFromCache
		c.Fallbacks += x.Fallbacks
		c.Errors += x.Errors
		c.ProgressRequests += x.ProgressRequests
		wait = append(wait, x.ReadWait)
		whole = append(whole, x.Latency)
	}
	if c.ReadWait, err = mergeLatencies("consistentReads.readWait", wait); err != nil {
		return err
	}
	if c.Latency, err = mergeLatencies("consistentReads.latency", whole); err != nil {
		return err
	}
	m.ConsistentReads = c
	return nil
}

// mergeOneShard takes what one worker alone measures (shard 0's roles)
// from the worker that has it, moving its offsets to the merged epoch.
func mergeOneShard(m *RunResult, ws []*RunResult, offset []float64) error {
	// one returns the worker that has the section named what (has), -1
	// when none does, and an error when two do.
	one := func(what string, has func(*RunResult) bool) (int, error) {
		found := -1
		for i, r := range ws {
			if !has(r) {
				continue
			}
			if found >= 0 {
				return -1, fmt.Errorf("shards %d and %d both have %s, which one worker of a load measures: %w",
					ws[found].Shard.Index, r.Shard.Index, what, ErrNotOneLoad)
			}
			found = i
		}
		return found, nil
	}
	own := perWorkerEtcd(ws) // summed instead (mergeEtcdRequests)
	sections := []struct {
		what string
		has  func(*RunResult) bool
		take func(dst *RunResult, src *RunResult, off float64)
	}{
		{"compactions", func(r *RunResult) bool { return len(r.Compactions) > 0 }, func(d, s *RunResult, off float64) {
			for _, c := range s.Compactions {
				c.AtMs += off
				d.Compactions = append(d.Compactions, c)
			}
		}},
		{"defrag", func(r *RunResult) bool { return r.Defrag != nil }, func(d, s *RunResult, off float64) {
			x := *s.Defrag
			x.AtMs += off
			x.Members = slices.Clone(x.Members)
			for i := range x.Members {
				x.Members[i].AtMs += off
			}
			d.Defrag = &x
		}},
		{"faults", func(r *RunResult) bool { return len(r.Faults) > 0 }, func(d, s *RunResult, off float64) {
			for _, f := range s.Faults {
				f.AtMs += off
				if f.EndedAtMs != 0 {
					f.EndedAtMs += off
				}
				f.SettledAtMs += off
				d.Faults = append(d.Faults, f)
			}
		}},
		{"etcd", func(r *RunResult) bool { return !own && len(r.Etcd) > 0 }, func(d, s *RunResult, _ float64) { d.Etcd = s.Etcd }},
		{"etcdPhases", func(r *RunResult) bool { return !own && len(r.EtcdPhases) > 0 }, func(d, s *RunResult, _ float64) { d.EtcdPhases = s.EtcdPhases }},
		{"etcdWrites", func(r *RunResult) bool { return r.EtcdWrites != nil }, func(d, s *RunResult, _ float64) { d.EtcdWrites = s.EtcdWrites }},
		{"etcdMetrics", func(r *RunResult) bool { return r.EtcdMetrics != nil }, func(d, s *RunResult, _ float64) { d.EtcdMetrics = s.EtcdMetrics }},
		{"periodicTraffic", func(r *RunResult) bool { return len(r.PeriodicTraffic) > 0 }, func(d, s *RunResult, _ float64) { d.PeriodicTraffic = s.PeriodicTraffic }},
		{"apiservers", func(r *RunResult) bool { return len(r.APIServers) > 0 }, func(d, s *RunResult, _ float64) { d.APIServers = s.APIServers }},
		{"components", func(r *RunResult) bool { return len(r.Components) > 0 }, func(d, s *RunResult, _ float64) { d.Components = s.Components }},
		{"apiserverMetrics", func(r *RunResult) bool { return len(r.APIServerMetrics) > 0 }, func(d, s *RunResult, _ float64) { d.APIServerMetrics = s.APIServerMetrics }},
	}
	for _, s := range sections {
		i, err := one(s.what, s.has)
		if err != nil {
			return err
		}
		if i >= 0 {
			s.take(m, ws[i], offset[i])
		}
	}
	if m.Compactions == nil {
		m.Compactions = []Compaction{}
	}
	return nil
}

// mergeMembers merges the members by endpoint, in shard 0's order (a
// member only a later worker listed follows): the connections and
// watchers pinned to each and what they saw summed, the db size the
// largest read at a worker's end; Error only when no worker read it.
func mergeMembers(ws []*RunResult) ([]MemberStats, error) {
	var out []MemberStats
	index := map[string]int{}
	type parts struct{ writes, delivery []Latency }
	var ps []parts
	for _, r := range ws {
		for _, x := range r.Members {
			i, ok := index[x.Endpoint]
			if !ok {
				i = len(out)
				index[x.Endpoint] = i
				m := x
				m.WatchConnections, m.WriterConnections, m.Watchers = 0, 0, 0
				m.Writes, m.Delivery = nil, nil
				m.DBSizeBytes, m.DBSizeInUseBytes, m.Error = 0, 0, ""
				out = append(out, m)
				ps = append(ps, parts{})
			}
			m, p := &out[i], &ps[i]
			m.WatchConnections += x.WatchConnections
			m.WriterConnections += x.WriterConnections
			m.Watchers += x.Watchers
			if x.Writes != nil {
				if m.Writes == nil {
					m.Writes = &MemberWrites{}
				}
				m.Writes.Completed += x.Writes.Completed
				m.Writes.Errors += x.Writes.Errors
				m.Writes.Timeouts += x.Writes.Timeouts
				p.writes = append(p.writes, x.Writes.Latency)
			}
			if x.Delivery != nil {
				if m.Delivery == nil {
					m.Delivery = &MemberDelivery{}
				}
				m.Delivery.Events += x.Delivery.Events
				m.Delivery.TimedEvents += x.Delivery.TimedEvents
				p.delivery = append(p.delivery, x.Delivery.FromResponse)
			}
			if x.Error == "" && x.DBSizeBytes > m.DBSizeBytes {
				m.DBSizeBytes, m.DBSizeInUseBytes = x.DBSizeBytes, x.DBSizeInUseBytes
			}
			if x.Error != "" && m.Error == "" {
				m.Error = fmt.Sprintf("worker %d: %s", r.Shard.Index, x.Error)
			}
		}
	}
	for i := range out {
		m := &out[i]
		if m.DBSizeBytes > 0 {
			m.Error = ""
		}
		var err error
		if m.Writes != nil {
			if m.Writes.Latency, err = mergeLatencies("members["+m.Endpoint+"].writes.latency", ps[i].writes); err != nil {
				return nil, err
			}
		}
		if m.Delivery != nil {
			if m.Delivery.FromResponse, err = mergeLatencies("members["+m.Endpoint+"].delivery.fromResponse", ps[i].delivery); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// mergeEtcdState sets the figures of etcd itself, which every worker read
// of the one etcd: Final from the worker that read the highest revision,
// with the highest compact revision any saw; each DBSize the largest.
func mergeEtcdState(m *RunResult, ws []*RunResult) {
	latest := ws[0]
	for _, r := range ws {
		if r.Final.Revision > latest.Final.Revision {
			latest = r
		}
	}
	m.Final = latest.Final
	m.Final.Resources = slices.Clone(latest.Final.Resources)
	for _, r := range ws {
		m.Final.CompactRevision = max(m.Final.CompactRevision, r.Final.CompactRevision)
		d, x := &m.DBSize, r.DBSize
		d.BeforeCompactionBytes = max(d.BeforeCompactionBytes, x.BeforeCompactionBytes)
		d.BeforeCompactionInUseBytes = max(d.BeforeCompactionInUseBytes, x.BeforeCompactionInUseBytes)
		d.AfterCompactionBytes = max(d.AfterCompactionBytes, x.AfterCompactionBytes)
		d.AfterCompactionInUseBytes = max(d.AfterCompactionInUseBytes, x.AfterCompactionInUseBytes)
		d.AfterDefragBytes = max(d.AfterDefragBytes, x.AfterDefragBytes)
		d.AfterDefragInUseBytes = max(d.AfterDefragInUseBytes, x.AfterDefragInUseBytes)
		d.EndBytes = max(d.EndBytes, x.EndBytes)
		d.EndInUseBytes = max(d.EndInUseBytes, x.EndInUseBytes)
	}
}

// mergeValidation sums every counter of the workers' validations but
// HistoryEvents, the largest (each worker recorded etcd's one history);
// RecorderScope is shard 0's (every worker's, they differ only if their
// credentials do), RecorderError each worker's prefixed with its index,
// and Violations every worker's by revision.
func mergeValidation(ws []*RunResult) Validation {
	var v Validation
	var errs []string
	for _, r := range ws {
		x := r.Validation
		v.Lost += x.Lost
		v.Duplicated += x.Duplicated
		v.OutOfOrder += x.OutOfOrder
		v.Atomic += x.Atomic
		v.Resumable += x.Resumable
		v.Bookmarkable += x.Bookmarkable
		v.Unexpected += x.Unexpected
		v.PrevKVMismatches += x.PrevKVMismatches
		v.PrevKVMissing += x.PrevKVMissing
		v.CacheMismatches += x.CacheMismatches
		v.UnsyncedWatchers += x.UnsyncedWatchers
		v.RecorderGaps += x.RecorderGaps
		v.UnrecordedWrites += x.UnrecordedWrites
		v.UnverifiedEvents += x.UnverifiedEvents
		v.UnparsedResourceVersions += x.UnparsedResourceVersions
		v.HistoryEvents = max(v.HistoryEvents, x.HistoryEvents)
		if v.RecorderScope == "" {
			v.RecorderScope = x.RecorderScope
		}
		if x.RecorderError != "" {
			errs = append(errs, fmt.Sprintf("worker %d: %s", r.Shard.Index, x.RecorderError))
		}
		v.Violations = append(v.Violations, x.Violations...)
	}
	v.RecorderError = strings.Join(errs, "; ")
	slices.SortStableFunc(v.Violations, func(a, b Violation) int { return cmp.Compare(a.Revision, b.Revision) })
	return v
}

// mergeIntervals lines the workers' intervals up, worker i's shifted by
// its start of the writes' offset from the earliest, in whole seconds,
// and sums their counts; the latency quantiles stay 0 (MergeRuns).
func mergeIntervals(ws []*RunResult, start []float64) []Interval {
	first := slices.Min(start)
	var out []Interval
	for i, r := range ws {
		shift := int(math.Round((start[i] - first) / 1000))
		for k, iv := range r.Intervals {
			j := k + shift
			for len(out) <= j {
				out = append(out, Interval{StartMs: float64(len(out)) * 1000})
			}
			o := &out[j]
			o.WritesScheduled += iv.WritesScheduled
			o.WritesCompleted += iv.WritesCompleted
			o.WriteErrors += iv.WriteErrors
			o.Events += iv.Events
			o.HeldBackEvents += iv.HeldBackEvents
		}
	}
	if out == nil {
		out = []Interval{}
	}
	return out
}

// mergeSelf sums the workers' additive figures and keeps the worst of the
// others (MergeRuns, MergeSelfStats).
func mergeSelf(ws []*RunResult) SelfStats {
	ss := make([]SelfStats, len(ws))
	for i, r := range ws {
		ss[i] = r.Self
	}
	return MergeSelfStats(ss...)
}

// MergeSelfStats merges the resource use of the processes of one divided
// load (or experiment), given in shard order: the additive figures
// summed (CPU seconds and cores, memory peaks: an upper bound of their
// simultaneous peak, goroutines, garbage collections and pauses, and
// CPULimitCores when every process had a limit, else 0), the wall time
// the longest, the etcd member's figures the first process's that has
// them, and the worst of the rest: the highest scheduling delay, and the
// busiest machine's load average with its NumCPU, so that
// GeneratorLimited and BusyWarnings see any busy process.
func MergeSelfStats(ss ...SelfStats) SelfStats {
	var s SelfStats
	limited := true
	busiest := -1.0
	for _, x := range ss {
		s.WallMs = max(s.WallMs, x.WallMs)
		s.CPUSeconds += x.CPUSeconds
		s.CPUCores += x.CPUCores
		s.CPULimitCores += x.CPULimitCores
		limited = limited && x.CPULimitCores > 0
		s.MaxRSSBytes += x.MaxRSSBytes
		s.PeakHeapBytes += x.PeakHeapBytes
		s.PeakGoroutines += x.PeakGoroutines
		s.GCCount += x.GCCount
		s.GCPauseMs += x.GCPauseMs
		s.IncludesEmbeddedEtcd = s.IncludesEmbeddedEtcd || x.IncludesEmbeddedEtcd
		if s.Etcd == nil {
			s.Etcd = x.Etcd
		}
		s.SchedLatencyP99Ms = max(s.SchedLatencyP99Ms, x.SchedLatencyP99Ms)
		if x.NumCPU > 0 && x.LoadAverageMax/float64(x.NumCPU) > busiest {
			busiest = x.LoadAverageMax / float64(x.NumCPU)
			s.NumCPU, s.LoadAverageMax = x.NumCPU, x.LoadAverageMax
		}
	}
	if !limited {
		s.CPULimitCores = 0
	}
	return s
}

// mergeCleanup sums what the workers deleted; KeysLeft is the fewest any
// counted afterwards (-1 when none could), the namespaces every worker's,
// the duration the longest, the error each worker's prefixed with its
// index. Nil when no worker cleaned up.
func mergeCleanup(ws []*RunResult) *Cleanup {
	var c *Cleanup
	var errs []string
	for _, r := range ws {
		x := r.Cleanup
		if x == nil {
			continue
		}
		if c == nil {
			c = &Cleanup{KeysLeft: -1}
		}
		c.KeysDeleted += x.KeysDeleted
		c.LeasesRevoked += x.LeasesRevoked
		if x.KeysLeft >= 0 && (c.KeysLeft < 0 || x.KeysLeft < c.KeysLeft) {
			c.KeysLeft = x.KeysLeft
		}
		c.Namespaces = append(c.Namespaces, x.Namespaces...)
		c.ObjectsDeleted += x.ObjectsDeleted
		c.NamespacesLeft = append(c.NamespacesLeft, x.NamespacesLeft...)
		c.DurationMs = max(c.DurationMs, x.DurationMs)
		if x.Error != "" {
			errs = append(errs, fmt.Sprintf("worker %d: %s", r.Shard.Index, x.Error))
		}
	}
	if c != nil {
		c.Error = strings.Join(errs, "; ")
	}
	return c
}

// mergeRequests sums the informers' requests by verb, outcome and
// resourceVersion, sorted by them.
func mergeRequests(ws []*RunResult) []RequestCount {
	type key struct{ verb, outcome, rv string }
	sums := map[key]*RequestCount{}
	var out []RequestCount
	for _, r := range ws {
		for _, x := range r.Requests {
			k := key{x.Verb, x.Outcome, x.ResourceVersion}
			if s, ok := sums[k]; ok {
				s.Count += x.Count
				s.Objects += x.Objects
				s.Bytes += x.Bytes
				continue
			}
			c := x
			sums[k] = &c
		}
	}
	for _, s := range sums {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b RequestCount) int {
		return cmp.Or(cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.ResourceVersion, b.ResourceVersion))
	})
	return out
}
