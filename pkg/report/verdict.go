package report

import (
	"fmt"
	"strings"
)

// SchedLatencyBusyMs is the Go scheduler latency (SelfStats.
// SchedLatencyP99Ms) above which lwbench's own goroutines waited long
// enough for a CPU to show in the latencies lwbench measures: each of
// those is taken by a goroutine that must run to read the clock.
const SchedLatencyBusyMs = 5.0

// BusyWarnings returns a warning for each sign in s that the machine was
// too busy for the latencies measured to be taken at face value, naming
// the figures affected: a load average above the number of CPUs (every
// process, the etcd member included, waited for a CPU), and lwbench's own
// goroutines waiting more than SchedLatencyBusyMs (p99) for one. None
// when neither was seen or could be measured.
func BusyWarnings(s SelfStats) []string {
	var w []string
	if s.NumCPU > 0 && s.LoadAverageMax > float64(s.NumCPU) {
		w = append(w, fmt.Sprintf("the machine was busy: load average up to %.1f on %d CPUs during the run; "+
			"every latency (writes, delivery, lists, relists, defragmentation, probes) includes waiting for a CPU, etcd's too",
			s.LoadAverageMax, s.NumCPU))
	}
	if s.SchedLatencyP99Ms > SchedLatencyBusyMs {
		w = append(w, fmt.Sprintf("lwbench's own CPU was starved: its goroutines waited %.1f ms (p99) for a CPU; "+
			"the write and delivery latencies it timed may be that much too high", s.SchedLatencyP99Ms))
	}
	return w
}

// ScheduleSlipFactor is how much longer than scheduled the writes may
// take (WriteStats.DurationMs over Scenario.DurationMs) before
// ScheduleWarnings says the target could not keep the rate.
const ScheduleSlipFactor = 1.5

// ScheduleWarnings returns a warning when r's writes took more than
// ScheduleSlipFactor times their scheduled length (and 2 s more): the
// target (etcd, or the apiservers in front of it) could not keep the
// write rate, so each write's latency, timed from its scheduled start,
// includes the backlog, and, with compaction during the writes, watches
// that fell as far behind could meet compacted revisions and relist.
// None otherwise, or without writes.
func ScheduleWarnings(r *RunResult) []string {
	planned, took := r.Scenario.DurationMs, r.Writes.DurationMs
	if r.Writes.Planned == 0 || planned <= 0 || took <= planned*ScheduleSlipFactor || took-planned < 2000 {
		return nil
	}
	w := fmt.Sprintf("the target could not keep the write rate: the writes scheduled over %.1f s took %.1f s (%.1f/s of %.1f/s scheduled), "+
		"so write latencies (timed from each write's scheduled start) include that backlog",
		planned/1000, took/1000, r.Writes.ThroughputPerSecond, r.Scenario.WriteRatePerSecond)
	if c := r.Scenario.CompactionIntervalMs; c > 0 && c < took {
		w += fmt.Sprintf("; with compaction every %.1f s, watches that fell as far behind could meet compacted revisions and relist", c/1000)
	}
	return []string{w}
}

// RunVerdict is r's one-line verdict, through either client set: "PASS:
// ..." when every watch guarantee held and nothing was lost, the run ran
// to its end, every fault was recovered from and what lwbench wrote on a
// cluster it does not own was deleted; "FAIL: ..." naming what failed
// otherwise.
// When the machine was busy (BusyWarnings of r.Self) it adds that the
// latencies are not to be trusted; r's other warnings do not.
func RunVerdict(r *RunResult) string {
	var failed []string
	if r.Interrupted {
		failed = append(failed, fmt.Sprintf("interrupted after %d of %d writes", r.Writes.Completed, r.Writes.Planned))
	}
	if !r.Validation.OK() {
		failed = append(failed, r.Validation.Summary())
	}
	for _, f := range r.Faults {
		if !f.Recovered {
			failed = append(failed, fmt.Sprintf("fault %s (%s) not recovered from", f.Kind, f.Member))
		}
	}
	if r.Defrag != nil && r.Defrag.Error != "" {
		failed = append(failed, "defragmentation failed: "+r.Defrag.Error)
	}
	if c := r.Cleanup; c != nil && c.Error != "" {
		if c.Namespaces != nil {
			failed = append(failed, fmt.Sprintf("cleanup of the run's namespaces failed (%d left): %s", len(c.NamespacesLeft), c.Error))
		} else {
			failed = append(failed, fmt.Sprintf("cleanup failed (%d keys left): %s", c.KeysLeft, c.Error))
		}
	}
	busy := ""
	if len(BusyWarnings(r.Self)) > 0 {
		busy = "; latencies distorted by a busy machine (see the warnings)"
	}
	if len(failed) > 0 {
		return "FAIL: " + strings.Join(failed, "; ") + busy
	}
	informers := r.Scenario.Watchers
	if r.Shard != nil {
		// A worker's result: its own block of the informers.
		informers = 0
		for _, inf := range r.Informers {
			if !inf.Cache {
				informers++
			}
		}
	}
	return fmt.Sprintf("PASS: every watch guarantee held, nothing lost (%d events to %d informers, checked against the %d in etcd's recorded history)%s",
		r.Delivery.Events, informers, r.Validation.HistoryEvents, busy)
}
