package command

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
)

// intervalText is an interval in ms as seconds, or minutes from a minute
// on; "-" for none.
func intervalText(ms float64) string {
	switch {
	case ms <= 0:
		return "-"
	case ms >= 60000:
		return strconv.FormatFloat(ms/60000, 'f', 1, 64) + " min"
	}
	return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s"
}

// expectedIntervalText is a periodic source's expected interval, "1.0
// min - 2.2 min" when jittered.
func expectedIntervalText(p report.PeriodicTraffic) string {
	if p.ExpectedMaxIntervalMs > p.ExpectedIntervalMs {
		return intervalText(p.ExpectedIntervalMs) + " - " + intervalText(p.ExpectedMaxIntervalMs)
	}
	return intervalText(p.ExpectedIntervalMs)
}

// makePeriodicTable lays out which periodic traffic of a cluster the run
// saw (report.PeriodicTrafficOf), in its order: the requests counted,
// the instances they came from, the interval per instance they give and
// upstream's; why a source was not seen goes to notes.
func makePeriodicTable(ps []report.PeriodicTraffic, notes *runNotes) output.Table {
	t := output.Table{Header: []string{"periodic traffic seen", "seen", "requests", "from", "every (each)", "expected"},
		Numeric: []bool{false, false, true, true, true, true}}
	for _, p := range ps {
		seen := "no"
		if p.Seen {
			seen = "yes"
		}
		if p.Note != "" {
			seen += " (note " + strconv.Itoa(notes.add(p.Source, p.Note)) + ")"
		}
		t.Rows = append(t.Rows, []string{p.Source, seen, fmt.Sprint(p.Count), fmt.Sprint(p.Instances),
			intervalText(p.ObservedIntervalMs), expectedIntervalText(p)})
	}
	return t
}

// periodicNote explains the table of makePeriodicTable.
func periodicNote(ps []report.PeriodicTraffic) string {
	window := 0.0
	if len(ps) > 0 {
		window = ps[0].WindowMs
	}
	return fmt.Sprintf("periodic traffic seen: the counting proxy's requests of each periodic source of "+
		"../shared/reference/cluster-traffic.md (section 1) over the %s after the seeding; from: the nodes, leaders, "+
		"kube-apiservers or resources they come from; every (each): the window x from / requests (compactions: between those seen); "+
		"expected: upstream's; the request each source sends and the source path of its interval are in the JSON "+
		"(periodicTraffic[].request, .upstream)", intervalText(window))
}

// makeEtcdMetricsTable lays out etcd's own /metrics per phase: the
// operations inside etcd, raft proposals, watchers and disk latency.
func makeEtcdMetricsTable(m *report.EtcdMetrics) output.Table {
	t := output.Table{Header: []string{"etcd phase (its /metrics)", "puts", "deletes", "ranges", "txns", "proposals", "watchers (slow)", "commit p99 ms", "fsync p99 ms"},
		Numeric: []bool{false, true, true, true, true, true, true, true, true}}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	for _, p := range m.Phases {
		t.Rows = append(t.Rows, []string{p.Phase, fmt.Sprint(p.Puts), fmt.Sprint(p.Deletes), fmt.Sprint(p.Ranges), fmt.Sprint(p.Txns),
			fmt.Sprint(p.ProposalsCommitted), fmt.Sprintf("%d (%d)", p.Watchers, p.SlowWatchers), ms(p.BackendCommitP99Ms), ms(p.WALFsyncP99Ms)})
	}
	return t
}

// etcdMetricsNote explains the table of makeEtcdMetricsTable and sums up
// the db size samples (etcdDBSizeNote).
func etcdMetricsNote(m *report.EtcdMetrics) string {
	s := "etcd's /metrics (" + m.Endpoint + ", every " + intervalText(m.IntervalMs) + "): puts, deletes, ranges, txns are etcd_mvcc_*_total " +
		"(a Txn's own puts and ranges count too; txns only those of several operations), proposals etcd_server_proposals_committed_total, watchers the most " +
		"etcd_debugging_mvcc_watcher_total (slow_watcher_total) in the phase, commit and fsync p99 ms of etcd_disk_backend_commit_duration_seconds " +
		"and etcd_disk_wal_fsync_duration_seconds"
	if n := dbSizeSummary(m); n != "" {
		s += "; " + n
	}
	return s
}

// etcdDBSizeNote sums up the db size samples of a member whose sizes
// alone were read (report.EtcdMetricsFromStatus).
func etcdDBSizeNote(m *report.EtcdMetrics) string {
	return "etcd's db size from Maintenance Status (" + m.Endpoint + ", every " + intervalText(m.IntervalMs) + "): " + dbSizeSummary(m)
}

// dbSizeSummary gives the first, the largest and the last of m's db
// size samples, and the failed reads; "" without either.
func dbSizeSummary(m *report.EtcdMetrics) string {
	var parts []string
	if n := len(m.Samples); n > 0 {
		peak := m.Samples[0]
		for _, x := range m.Samples {
			if x.DBSizeBytes > peak.DBSizeBytes {
				peak = x
			}
		}
		first, last := m.Samples[0], m.Samples[n-1]
		parts = append(parts, fmt.Sprintf("db size (in use) over %d samples: first %s (%s), peak %s (%s) at %.1f s in %s, last %s (%s)", n,
			sizeText(first.DBSizeBytes), sizeText(first.DBSizeInUseBytes), sizeText(peak.DBSizeBytes), sizeText(peak.DBSizeInUseBytes),
			peak.AtMs/1000, peak.Phase, sizeText(last.DBSizeBytes), sizeText(last.DBSizeInUseBytes)))
	}
	if m.Errors > 0 {
		when := ""
		if n := len(m.FailedAtMs); n > 0 {
			when = fmt.Sprintf(" (issued from %.1f s to %.1f s)", m.FailedAtMs[0]/1000, m.FailedAtMs[n-1]/1000)
		}
		parts = append(parts, fmt.Sprintf("%d reads failed%s, the first: %s", m.Errors, when, m.Error))
	}
	return strings.Join(parts, "; ")
}
