package report

import (
	"cmp"
	"slices"
	"strings"
)

// What a request does at etcd (EtcdVerb).
const (
	EtcdWrite = "write" // Put, DeleteRange, a Txn that puts or deletes
	EtcdRead  = "read"  // Range, RangeStream, a Txn that only reads
	EtcdWatch = "watch" // a Watch create request
)

// EtcdVerb returns what requests of method and kind (EtcdRequests) do at
// etcd: EtcdWrite, EtcdRead or EtcdWatch; "" for the rest (leases,
// Compact, Status, Watch cancel and progress requests, watch responses).
// A Txn is judged by its success branch, the operations of its kind after
// "then " ("if mod_revision=? then put else range" is a write: the else
// branch only runs when the compare fails).
func EtcdVerb(method, kind string) string {
	switch method {
	case "Put", "DeleteRange":
		return EtcdWrite
	case "Range", "RangeStream":
		return EtcdRead
	case "Watch":
		if strings.HasPrefix(kind, "create") {
			return EtcdWatch
		}
	case "Txn":
		_, then, _ := strings.Cut(kind, "then ")
		then, _, _ = strings.Cut(then, " else ")
		switch {
		case strings.Contains(then, "put") || strings.Contains(then, "delete"):
			return EtcdWrite
		case strings.Contains(then, "range"):
			return EtcdRead
		}
	}
	return ""
}

// EtcdResourceRates is what etcd was asked of one resource in one phase,
// as counts and as rates over the phase's duration (EtcdByResource).
type EtcdResourceRates struct {
	Phase    string `json:"phase"`
	Resource string `json:"resource"` // EtcdRequests.Resource; "" none
	// DurationMs is the phase's (EtcdPhase.DurationMs); 0 when unknown,
	// and then every rate is 0.
	DurationMs float64 `json:"durationMs"`
	// Writes, Reads and Watches count the requests of each EtcdVerb; Keys
	// are the keys the reads returned, WatchEvents the events of the
	// resource's watch responses.
	Writes      int64 `json:"writes"`
	Reads       int64 `json:"reads"`
	Keys        int64 `json:"keys"`
	Watches     int64 `json:"watches"`
	WatchEvents int64 `json:"watchEvents"`
	// RequestBytes and ResponseBytes are every message's, whatever its
	// verb (as EtcdRequests').
	RequestBytes  int64 `json:"requestBytes"`
	ResponseBytes int64 `json:"responseBytes"`

	WritesPerSecond        float64 `json:"writesPerSecond"`
	ReadsPerSecond         float64 `json:"readsPerSecond"`
	KeysPerSecond          float64 `json:"keysPerSecond"`
	WatchEventsPerSecond   float64 `json:"watchEventsPerSecond"`
	RequestBytesPerSecond  float64 `json:"requestBytesPerSecond"`
	ResponseBytesPerSecond float64 `json:"responseBytesPerSecond"`
}

// EtcdByResource sums reqs by phase and resource, verb by verb
// (EtcdVerb), and divides by each phase's duration in phases. Rows are
// ordered by phase (phases' order, then phases only reqs name, in the
// order they first appear), then resource byte-wise, with "" (no
// resource) last.
func EtcdByResource(reqs []EtcdRequests, phases []EtcdPhase) []EtcdResourceRates {
	type key struct{ phase, resource string }
	order := map[string]int{}
	durations := map[string]float64{}
	for _, p := range phases {
		if _, ok := order[p.Phase]; !ok {
			order[p.Phase] = len(order)
		}
		durations[p.Phase] += p.DurationMs
	}
	rows := map[key]*EtcdResourceRates{}
	for _, r := range reqs {
		if _, ok := order[r.Phase]; !ok {
			order[r.Phase] = len(order)
		}
		k := key{r.Phase, r.Resource}
		row := rows[k]
		if row == nil {
			row = &EtcdResourceRates{Phase: r.Phase, Resource: r.Resource, DurationMs: durations[r.Phase]}
			rows[k] = row
		}
		switch EtcdVerb(r.Method, r.Kind) {
		case EtcdWrite:
			row.Writes += r.Requests
		case EtcdRead:
			row.Reads += r.Requests
			row.Keys += r.Items
		case EtcdWatch:
			row.Watches += r.Requests
		}
		if r.Method == "Watch" && strings.HasPrefix(r.Kind, "events") {
			row.WatchEvents += r.Items
		}
		row.RequestBytes += r.RequestBytes
		row.ResponseBytes += r.ResponseBytes
	}
	out := make([]EtcdResourceRates, 0, len(rows))
	for _, r := range rows {
		if s := r.DurationMs / 1000; s > 0 {
			r.WritesPerSecond = float64(r.Writes) / s
			r.ReadsPerSecond = float64(r.Reads) / s
			r.KeysPerSecond = float64(r.Keys) / s
			r.WatchEventsPerSecond = float64(r.WatchEvents) / s
			r.RequestBytesPerSecond = float64(r.RequestBytes) / s
			r.ResponseBytesPerSecond = float64(r.ResponseBytes) / s
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b EtcdResourceRates) int {
		if n := cmp.Compare(order[a.Phase], order[b.Phase]); n != 0 {
			return n
		}
		if (a.Resource == "") != (b.Resource == "") {
			if a.Resource == "" {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Resource, b.Resource)
	})
	return out
}

// EtcdByKind sums reqs over their resources: one row per phase, method
// and kind, in the order each first appears, with Resource "".
func EtcdByKind(reqs []EtcdRequests) []EtcdRequests {
	type key struct{ phase, method, kind string }
	index := map[key]int{}
	var out []EtcdRequests
	for _, r := range reqs {
		k := key{r.Phase, r.Method, r.Kind}
		i, ok := index[k]
		if !ok {
			index[k] = len(out)
			out = append(out, EtcdRequests{Phase: r.Phase, Method: r.Method, Kind: r.Kind})
			i = len(out) - 1
		}
		o := &out[i]
		o.Requests += r.Requests
		o.RequestBytes += r.RequestBytes
		o.Responses += r.Responses
		o.ResponseBytes += r.ResponseBytes
		o.Items += r.Items
		o.Errors += r.Errors
		o.FailedCompares += r.FailedCompares
	}
	return out
}
