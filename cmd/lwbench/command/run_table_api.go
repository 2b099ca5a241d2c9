package command

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
)

// kubeAPIServerRow describes the apiservers: those lwbench started, or
// the existing cluster's (--kubeconfig), whose settings it does not know;
// and the clients' connections to them, when recorded.
func kubeAPIServerRow(a report.APIServerTarget) string {
	cache := "off"
	if a.WatchCache {
		cache = "on"
	}
	compaction := "off"
	if a.EtcdCompactionIntervalMs > 0 {
		compaction = fmt.Sprintf("every %.0f ms", a.EtcdCompactionIntervalMs)
	}
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

// apiRequestsRow sums the client-go informers' requests up by verb,
// resourceVersion and outcome.
func apiRequestsRow(r *report.RunResult) string {
	var reqs []string
	for _, c := range r.Requests {
		rv := c.ResourceVersion
		if rv == "" {
			rv = `""`
		}
		reqs = append(reqs, fmt.Sprintf("%s RV=%s %s: %d", c.Verb, rv, c.Outcome, c.Count))
	}
	return strings.Join(reqs, "; ")
}

// holdsRow describes the informers held back across a compaction
// through kube-apiserver, "-" when none was.
func holdsRow(holds []report.Hold) string {
	if len(holds) == 0 {
		return "-"
	}
	var hs []string
	for _, h := range holds {
		past := "compacted past"
		if !h.Compacted {
			past = "not compacted past"
		}
		hs = append(hs, fmt.Sprintf("informer %d from revision %d for %.0f ms, %s", h.Informer, h.HeldRevision, h.ReleasedAtMs-h.HeldAtMs, past))
	}
	return strings.Join(hs, "; ")
}

// makeEtcdRequestsTable lays out what the counting proxy saw etcd receive,
// by phase and request shape, summed over resources: a row per phase
// with the phase's sums, then its request shapes' rows, indented, so
// that the longest phase names ("restart kube-controller-manager") and
// shapes ("Txn if mod_revision=? then delete else range") fit 120
// columns.
func makeEtcdRequestsTable(reqs []report.EtcdRequests) output.Table {
	t := output.Table{Header: []string{"etcd phase / request", "requests", "bytes in", "responses", "bytes out"},
		Numeric: []bool{false, true, true, true, true}}
	row := func(name string, e report.EtcdRequests) []string {
		return []string{name, fmt.Sprint(e.Requests), fmt.Sprint(e.RequestBytes), fmt.Sprint(e.Responses), fmt.Sprint(e.ResponseBytes)}
	}
	rows := report.EtcdByKind(reqs)
	first := map[string]int{} // a phase's rows together, in the order phases first appear
	for i, e := range rows {
		if _, ok := first[e.Phase]; !ok {
			first[e.Phase] = i
		}
	}
	slices.SortStableFunc(rows, func(a, b report.EtcdRequests) int { return first[a.Phase] - first[b.Phase] })
	for i := 0; i < len(rows); {
		j := i
		var sum report.EtcdRequests
		for ; j < len(rows) && rows[j].Phase == rows[i].Phase; j++ {
			sum.Requests += rows[j].Requests
			sum.RequestBytes += rows[j].RequestBytes
			sum.Responses += rows[j].Responses
			sum.ResponseBytes += rows[j].ResponseBytes
		}
		t.Rows = append(t.Rows, row(rows[i].Phase, sum))
		for _, e := range rows[i:j] {
			t.Rows = append(t.Rows, row("  "+e.Method+" "+e.Kind, e))
		}
		i = j
	}
	return t
}

// makeEtcdResourceTable lays out what the counting proxy saw etcd
// receive by phase and resource, as rates over each phase's duration
// (report.EtcdByResource): a row per phase with the phase's sums, then
// its resources' rows, indented, requests without a resource "-". A
// built-in resource is named without its group (etcdResourceName), so
// that the longest phase names ("restart kube-controller-manager") and
// the longest resources ("validatingadmissionpolicybindings") fit 120
// columns beside the rates; keys read per second are in the JSON only.
func makeEtcdResourceTable(reqs []report.EtcdRequests, phases []report.EtcdPhase) output.Table {
	t := output.Table{Header: []string{"etcd phase / resource", "writes/s", "reads/s", "watch ev/s", "in/s", "out/s"},
		Numeric: []bool{false, true, true, true, true, true}}
	rate := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	row := func(name string, r report.EtcdResourceRates) []string {
		return []string{name, rate(r.WritesPerSecond), rate(r.ReadsPerSecond), rate(r.WatchEventsPerSecond),
			sizeText(int64(r.RequestBytesPerSecond)), sizeText(int64(r.ResponseBytesPerSecond))}
	}
	rows := report.EtcdByResource(reqs, phases)
	for i := 0; i < len(rows); {
		j := i
		var sum report.EtcdResourceRates
		for ; j < len(rows) && rows[j].Phase == rows[i].Phase; j++ {
			sum.WritesPerSecond += rows[j].WritesPerSecond
			sum.ReadsPerSecond += rows[j].ReadsPerSecond
			sum.WatchEventsPerSecond += rows[j].WatchEventsPerSecond
			sum.RequestBytesPerSecond += rows[j].RequestBytesPerSecond
			sum.ResponseBytesPerSecond += rows[j].ResponseBytesPerSecond
		}
		t.Rows = append(t.Rows, row(rows[i].Phase, sum))
		for _, r := range rows[i:j] {
			t.Rows = append(t.Rows, row("  "+etcdResourceName(r.Resource), r))
		}
		i = j
	}
	return t
}

// etcdResourceName is a resource's name in the etcd by resource table:
// kubectl's "resource.group" (report.EtcdRequests.Resource) without the
// group for a built-in resource, whose plural is unique among the
// built-ins and which kube-apiserver stores without its group
// (keyspace.ResourcePath); "-" for no resource.
func etcdResourceName(groupResource string) string {
	if groupResource == "" {
		return "-"
	}
	resource, group, ok := strings.Cut(groupResource, ".")
	if ok && !strings.Contains(keyspace.ResourcePath(group, resource), "/") {
		return resource
	}
	return groupResource
}

// etcdResourceNote explains the table of makeEtcdResourceTable, with
// each phase's duration.
func etcdResourceNote(phases []report.EtcdPhase) string {
	ds := make([]string, len(phases))
	for i, p := range phases {
		ds[i] = fmt.Sprintf("%s %.1f s", p.Phase, p.DurationMs/1000)
	}
	return "etcd by resource: per second of each phase (" + strings.Join(ds, ", ") + "), the phase's sum, then by the resource of each request's key " +
		"(a built-in resource without its group, which the JSON's etcd[].resource has); " +
		"writes are Put, DeleteRange and Txn that put or delete, reads Range and RangeStream, watch ev the events of the resource's watches; " +
		"in/s and out/s are the bytes of every message to etcd and from it"
}

// apiRelistNote explains the relists table of a run through
// kube-apiserver.
const apiRelistNote = "relists: by the outcome of the request before them, each cause's slowest resync, resync = backoff " +
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

// apiServerRows are the rows of the apiservers' CPU and memory and their
// own metrics, for a run through kube-apiserver.
func apiServerRows(r *report.RunResult) [][]string {
	var rows [][]string
	for _, u := range append(append([]report.APIServerUsage(nil), r.APIServers...), r.Components...) {
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
			// At most 53 columns: the label and a 60-column value
			// within maxRunTableWidth.
			rows = append(rows, []string{"watches open at phase ends (longrunning WATCH)", phaseList(a.order, a.phases)})
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
		rows = append(rows, []string{"etcd_request_duration_seconds mean", fmt.Sprintf("%.2f ms over %.0f requests", s.total/c.total*1000, c.total)})
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

// apiserverPhaseNote explains the table of makeAPIServerPhaseTable.
const apiserverPhaseNote = "kube-apiserver per phase (its own /metrics, scraped at each phase's start and end): requests are " +
	"apiserver_request_total (a WATCH counts when it ends), not 2xx those of another code, POST to LIST by its verb label (PUT with " +
	"PATCH, DELETE with DELETECOLLECTION); to etcd is etcd_requests_total; cores process_cpu_seconds_total's increase over the " +
	"phase's duration; rss the most resident memory seen in it; by resource, code and operation in the JSON (apiserverMetrics)"

// apiserverObjectsNote says how many objects each kube-apiserver stored
// at the end of each phase: apiserver_resource_objects (before 1.34
// apiserver_storage_objects) summed over resources, a count it refreshes
// periodically, not at each write; "" when no phase has a count.
func apiserverObjectsNote(usage []report.APIServerUsage, metrics []report.APIServerMetric) string {
	type key struct{ server, phase string }
	objects, storage := map[key]float64{}, map[key]float64{}
	for _, m := range metrics {
		switch m.Name {
		case "apiserver_resource_objects":
			objects[key{m.Server, m.Phase}] += max(m.Value, 0) // -1: its count failed
		case "apiserver_storage_objects":
			storage[key{m.Server, m.Phase}] += max(m.Value, 0)
		}
	}
	if len(objects) == 0 {
		objects = storage
	}
	var parts []string
	for _, u := range usage {
		var ps []string
		for _, p := range u.Phases {
			if v, ok := objects[key{u.Server, p.Phase}]; ok {
				ps = append(ps, fmt.Sprintf("%s %.0f", p.Phase, v))
			}
		}
		if len(ps) > 0 {
			parts = append(parts, u.Server+" "+strings.Join(ps, ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "kube-apiserver's objects stored at each phase's end (apiserver_resource_objects summed over resources, a count it " +
		"refreshes periodically, not at each write): " + strings.Join(parts, "; ")
}

// makeAPIServerPhaseTable lays out each kube-apiserver's own /metrics per
// phase, a row per server and phase in usage's order: its requests by
// verb, the requests it sent etcd, its CPU cores and peak resident set
// (the objects it stores are in apiserverObjectsNote). A row names its
// phase, and its server too when there are several ("apiserver1:
// seed"). At most 115 columns with one server, the longest phase names
// ("released after compaction 1") and seven-digit counts. No rows
// without usage.
func makeAPIServerPhaseTable(usage []report.APIServerUsage, metrics []report.APIServerMetric) output.Table {
	t := output.Table{Header: []string{"apiserver phase", "requests", "not 2xx", "POST", "PUT", "DELETE", "LIST", "to etcd", "cores", "rss"},
		Numeric: []bool{false, true, true, true, true, true, true, true, true, true}}
	type key struct{ server, phase string }
	type figures struct{ requests, not2xx, post, put, del, list, etcd float64 }
	fs := map[key]*figures{}
	for _, m := range metrics {
		k := key{m.Server, m.Phase}
		f := fs[k]
		if f == nil {
			f = &figures{}
			fs[k] = f
		}
		switch m.Name {
		case "apiserver_request_total":
			f.requests += m.Value
			if !strings.HasPrefix(m.Labels["code"], "2") {
				f.not2xx += m.Value
			}
			switch m.Labels["verb"] {
			case "POST":
				f.post += m.Value
			case "PUT", "PATCH":
				f.put += m.Value
			case "DELETE", "DELETECOLLECTION":
				f.del += m.Value
			case "LIST":
				f.list += m.Value
			}
		case "etcd_requests_total":
			f.etcd += m.Value
		}
	}
	n := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	for _, u := range usage {
		for _, p := range u.Phases {
			f := fs[key{u.Server, p.Phase}]
			if f == nil {
				f = &figures{}
			}
			cores := "-"
			if p.DurationMs > 0 {
				cores = strconv.FormatFloat(p.CPUSeconds/(p.DurationMs/1000), 'f', 2, 64)
			}
			label := p.Phase
			if len(usage) > 1 {
				label = u.Server + ": " + p.Phase
			}
			t.Rows = append(t.Rows, []string{label, n(f.requests), n(f.not2xx), n(f.post), n(f.put), n(f.del), n(f.list),
				n(f.etcd), cores, sizeText(p.PeakResidentMemoryBytes)})
		}
	}
	return t
}
