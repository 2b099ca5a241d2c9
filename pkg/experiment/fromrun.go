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
	var resync, backoff, relist []float64
	for _, rl := range r.Relists {
		c.RelistObjects += rl.Objects
		c.RelistBytes += rl.Bytes
		resync = append(resync, rl.DurationMs+rl.BackoffMs)
		backoff, relist = append(backoff, rl.BackoffMs), append(relist, rl.DurationMs)
		for _, a := range rl.Attempts {
			if a.Error != "" {
				c.ListRestarts++
			}
		}
	}
	c.ResyncP50Ms, c.ResyncMaxMs = percentile(append([]float64(nil), resync...), 0.5), maxOf(resync)
	c.BackoffP50Ms, c.RelistP50Ms = percentile(backoff, 0.5), percentile(relist, 0.5)
	for _, cp := range r.Compaction {
		if cp.Error == "" {
			c.Compactions++
		}
	}
	if r.Defrag != nil && r.Defrag.Error == "" {
		c.Defrags, c.DefragMs = 1, r.Defrag.DurationMs
	}
	c.OtherViolations = runViolations(r.Validation)
	res.Cases = []CaseSummary{c}
	return res
}

// runViolations counts a run's broken guarantees other than lost events.
func runViolations(v report.Validation) int64 {
	return v.Duplicated + v.OutOfOrder + v.Atomic + v.Resumable + v.Bookmarkable + v.Unexpected +
		v.PrevKVMismatches + v.CacheMismatches + int64(v.UnsyncedWatchers) + v.RecorderGaps + v.UnverifiedEvents
}

// NameKubeRun is Result.Experiment for a `lwbench run --kube-apiserver`
// result converted by FromKubeRun.
const NameKubeRun = "kube-run"

// FromKubeRun turns a `lwbench run --kube-apiserver` result into a Result
// of one case, so that `lwbench report` compares it with the etcd-direct
// model's runs and with the experiments: the informers' relists (LIST or
// WATCHLIST phases after an informer's first) and what they read through
// the API, the time from the failure that caused each (client-go's
// backoff) to its last page or initial events' bookmark, the LIST and
// WATCHLIST requests that failed before them (ListRestarts), kube-apiserver's
// compactions seen, the defragmentation, the writers' throughput and p99
// latency, lost events and other violations. Result.APIServer describes
// the apiservers. A run through kube-apiserver samples no db size and no
// probe, and records no wall time (DurationMs 0) nor the machine.
func FromKubeRun(r *report.KubeRunResult, label string) *Result {
	api := r.APIServer
	res := &Result{Kind: report.KindExperiment, SchemaVersion: SchemaVersion, Experiment: NameKubeRun, StartedAt: r.StartedAt, Label: label,
		Target: r.Target, Environment: Environment{EtcdVersion: r.Target.EtcdVersion}, APIServer: &api, Timelines: []Timeline{}}
	sc := r.Scenario
	c := CaseSummary{Experiment: NameKubeRun,
		Case:    fmt.Sprintf("%s informers=%d objects=%d rate=%.0f/s", sc.Profile, sc.Watchers, sc.Objects, sc.WriteRatePerSecond),
		Relists: int64(len(r.Relists)), WritesPerSecond: r.Writes.ThroughputPerSecond, WriteP99Ms: r.Writes.Latency.P99Ms,
		LostEvents: r.Validation.Lost, OtherViolations: runViolations(r.Validation), Compactions: len(r.Compactions)}
	var resync, backoff, relist []float64
	for _, rl := range r.Relists {
		c.RelistObjects += rl.Objects
		c.RelistBytes += rl.Bytes
		c.ListRestarts += int64(rl.FailedRequests)
		resync = append(resync, rl.DurationMs+rl.BackoffMs)
		backoff, relist = append(backoff, rl.BackoffMs), append(relist, rl.DurationMs)
	}
	c.ResyncP50Ms, c.ResyncMaxMs = percentile(append([]float64(nil), resync...), 0.5), maxOf(resync)
	c.BackoffP50Ms, c.RelistP50Ms = percentile(backoff, 0.5), percentile(relist, 0.5)
	if r.Defrag != nil && r.Defrag.Error == "" {
		c.Defrags, c.DefragMs = 1, r.Defrag.DurationMs
	}
	res.Cases = []CaseSummary{c}
	return res
}
