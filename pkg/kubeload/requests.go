package kubeload

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Verb is what an informer asked kube-apiserver for.
type Verb string

// The verbs of an informer's requests, as client-go's reflector sends them
// (k8s.io/client-go/tools/cache/reflector.go list, watch and watchList).
const (
	// VerbList is a LIST (one page of it, with a limit).
	VerbList Verb = "list"
	// VerbWatch is a WATCH from a resourceVersion.
	VerbWatch Verb = "watch"
	// VerbWatchList is a WATCH with sendInitialEvents=true: the state as
	// initial events, a bookmark at their revision, then the watch
	// (WatchListClient).
	VerbWatchList Verb = "watchlist"
)

// Outcome is how a request ended.
type Outcome string

// The outcomes of a request.
const (
	// OutcomeOK is a LIST that returned its items, or a WATCHLIST whose
	// initial events ended with their bookmark and whose stream then
	// ended normally.
	OutcomeOK Outcome = "ok"
	// OutcomeClosed is a watch that kube-apiserver ended (its timeout)
	// without an error.
	OutcomeClosed Outcome = "closed"
	// OutcomeStopped is a watch the informer stopped itself (it was
	// stopping, or a hold broke it).
	OutcomeStopped Outcome = "stopped"
	// OutcomeExpired is 410 Gone: the resourceVersion was compacted (etcd)
	// or is older than the watch cache holds ("too old resource
	// version"), returned as a status or as a watch's ERROR event.
	OutcomeExpired Outcome = "expired"
	// OutcomeTooLargeRV is "too large resource version" (504 with reason
	// Timeout and the ResourceVersionTooLarge cause): the cache has not
	// caught up with the requested revision.
	OutcomeTooLargeRV Outcome = "too-large-rv"
	// OutcomeThrottled is 429 Too Many Requests (API Priority and
	// Fairness rejected it).
	OutcomeThrottled Outcome = "throttled"
	// OutcomeError is any other failure.
	OutcomeError Outcome = "error"
)

// Request is one LIST or WATCH an informer sent, with what came back.
// Times are offsets from the load's epoch.
type Request struct {
	// Informer is the number of the informer that sent it.
	Informer int
	// Seq numbers the informer's requests from 0, in the order sent.
	Seq int
	// Verb is list, watch or watchlist.
	Verb Verb
	// ResourceVersion, ResourceVersionMatch, Limit and Continue are the
	// request's list options as sent ("" RV: the latest, a quorum read;
	// "0": any).
	ResourceVersion      string
	ResourceVersionMatch string
	Limit                int64
	Continue             bool
	// SendInitialEvents is the watch's sendInitialEvents option.
	SendInitialEvents bool
	// Start is when it was sent; Duration until its response ended (a
	// watch: until its stream ended).
	Start, Duration time.Duration
	// Outcome is how it ended; Err the error's text, if any.
	Outcome Outcome
	Err     string
	// Objects are the items of a LIST page or the initial events of a
	// WATCHLIST; Events the watch events after them (bookmarks apart);
	// Bookmarks the bookmarks.
	Objects, Events, Bookmarks int64
	// ResponseBytes are the bytes of the response body as received (a
	// watch: its whole stream).
	ResponseBytes int64
	// ResultRV is a LIST's resourceVersion, or the last resourceVersion a
	// watch delivered ("" if none).
	ResultRV string
	// InitialEventsEnd is when a WATCHLIST's initial events ended (the
	// bookmark that says so arrived); 0 if they did not.
	InitialEventsEnd time.Duration
	// InitialEventsBytes are the response bytes received until then: what
	// the WATCHLIST's state cost, the watch's events after it apart.
	InitialEventsBytes int64
}

// openRequest is a Request being recorded: the log's copy, whose counters
// the ListerWatcher updates under the log's lock, and its response bytes,
// which the transport counts while the body is read.
type openRequest struct {
	Request
	bytes atomic.Int64
}

// requestLog is every request of a set of informers, in the order sent.
type requestLog struct {
	mu   sync.Mutex
	reqs []*openRequest
	seq  map[int]int
}

// begin records a request as sent and returns it, to be completed by end.
func (l *requestLog) begin(req Request) *openRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seq == nil {
		l.seq = map[int]int{}
	}
	r := &openRequest{Request: req}
	r.Seq = l.seq[r.Informer]
	l.seq[r.Informer]++
	l.reqs = append(l.reqs, r)
	return r
}

// end completes r: its outcome, error and duration from now (its
// response bytes are read when the log is, snapshot).
func (l *requestLog) end(r *openRequest, now time.Duration, outcome Outcome, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Duration = now - r.Start
	r.Outcome = outcome
	if err != nil {
		r.Err = err.Error()
	}
}

// snapshot returns a copy of every request, in the order sent. A request
// still open (a watch) has Duration 0 and Outcome "".
func (l *requestLog) snapshot() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Request, len(l.reqs))
	for i, r := range l.reqs {
		out[i] = r.Request
		out[i].ResponseBytes = r.bytes.Load()
	}
	return out
}

type requestKey struct{}

// withRequest returns ctx carrying r, whose response bytes the transport
// counts.
func withRequest(ctx context.Context, r *openRequest) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// countingTransport counts the body bytes of every response whose
// request's context carries a *Request (withRequest); client-go passes the
// context of List and Watch to the HTTP request, so this measures what an
// informer received from outside client-go.
type countingTransport struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if r, ok := req.Context().Value(requestKey{}).(*openRequest); ok && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &r.bytes}
	}
	return resp, nil
}

// countingBody adds every byte read to n.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// update runs f, which changes a request's counters, under the log's lock.
func (l *requestLog) update(f func()) {
	l.mu.Lock()
	f()
	l.mu.Unlock()
}
