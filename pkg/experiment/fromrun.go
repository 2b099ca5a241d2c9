package experiment

import (
	"fmt"

	"github.com/kubestore/etcdkit/pkg/report"
)

// NameRun is Result.Experiment for a `lwbench run` result of the
// etcd-direct model converted by FromRun; NameKubeRun for one through
// kube-apiserver (RunResult.APIServer set), whose figures differ: no db
// size is sampled there.
const (
	NameRun     = "run"
	NameKubeRun = "kube-run"
)

// FromRun turns a `lwbench run` result, of either client set, into a
// Result of one case, so that `lwbench report` compares runs with
// experiments and with each other in the same columns: the informers'
// relists and what they read (from etcd for the model, through the API
// for client-go), the time from the failure that caused each (the
// backoff) to its last page or initial events' bookmark, the LIST and
// WATCHLIST requests that failed before them (ListRestarts), the
// compactions (lwbench's, or kube-apiserver's seen), the
// defragmentation, write throughput and p99 latency, delivery p99 latency
// from the write's response, db sizes before the compaction and at the
// end (the model's), lost events and other violations. Result.APIServer
// describes the apiservers of a run through them. A run has no probe and
// no timeline.
func FromRun(r *report.RunResult, label string) *Result {
	name := NameRun
	if r.APIServer != nil {
		name = NameKubeRun
	}
	res := &Result{Kind: report.KindExperiment, SchemaVersion: SchemaVersion, Experiment: name, StartedAt: r.StartedAt, Label: label,
		DurationMs: r.Self.WallMs, Target: r.Target, Environment: Environment{EtcdVersion: r.Target.EtcdVersion, Cores: r.Self.NumCPU},
		APIServer: r.APIServer, Timelines: []Timeline{}}
	sc := r.Scenario
	c := CaseSummary{Experiment: name,
		Case:    fmt.Sprintf("%s informers=%d objects=%d rate=%.0f/s", sc.Profile, sc.Watchers, sc.Objects, sc.WriteRatePerSecond),
		Relists: int64(len(r.Relists)), WritesPerSecond: r.Writes.ThroughputPerSecond, WriteP99Ms: r.Writes.Latency.P99Ms,
		DeliveryP99Ms: r.Delivery.FromResponse.P99Ms, DeliveryEvents: r.Delivery.FromResponse.Count,
		DBSizeBeforeBytes: r.DBSize.BeforeCompactionBytes, DBSizeAfterBytes: r.DBSize.EndBytes, LostEvents: r.Validation.Lost,
		OtherViolations: runViolations(r.Validation)}
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
	for _, cp := range r.Compactions {
		if cp.Error == "" {
			c.Compactions++
		}
	}
	if r.Defrag != nil && r.Defrag.Error == "" {
		c.Defrags, c.DefragMs = 1, r.Defrag.DurationMs
	}
	res.Cases = []CaseSummary{c}
	return res
}

// runViolations counts a run's broken guarantees other than lost events.
func runViolations(v report.Validation) int64 {
	return v.Duplicated + v.OutOfOrder + v.Atomic + v.Resumable + v.Bookmarkable + v.Unexpected +
		v.PrevKVMismatches + v.CacheMismatches + int64(v.UnsyncedWatchers) + v.RecorderGaps + v.UnverifiedEvents + v.UnparsedResourceVersions
}
