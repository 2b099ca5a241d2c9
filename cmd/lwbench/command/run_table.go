package command

import (
	"fmt"
	"strings"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
)

func lat(l report.Latency) string {
	if l.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("p50 %.2f / p99 %.2f / p99.9 %.2f / max %.2f ms", l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
}

// makeRunTable lays a run result out as metric/value rows, the summary
// `lwbench run` prints.
func makeRunTable(r *report.RunResult) output.Table {
	var relistMs, relistObjects, relistRVs string
	if len(r.Relists) > 0 {
		var maxMs float64
		var objs int64
		for _, rl := range r.Relists {
			maxMs = max(maxMs, rl.DurationMs)
			objs += rl.Objects
		}
		relistMs = fmt.Sprintf("%.2f ms (longest)", maxMs)
		relistObjects = fmt.Sprint(objs)
		var rvs []string
		for _, a := range r.Relists[0].Attempts {
			rv := a.ResourceVersion
			if rv == "" {
				rv = `""`
			}
			res := "ok"
			if a.Error != "" {
				res = a.Error
			}
			rvs = append(rvs, fmt.Sprintf("RV=%s limit %d: %s", rv, a.Limit, res))
		}
		relistRVs = strings.Join(rvs, "; ")
	} else {
		relistMs, relistObjects, relistRVs = "-", "0", "-"
	}
	defrag := "-"
	if r.Defrag != nil {
		defrag = fmt.Sprintf("%.2f ms", r.Defrag.DurationMs)
		if len(r.Defrag.Members) > 1 {
			var each []string
			for _, m := range r.Defrag.Members {
				each = append(each, fmt.Sprintf("%s %.2f ms", m.Endpoint, m.DurationMs))
			}
			defrag += " (" + strings.Join(each, ", ") + ")"
		}
		if r.Defrag.Error != "" {
			defrag += " (error: " + r.Defrag.Error + ")"
		}
	}
	var compactRevs []string
	for _, c := range r.Compaction {
		s := fmt.Sprint(c.Revision)
		if c.Error != "" {
			s += " (error)"
		}
		compactRevs = append(compactRevs, s)
	}
	if len(compactRevs) == 0 {
		compactRevs = []string{"-"}
	}
	var objects []string
	for _, rc := range r.Final.Resources {
		objects = append(objects, fmt.Sprintf("%s %d", rc.Resource, rc.Objects))
	}
	v := r.Validation
	rows := [][]string{
		{"etcd", fmt.Sprintf("%s (%s)", r.Target.EtcdVersion, targetDescription(r.Target))},
		{"profile", fmt.Sprintf("%s: %d watchers on %d streams over %d connections", r.Scenario.Profile, r.Scenario.Watchers, r.Scenario.Streams, r.Scenario.Connections)},
		{"writes completed / planned", fmt.Sprintf("%d / %d (%.0f/s)", r.Writes.Completed, r.Writes.Planned, r.Writes.ThroughputPerSecond)},
		{"write errors (timeouts)", fmt.Sprintf("%d (%d)", r.Writes.Errors, r.Writes.Timeouts)},
		{"write latency (from schedule)", lat(r.Writes.Latency)},
		{"events delivered", fmt.Sprintf("%d (%.0f/s; %d timed)", r.Delivery.Events, r.Delivery.EventsPerSecond, r.Delivery.TimedEvents)},
		{"delivery latency from commit", lat(r.Delivery.FromCommit)},
		{"delivery latency from send", lat(r.Delivery.FromSend)},
		{"initial lists", fmt.Sprintf("%d, %s", r.InitialLists.Count, lat(r.InitialLists.Latency))},
		{"relists", fmt.Sprint(len(r.Relists))},
		{"first relist requests", relistRVs},
		{"relist duration", relistMs},
		{"relist objects", relistObjects},
	}
	if cr := r.ConsistentReads; cr != nil {
		rows = append(rows,
			[]string{"consistent reads (cache / fallback)", fmt.Sprintf("%d (%d / %d), %d progress requests", cr.Requests, cr.ServedFromCache, cr.Fallbacks, cr.ProgressRequests)},
			[]string{"consistent read wait", lat(cr.ReadWait)})
	}
	rows = append(rows,
		[]string{"compactions at revision", strings.Join(compactRevs, ", ")},
		[]string{"db size before compaction", fmt.Sprintf("%d bytes (%d in use)", r.DBSize.BeforeCompactionBytes, r.DBSize.BeforeCompactionInUseBytes)},
		[]string{"db size after compaction", fmt.Sprintf("%d bytes (%d in use)", r.DBSize.AfterCompactionBytes, r.DBSize.AfterCompactionInUseBytes)},
		[]string{"db size after defrag", fmt.Sprintf("%d bytes (%d in use)", r.DBSize.AfterDefragBytes, r.DBSize.AfterDefragInUseBytes)},
		[]string{"defrag duration", defrag},
		[]string{"history events recorded", fmt.Sprint(v.HistoryEvents)},
		[]string{"lost events", fmt.Sprint(v.Lost)},
		[]string{"duplicated events", fmt.Sprint(v.Duplicated)},
		[]string{"out-of-order events", fmt.Sprint(v.OutOfOrder)},
		[]string{"split revisions (atomic)", fmt.Sprint(v.Atomic)},
		[]string{"resumable / bookmarkable violations", fmt.Sprintf("%d / %d", v.Resumable, v.Bookmarkable)},
		[]string{"unexpected events", fmt.Sprint(v.Unexpected)},
		[]string{"prevKV mismatches (missing)", fmt.Sprintf("%d (%d)", v.PrevKVMismatches, v.PrevKVMissing)},
		[]string{"cache mismatches at end", fmt.Sprint(v.CacheMismatches)},
		[]string{"unsynced watchers at end", fmt.Sprint(v.UnsyncedWatchers)},
		[]string{"final revision", fmt.Sprint(r.Final.Revision)},
		[]string{"final compact revision", fmt.Sprint(r.Final.CompactRevision)},
		[]string{"live objects", fmt.Sprintf("%d (%s)", r.Final.Objects, strings.Join(objects, ", "))},
	)
	rows = append(rows, memberRows(r.Members)...)
	rows = append(rows, faultRows(r.Faults)...)
	if c := r.Cleanup; c != nil {
		s := fmt.Sprintf("%d keys deleted, %d leases revoked, %d keys left under the prefix", c.KeysDeleted, c.LeasesRevoked, c.KeysLeft)
		if c.Error != "" {
			s += " (error: " + c.Error + ")"
		}
		rows = append(rows, []string{"cleanup", s})
	}
	rows = append(rows, selfRows(r.Self)...)
	return output.Table{Header: []string{"metric", "value"}, Rows: rows}
}

func selfRows(s report.SelfStats) [][]string {
	who := "lwbench"
	if s.IncludesEmbeddedEtcd {
		who = "lwbench + embedded etcd"
	}
	rows := [][]string{
		{who + " CPU", fmt.Sprintf("%.2f s (%.2f of %d cores)", s.CPUSeconds, s.CPUCores, s.NumCPU)},
		{who + " memory", fmt.Sprintf("max RSS %d bytes, peak heap %d bytes", s.MaxRSSBytes, s.PeakHeapBytes)},
	}
	if s.Etcd != nil {
		rows = append(rows, []string{"etcd CPU / memory", fmt.Sprintf("%.2f s (%.2f cores), RSS %d bytes", s.Etcd.CPUSeconds, s.Etcd.CPUCores, s.Etcd.RSSBytes)})
	}
	return rows
}

func targetDescription(t report.Target) string {
	switch {
	case t.Embedded:
		return "embedded"
	case t.Managed:
		return fmt.Sprintf("%d members started by lwbench", len(t.Endpoints))
	}
	return "external"
}

// makeIntervalTable lays the per-interval series out, one row per second:
// what `--interval-csv` writes.
func makeIntervalTable(ivs []report.Interval) output.Table {
	t := output.Table{Header: []string{"start_ms", "writes_scheduled", "writes_completed", "write_errors",
		"write_p50_ms", "write_p99_ms", "write_p999_ms", "events", "delivery_p50_ms", "delivery_p99_ms", "delivery_p999_ms"}}
	f := func(x float64) string { return fmt.Sprintf("%.3f", x) }
	for _, iv := range ivs {
		t.Rows = append(t.Rows, []string{f(iv.StartMs), fmt.Sprint(iv.WritesScheduled), fmt.Sprint(iv.WritesCompleted),
			fmt.Sprint(iv.WriteErrors), f(iv.WriteP50Ms), f(iv.WriteP99Ms), f(iv.WriteP999Ms), fmt.Sprint(iv.Events),
			f(iv.DeliveryP50Ms), f(iv.DeliveryP99Ms), f(iv.DeliveryP999Ms)})
	}
	t.Numeric = make([]bool, len(t.Header))
	for i := range t.Numeric {
		t.Numeric[i] = true
	}
	return t
}

// faultRows lays faults out as metric/value rows for makeRunTable.
func faultRows(faults []report.Fault) [][]string {
	var rows [][]string
	for _, f := range faults {
		name := fmt.Sprintf("fault %s (%s)", f.Kind, f.Member)
		rec := "not recovered"
		if f.Recovered {
			rec = fmt.Sprintf("%.0f ms (writes %.0f ms, watchers %.0f ms)", f.RecoveryMs, f.WriteRecoveryMs, f.WatchRecoveryMs)
		}
		relists := f.RelistSummary()
		rows = append(rows,
			[]string{name + " recovery", rec},
			[]string{name + " leader before / after", fmt.Sprintf("%s / %s", f.LeaderBefore, f.LeaderAfter)},
			[]string{name + " relists", relists},
			[]string{name + " write errors (timeouts)", fmt.Sprintf("%d (%d)", f.WriteErrors, f.WriteTimeouts)},
			[]string{name + " probe errors, longest stall", fmt.Sprintf("%d writes, %d reads, %.0f ms", f.Probe.Writes.Errors, f.Probe.Reads.Errors, f.Probe.LongestStallMs)},
		)
		if f.Error != "" {
			rows = append(rows, []string{name + " error", f.Error})
		}
	}
	return rows
}

// memberRows lays per-member figures out as metric/value rows.
func memberRows(members []report.MemberStats) [][]string {
	var rows [][]string
	if len(members) == 1 && members[0].Writes == nil {
		return nil // the one member's figures are the run's
	}
	for _, m := range members {
		name := "member " + m.Name
		if m.Name == "" {
			name = "member " + m.Endpoint
		}
		if m.Writes != nil {
			rows = append(rows, []string{name + " write latency", fmt.Sprintf("%s; %d errors", lat(m.Writes.Latency), m.Writes.Errors)})
		}
		if m.Delivery != nil {
			rows = append(rows, []string{name + " delivery latency", fmt.Sprintf("%s; %d events", lat(m.Delivery.FromCommit), m.Delivery.Events)})
		}
		size := fmt.Sprintf("%d bytes (%d in use)", m.DBSizeBytes, m.DBSizeInUseBytes)
		if m.Error != "" {
			size = "unknown: " + m.Error
		}
		rows = append(rows, []string{name + " db size at end", size})
	}
	return rows
}
