package etcdproxy

import (
	"slices"
	"strings"
	"sync"
)

// DefaultPhase is the phase a Counter counts into until SetPhase is first
// called.
const DefaultPhase = "start"

// Row is what passed through the proxy for one method and kind of message
// in one phase.
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
}

// Counts is a snapshot of a Counter: one Row per phase, method and kind
// that saw a message, ordered by phase (in the order phases were first
// set), then Method, then Kind (byte-wise).
type Counts []Row

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

// Get returns the row of phase, method and kind, and whether there is one.
func (c Counts) Get(phase, method, kind string) (Row, bool) {
	for _, r := range c {
		if r.Phase == phase && r.Method == method && r.Kind == kind {
			return r, true
		}
	}
	return Row{}, false
}

// entry is one row being counted; gen is the Counter generation (see
// Reset) the entry belongs to.
type entry struct {
	Row
	phase int
	gen   uint64
}

// Counter counts messages per phase, method and kind. Several proxies may
// share one (Config.Counter), e.g. one per member of a cluster, so that
// one SetPhase switches them all. It is safe for concurrent use; the zero
// value is not: use NewCounter.
type Counter struct {
	mu     sync.Mutex
	gen    uint64
	phase  int
	phases []string
	// rows holds one map per phase, keyed by method + "\x00" + kind.
	rows []map[string]*entry
}

// NewCounter returns a Counter counting into DefaultPhase.
func NewCounter() *Counter {
	return &Counter{phases: []string{DefaultPhase}, rows: []map[string]*entry{{}}}
}

// SetPhase makes name the phase that later messages are counted in. A name
// seen before counts on into its earlier rows.
func (c *Counter) SetPhase(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setPhaseLocked(name)
}

func (c *Counter) setPhaseLocked(name string) {
	if i := slices.Index(c.phases, name); i >= 0 {
		c.phase = i
		return
	}
	c.phases = append(c.phases, name)
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

// Reset forgets every count and phase but the current phase, which stays
// current. Calls in flight count their responses into the current phase.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := c.phases[c.phase]
	c.gen++
	c.phase = 0
	c.phases = []string{name}
	c.rows = []map[string]*entry{{}}
}

// Counts returns a copy of the counts, ordered as Counts documents.
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
			return strings.Compare(a.Kind, b.Kind)
		})
	}
	return out
}

// lookupLocked returns the entry of key (method + "\x00" + kind) in phase
// i, creating it. The map lookup with string(key) does not allocate.
func (c *Counter) lookupLocked(i int, key []byte) *entry {
	if e, ok := c.rows[i][string(key)]; ok {
		return e
	}
	k := string(key)
	method, kind, _ := strings.Cut(k, "\x00")
	e := &entry{Row: Row{Phase: c.phases[i], Method: method, Kind: kind}, phase: i, gen: c.gen}
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
// was counted, into the same method and kind in the current phase. An
// entry from before a Reset counts into the current phase.
func (c *Counter) addTo(e *entry, now bool, scratch []byte, d delta) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.gen != c.gen || (now && e.phase != c.phase) {
		scratch = appendKey(scratch[:0], e.Method, e.Kind)
		e = c.lookupLocked(c.phase, scratch)
	}
	d.apply(&e.Row)
	return scratch
}

// appendKey appends the rows map key of method and kind to b.
func appendKey(b []byte, method, kind string) []byte {
	b = append(b, method...)
	b = append(b, 0)
	return append(b, kind...)
}

// delta is what one message adds to a row.
type delta struct {
	requests, requestBytes, responses, responseBytes, items, errors int64
}

func (d delta) apply(r *Row) {
	r.Requests += d.requests
	r.RequestBytes += d.requestBytes
	r.Responses += d.responses
	r.ResponseBytes += d.responseBytes
	r.Items += d.items
	r.Errors += d.errors
}
