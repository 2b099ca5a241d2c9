package command

import (
	"fmt"
	"slices"
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

// makeEtcdMetricsTable lays out etcd's own /metrics per phase (summed
// over the members when there are several): the operations inside etcd,
// raft proposals, watchers (slow ones in parentheses) and disk latency
// (txns, mvcc transactions of several operations, 0 for kube-apiserver's,
// are in the JSON), in at most 116 columns with the longest phase names
// ("released after compaction 1") and six-digit counts.
func makeEtcdMetricsTable(m *report.EtcdMetrics) output.Table {
	t := output.Table{Header: []string{"etcd phase (/metrics)", "puts", "deletes", "ranges", "proposals", "watchers", "commit p99 ms", "fsync p99 ms"},
		Numeric: []bool{false, true, true, true, true, true, true, true}}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	for _, p := range m.Phases {
		t.Rows = append(t.Rows, []string{p.Phase, fmt.Sprint(p.Puts), fmt.Sprint(p.Deletes), fmt.Sprint(p.Ranges),
			fmt.Sprint(p.ProposalsCommitted), fmt.Sprintf("%d (%d)", p.Watchers, p.SlowWatchers), ms(p.BackendCommitP99Ms), ms(p.WALFsyncP99Ms)})
	}
	return t
}

// etcdMetricsNote explains the table of makeEtcdMetricsTable and sums up
// the db size samples (etcdDBSizeNote).
func etcdMetricsNote(m *report.EtcdMetrics) string {
	from := m.Endpoint
	if len(m.Members) > 1 {
		from = fmt.Sprintf("%d members summed", len(m.Members))
	}
	s := "etcd's /metrics (" + from + ", every " + intervalText(m.IntervalMs) + "): puts, deletes, ranges are etcd_mvcc_*_total " +
		"(a Txn's own puts and ranges count too; etcd_mvcc_txn_total, only txns of several operations, is in the JSON), proposals etcd_server_proposals_committed_total, watchers the most " +
		"etcd_debugging_mvcc_watcher_total (in parentheses slow_watcher_total) in the phase, commit and fsync p99 ms of etcd_disk_backend_commit_duration_seconds " +
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
// size samples (member 0's, with several), and the failed reads; ""
// without either.
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
		of := ""
		if len(m.Members) > 1 {
			of = " of member 0"
		}
		parts = append(parts, fmt.Sprintf("db size (in use)%s over %d samples: first %s (%s), peak %s (%s) at %.1f s in %s, last %s (%s)", of, n,
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

// serverMetricsTables are the tables of the servers' own /metrics per
// phase and the lines that explain them: etcd's (summed over its members,
// then each member's when there are several, then the RPCs it handled)
// and the kube-apiservers' (makeAPIServerPhaseTable, when their /metrics
// were read, not their processes alone); a member whose db sizes alone
// were read gives a line and no table.
func serverMetricsTables(m *report.EtcdMetrics, usage []report.APIServerUsage, metrics []report.APIServerMetric) ([]output.Table, []string) {
	var tables []output.Table
	var notes []string
	switch {
	case m != nil && len(m.Phases) > 0:
		tables = append(tables, makeEtcdMetricsTable(m))
		notes = append(notes, etcdMetricsNote(m))
		if len(m.Members) > 1 {
			tables = append(tables, makeEtcdMembersTable(m))
			notes = append(notes, etcdMembersNote(m))
		}
		if t, note := makeEtcdRPCTable(m); len(t.Rows) > 0 {
			tables = append(tables, t)
			notes = append(notes, note)
		}
	case m != nil && len(m.Samples) > 0:
		notes = append(notes, etcdDBSizeNote(m)) // the db sizes alone (from Status): no table
	}
	if t := makeAPIServerPhaseTable(usage, metrics); len(t.Rows) > 0 && len(metrics) > 0 {
		tables = append(tables, t)
		notes = append(notes, apiserverPhaseNote)
		if n := apiserverObjectsNote(usage, metrics); n != "" {
			notes = append(notes, n)
		}
	}
	return tables, notes
}

// makeEtcdMembersTable lays out each member's own /metrics per phase
// (report.EtcdMetrics.Members), phase by phase, the members in their
// order: what each applied, served and held, and its disk latency.
func makeEtcdMembersTable(m *report.EtcdMetrics) output.Table {
	t := output.Table{Header: []string{"etcd phase (each member)", "member", "puts", "ranges", "watchers", "db size", "commit p99 ms", "fsync p99 ms"},
		Numeric: []bool{false, true, true, true, true, true, true, true}}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	for _, sum := range m.Phases {
		for i, mm := range m.Members {
			for _, p := range mm.Phases {
				if p.Phase != sum.Phase {
					continue
				}
				t.Rows = append(t.Rows, []string{p.Phase, strconv.Itoa(i), fmt.Sprint(p.Puts), fmt.Sprint(p.Ranges),
					fmt.Sprintf("%d (%d)", p.Watchers, p.SlowWatchers), sizeText(p.DBSizeBytes), ms(p.BackendCommitP99Ms), ms(p.WALFsyncP99Ms)})
			}
		}
	}
	return t
}

// etcdMembersNote explains the table of makeEtcdMembersTable: which
// member is which, and the failed scrapes of each.
func etcdMembersNote(m *report.EtcdMetrics) string {
	var ms []string
	for i, mm := range m.Members {
		s := fmt.Sprintf("%d %s", i, mm.Endpoint)
		if mm.Errors > 0 {
			s += fmt.Sprintf(" (%d scrapes failed, the first: %s)", mm.Errors, mm.Error)
		}
		ms = append(ms, s)
	}
	return "etcd per member (each one's /metrics): " + strings.Join(ms, ", ") + "; watchers the most in the phase (slow ones in parentheses), " +
		"db size the largest etcd_mvcc_db_total_size_in_bytes; the first etcd table sums the members: every member applies every " +
		"write, so its puts, deletes, txns and proposals are the cluster's times " + strconv.Itoa(len(m.Members)) +
		", while ranges, watchers and RPCs are each served by one member; its p99s are of the members' histogram buckets summed, not averaged"
}

// rpcColumns are the gRPC methods makeEtcdRPCTable gives a column of
// their own, in order; the Lease* methods share one, the rest "other".
var rpcColumns = []string{"Range", "Txn", "Put", "DeleteRange", "Watch"}

// makeEtcdRPCTable lays out the RPCs etcd handled per phase
// (report.EtcdMetricsPhase.HandledRPCs, summed over the members), by
// method whatever their code, and those not OK; its note names the codes
// that were not OK. No rows when no phase has RPCs (a result written
// before lwbench read them).
func makeEtcdRPCTable(m *report.EtcdMetrics) (output.Table, string) {
	header := append(append([]string{"etcd phase (RPCs handled)"}, rpcColumns...), "Lease*", "other", "not OK")
	t := output.Table{Header: header, Numeric: []bool{false, true, true, true, true, true, true, true, true}}
	var failed []string
	for _, p := range m.Phases {
		if len(p.HandledRPCs) == 0 {
			continue
		}
		counts := make([]int64, len(rpcColumns)+3)
		codes := map[string]int64{}
		var order []string
		for _, r := range p.HandledRPCs {
			i := slices.Index(rpcColumns, r.Method)
			switch {
			case i >= 0:
			case strings.HasPrefix(r.Method, "Lease"):
				i = len(rpcColumns)
			default:
				i = len(rpcColumns) + 1
			}
			counts[i] += r.Count
			if r.Code != "OK" {
				counts[len(counts)-1] += r.Count
				k := r.Method + " " + r.Code
				if _, ok := codes[k]; !ok {
					order = append(order, k)
				}
				codes[k] += r.Count
			}
		}
		row := []string{p.Phase}
		for _, n := range counts {
			row = append(row, fmt.Sprint(n))
		}
		t.Rows = append(t.Rows, row)
		if len(order) > 0 {
			parts := make([]string, len(order))
			for i, k := range order {
				parts[i] = fmt.Sprintf("%s %d", k, codes[k])
			}
			failed = append(failed, p.Phase+": "+strings.Join(parts, ", "))
		}
	}
	note := "etcd RPCs handled: the increase of grpc_server_handled_total by grpc_method, every code"
	if len(m.Members) > 1 {
		note += ", summed over the members"
	}
	note += "; a stream (Watch, LeaseKeepAlive) counts when it ends; not OK: those of another grpc_code (Canceled: the client ended it)"
	if len(failed) > 0 {
		note += " (" + strings.Join(failed, "; ") + ")"
	} else {
		note += " (none)"
	}
	return t, note
}
