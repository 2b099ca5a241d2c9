package command

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
)

// kubeAPIServerRow describes the apiservers: those lwbench started, or
// the existing cluster's (--kubeconfig), whose settings it does not know;
// and the clients' connections to them, when recorded.
func kubeAPIServerRow(a report.APIServerTarget, cache, compaction string) string {
	conns := ""
	if a.Connections != "" {
		conns = fmt.Sprintf(", client connections %s (%d open at the end)", a.Connections, a.ClientConnections)
	}
	if !a.Managed && a.URL != "" {
		if a.EtcdCompactionIntervalMs <= 0 {
			compaction = "the cluster's own"
		}
		return fmt.Sprintf("%s at %s (an existing cluster's: watch cache as its operator set it), compaction %s", a.Version, a.URL, compaction) + conns
	}
	row := fmt.Sprintf("%s x%d, watch cache %s, compaction %s", a.Version, a.Servers, cache, compaction)
	if a.FeatureGates != "" {
		row += ", feature gates " + a.FeatureGates
	}
	if len(a.Args) > 0 {
		row += ", flags " + strings.Join(a.Args, " ")
	}
	return row + conns
}

// makeKubeRunTable lays a run through kube-apiserver out as metric/value
// rows, the summary `lwbench run --kube-apiserver` prints, and the notes
// below it: every value too long for a cell (runNotes.fit).
func makeKubeRunTable(r *report.KubeRunResult) (output.Table, *runNotes) {
	notes := &runNotes{}
	a := r.APIServer
	cache := "off"
	if a.WatchCache {
		cache = "on"
	}
	compaction := "off"
	if a.EtcdCompactionIntervalMs > 0 {
		compaction = fmt.Sprintf("every %.0f ms", a.EtcdCompactionIntervalMs)
	}
	var reqs []string
	for _, c := range r.Requests {
		rv := c.ResourceVersion
		if rv == "" {
			rv = `""`
		}
		reqs = append(reqs, fmt.Sprintf("%s RV=%s %s: %d", c.Verb, rv, c.Outcome, c.Count))
	}
	causes := map[string]int{}
	var relistObjects, relistBytes int64
	for _, rl := range r.Relists {
		causes[kubeRelistCause(rl)]++
		relistObjects += rl.Objects
		relistBytes += rl.Bytes
	}
	var causeList []string
	for _, c := range slices.Sorted(maps.Keys(causes)) {
		causeList = append(causeList, fmt.Sprintf("%s %d", c, causes[c]))
	}
	relists := fmt.Sprint(len(r.Relists))
	if len(causeList) > 0 {
		relists += " (" + strings.Join(causeList, ", ") + ")"
	}
	holds := "-"
	if len(r.Holds) > 0 {
		var hs []string
		for _, h := range r.Holds {
			past := "compacted past"
			if !h.Compacted {
				past = "not compacted past"
			}
			hs = append(hs, fmt.Sprintf("informer %d from revision %d for %.0f ms, %s", h.Informer, h.HeldRevision, h.ReleasedAtMs-h.HeldAtMs, past))
		}
		holds = strings.Join(hs, "; ")
	}
	v := r.Validation
	rows := [][]string{
		{"etcd", fmt.Sprintf("%s (%s)", r.Target.EtcdVersion, targetDescription(r.Target))},
		{"kube-apiserver", kubeAPIServerRow(a, cache, compaction)},
		{"informers", fmt.Sprintf("%d client-go informers, WatchListClient %s", len(r.Informers), a.ClientWatchList)},
		{"writes completed / planned", fmt.Sprintf("%d / %d (%.0f/s)", r.Writes.Completed, r.Writes.Planned, r.Writes.ThroughputPerSecond)},
		{"write errors (timeouts)", fmt.Sprintf("%d (%d)", r.Writes.Errors, r.Writes.Timeouts)},
		{"write latency (from schedule)", lat(r.Writes.Latency)},
		{"events delivered", fmt.Sprintf("%d (%.0f/s; %d timed)", r.Delivery.Events, r.Delivery.EventsPerSecond, r.Delivery.TimedEvents)},
		{"delivery latency from response" + notHeldBack(r.Delivery), lat(r.Delivery.FromCommit)},
	}
	rows = append(rows, heldBackRows(r.Delivery.HeldBack, "informers", "response")...)
	rows = append(rows, [][]string{
		{"informer requests", strings.Join(reqs, "; ")},
		{"relists (cause)", relists},
		{"relist objects / bytes", fmt.Sprintf("%d / %s", relistObjects, sizeText(relistBytes))},
		{"held informers", holds},
	}...)
	if r.Interrupted {
		rows = append([][]string{{"interrupted", "yes: the figures cover the run until the interruption"}}, rows...)
	}
	if len(r.Etcd) > 0 {
		rows = append(rows, []string{"etcd requests", fmt.Sprintf("%d kinds (the etcd requests table below)", len(r.Etcd))})
	}
	rows = append(rows, kubeStackRows(r)...)
	rows = append(rows,
		[]string{"history events recorded", fmt.Sprint(v.HistoryEvents)},
		[]string{"lost events", fmt.Sprint(v.Lost)},
		[]string{"duplicated events", fmt.Sprint(v.Duplicated)},
		[]string{"out-of-order events", fmt.Sprint(v.OutOfOrder)},
		[]string{"resumable / bookmarkable violations", fmt.Sprintf("%d / %d", v.Resumable, v.Bookmarkable)},
		[]string{"unexpected events", fmt.Sprint(v.Unexpected)},
		[]string{"cache mismatches at end", fmt.Sprint(v.CacheMismatches)},
		[]string{"unsynced informers at end", fmt.Sprint(v.UnsyncedWatchers)},
	)
	return output.Table{Header: []string{"metric", "value"}, Rows: notes.fit(rows)}, notes
}

// kubeRelistCause is what forced a relist through kube-apiserver: the
// outcome of the request before it, "none" when none failed.
func kubeRelistCause(rl report.KubeRelist) string {
	if rl.Cause == "" {
		return "none"
	}
	return rl.Cause
}

// makeKubeEtcdTable lays out what the counting proxy saw etcd receive,
// by phase and request shape.
func makeKubeEtcdTable(reqs []report.EtcdRequests) output.Table {
	t := output.Table{Header: []string{"etcd phase", "request", "requests", "bytes in", "responses", "bytes out"},
		Numeric: []bool{false, false, true, true, true, true}}
	for _, e := range reqs {
		t.Rows = append(t.Rows, []string{e.Phase, e.Method + " " + e.Kind, fmt.Sprint(e.Requests), fmt.Sprint(e.RequestBytes),
			fmt.Sprint(e.Responses), fmt.Sprint(e.ResponseBytes)})
	}
	return t
}

// writeKubeRunTail writes what follows the summary of a run through
// kube-apiserver (writeTail): the relists, side by side as run's, and
// etcd's requests, then the notes and the verdict.
func writeKubeRunTail(out, errOut io.Writer, f output.Format, r *report.KubeRunResult, notes *runNotes) error {
	var tables []output.Table
	var intro []string
	if len(r.Relists) > 0 {
		var rs []resync
		for _, rl := range r.Relists {
			rs = append(rs, resync{reason: kubeRelistCause(rl), objects: rl.Objects, backoffMs: rl.BackoffMs, listMs: rl.DurationMs})
		}
		tables = append(tables, makeRelistTable(rs))
		intro = append(intro, kubeRelistNote)
	}
	if len(r.Etcd) > 0 {
		tables = append(tables, makeKubeEtcdTable(r.Etcd))
	}
	return writeTail(out, errOut, f, tables, intro, notes, nil, r.Verdict)
}

// kubeRelistNote explains the relists table of a run through
// kube-apiserver.
const kubeRelistNote = "relists: by the outcome of the request before them, each cause's slowest resync, resync = backoff " +
	"(client-go's wait before relisting) + relist (its LIST or WATCHLIST requests, to the last page or the initial events' bookmark)"

// kubeMetricRows are the metrics of kube-apiserver's own /metrics the
// table shows, in order, each summed over the apiservers and the phases
// (a gauge: per phase, its value at the phase's end); a metric without
// series shows 0, except apiserver_cache_list_*, which kube-apiserver
// 1.37 hides.
var kubeMetricRows = []string{
	"apiserver_request_total",
	"apiserver_longrunning_requests",
	"apiserver_storage_list_total",
	"apiserver_storage_list_fetched_objects_total",
	"apiserver_storage_list_evaluated_objects_total",
	"apiserver_storage_list_returned_objects_total",
	"apiserver_cache_list_total",
	"apiserver_cache_list_fetched_objects_total",
	"apiserver_cache_list_returned_objects_total",
	"apiserver_watch_cache_initializations_total",
	"apiserver_watch_cache_events_received_total",
	"apiserver_watch_cache_events_dispatched_total",
	"apiserver_watch_cache_consistent_read_total",
	"apiserver_storage_events_received_total",
	"apiserver_watch_events_total",
	"etcd_requests_total",
	"etcd_request_errors_total",
	"apiserver_flowcontrol_rejected_requests_total",
}

// kubeByPhaseRows are the metrics the table also shows per phase.
var kubeByPhaseRows = []string{"etcd_requests_total", "apiserver_storage_list_total", "apiserver_request_total"}

// topSeries is how many series a metric's row names.
const topSeries = 6

// kubeStackRows are the rows of kube-apiserver's compactions, the
// defragmentation, the apiservers' CPU and memory and their own metrics.
func kubeStackRows(r *report.KubeRunResult) [][]string {
	var rows [][]string
	comp := "-"
	if len(r.Compactions) > 0 {
		var cs []string
		for _, c := range r.Compactions {
			cs = append(cs, fmt.Sprintf("%d: to revision %d at %.1f s", c.N, c.Revision, c.AtMs/1000))
		}
		comp = strings.Join(cs, "; ")
	}
	rows = append(rows, []string{"kube-apiserver compactions", comp})
	defrag := "-"
	if d := r.Defrag; d != nil {
		var ms []string
		for _, m := range d.Members {
			ms = append(ms, fmt.Sprintf("%s %s -> %s", m.Endpoint, sizeText(m.BeforeBytes), sizeText(m.AfterBytes)))
		}
		defrag = fmt.Sprintf("%.1f ms at %.1f s (%s)", d.DurationMs, d.AtMs/1000, strings.Join(ms, "; "))
		if d.Error != "" {
			defrag += ": " + d.Error
		}
	}
	rows = append(rows, []string{"defragmentation", defrag})
	if c := r.Cleanup; c != nil {
		v := fmt.Sprintf("deleted %d objects and namespaces %v in %.1f s", c.ObjectsDeleted, c.Namespaces, c.DurationMs/1000)
		if c.Error != "" {
			v += ": " + c.Error
		}
		rows = append(rows, []string{"namespace cleanup", v})
	}
	for _, u := range r.APIServers {
		var ps []string
		for _, p := range u.Phases {
			ps = append(ps, fmt.Sprintf("%s %.2f", p.Phase, p.CPUSeconds))
		}
		cpu := fmt.Sprintf("%.2f", u.CPUSeconds)
		if len(ps) > 0 {
			cpu += " (" + strings.Join(ps, ", ") + ")"
		}
		rows = append(rows,
			[]string{u.Server + " CPU seconds (by phase)", cpu},
			[]string{u.Server + " resident memory", fmt.Sprintf("peak %.1f MiB, final %.1f MiB", float64(u.PeakResidentMemoryBytes)/(1<<20), float64(u.FinalResidentMemoryBytes)/(1<<20))})
	}
	if len(r.APIServerMetrics) == 0 {
		return rows
	}
	type agg struct {
		total  float64
		series map[string]float64
		phases map[string]float64
		order  []string
	}
	aggs := map[string]*agg{}
	for _, m := range r.APIServerMetrics {
		if m.Name == "apiserver_longrunning_requests" && m.Labels["verb"] != "WATCH" {
			continue
		}
		a := aggs[m.Name]
		if a == nil {
			a = &agg{series: map[string]float64{}, phases: map[string]float64{}}
			aggs[m.Name] = a
		}
		if _, ok := a.phases[m.Phase]; !ok {
			a.order = append(a.order, m.Phase)
		}
		a.phases[m.Phase] += m.Value
		if !m.Gauge {
			a.total += m.Value
			a.series[kubeload.SeriesLabel(m)] += m.Value
		}
	}
	for _, name := range kubeMetricRows {
		a := aggs[name]
		if a == nil {
			// apiserver_cache_list_* are hidden in 1.37 (deprecated):
			// no row rather than a 0 that reads as none served.
			if !strings.HasPrefix(name, "apiserver_cache_list_") {
				rows = append(rows, []string{name, "0"})
			}
			continue
		}
		if name == "apiserver_longrunning_requests" {
			rows = append(rows, []string{"watches open (apiserver_longrunning_requests WATCH) at each phase's end", phaseList(a.order, a.phases)})
			continue
		}
		keys := slices.SortedFunc(maps.Keys(a.series), func(x, y string) int {
			if a.series[x] != a.series[y] {
				if a.series[x] > a.series[y] {
					return -1
				}
				return 1
			}
			return strings.Compare(x, y)
		})
		var parts []string
		for i, k := range keys {
			if i == topSeries {
				parts = append(parts, fmt.Sprintf("%d more", len(keys)-topSeries))
				break
			}
			parts = append(parts, fmt.Sprintf("%s %.0f", k, a.series[k]))
		}
		rows = append(rows, []string{name, fmt.Sprintf("%.0f (%s)", a.total, strings.Join(parts, ", "))})
		if slices.Contains(kubeByPhaseRows, name) {
			rows = append(rows, []string{name + " by phase", phaseList(a.order, a.phases)})
		}
	}
	if c, s := aggs["etcd_request_duration_seconds_count"], aggs["etcd_request_duration_seconds_sum"]; c != nil && s != nil && c.total > 0 {
		rows = append(rows, []string{"etcd request mean latency (etcd_request_duration_seconds)", fmt.Sprintf("%.2f ms over %.0f requests", s.total/c.total*1000, c.total)})
	}
	return rows
}

// phaseList lays values out by phase, in order: "seed 12, sync 3".
func phaseList(order []string, values map[string]float64) string {
	var ps []string
	for _, p := range order {
		ps = append(ps, fmt.Sprintf("%s %.0f", p, values[p]))
	}
	return strings.Join(ps, ", ")
}
