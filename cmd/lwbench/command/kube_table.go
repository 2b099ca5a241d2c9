package command

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
)

// makeKubeRunTable lays a run through kube-apiserver out as metric/value
// rows, the summary `lwbench run --kube-apiserver` prints.
func makeKubeRunTable(r *report.KubeRunResult) output.Table {
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
	var relistMs float64
	for _, rl := range r.Relists {
		c := rl.Cause
		if c == "" {
			c = "none"
		}
		causes[c]++
		relistObjects += rl.Objects
		relistBytes += rl.Bytes
		relistMs = max(relistMs, rl.DurationMs)
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
			hs = append(hs, fmt.Sprintf("informer %d from revision %d for %.0f ms (compacted past: %v)", h.Informer, h.HeldRevision, h.ReleasedAtMs-h.HeldAtMs, h.Compacted))
		}
		holds = strings.Join(hs, "; ")
	}
	v := r.Validation
	rows := [][]string{
		{"etcd", fmt.Sprintf("%s (%s)", r.Target.EtcdVersion, targetDescription(r.Target))},
		{"kube-apiserver", fmt.Sprintf("%s x%d, watch cache %s, compaction %s, feature gates %q", a.Version, a.Servers, cache, compaction, a.FeatureGates)},
		{"informers", fmt.Sprintf("%d client-go informers, WatchListClient %s", len(r.Informers), a.ClientWatchList)},
		{"writes completed / planned", fmt.Sprintf("%d / %d (%.0f/s)", r.Writes.Completed, r.Writes.Planned, r.Writes.ThroughputPerSecond)},
		{"write errors (timeouts)", fmt.Sprintf("%d (%d)", r.Writes.Errors, r.Writes.Timeouts)},
		{"write latency (from schedule)", lat(r.Writes.Latency)},
		{"events delivered", fmt.Sprintf("%d (%.0f/s; %d timed)", r.Delivery.Events, r.Delivery.EventsPerSecond, r.Delivery.TimedEvents)},
		{"delivery latency from response", lat(r.Delivery.FromCommit)},
		{"informer requests", strings.Join(reqs, "; ")},
		{"relists (cause)", relists},
		{"relist objects / bytes", fmt.Sprintf("%d / %d", relistObjects, relistBytes)},
		{"longest relist", fmt.Sprintf("%.2f ms", relistMs)},
		{"held informers", holds},
	}
	if r.Interrupted {
		rows = append([][]string{{"interrupted", "yes: the figures cover the run until the interruption"}}, rows...)
	}
	for _, e := range r.Etcd {
		rows = append(rows, []string{fmt.Sprintf("etcd %s: %s %s", e.Phase, e.Method, e.Kind), fmt.Sprintf("%d requests, %d bytes in, %d responses, %d bytes out", e.Requests, e.RequestBytes, e.Responses, e.ResponseBytes)})
	}
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
	return output.Table{Header: []string{"metric", "value"}, Rows: rows}
}
