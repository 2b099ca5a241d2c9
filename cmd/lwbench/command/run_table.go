package command

import (
	"fmt"
	"github.com/dustin/go-humanize"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

func lat(l report.Latency) string {
	if l.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("p50 %.2f / p99 %.2f / p99.9 %.2f / max %.2f ms", l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
}

// Widths of the run summary: no line of it is wider than
// maxRunTableWidth; a value longer than maxValueWidth goes below the table
// as a numbered note (runNotes), its cell saying which.
const (
	maxRunTableWidth = 120
	maxValueWidth    = 60
)

// makeRunTable lays a run result out as metric/value rows, the summary
// `lwbench run` prints, through either client set (a run through
// kube-apiserver has its own rows: the apiservers, the informers'
// requests, the holds, the apiservers' CPU, memory and metrics), and the
// notes that go below it (runNotes): the first relist's requests (the
// model's), and every value too long for a cell.
func makeRunTable(r *report.RunResult) (output.Table, *runNotes) {
	notes := &runNotes{}
	api := r.APIServer
	defrag := "-"
	if r.Defrag != nil {
		defrag = fmt.Sprintf("%.2f ms", r.Defrag.DurationMs)
		if len(r.Defrag.Members) > 1 {
			defrag += fmt.Sprintf(" (%d members, one at a time)", len(r.Defrag.Members))
		}
		if r.Defrag.Error != "" {
			defrag += fmt.Sprintf(" (error: note %d)", notes.add("defrag error", r.Defrag.Error))
		}
	}
	// A cluster's model runs kube-apiserver's compactor, as a run through
	// kube-apiserver has it.
	apiCompactor := api != nil || r.Cluster != nil
	var compactRevs []string
	for _, c := range r.Compactions {
		s := fmt.Sprint(c.Revision)
		if c.Error != "" {
			s += " (error)"
		}
		if apiCompactor {
			s += fmt.Sprintf(" at %.1f s", c.AtMs/1000)
		}
		compactRevs = append(compactRevs, s)
	}
	if len(compactRevs) == 0 {
		compactRevs = []string{"-"}
	}
	compactions := "compactions at revision"
	if apiCompactor {
		compactions = "kube-apiserver's compactions at revision"
	}
	v := r.Validation
	rows := [][]string{{"etcd", fmt.Sprintf("%s (%s)", r.Target.EtcdVersion, targetDescription(r.Target))}}
	if api != nil {
		rows = append(rows,
			[]string{"kube-apiserver", kubeAPIServerRow(*api)},
			[]string{"informers", fmt.Sprintf("%d client-go informers, WatchListClient %s", len(r.Informers), api.ClientWatchList)})
		if c := r.Cluster; c != nil {
			rows = append(rows, clusterRows(c, r.Scenario.WriteRatePerSecond)...)
		}
	} else {
		rows = append(rows,
			[]string{"profile", r.Scenario.Profile + watchListNote(r.Scenario)},
			[]string{"informers / streams / connections", fmt.Sprintf("%d / %d / %d", r.Scenario.Watchers, r.Scenario.Streams, r.Scenario.Connections)})
		if c := r.Cluster; c != nil {
			rows = append(rows, clusterRows(c, r.Scenario.WriteRatePerSecond)...) // the model of a cluster
		}
	}
	fromResponse, fromSend := lat(r.Delivery.FromResponse), lat(r.Delivery.FromSend)
	if r.Cluster != nil && r.Delivery.TimedEvents == 0 {
		// A cluster's events are the control plane's writes (the pods of
		// the churned Deployments), whose send lwbench does not see.
		fromResponse = "- (the events come from the control plane's writes)"
		fromSend = fromResponse
	}
	rows = append(rows, [][]string{
		{"writes completed / planned", fmt.Sprintf("%d / %d (%.0f/s)", r.Writes.Completed, r.Writes.Planned, r.Writes.ThroughputPerSecond)},
		{"write errors (timeouts)", fmt.Sprintf("%d (%d)", r.Writes.Errors, r.Writes.Timeouts)},
		{"write latency (from schedule)", lat(r.Writes.Latency)},
		{"events delivered", fmt.Sprintf("%d (%.0f/s; %d timed)", r.Delivery.Events, r.Delivery.EventsPerSecond, r.Delivery.TimedEvents)},
		{"delivery latency from response" + notHeldBack(r.Delivery), fromResponse},
		{"delivery latency from send" + notHeldBack(r.Delivery), fromSend},
	}...)
	rows = append(rows, heldBackRows(r.Delivery.HeldBack)...)
	relists := fmt.Sprint(len(r.Relists))
	var relistObjects, relistBytes int64
	for _, rl := range r.Relists {
		relistObjects += rl.Objects
		relistBytes += rl.Bytes
	}
	if len(r.Relists) > 0 {
		relists += " (the relists table below)"
		if len(r.Relists[0].Attempts) > 0 {
			notes.addLines("first relist's requests", firstRelistRequests(r.Relists[0]))
		}
	}
	if api != nil {
		rows = append(rows, []string{"informer requests", apiRequestsRow(r)})
	} else {
		rows = append(rows,
			[]string{"initial lists", fmt.Sprintf("%d (%d objects)", r.InitialLists.Count, r.InitialLists.Objects)},
			[]string{"initial list latency", lat(r.InitialLists.Latency)})
	}
	rows = append(rows,
		[]string{"relists", relists},
		[]string{"relist objects / bytes", fmt.Sprintf("%d / %s", relistObjects, sizeText(relistBytes))})
	if api != nil {
		rows = append(rows, []string{"held informers", holdsRow(r.Holds)})
	}
	if r.Interrupted {
		rows = append([][]string{{"interrupted", "yes: the figures cover the run until the interruption"}}, rows...)
	}
	if cr := r.ConsistentReads; cr != nil {
		rows = append(rows,
			[]string{"consistent reads (cache / fallback)", fmt.Sprintf("%d (%d / %d), %d progress requests", cr.Requests, cr.ServedFromCache, cr.Fallbacks, cr.ProgressRequests)},
			[]string{"consistent read wait", lat(cr.ReadWait)})
	}
	rows = append(rows, []string{compactions, strings.Join(compactRevs, ", ")})
	if api == nil {
		rows = append(rows,
			[]string{"db size before compaction", dbSize(r.DBSize.BeforeCompactionBytes, r.DBSize.BeforeCompactionInUseBytes)},
			[]string{"db size after compaction", dbSize(r.DBSize.AfterCompactionBytes, r.DBSize.AfterCompactionInUseBytes)},
			[]string{"db size after defrag", dbSize(r.DBSize.AfterDefragBytes, r.DBSize.AfterDefragInUseBytes)})
	}
	rows = append(rows, []string{"defrag duration", defrag})
	if r.Defrag != nil && (len(r.Defrag.Members) > 1 || api != nil) {
		for _, m := range r.Defrag.Members {
			rows = append(rows, []string{"defrag of " + m.Endpoint, fmt.Sprintf("%.2f ms, %s -> %s", m.DurationMs, sizeText(m.BeforeBytes), sizeText(m.AfterBytes))})
		}
	}
	if len(r.Etcd) > 0 {
		rows = append(rows, []string{"etcd requests", fmt.Sprintf("%d kinds (the etcd requests table below)", len(report.EtcdByKind(r.Etcd)))})
	}
	rows = append(rows, apiServerRows(r)...)
	rows = append(rows,
		[]string{"history events recorded", fmt.Sprint(v.HistoryEvents)},
		[]string{"lost events", fmt.Sprint(v.Lost)},
		[]string{"duplicated events", fmt.Sprint(v.Duplicated)},
		[]string{"out-of-order events", fmt.Sprint(v.OutOfOrder)},
		[]string{"split revisions (atomic)", fmt.Sprint(v.Atomic)},
		[]string{"resumable / bookmarkable violations", fmt.Sprintf("%d / %d", v.Resumable, v.Bookmarkable)},
		[]string{"unexpected events", fmt.Sprint(v.Unexpected)},
		[]string{"prevKV mismatches (missing)", fmt.Sprintf("%d (%d)", v.PrevKVMismatches, v.PrevKVMissing)},
		[]string{"cache mismatches at end", fmt.Sprint(v.CacheMismatches)},
		[]string{"unsynced informers at end", fmt.Sprint(v.UnsyncedWatchers)},
	)
	if api != nil {
		rows = append(rows, []string{"unparsed resourceVersions", fmt.Sprint(v.UnparsedResourceVersions)})
	}
	if api == nil {
		var objects []string
		for _, rc := range r.Final.Resources {
			objects = append(objects, fmt.Sprintf("%s %d", rc.Resource, rc.Objects))
		}
		rows = append(rows,
			[]string{"final revision", fmt.Sprint(r.Final.Revision)},
			[]string{"final compact revision", fmt.Sprint(r.Final.CompactRevision)},
			[]string{"live objects", fmt.Sprintf("%d (%s)", r.Final.Objects, strings.Join(objects, ", "))})
	}
	rows = append(rows, memberRows(r.Members)...)
	rows = append(rows, faultRows(r.Faults)...)
	if c := r.Cleanup; c != nil {
		s := fmt.Sprintf("%d keys deleted, %d leases revoked, %d left under the prefix", c.KeysDeleted, c.LeasesRevoked, c.KeysLeft)
		if c.Namespaces != nil {
			s = fmt.Sprintf("deleted %d objects and namespaces %v in %.1f s; %d still present", c.ObjectsDeleted, c.Namespaces, c.DurationMs/1000, len(c.NamespacesLeft))
		}
		if c.Error != "" {
			s += fmt.Sprintf(" (error: note %d)", notes.add("cleanup error", c.Error))
		}
		rows = append(rows, []string{"cleanup", s})
	}
	if r.Self.NumCPU > 0 {
		rows = append(rows, selfRows(r.Self)...)
	}
	return output.Table{Header: []string{"metric", "value"}, Rows: notes.fit(rows)}, notes
}

// firstRelistRequests lists a relist's LIST requests, one line each, with
// their outcome.
func firstRelistRequests(rl report.Relist) []string {
	var lines []string
	for i, a := range rl.Attempts {
		rv := a.ResourceVersion
		if rv == "" {
			rv = `""`
		}
		res := "ok"
		if a.Error != "" {
			res = a.Error
		}
		req := fmt.Sprintf("RV=%s limit %d", rv, a.Limit)
		if a.WatchList {
			req = fmt.Sprintf("watch-list RV=%s", rv)
		}
		lines = append(lines, fmt.Sprintf("%d. %s: %s", i+1, req, res))
	}
	return lines
}

// resync is one relist as the relists table sums it up: what forced it
// (reason), the objects it read, its backoff and its relist.
type resync struct {
	reason            string
	objects           int64
	backoffMs, listMs float64
}

// runResyncs are a run's relists as resyncs, a watch cache's apart.
func runResyncs(relists []report.Relist) []resync {
	var out []resync
	for _, rl := range relists {
		name := rl.Reason
		if rl.Cache {
			name += " (watch cache)"
		}
		out = append(out, resync{reason: name, objects: rl.Objects, backoffMs: rl.BackoffMs, listMs: rl.DurationMs})
	}
	return out
}

// makeRelistTable lays relists out by reason, side by side: how many,
// the objects they read, and the slowest resync of each reason split
// into its backoff (client-go's wait before relisting; a watch cache's
// one second) and its relist (the LIST requests' duration, every
// attempt): resync = backoff + relist, the words `lwbench report` uses.
// No rows without relists.
func makeRelistTable(relists []resync) output.Table {
	t := output.Table{Header: []string{"relists", "count", "objects", "backoff ms", "relist ms", "resync ms"},
		Numeric: []bool{false, true, true, true, true, true}}
	type group struct {
		count, objects int64
		slowest        resync
	}
	groups := map[string]*group{}
	for _, rl := range relists {
		g := groups[rl.reason]
		if g == nil {
			g = &group{slowest: rl}
			groups[rl.reason] = g
		}
		g.count++
		g.objects += rl.objects
		if rl.backoffMs+rl.listMs > g.slowest.backoffMs+g.slowest.listMs {
			g.slowest = rl
		}
	}
	ms := func(x float64) string { return fmt.Sprintf("%.2f", x) }
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		g := groups[name]
		t.Rows = append(t.Rows, []string{name, fmt.Sprint(g.count), fmt.Sprint(g.objects),
			ms(g.slowest.backoffMs), ms(g.slowest.listMs), ms(g.slowest.backoffMs + g.slowest.listMs)})
	}
	return t
}

// relistNote explains the relists table.
const relistNote = "relists: each reason's slowest resync, resync = backoff (client-go's wait before relisting; " +
	"a watch cache's 1 s) + relist (its LIST requests' duration, every attempt)"

// runNotes are the numbered notes below the run summary: what does not
// fit in a cell.
type runNotes struct{ lines [][]string }

// fit moves every value of rows (metric/value) longer than
// maxValueWidth to a note, its cell saying which, and returns rows.
func (n *runNotes) fit(rows [][]string) [][]string {
	for _, row := range rows {
		if len(row[1]) > maxValueWidth {
			row[1] = fmt.Sprintf("(note %d)", n.add(row[0], row[1]))
		}
	}
	return rows
}

// add adds a note "N. what: text" and returns N.
func (n *runNotes) add(what, text string) int {
	return n.addLines(what, []string{text})
}

// addLines adds a note of several lines, the first "N. what:".
func (n *runNotes) addLines(what string, lines []string) int {
	n.lines = append(n.lines, append([]string{what + ":"}, lines...))
	return len(n.lines)
}

// writeRunTail writes what follows the run summary (writeTail): the
// relists table, what the counting proxy saw etcd receive (a run through
// kube-apiserver with one), the notes, the warnings and the verdict.
func writeRunTail(out, errOut io.Writer, f output.Format, r *report.RunResult, notes *runNotes) error {
	var tables []output.Table
	var intro []string
	if len(r.Relists) > 0 {
		tables = append(tables, makeRelistTable(runResyncs(r.Relists)))
		if r.APIServer != nil {
			intro = append(intro, apiRelistNote)
		} else {
			intro = append(intro, relistNote)
		}
	}
	if r.Cluster != nil && r.Cluster.NodeHealth != nil && len(r.Cluster.NodeHealth.Phases) > 0 {
		tables = append(tables, makeNodeHealthTable(r.Cluster.NodeHealth))
	}
	if len(r.Etcd) > 0 {
		tables = append(tables, makeEtcdRequestsTable(r.Etcd))
		if len(r.EtcdPhases) > 0 {
			tables = append(tables, makeEtcdResourceTable(r.Etcd, r.EtcdPhases))
			intro = append(intro, etcdResourceNote(r.EtcdPhases))
		}
	}
	if len(r.PeriodicTraffic) > 0 {
		tables = append(tables, makePeriodicTable(r.PeriodicTraffic, notes))
		intro = append(intro, periodicNote(r.PeriodicTraffic))
	}
	st, sn := serverMetricsTables(r.EtcdMetrics, r.APIServers, r.APIServerMetrics)
	tables, intro = append(tables, st...), append(intro, sn...)
	return writeTail(out, errOut, f, tables, intro, notes, r.Warnings, r.Verdict)
}

// writeTail writes what follows a run's summary. For table and markdown,
// to out: the tables, the lines of intro (what explains them), the
// numbered notes, the warnings and the verdict, the last line, wrapped to
// maxRunTableWidth. For JSON and CSV, whose stdout is for programs, the
// warnings and the verdict to errOut.
func writeTail(out, errOut io.Writer, f output.Format, tables []output.Table, intro []string, notes *runNotes, warnings []string, verdict string) error {
	if f != output.FormatTable && f != output.FormatMarkdown {
		for _, w := range warnings {
			fmt.Fprintln(errOut, "warning: "+w)
		}
		if verdict != "" {
			fmt.Fprintln(errOut, verdict)
		}
		return nil
	}
	for _, t := range tables {
		fmt.Fprintln(out)
		if err := output.Write(out, f, t, nil); err != nil {
			return err
		}
	}
	text := append([]string(nil), intro...)
	for i, note := range notes.lines {
		text = append(text, fmt.Sprintf("%d. %s", i+1, note[0]))
		for _, l := range note[1:] {
			text = append(text, "   "+l)
		}
	}
	for _, w := range warnings {
		text = append(text, "warning: "+w)
	}
	if verdict != "" {
		text = append(text, verdict)
	}
	if len(text) > 0 {
		fmt.Fprintln(out)
	}
	for _, l := range text {
		for _, w := range wrapIndented(output.Escape(l), maxRunTableWidth) {
			if _, err := fmt.Fprintln(out, w); err != nil {
				return err
			}
		}
	}
	return nil
}

// wrapIndented breaks s at spaces into lines of at most width characters, the
// lines after the first indented as s is, plus two; a word longer than
// width stays whole.
func wrapIndented(s string, width int) []string {
	indent := strings.Repeat(" ", len(s)-len(strings.TrimLeft(s, " "))+2)
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = strings.Repeat(" ", len(s)-len(strings.TrimLeft(s, " "))) + w
			if len(lines) > 0 {
				line = indent + w
			}
		case len(line)+1+len(w) > width:
			lines = append(lines, line)
			line = indent + w
		default:
			line += " " + w
		}
	}
	return append(lines, line)
}

// dbSize is a member's db file size and the size in use, or "-" when it
// was not measured (no db file is 0 bytes).
func dbSize(bytes, inUseBytes int64) string {
	if bytes == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%s in use)", sizeText(bytes), sizeText(inUseBytes))
}

func selfRows(s report.SelfStats) [][]string {
	who := "lwbench"
	if s.IncludesEmbeddedEtcd {
		who = "lwbench + embedded etcd"
	}
	rows := [][]string{
		{who + " CPU", fmt.Sprintf("%.2f s (%.2f of %d cores)", s.CPUSeconds, s.CPUCores, s.NumCPU)},
		{who + " memory", fmt.Sprintf("max RSS %s, peak heap %s", sizeText(s.MaxRSSBytes), sizeText(s.PeakHeapBytes))},
	}
	if s.Etcd != nil {
		rows = append(rows, []string{"etcd CPU / memory", fmt.Sprintf("%.2f s (%.2f cores), RSS %s", s.Etcd.CPUSeconds, s.Etcd.CPUCores, sizeText(s.Etcd.RSSBytes))})
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

// notHeldBack qualifies the name of a delivery latency row when some
// informers were held back, whose latency d's leaves out.
func notHeldBack(d report.DeliveryStats) string {
	if d.HeldBack == nil {
		return ""
	}
	return " (not held back)"
}

// heldBackRows lays out the delivery to the informers held back, from
// their hold on (report.DeliveryStats.HeldBack): none when h is nil.
func heldBackRows(h *report.HeldBackDelivery) [][]string {
	if h == nil {
		return nil
	}
	return [][]string{
		{"held-back informers: events from the hold on", fmt.Sprintf("%d (%d timed); %d held back", h.Events, h.TimedEvents, h.Watchers)},
		{"held-back informers: delivery latency from response", lat(h.FromResponse)},
	}
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
			[]string{name + " leader before/after", fmt.Sprintf("%s / %s", f.LeaderBefore, f.LeaderAfter)},
			[]string{name + " relists", relists},
			[]string{name + " write errors (timeouts)", fmt.Sprintf("%d (%d)", f.WriteErrors, f.WriteTimeouts)},
			[]string{name + " probe errors, stall", fmt.Sprintf("%d writes, %d reads, longest stall %.0f ms", f.Probe.Writes.Errors, f.Probe.Reads.Errors, f.Probe.LongestStallMs)},
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
			rows = append(rows, []string{name + " delivery latency", fmt.Sprintf("%s; %d events", lat(m.Delivery.FromResponse), m.Delivery.Events)})
		}
		size := dbSize(m.DBSizeBytes, m.DBSizeInUseBytes)
		if m.Error != "" {
			size = "unknown: " + m.Error
		}
		rows = append(rows, []string{name + " db size at end", size})
	}
	return rows
}

// figures builds a table of one row: a column per figure, for CSV, where
// the metric/value summary cannot be read by a CSV reader.
type figures struct{ t output.Table }

// add appends the column name with the value v.
func (f *figures) add(name string, v string) {
	f.t.Header = append(f.t.Header, name)
	f.t.Rows[0] = append(f.t.Rows[0], v)
	f.t.Numeric = append(f.t.Numeric, true)
}

func (f *figures) int(name string, v int64)     { f.add(name, strconv.FormatInt(v, 10)) }
func (f *figures) float(name string, v float64) { f.add(name, strconv.FormatFloat(v, 'f', 3, 64)) }

// latency adds prefix_p50_ms, _p99_ms, _p999_ms and _max_ms: "-" when
// there was no sample.
func (f *figures) latency(prefix string, l report.Latency) {
	for _, q := range []struct {
		name string
		v    float64
	}{{"p50", l.P50Ms}, {"p99", l.P99Ms}, {"p999", l.P999Ms}, {"max", l.MaxMs}} {
		if l.Count == 0 {
			f.add(prefix+"_"+q.name+"_ms", "-")
		} else {
			f.float(prefix+"_"+q.name+"_ms", q.v)
		}
	}
}

func newFigures() *figures { return &figures{t: output.Table{Rows: [][]string{{}}}} }

// targetFigures adds the target's columns.
func (f *figures) target(t report.Target) {
	f.add("etcd_version", t.EtcdVersion)
	f.add("target", targetDescription(t))
	f.t.Numeric[len(f.t.Numeric)-1], f.t.Numeric[len(f.t.Numeric)-2] = false, false
}

// writes adds the columns of a writer's statistics: counts as
// <prefix>s_completed and so on, latency as <prefix>_p99_ms.
func (f *figures) writes(prefix string, w report.WriteStats) {
	f.int(prefix+"s_planned", w.Planned)
	f.int(prefix+"s_completed", w.Completed)
	f.int(prefix+"_errors", w.Errors)
	f.int(prefix+"_timeouts", w.Timeouts)
	f.float(prefix+"s_per_second", w.ThroughputPerSecond)
	f.latency(prefix, w.Latency)
}

// self adds lwbench's own resource use.
func (f *figures) self(s report.SelfStats) {
	f.float("lwbench_cpu_seconds", s.CPUSeconds)
	f.float("lwbench_cpu_cores", s.CPUCores)
	f.int("lwbench_max_rss_bytes", s.MaxRSSBytes)
	f.int("lwbench_peak_heap_bytes", s.PeakHeapBytes)
}

// watchListNote names the informers' WatchListClient gate of an informer
// run, "" for other profiles and results that do not say.
func watchListNote(sc report.Scenario) string {
	if sc.WatchList == nil || sc.Profile != string(watchload.ProfileInformer) {
		return ""
	}
	return ", WatchList " + onOff(*sc.WatchList)
}

// makeRunCSVTable lays a run result out as one row of figures, what
// `lwbench run -w csv` prints: the figures of the summary table, one
// column each, "-" for one not measured.
func makeRunCSVTable(r *report.RunResult) output.Table {
	f := newFigures()
	f.target(r.Target)
	f.add("profile", r.Scenario.Profile)
	f.t.Numeric[len(f.t.Numeric)-1] = false
	f.int("informers", int64(r.Scenario.Watchers))
	f.int("streams", int64(r.Scenario.Streams))
	f.int("connections", int64(r.Scenario.Connections))
	f.writes("write", r.Writes)
	f.int("events", r.Delivery.Events)
	f.int("timed_events", r.Delivery.TimedEvents)
	f.float("events_per_second", r.Delivery.EventsPerSecond)
	f.latency("delivery_from_response", r.Delivery.FromResponse)
	f.latency("delivery_from_send", r.Delivery.FromSend)
	if h := r.Delivery.HeldBack; h != nil {
		f.int("held_back_events", h.Events)
		f.latency("held_back_delivery_from_response", h.FromResponse)
	} else {
		f.add("held_back_events", "-") // no watcher held back
		f.latency("held_back_delivery_from_response", report.Latency{})
	}
	f.int("initial_lists", r.InitialLists.Count)
	f.latency("initial_list", r.InitialLists.Latency)
	f.int("relists", int64(len(r.Relists)))
	var relistObjects int64
	var relistMaxMs float64
	for _, rl := range r.Relists {
		relistObjects += rl.Objects
		relistMaxMs = max(relistMaxMs, rl.DurationMs)
	}
	relistMax := "-"
	if len(r.Relists) > 0 {
		relistMax = strconv.FormatFloat(relistMaxMs, 'f', 3, 64)
	}
	f.int("relist_objects", relistObjects)
	f.add("relist_max_ms", relistMax)
	// The slowest resync, = its backoff + its relist.
	resync, resyncBackoff := "-", "-"
	if len(r.Relists) > 0 {
		slowest := r.Relists[0]
		for _, rl := range r.Relists {
			if rl.BackoffMs+rl.DurationMs > slowest.BackoffMs+slowest.DurationMs {
				slowest = rl
			}
		}
		resync = strconv.FormatFloat(slowest.BackoffMs+slowest.DurationMs, 'f', 3, 64)
		resyncBackoff = strconv.FormatFloat(slowest.BackoffMs, 'f', 3, 64)
	}
	f.add("resync_max_ms", resync)
	f.add("resync_max_backoff_ms", resyncBackoff)
	var compactions, compactionErrors int64
	for _, c := range r.Compactions {
		if c.Error != "" {
			compactionErrors++
		} else {
			compactions++
		}
	}
	f.int("compactions", compactions)
	f.int("compaction_errors", compactionErrors)
	if r.Defrag != nil {
		f.float("defrag_ms", r.Defrag.DurationMs)
	} else {
		f.add("defrag_ms", "-")
	}
	d := r.DBSize
	for _, s := range []struct {
		at           string
		bytes, inUse int64
	}{{"before_compaction", d.BeforeCompactionBytes, d.BeforeCompactionInUseBytes}, {"after_compaction", d.AfterCompactionBytes, d.AfterCompactionInUseBytes},
		{"after_defrag", d.AfterDefragBytes, d.AfterDefragInUseBytes}, {"end", d.EndBytes, d.EndInUseBytes}} {
		if s.bytes == 0 { // not measured: no db file is 0 bytes
			f.add("db_"+s.at+"_bytes", "-")
			f.add("db_"+s.at+"_in_use_bytes", "-")
			continue
		}
		f.int("db_"+s.at+"_bytes", s.bytes)
		f.int("db_"+s.at+"_in_use_bytes", s.inUse)
	}
	v := r.Validation
	f.int("history_events", v.HistoryEvents)
	f.int("lost_events", v.Lost)
	f.int("duplicated_events", v.Duplicated)
	f.int("out_of_order_events", v.OutOfOrder)
	f.int("split_revisions", v.Atomic)
	f.int("resumable_violations", v.Resumable)
	f.int("bookmarkable_violations", v.Bookmarkable)
	f.int("unexpected_events", v.Unexpected)
	f.int("prevkv_mismatches", v.PrevKVMismatches)
	f.int("prevkv_missing", v.PrevKVMissing)
	f.int("cache_mismatches", v.CacheMismatches)
	f.int("unsynced_informers", int64(v.UnsyncedWatchers))
	f.int("final_revision", r.Final.Revision)
	f.int("final_compact_revision", r.Final.CompactRevision)
	f.int("live_objects", r.Final.Objects)
	f.self(r.Self)
	verdict, _, _ := strings.Cut(r.Verdict, ":")
	f.add("verdict", verdict)
	f.t.Numeric[len(f.t.Numeric)-1] = false
	return f.t
}

// sizeText is n bytes in binary units for a person ("1.5 GiB",
// humanize.IBytes); the CSV and JSON keep the exact bytes.
func sizeText(n int64) string {
	if n < 0 {
		return "-" + humanize.IBytes(uint64(-n))
	}
	return humanize.IBytes(uint64(n))
}
