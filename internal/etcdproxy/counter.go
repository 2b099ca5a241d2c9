package etcdproxy

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// DefaultPhase is the phase a Counter counts into until SetPhase is first
// called.
const DefaultPhase = "start"

// Row is what passed through the proxy for one method and kind of message
// touching one resource in one phase.
//
// A request row (Requests > 0) also holds the responses and errors of its
// calls: for unary and server-streaming calls (Range, Txn, RangeStream,
// Snapshot, ...) they count in the row and phase of the request, even when
// the phase changed while the call was in flight. Messages on the
// bidirectional streams (Watch, LeaseKeepAlive) are counted each in the
// phase current when it passed: LeaseKeepAlive responses in the row of the
// stream's latest request kind, Watch responses in rows of their own
// (Requests 0; see Kind). Kind "stream" counts bidirectional streams opened
// (Requests) and ended with a status other than OK (Errors), without bytes.
type Row struct {
	// Phase is the phase name given to SetPhase (DefaultPhase before).
	Phase string `json:"phase"`
	// Method is the gRPC method name without its service ("Range",
	// "Watch", "LeaseKeepAlive"); for a service outside etcdserverpb it is
	// the full method name ("/v3lockpb.Lock/Lock").
	Method string `json:"method"`
	// Kind is the shape of the message, a few space separated words: see
	// the package documentation for the vocabulary.
	Kind string `json:"kind"`
	// Resource is the resource the messages touch, named from their key
	// (see the package documentation, # Resources): kubectl's
	// resource.group spelling ("pods", "leases.coordination.k8s.io"), or
	// ResourceCompactRevKey, ResourceOutsidePrefix, ResourceWholePrefix;
	// "" for messages without a key (leases, Compact, Status, progress
	// requests, a stream's opening).
	Resource string `json:"resource,omitempty"`
	// Namespace is, for requests on one Lease or one namespace's Leases
	// (Resource "leases.coordination.k8s.io", not watches), the Leases'
	// namespace: "kube-node-lease" holds the node heartbeats,
	// "kube-system" the leader-election and kube-apiserver identity
	// Leases; "" otherwise.
	Namespace string `json:"namespace,omitempty"`
	// Name is, for a Lease in kube-system, its name ("kube-scheduler",
	// "apiserver-<hash>"); "" otherwise.
	Name string `json:"name,omitempty"`
	// PrefixKey is true for reads (Range, RangeStream, no range end) of
	// the resource's prefix key itself ("/registry/configmaps"), where no
	// object lives: kube-apiserver's object count poll.
	PrefixKey bool `json:"prefixKey,omitempty"`
	// Requests is the number of request messages (client to etcd).
	Requests int64 `json:"requests"`
	// RequestBytes is their total size: serialized protobuf bytes, without
	// gRPC's 5-byte message prefix and HTTP/2 framing.
	RequestBytes int64 `json:"requestBytes"`
	// Responses is the number of response messages (etcd to client); a
	// unary call that failed has none.
	Responses int64 `json:"responses"`
	// ResponseBytes is their total size, counted as RequestBytes.
	ResponseBytes int64 `json:"responseBytes"`
	// Items is the number of keys in Range and RangeStream responses and
	// of events in Watch responses; 0 for other methods.
	Items int64 `json:"items"`
	// Errors is the number of calls (streams, for kind "stream") that
	// ended with a gRPC status other than OK, including a client's own
	// cancellation; the code and message reach the client unchanged.
	Errors int64 `json:"errors"`
	// FailedCompares is the number of Txn responses whose compares did
	// not hold (TxnResponse.succeeded false: etcd ran the Else branch and
	// wrote nothing); 0 for other methods. kube-apiserver's writes compare
	// the object's mod_revision with the one it started from, so a failed
	// compare is a write from a stale object, which it retries from the
	// Else branch's read (k8s.io/apiserver/pkg/storage/etcd3/store.go
	// GuaranteedUpdate, conditionalDelete).
	FailedCompares int64 `json:"failedCompares,omitempty"`
}

// Counts is a snapshot of a Counter: one Row per phase, method, kind,
// resource, namespace and name that saw a message, ordered by phase (in
// the order phases were first set), then Method, Kind, Resource,
// Namespace and Name (byte-wise).
type Counts []Row

// ByResource returns c with the rows that differ only in Namespace,
// Name and PrefixKey summed into one, without them: one Row per phase,
// method, kind and resource, in c's order.
func (c Counts) ByResource() Counts {
	out := make(Counts, 0, len(c))
	for _, r := range c {
		r.Namespace, r.Name, r.PrefixKey = "", "", false
		if n := len(out); n > 0 && out[n-1].Phase == r.Phase && out[n-1].Method == r.Method && out[n-1].Kind == r.Kind && out[n-1].Resource == r.Resource {
			rowDelta(r).apply(&out[n-1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// Phases returns the names of the phases that have rows, in the order
// they were first set.
func (c Counts) Phases() []string {
	var out []string
	for _, r := range c {
		if len(out) == 0 || out[len(out)-1] != r.Phase {
			out = append(out, r.Phase)
		}
	}
	return out
}

// Get returns the rows of phase, method and kind summed over their
// resources, and whether there is one. The sum's Resource is the rows'
// resource when they all have the same, else "".
func (c Counts) Get(phase, method, kind string) (Row, bool) {
	var sum Row
	found := false
	for _, r := range c {
		if r.Phase != phase || r.Method != method || r.Kind != kind {
			continue
		}
		if !found {
			sum = Row{Phase: phase, Method: method, Kind: kind, Resource: r.Resource}
			found = true
		} else if sum.Resource != r.Resource {
			sum.Resource = ""
		}
		rowDelta(r).apply(&sum)
	}
	return sum, found
}

// PhaseTime is how long a Counter counted into one phase.
type PhaseTime struct {
	// Phase is the phase name.
	Phase string
	// Start is when it was first set (for DefaultPhase, when the Counter
	// was made; after Reset, the Reset).
	Start time.Time
	// Duration is how long it was the current phase, summed over every
	// time it was set; for the current phase, up to the call.
	Duration time.Duration
}

// entry is one row being counted; gen is the Counter generation (see
// Reset) the entry belongs to, path the resource path its key was made of
// (appendResourcePath).
type entry struct {
	Row
	path  string
	phase int
	gen   uint64
}

// Counter counts messages per phase, method and kind. Several proxies may
// share one (Config.Counter), e.g. one per member of a cluster, so that
// one SetPhase switches them all. It is safe for concurrent use; the zero
// value is not: use NewCounter.
type Counter struct {
	mu     sync.Mutex
	now    func() time.Time
	gen    uint64
	phase  int
	phases []string
	// times holds each phase's start and its time as the current phase
	// up to since, when the current phase was last set.
	times []PhaseTime
	since time.Time
	// rows holds one map per phase, keyed by method + "\x00" + kind, then
	// "\x00" + resource path when there is one (appendKey, appendPath).
	rows []map[string]*entry
}

// NewCounter returns a Counter counting into DefaultPhase from now on.
func NewCounter() *Counter { return newCounter(time.Now) }

// newCounter returns a Counter reading the time from now.
func newCounter(now func() time.Time) *Counter {
	t := now()
	return &Counter{now: now, phases: []string{DefaultPhase}, times: []PhaseTime{{Phase: DefaultPhase, Start: t}},
		since: t, rows: []map[string]*entry{{}}}
}

// SetPhase makes name the phase that later messages are counted in. A name
// seen before counts on into its earlier rows.
func (c *Counter) SetPhase(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setPhaseLocked(name)
}

func (c *Counter) setPhaseLocked(name string) {
	t := c.now()
	c.times[c.phase].Duration += t.Sub(c.since)
	c.since = t
	if i := slices.Index(c.phases, name); i >= 0 {
		c.phase = i
		return
	}
	c.phases = append(c.phases, name)
	c.times = append(c.times, PhaseTime{Phase: name, Start: t})
	c.rows = append(c.rows, map[string]*entry{})
	c.phase = len(c.phases) - 1
}

// Phase returns the current phase name.
func (c *Counter) Phase() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phases[c.phase]
}

// Phases returns every phase name, in the order first set, starting with
// DefaultPhase (or, after Reset, the phase current then).
func (c *Counter) Phases() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.phases)
}

// PhaseTimes returns every phase's start and duration, in the order of
// Phases.
func (c *Counter) PhaseTimes() []PhaseTime {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.times)
	out[c.phase].Duration += c.now().Sub(c.since)
	return out
}

// Reset forgets every count and phase but the current phase, which stays
// current. Calls in flight count their responses into the current phase.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := c.phases[c.phase]
	c.gen++
	c.phase = 0
	c.phases = []string{name}
	c.since = c.now()
	c.times = []PhaseTime{{Phase: name, Start: c.since}}
	c.rows = []map[string]*entry{{}}
}

// Counts returns a copy of the counts, ordered as Counts documents. Rows
// of two resource paths that name one resource (a node's "minions" and a
// stray "nodes") are one row.
func (c *Counter) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out Counts
	for _, m := range c.rows {
		start := len(out)
		for _, e := range m {
			out = append(out, e.Row)
		}
		slices.SortFunc(out[start:], func(a, b Row) int {
			if n := strings.Compare(a.Method, b.Method); n != 0 {
				return n
			}
			if n := strings.Compare(a.Kind, b.Kind); n != 0 {
				return n
			}
			if n := strings.Compare(a.Resource, b.Resource); n != 0 {
				return n
			}
			if n := strings.Compare(a.Namespace, b.Namespace); n != 0 {
				return n
			}
			if a.PrefixKey != b.PrefixKey {
				if a.PrefixKey {
					return 1
				}
				return -1
			}
			return strings.Compare(a.Name, b.Name)
		})
		merged := out[:start]
		for _, r := range out[start:] {
			if n := len(merged); n > start && merged[n-1].Method == r.Method && merged[n-1].Kind == r.Kind && merged[n-1].Resource == r.Resource &&
				merged[n-1].Namespace == r.Namespace && merged[n-1].Name == r.Name && merged[n-1].PrefixKey == r.PrefixKey {
				rowDelta(r).apply(&merged[n-1])
				continue
			}
			merged = append(merged, r)
		}
		out = merged
	}
	return out
}

// lookupLocked returns the entry of key (appendKey, then appendPath) in
// phase i, creating it. The map lookup with string(key) does not
// allocate.
func (c *Counter) lookupLocked(i int, key []byte) *entry {
	if e, ok := c.rows[i][string(key)]; ok {
		return e
	}
	k := string(key)
	method, rest, _ := strings.Cut(k, "\x00")
	kind, path, _ := strings.Cut(rest, "\x00")
	resource, scope, _ := strings.Cut(path, "\x00") // appendLeaseScope
	row := Row{Phase: c.phases[i], Method: method, Kind: kind, Resource: resourceName(resource)}
	if scope == scopePrefixKey {
		row.PrefixKey = true
	} else {
		row.Namespace, row.Name, _ = strings.Cut(scope, "/")
	}
	e := &entry{Row: row, path: path, phase: i, gen: c.gen}
	c.rows[i][k] = e
	return e
}

// add counts into the row of key in the current phase and returns it.
func (c *Counter) add(key []byte, d delta) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.lookupLocked(c.phase, key)
	d.apply(&e.Row)
	return e
}

// addTo counts into e, or, when now is set and the phase changed since e
// was counted, into the same method, kind and resource in the current
// phase. An entry from before a Reset counts into the current phase.
func (c *Counter) addTo(e *entry, now bool, scratch []byte, d delta) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.gen != c.gen || (now && e.phase != c.phase) {
		scratch = appendPath(appendKey(scratch[:0], e.Method, e.Kind), e.path)
		e = c.lookupLocked(c.phase, scratch)
	}
	d.apply(&e.Row)
	return scratch
}

// appendKey appends the rows map key of method and kind to b; appendPath
// then adds the resource's.
func appendKey(b []byte, method, kind string) []byte {
	b = append(b, method...)
	b = append(b, 0)
	return append(b, kind...)
}

// appendPath appends resource path path (appendResourcePath) to the rows
// map key b; none for "".
func appendPath[T string | []byte](b []byte, path T) []byte {
	if len(path) == 0 {
		return b
	}
	b = append(b, 0)
	return append(b, path...)
}

// resourceName returns Row.Resource of a resource path
// (appendResourcePath): kubectl's resource.group spelling of the resource
// kube-apiserver stores under it (keyspace.ResourceOf), or the path
// itself for the names of keys outside every resource.
func resourceName(path string) string {
	switch path {
	case "", ResourceCompactRevKey, ResourceOutsidePrefix, ResourceWholePrefix:
		return path
	}
	group, resource := keyspace.ResourceOf(path)
	return keyspace.Key{Group: group, Resource: resource}.GroupResource()
}

// delta is what one message adds to a row.
type delta struct {
	requests, requestBytes, responses, responseBytes, items, errors, failedCompares int64
}

// rowDelta is what row r counted, as one delta.
func rowDelta(r Row) delta {
	return delta{r.Requests, r.RequestBytes, r.Responses, r.ResponseBytes, r.Items, r.Errors, r.FailedCompares}
}

func (d delta) apply(r *Row) {
	r.Requests += d.requests
	r.RequestBytes += d.requestBytes
	r.Responses += d.responses
	r.ResponseBytes += d.responseBytes
	r.Items += d.items
	r.Errors += d.errors
	r.FailedCompares += d.failedCompares
}
