package experiment

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// Worker is one worker of a divided experiment, as its own result said
// (Result.Workers of a merged result).
type Worker struct {
	Shard      shard.Shard `json:"shard"`      // its part
	StartedAt  time.Time   `json:"startedAt"`  // its epoch, UTC, on its clock
	DurationMs float64     `json:"durationMs"` // its wall time, ms
	// Cases are its own case summaries: its block of the watchers, its
	// own probe.
	Cases []CaseSummary `json:"cases"`
	// Self is its process's resource use (nil when not measured);
	// GeneratorLimited is report.GeneratorLimited of it, and
	// GeneratorLimitedWhy why.
	Self                *report.SelfStats `json:"self,omitempty"`
	GeneratorLimited    bool              `json:"generatorLimited"`
	GeneratorLimitedWhy string            `json:"generatorLimitedWhy,omitempty"`
	// RelistStorm and Catchup are its own part of the experiment.
	RelistStorm *RelistStormResult `json:"relistStorm,omitempty"`
	Catchup     *CatchupResult     `json:"catchup,omitempty"`
}

// ErrNotOneExperiment is returned (wrapped, naming the shard or result
// and what differs) by Merge for results that are not the workers of
// one divided experiment.
var ErrNotOneExperiment = errors.New("not the workers of one experiment")

// Merge merges the results of the workers of one divided experiment
// (Divisible; each with its Shard, every index of one count exactly
// once, the same scenario, cases and target) into the result of the
// whole, with Workers set and Shard nil. The figures are combined so that
// they are what one process running every watcher would have reported:
//
//   - counts are summed: the watchers, relists, LIST requests, pages,
//     objects, bytes, 410s, events, responses, missing and unexpected
//     revisions, and every validation counter (Validation.add);
//   - quantiles are recomputed from the samples concatenated in the
//     order of the shards, which is the watchers' order
//     (RelistStormCase.ResyncMs, ListMs, BackoffMs;
//     CatchupCase.WatcherCatchupMs): never an average of the workers'
//     quantiles; a result with watchers but no samples cannot be merged
//     exactly and is an error;
//   - what shard 0 alone does is shard 0's: the writes (another worker
//     that wrote is an error), the compaction and the revision held
//     (HeldRevision the highest any worker held), the release time, the
//     catch-up's relists, the probe (each worker probes its own key; its
//     windows are in Workers) and the timelines;
//   - Self sums the workers' additive figures and keeps the worst of the
//     rest (report.MergeSelfStats), each worker's in Workers with its
//     verdict of report.GeneratorLimited, and Warnings names every worker
//     limited by the generator;
//   - StartedAt is the earliest worker's, DurationMs runs to the latest
//     end, offsets of shard 0 (ReleaseAtMs) are moved to that epoch.
//
// The results are not modified. Errors wrap ErrNotOneExperiment.
func Merge(results []*Result) (*Result, error) {
	ws, err := experimentShards(results)
	if err != nil {
		return nil, err
	}
	first := ws[0]
	m := &Result{Kind: first.Kind, SchemaVersion: first.SchemaVersion, Experiment: first.Experiment, StartedAt: first.StartedAt,
		Quick: first.Quick, Label: first.Label, Environment: first.Environment, Target: first.Target, APIServer: first.APIServer,
		Timelines: first.Timelines, Cases: []CaseSummary{}}
	for _, r := range ws[1:] {
		if r.StartedAt.Before(m.StartedAt) {
			m.StartedAt = r.StartedAt
		}
	}
	offset0 := report.Ms(first.StartedAt.Sub(m.StartedAt))
	var selves []report.SelfStats
	for _, r := range ws {
		m.DurationMs = max(m.DurationMs, report.Ms(r.StartedAt.Sub(m.StartedAt))+r.DurationMs)
		m.NamespaceCleanup = append(m.NamespaceCleanup, r.NamespaceCleanup...)
		for _, w := range r.Warnings {
			m.Warnings = append(m.Warnings, fmt.Sprintf("worker %d: %s", r.Shard.Index, w))
		}
		wk := Worker{Shard: *r.Shard, StartedAt: r.StartedAt, DurationMs: r.DurationMs, Cases: r.Cases, Self: r.Self,
			RelistStorm: r.RelistStorm, Catchup: r.Catchup}
		if r.Self != nil {
			selves = append(selves, *r.Self)
			wk.GeneratorLimited, wk.GeneratorLimitedWhy = report.GeneratorLimited(*r.Self)
			if wk.GeneratorLimited {
				m.Warnings = append(m.Warnings, fmt.Sprintf("figures of worker %d were limited by the generator: %s", r.Shard.Index, wk.GeneratorLimitedWhy))
			}
		}
		m.Workers = append(m.Workers, wk)
	}
	if len(selves) == len(ws) {
		s := report.MergeSelfStats(selves...)
		m.Self = &s
	}
	switch m.Experiment {
	case NameRelistStorm:
		rs, err := mergeRelistStorm(ws, offset0)
		if err != nil {
			return nil, err
		}
		m.RelistStorm = rs
		for _, c := range rs.Cases {
			m.Cases = append(m.Cases, c.summary())
		}
	case NameCatchup:
		cr, err := mergeCatchup(ws)
		if err != nil {
			return nil, err
		}
		m.Catchup = cr
		for _, c := range cr.Cases {
			m.Cases = append(m.Cases, c.summary())
		}
	}
	return m, nil
}

// experimentShards checks that results are the workers of one divided
// experiment and returns them by shard index.
func experimentShards(results []*Result) ([]*Result, error) {
	if len(results) == 0 {
		return nil, fmt.Errorf("no results to merge: %w", ErrNotOneExperiment)
	}
	var ws []*Result
	for i, r := range results {
		switch {
		case r == nil:
			return nil, fmt.Errorf("result %d is nil", i+1)
		case !slices.Contains(Divisible, r.Experiment):
			return nil, fmt.Errorf("result %d is a %q result, which is not divided among workers: %w", i+1, r.Experiment, ErrNotOneExperiment)
		case r.Shard == nil:
			return nil, fmt.Errorf("result %d is not a worker's (it has no shard): %w", i+1, ErrNotOneExperiment)
		case r.Experiment != results[0].Experiment:
			return nil, fmt.Errorf("result %d is %s, the first %s: %w", i+1, r.Experiment, results[0].Experiment, ErrNotOneExperiment)
		}
		if err := r.Shard.Validate(); err != nil {
			return nil, fmt.Errorf("result %d: %v: %w", i+1, err, ErrNotOneExperiment)
		}
		if ws == nil {
			ws = make([]*Result, r.Shard.Count)
		}
		switch {
		case r.Shard.Count != len(ws):
			return nil, fmt.Errorf("result %d is shard %s, the first of %d shards: %w", i+1, r.Shard, len(ws), ErrNotOneExperiment)
		case ws[r.Shard.Index] != nil:
			return nil, fmt.Errorf("shard %d appears twice: %w", r.Shard.Index, ErrNotOneExperiment)
		}
		ws[r.Shard.Index] = r
	}
	for i, r := range ws {
		if r == nil {
			return nil, fmt.Errorf("shard %d of %d missing: %w", i, len(ws), ErrNotOneExperiment)
		}
	}
	for _, r := range ws[1:] {
		var same bool
		switch r.Experiment {
		case NameRelistStorm:
			same = r.RelistStorm != nil && ws[0].RelistStorm != nil && reflect.DeepEqual(r.RelistStorm.Options, ws[0].RelistStorm.Options) &&
				len(r.RelistStorm.Cases) == len(ws[0].RelistStorm.Cases)
		case NameCatchup:
			same = r.Catchup != nil && ws[0].Catchup != nil && reflect.DeepEqual(r.Catchup.Scenario, ws[0].Catchup.Scenario) &&
				len(r.Catchup.Cases) == len(ws[0].Catchup.Cases)
		}
		if !same {
			return nil, fmt.Errorf("shard %d ran another scenario, or other cases, than shard 0: %w", r.Shard.Index, ErrNotOneExperiment)
		}
		if !slices.Equal(slices.Sorted(slices.Values(r.Target.Endpoints)), slices.Sorted(slices.Values(ws[0].Target.Endpoints))) {
			return nil, fmt.Errorf("shard %d drove %v, shard 0 %v: %w", r.Shard.Index, r.Target.Endpoints, ws[0].Target.Endpoints, ErrNotOneExperiment)
		}
	}
	return ws, nil
}

// mergeRelistStorm merges the workers' relist storms case by case
// (Merge); offset0 moves shard 0's offsets to the merged epoch.
func mergeRelistStorm(ws []*Result, offset0 float64) (*RelistStormResult, error) {
	out := &RelistStormResult{Options: ws[0].RelistStorm.Options}
	for k, c0 := range ws[0].RelistStorm.Cases {
		m := c0
		m.Watchers, m.Relists, m.RelistRequests, m.RelistPages, m.RelistObjects, m.RelistBytes, m.Expired = 0, 0, 0, 0, 0, 0, 0
		m.EtcdRanges, m.EtcdRangeBytes = 0, 0
		m.Validation = Validation{}
		m.ResyncMs, m.ListMs, m.BackoffMs = nil, nil, nil
		m.ReleaseAtMs = c0.ReleaseAtMs + offset0
		for _, r := range ws {
			c := r.RelistStorm.Cases[k]
			switch {
			case c.Objects != c0.Objects || c.PageSize != c0.PageSize || c.WatchList != c0.WatchList || c.Compacted != c0.Compacted:
				return nil, fmt.Errorf("case %d of shard %d is %s, shard 0's %s: %w", k, r.Shard.Index, c.summary().Case, c0.summary().Case, ErrNotOneExperiment)
			case len(c.ResyncMs) != c.Watchers:
				return nil, fmt.Errorf("case %s of shard %d: %d resync samples for %d informers: its quantiles cannot be merged exactly: %w",
					c.summary().Case, r.Shard.Index, len(c.ResyncMs), c.Watchers, ErrNotOneExperiment)
			case len(c.ListMs) != c.Relists || len(c.BackoffMs) != c.Relists:
				return nil, fmt.Errorf("case %s of shard %d: %d relists but %d duration and %d backoff samples: its quantiles cannot be merged exactly: %w",
					c.summary().Case, r.Shard.Index, c.Relists, len(c.ListMs), len(c.BackoffMs), ErrNotOneExperiment)
			case r.Shard.Index != 0 && c.Writes.Planned != 0:
				return nil, fmt.Errorf("case %s: shard %d wrote too, but shard 0 alone writes: %w", c.summary().Case, r.Shard.Index, ErrNotOneExperiment)
			}
			m.Watchers += c.Watchers
			m.Relists += c.Relists
			m.RelistRequests += c.RelistRequests
			m.RelistPages += c.RelistPages
			m.RelistObjects += c.RelistObjects
			m.RelistBytes += c.RelistBytes
			m.Expired += c.Expired
			m.EtcdRanges += c.EtcdRanges
			m.EtcdRangeBytes += c.EtcdRangeBytes
			m.HeldRevision = max(m.HeldRevision, c.HeldRevision)
			m.CompactRevision = max(m.CompactRevision, c.CompactRevision)
			m.Validation = m.Validation.add(c.Validation)
			m.ResyncMs = append(m.ResyncMs, c.ResyncMs...)
			m.ListMs = append(m.ListMs, c.ListMs...)
			m.BackoffMs = append(m.BackoffMs, c.BackoffMs...)
		}
		m.ResyncP50Ms, m.ResyncMaxMs = percentile(slices.Clone(m.ResyncMs), 0.5), maxOf(m.ResyncMs)
		m.ListP50Ms, m.ListMaxMs = percentile(slices.Clone(m.ListMs), 0.5), maxOf(m.ListMs)
		m.BackoffP50Ms = percentile(slices.Clone(m.BackoffMs), 0.5)
		out.Cases = append(out.Cases, m)
		out.Validation = out.Validation.add(m.Validation)
	}
	return out, nil
}

// mergeCatchup merges the workers' catch-ups distance by distance
// (Merge).
func mergeCatchup(ws []*Result) (*CatchupResult, error) {
	out := &CatchupResult{Scenario: ws[0].Catchup.Scenario}
	for k, c0 := range ws[0].Catchup.Cases {
		m := c0
		m.Watchers, m.Events, m.Responses, m.EventBytes, m.Missing, m.Unexpected = 0, 0, 0, 0, 0, 0
		m.WatcherCatchupMs, m.CatchupMs, m.RevisionsPerSecond = nil, 0, 0
		for _, r := range ws {
			c := r.Catchup.Cases[k]
			switch {
			case c.Behind != c0.Behind || c.FromRevision != c0.FromRevision || c.ToRevision != c0.ToRevision || c.Revisions != c0.Revisions:
				return nil, fmt.Errorf("distance %d of shard %d resumed from %d to %d, shard 0's %d behind from %d to %d: %w",
					k, r.Shard.Index, c.FromRevision, c.ToRevision, c0.Behind, c0.FromRevision, c0.ToRevision, ErrNotOneExperiment)
			case len(c.WatcherCatchupMs) != c.Watchers:
				return nil, fmt.Errorf("distance %d of shard %d: %d catch-up samples for %d watchers: %w", c.Behind, r.Shard.Index,
					len(c.WatcherCatchupMs), c.Watchers, ErrNotOneExperiment)
			}
			m.Watchers += c.Watchers
			m.Events += c.Events
			m.Responses += c.Responses
			m.EventBytes += c.EventBytes
			m.Missing += c.Missing
			m.Unexpected += c.Unexpected
			m.Expired = m.Expired || c.Expired
			m.WatcherCatchupMs = append(m.WatcherCatchupMs, c.WatcherCatchupMs...)
		}
		m.CatchupMs = maxOf(m.WatcherCatchupMs)
		if !m.Expired && m.CatchupMs > 0 {
			m.RevisionsPerSecond = float64(m.Revisions) / (m.CatchupMs / 1000)
		}
		if math.IsInf(m.RevisionsPerSecond, 0) {
			m.RevisionsPerSecond = 0
		}
		out.Cases = append(out.Cases, m)
	}
	return out, nil
}
