package experiment

import (
	"fmt"

	"github.com/kubestore/etcdkit/pkg/report"
)

// NameRun is Result.Experiment for a `lwbench run` result converted by
// FromRun.
const NameRun = "run"

// FromRun turns a `lwbench run` result into a Result of one case, so that
// `lwbench report` compares runs with experiments in the same columns:
// relists and what they read, compactions, the defragmentation, write
// throughput and latency, db sizes before the compaction and at the end,
// lost events and other violations. A run has no probe and no timeline.
func FromRun(r *report.RunResult, label string) *Result {
	res := &Result{Kind: report.KindExperiment, SchemaVersion: SchemaVersion, Experiment: NameRun, StartedAt: r.StartedAt, Label: label,
		DurationMs: r.Self.WallMs, Target: r.Target, Environment: Environment{EtcdVersion: r.Target.EtcdVersion, Cores: r.Self.NumCPU},
		Timelines: []Timeline{}}
	sc := r.Scenario
	c := CaseSummary{Experiment: NameRun,
		Case:    fmt.Sprintf("%s watchers=%d objects=%d rate=%.0f/s", sc.Profile, sc.Watchers, sc.Objects, sc.WriteRatePerSecond),
		Relists: int64(len(r.Relists)), WritesPerSecond: r.Writes.ThroughputPerSecond, WriteP99Ms: r.Writes.Latency.P99Ms,
		DBSizeBeforeBytes: r.DBSize.BeforeCompactionBytes, DBSizeAfterBytes: r.DBSize.EndBytes, LostEvents: r.Validation.Lost}
	var resync []float64
	for _, rl := range r.Relists {
		c.RelistObjects += rl.Objects
		c.RelistBytes += rl.Bytes
		resync = append(resync, rl.DurationMs+rl.BackoffMs)
		for _, a := range rl.Attempts {
			if a.Error != "" {
				c.ListRestarts++
			}
		}
	}
	c.ResyncP50Ms, c.ResyncMaxMs = percentile(append([]float64(nil), resync...), 0.5), maxOf(resync)
	for _, cp := range r.Compaction {
		if cp.Error == "" {
			c.Compactions++
		}
	}
	if r.Defrag != nil && r.Defrag.Error == "" {
		c.Defrags, c.DefragMs = 1, r.Defrag.DurationMs
	}
	v := r.Validation
	c.OtherViolations = v.Duplicated + v.OutOfOrder + v.Atomic + v.Resumable + v.Bookmarkable + v.Unexpected +
		v.PrevKVMismatches + v.CacheMismatches + int64(v.UnsyncedWatchers) + v.RecorderGaps + v.UnverifiedEvents
	res.Cases = []CaseSummary{c}
	return res
}
