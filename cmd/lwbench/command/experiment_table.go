package command

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/report"
)

func mb(b int64) string    { return fmt.Sprintf("%.1f", float64(b)/1e6) }
func ms(v float64) string  { return fmt.Sprintf("%.1f", v) }
func ms0(v float64) string { return fmt.Sprintf("%.0f", v) }
func n[T int | int64](v T) string {
	return fmt.Sprint(v)
}

func numeric(cols int, text ...int) []bool {
	out := make([]bool, cols)
	for i := range out {
		out[i] = true
	}
	for _, i := range text {
		out[i] = false
	}
	return out
}

// makeExperimentTable lays an experiment's result out, one row per case, in the
// columns of its experiment (sizes in decimal MB, times in ms).
func makeExperimentTable(r *experiment.Result) output.Table {
	if e, ok := lookupExperiment(r.Experiment); ok {
		if t, ok := e.table(r); ok {
			return t
		}
	}
	return makeComparisonTable([]*experiment.Result{r})
}

// experimentLayout is an experiment's table as its command prints it:
// split into tables of at most maxTableWidth columns, each repeating the
// columns that name the case (its entry's keys), with its entry's notes
// below; the comparison's layout for a result without its part.
func experimentLayout(r *experiment.Result) layout {
	if e, ok := lookupExperiment(r.Experiment); ok {
		if t, ok := e.table(r); ok {
			l := layout{wide: t, keys: e.keys, groups: e.groups}
			if e.notes != nil {
				l.notes = e.notes(r)
			}
			return l
		}
	}
	return comparisonLayout([]*experiment.Result{r})
}

// writeComparison prints the comparison of results in format f: its
// layout, or the Comparison document for JSON.
func writeComparison(w io.Writer, f output.Format, results []*experiment.Result) error {
	return comparisonLayout(results).write(w, f, experiment.Compare(results))
}

func relistStormTable(r *experiment.Result) (output.Table, bool) {
	rs := r.RelistStorm
	if rs == nil {
		return output.Table{}, false
	}
	t := output.Table{Header: []string{"objects", "page size", "compacted", "watchers", "relists", "LIST requests", "410 expired",
		"relist objects", "relist MB", "backoff p50 ms", "relist p50 ms", "resync p50 ms", "resync max ms",
		"probe p99 ms", "probe max ms", "probe errors", "lost events"}}
	if r.APIServer != nil {
		// What the relists cost etcd behind kube-apiserver.
		t.Header = append(t.Header, "etcd ranges", "etcd range MB")
	}
	t.Numeric = numeric(len(t.Header), 2)
	for _, c := range rs.Cases {
		row := []string{n(c.Objects), c.Listing(), fmt.Sprint(c.Compacted), n(c.Watchers), n(c.Relists),
			n(c.RelistRequests), n(c.Expired), n(c.RelistObjects), mb(c.RelistBytes), ms0(c.BackoffP50Ms), ms(c.ListP50Ms),
			ms0(c.ResyncP50Ms), ms0(c.ResyncMaxMs), ms(c.Probe.P99Ms), ms(c.Probe.MaxMs), n(c.Probe.Errors), n(c.Validation.Lost)}
		if r.APIServer != nil {
			row = append(row, n(c.EtcdRanges), mb(c.EtcdRangeBytes))
		}
		t.Rows = append(t.Rows, row)
	}
	return t, true
}

// resyncNote explains backoff, relist and resync, in the words `lwbench
// run`'s table uses too.
const resyncNote = "resync = backoff + relist: backoff is client-go's wait before a relist (its backoff manager), " +
	"relist the relist's LIST requests (a 410 and the list at the latest revision together), " +
	"resync the time until the informer's cache is current again."

// relistStormNotes explain the relist storm's columns.
func relistStormNotes(r *experiment.Result) []string {
	notes := []string{resyncNote + " In a relist storm resync runs from the informers' release, so it also counts " +
		"the watch that failed with \"required revision has been compacted\"; a control case (compacted false) has no relist " +
		"and resyncs by watching.",
		"probe: a fixed-rate read and write from the release until every informer resynced; lost events: events a watcher never received."}
	if r.APIServer != nil {
		notes = append(notes, "etcd ranges and etcd range MB: the LISTs etcd received behind kube-apiserver for the relists "+
			"(Range and RangeStream over a prefix), and their response bytes; none when the watch cache served them.")
	}
	return notes
}

func continuationTable(r *experiment.Result) (output.Table, bool) {
	cr := r.Continuation
	if cr == nil {
		return output.Table{}, false
	}
	t := output.Table{Header: []string{"page size", "fallback", "history kept (lists)", "compact every", "retain", "revisions per list p50",
		"compactions", "lists", "expired lists", "restarts", "full lists", "failed", "wasted pages", "requests p50", "KB p50",
		"time p50 ms", "time max ms", "probe p99 ms"}}
	t.Numeric = numeric(len(t.Header), 1)
	for _, c := range cr.Cases {
		fb, kept := c.Fallback, "-"
		if !c.Compacting {
			fb = "control"
		} else if c.RetainLists > 0 {
			kept = fmt.Sprintf("%g", c.RetainLists)
		}
		t.Rows = append(t.Rows, []string{n(c.PageSize), fb, kept, n(c.CompactEvery), n(c.Retain), fmt.Sprintf("%.0f", c.RevisionsP50),
			n(c.Compactions), n(c.Lists),
			n(c.Expired), n(c.Restarts), n(c.Fallbacks), n(c.Failed), n(c.WastedPages), fmt.Sprintf("%.0f", c.RequestsP50),
			fmt.Sprintf("%.0f", c.BytesP50/1e3), ms0(c.DurationP50Ms), ms0(c.DurationMaxMs), ms(c.Probe.P99Ms)})
	}
	return t, true
}

func sweepTable(r *experiment.Result) (output.Table, bool) {
	cs := r.CompactionSweep
	if cs == nil {
		return output.Table{}, false
	}
	t := output.Table{Header: []string{"interval", "compactions", "compact p50 ms", "disconnections", "relists", "relist objects",
		"db start MB", "db peak MB", "db end MB", "in use end MB", "writes/s", "write p99 ms", "probe p99 ms", "probe max ms", "lost events"}}
	t.Numeric = numeric(len(t.Header), 0)
	for _, c := range cs.Cases {
		compactMs := ms(c.CompactionP50Ms)
		if r.APIServer != nil {
			compactMs = "-" // kube-apiserver's compactor's own calls
		}
		t.Rows = append(t.Rows, []string{sweepInterval(c.IntervalMs), n(c.Compactions), compactMs, n(c.Disconnections),
			n(c.Relists), n(c.RelistObjects), mb(c.DBSizeStartBytes), mb(c.DBSizePeakBytes), mb(c.DBSizeEndBytes),
			mb(c.DBSizeEndInUseBytes), fmt.Sprintf("%.0f", c.Writes.ThroughputPerSecond), ms(c.Writes.Latency.P99Ms),
			ms(c.Probe.P99Ms), ms(c.Probe.MaxMs), n(c.Validation.Lost)})
	}
	return t, true
}

func defragTable(r *experiment.Result) (output.Table, bool) {
	ds := r.DefragStall
	if ds == nil {
		return output.Table{}, false
	}
	t := output.Table{Header: []string{"size", "overlapping compaction", "keys", "db before MB", "in use before MB", "compaction ms",
		"overlap ms", "defrag ms", "db after MB", "in use after MB", "probe p99 ms", "probe max ms", "longest stall ms",
		"probe errors", "probe timeouts"}}
	if r.APIServer != nil {
		// The probe's twin through kube-apiserver.
		t.Header = append(t.Header, "API probe p99 ms", "API probe max ms", "API longest stall ms", "API probe errors", "API probe timeouts")
	}
	t.Numeric = numeric(len(t.Header), 0, 1)
	for _, c := range ds.Cases {
		row := []string{fmt.Sprintf("%d MB", c.TargetBytes/1e6), fmt.Sprint(c.Overlapping), n(c.Keys), mb(c.BeforeBytes),
			mb(c.BeforeInUseBytes), ms0(c.CompactionMs), ms0(c.OverlapMs), ms0(c.DefragMs), mb(c.AfterBytes), mb(c.AfterInUseBytes),
			ms(c.Probe.P99Ms), ms(c.Probe.MaxMs), ms0(c.Probe.LongestStallMs), n(c.Probe.Errors), n(c.Probe.Timeouts)}
		if r.APIServer != nil {
			a := c.APIProbe
			if a == nil {
				a = &compaction.ProbeWindow{}
			}
			row = append(row, ms(a.P99Ms), ms(a.MaxMs), ms0(a.LongestStallMs), n(a.Errors), n(a.Timeouts))
		}
		t.Rows = append(t.Rows, row)
	}
	return t, true
}

func catchupTable(r *experiment.Result) (output.Table, bool) {
	cr := r.Catchup
	if cr == nil {
		return output.Table{}, false
	}
	t := output.Table{Header: []string{"updates behind", "revisions", "catch-up ms", "revisions/s", "responses", "events", "event MB",
		"missing", "unexpected", "relist ms", "relist pages", "relist objects", "relist MB", "unpaginated relist ms", "probe p99 ms"}}
	if r.APIServer != nil {
		// Through kube-apiserver: "responses" are bookmarks; a watch
		// older than the watch cache is answered 410.
		t.Header[4] = "bookmarks"
		t.Header = append(t.Header, "410 expired")
	}
	t.Numeric = numeric(len(t.Header))
	for _, c := range cr.Cases {
		row := []string{n(c.Behind), n(c.Revisions), ms0(c.CatchupMs), fmt.Sprintf("%.0f", c.RevisionsPerSecond),
			n(c.Responses), n(c.Events), mb(c.EventBytes), n(c.Missing), n(c.Unexpected), ms(c.RelistMs), n(c.RelistPages),
			n(c.RelistObjects), mb(c.RelistBytes), ms(c.RelistUnpaginatedMs), ms(c.Probe.P99Ms)}
		if r.APIServer != nil {
			row = append(row, fmt.Sprint(c.Expired))
		}
		t.Rows = append(t.Rows, row)
	}
	return t, true
}

// makeComparisonTable lays any set of results out as one table: a row
// per case of each result, in the order given, in the columns every
// experiment shares (CaseSummary). A figure the case did not measure
// (experiment.Measured) shows "-".
func makeComparisonTable(results []*experiment.Result) output.Table {
	t := output.Table{Header: []string{"result", "experiment", "case", "etcd", "kube-apiserver", "relists", "relist objects", "relist MB",
		"backoff p50 ms", "relist p50 ms", "resync p50 ms", "resync max ms", "LIST restarts", "compactions", "defrag ms", "writes/s",
		"write p99 ms", "delivery p99 ms", "probe p99 ms", "probe max ms", "longest stall ms", "probe errors", "db before MB", "db after MB", "lost events",
		"other violations"}}
	t.Numeric = numeric(len(t.Header), 0, 1, 2, 3, 4)
	for _, r := range results {
		for _, c := range r.Cases {
			// measured returns the cells when c measured figure, else a
			// "-" for each.
			measured := func(figure string, cells ...string) []string {
				if !experiment.Measured(c, figure) {
					for i := range cells {
						cells[i] = "-"
					}
				}
				return cells
			}
			backoff, relist := ms0(c.BackoffP50Ms), ms(c.RelistP50Ms)
			if c.BackoffP50Ms == 0 && c.RelistP50Ms == 0 {
				backoff, relist = "-", "-" // no relist, or a result written before they were recorded
			}
			row := []string{r.Name(), c.Experiment, c.Case, r.Target.EtcdVersion, apiServerCell(r.APIServer)}
			row = append(row, measured(experiment.FigureRelists, n(c.Relists))...)
			row = append(row, measured(experiment.FigureRelistObjects, n(c.RelistObjects))...)
			row = append(row, measured(experiment.FigureRelistBytes, mb(c.RelistBytes))...)
			row = append(row, measured(experiment.FigureRelistTime, backoff, relist)...)
			row = append(row, measured(experiment.FigureResync, ms0(c.ResyncP50Ms), ms0(c.ResyncMaxMs))...)
			row = append(row, measured(experiment.FigureListRestarts, n(c.ListRestarts))...)
			row = append(row, measured(experiment.FigureCompactions, n(c.Compactions))...)
			row = append(row, measured(experiment.FigureDefrag, ms0(c.DefragMs))...)
			row = append(row, measured(experiment.FigureWrites, fmt.Sprintf("%.0f", c.WritesPerSecond), ms(c.WriteP99Ms))...)
			delivery := ms(c.DeliveryP99Ms)
			if c.DeliveryEvents == 0 {
				delivery = "-" // no event timed, or a result converted before it was recorded
			}
			row = append(row, measured(experiment.FigureDelivery, delivery)...)
			row = append(row, measured(experiment.FigureProbe, ms(c.Probe.P99Ms), ms(c.Probe.MaxMs), ms0(c.Probe.LongestStallMs), n(c.Probe.Errors))...)
			row = append(row, measured(experiment.FigureDBSize, mb(c.DBSizeBeforeBytes), mb(c.DBSizeAfterBytes))...)
			row = append(row, measured(experiment.FigureLostEvents, n(c.LostEvents))...)
			row = append(row, measured(experiment.FigureOtherViolations, n(c.OtherViolations))...)
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

// comparisonIdentity is the number of makeComparisonTable's leading
// columns that say what ran: result, experiment, case, etcd,
// kube-apiserver.
const comparisonIdentity = 5

// comparisonLayout is the comparison as `lwbench report` prints it: in
// text, a first table numbering the cases (#) with what ran (the
// kube-apiserver by its release, described in a note), then the figures
// in tables of at most maxTableWidth columns keyed by #; notes explain
// "-", resync and the kube-apiservers.
func comparisonLayout(results []*experiment.Result) layout {
	wide := makeComparisonTable(results)
	ident := output.Table{Header: append([]string{"#"}, wide.Header[:comparisonIdentity]...), Numeric: []bool{true}}
	figs := output.Table{Header: append([]string{"#"}, wide.Header[comparisonIdentity:]...),
		Numeric: append([]bool{true}, wide.Numeric[comparisonIdentity:]...)}
	var apiNotes []string
	i := 0
	for _, r := range results {
		api := "-"
		if a := r.APIServer; a != nil {
			api = a.Version
			note := fmt.Sprintf("kube-apiserver of %s: %s.", r.Name(), apiServerCell(a))
			if !slices.Contains(apiNotes, note) {
				apiNotes = append(apiNotes, note)
			}
		}
		for range r.Cases {
			row := wide.Rows[i]
			id := fmt.Sprint(i + 1)
			ident.Rows = append(ident.Rows, []string{id, row[0], row[1], row[2], row[3], api})
			figs.Rows = append(figs.Rows, append([]string{id}, row[comparisonIdentity:]...))
			i++
		}
	}
	notes := []string{"A figure a case's experiment does not measure shows \"-\".",
		resyncNote + " relist-storm's resync runs from the informers' release (the failed watch too); a run's is backoff + relist; " +
			"continuation's is one paginated list's total time, retries included; catchup's the time the watcher took to catch up."}
	// The groups kept together: relists, their times, restarts and
	// maintenance, writes and delivery, probe, db size, broken guarantees.
	parts := splitTable(figs, 1, maxTableWidth, 1, 4, 8, 11, 14, 18, 20)
	return layout{wide: wide, text: append([]output.Table{ident}, parts...), notes: append(notes, apiNotes...),
		textNotes: []string{"#: the case's row in the first table."}}
}

// apiServerCell names the kube-apiservers a result went through in one
// cell: release, watch cache and the informers' WatchListClient, or the
// existing cluster's release and URL (--kubeconfig); "-" for the
// etcd-direct model.
func apiServerCell(a *report.APIServerTarget) string {
	switch {
	case a == nil:
		return "-"
	case !a.Managed:
		return fmt.Sprintf("%s at %s, WatchListClient %s", a.Version, a.URL, a.ClientWatchList)
	}
	cache := "off"
	if a.WatchCache {
		cache = "on"
	}
	return fmt.Sprintf("%s x%d, watch cache %s, WatchListClient %s", a.Version, a.Servers, cache, a.ClientWatchList)
}

// sweepInterval is a compaction-sweep case's interval as its table shows
// it: never, or the duration.
func sweepInterval(intervalMs float64) string {
	if intervalMs < 0 {
		return "never"
	}
	return time.Duration(intervalMs * float64(time.Millisecond)).String()
}
