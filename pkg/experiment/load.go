package experiment

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// load is one Kubernetes prefix on a session's member: pods seeded with
// kube-apiserver's encoding and transactions, a history recorder from the
// end of the seeding on, and, per case, writers updating the pods and
// informers watching them (a watchload.ClientSet). Its clients are
// lwbench's model writing and reading etcd directly (modelLoad), or, with
// the session's StackFactory, client-go through real kube-apiservers
// whose --etcd-prefix is the load's prefix (apiLoad): an experiment's
// script is the same over both.
type load struct {
	s          *session
	ws         *watchload.Session // a Child of the session's: the writers' connections and the recorder
	name       string             // the load's own prefix, e.g. /registry/n1000, whose base names its barrier points
	prefix     string             // the Kubernetes prefix, e.g. /registry/n1000 (through shared kube-apiservers theirs)
	podsPrefix string             // e.g. /registry/n1000/pods/
	pods       int
	workers    int
	seededAt   int64 // the revision after seeding
	clients    loadClients
}

// loadClients are the clients of a load's pods, one implementation per
// client set: modelLoad (lwbench's etcd-direct model) and apiLoad
// (client-go through kube-apiserver).
type loadClients interface {
	// seed seeds the load's pods in namespaces namespaces and starts the
	// history recorder; it sets the load's seededAt (and, on a cluster
	// lwbench does not own, its prefix).
	seed(ctx context.Context, namespaces int, seed uint64) error
	// startCase starts a case's informers of the pods and waits until
	// they have listed (load.startCase).
	startCase(ctx context.Context, o watcherOptions, maxWrites int64) (watchload.ClientSet, error)
	// watchList reports whether the informers load their state with a
	// WATCHLIST, to which no page size applies (client-go's
	// WatchListClient through kube-apiserver; the model lists in pages).
	watchList() bool
	// updatePods updates the seeded pods n times in all, round robin,
	// concurrency at once, each one revision, and returns the revisions
	// in no particular order.
	updatePods(ctx context.Context, n, concurrency int) ([]int64, error)
	// watchFrom watches the pods from revision from+1 until it has seen
	// revision until (catchup).
	watchFrom(ctx context.Context, from, until int64) (catchupWatch, error)
	// pages reads the pods a page at a time, as a paginated LIST does.
	pages() pageReader
	// list lists every pod at the latest revision in pages of pageSize
	// (0: unpaginated) as the clients would relist.
	list(ctx context.Context, pageSize int64) (catchupList, error)
	// compactions, for kube-apiserver's own compactor, calls f with
	// every revision it compacts to from revision from on, until ctx
	// ends, and returns a channel closed then; nil for the model, whose
	// compactions the experiment makes.
	compactions(ctx context.Context, from int64, f func(rev int64)) <-chan struct{}
	// counter returns the counting proxy in front of etcd, or one that
	// counts nothing.
	counter() etcdCounter
	// end ends the load once its cases are done (load.end).
	end(ctx context.Context) error
	// close closes what the clients opened (load.close).
	close()
}

// catchupWatch is what a watch of the pods from a revision delivered.
type catchupWatch struct {
	revisions []int64 // the events' revisions, in order
	// responses are etcd's watch responses (the model), or the
	// bookmarks (client-go through kube-apiserver).
	responses int64
	bytes     int64 // the events' bytes
	expired   bool  // answered 410: the revision is no longer served
	// duration runs from the watch's start (its connection open) to the
	// event at the last revision, or the 410.
	duration time.Duration
}

// catchupList is one LIST of every pod.
type catchupList struct {
	duration       time.Duration
	pages          int
	objects, bytes int64
}

// newLoad seeds pods under prefix and starts recording the history:
// through kube-apiservers of the load's own when the session has a
// StackFactory (kube-apiserver's compactor off: the experiment compacts),
// otherwise with the etcd-direct model.
func newLoad(ctx context.Context, s *session, prefix string, pods, namespaces int, seed uint64) (*load, error) {
	return newLoadCompacting(ctx, s, prefix, pods, namespaces, seed, -1)
}

// newLoadCompacting is newLoad whose kube-apiservers, if any, run their
// own compactor every apiCompaction (negative: off).
func newLoadCompacting(ctx context.Context, s *session, prefix string, pods, namespaces int, seed uint64, apiCompaction time.Duration) (*load, error) {
	l := &load{s: s, ws: s.ws.Child(), name: prefix, prefix: prefix,
		podsPrefix: watchload.ResourcePrefix(prefix, watchload.ResourcePods), pods: pods, workers: 16}
	if s.stacks != nil {
		l.clients = &apiLoad{l: l, compaction: apiCompaction}
	} else {
		l.clients = &modelLoad{l: l}
	}
	start := time.Now()
	if err := l.clients.seed(ctx, namespaces, seed); err != nil {
		l.close()
		return nil, err
	}
	s.mark(MarkPhase, fmt.Sprintf("seed %d pods", pods), start, time.Now(), 0)
	return l, nil
}

// loadMix is the mix of a load's writes: every write goes to a pod.
var loadMix = watchload.Mix{CreatePercent: 10, UpdatePercent: 80, DeletePercent: 10}

// end is a load's successful end, before close: divided among workers,
// they meet once every one is done with it (its namespaces or pods may
// then go). Not called on failure, when a worker's error aborts the
// barrier instead.
func (l *load) end(ctx context.Context) error { return l.clients.end(ctx) }

// close stops the recorder and closes the connections, and what the
// clients opened: on a cluster lwbench does not own, deletes the load's
// namespaces (recorded in the session); stops the load's kube-apiservers.
func (l *load) close() {
	l.ws.Close()
	l.clients.close()
}

// watcherOptions shape a case's informers.
type watcherOptions struct {
	watchers, conns int
	// firstID is the ID of the first informer (its number in the whole
	// of a divided experiment, WatcherBlock; 0 undivided); the model's
	// informers are numbered from it.
	firstID int
	// pageSize is the informers' LIST page size (0: unpaginated); through
	// kube-apiserver, -1 leaves it to client-go.
	pageSize    int64
	syncTimeout time.Duration
}

// startCase starts n informers of the pods (listing all at once) and
// waits until they have listed; maxWrites bounds the writes the case may
// make. Through kube-apiserver the informers are client-go's, with the
// session's WatchListClient gate, on a connection each (conns does not
// apply).
func (l *load) startCase(ctx context.Context, o watcherOptions, maxWrites int64) (watchload.ClientSet, error) {
	return l.clients.startCase(ctx, o, maxWrites)
}

// finish stops the case's writers, waits (at most 30 s) until every
// informer has seen the final revision, and validates the case
// (ClientSet.Confirm, Validate): the writes and the experiment's view of
// the validation. An informer that did not confirm the end counts as
// unsynced (the model), or with its cache's differences from etcd as
// cache violations (client-go). The caller closes the case.
func (l *load) finish(ctx context.Context, c watchload.ClientSet) (report.WriteStats, Validation, error) {
	ws := c.StopWrites()
	final, err := l.s.revision(ctx)
	if err != nil {
		return ws, Validation{}, err
	}
	unsynced := c.Confirm(ctx, final, 30*time.Second)
	v, err := c.Validate(ctx, unsynced)
	if err != nil {
		return ws, Validation{}, err
	}
	return ws, fromReport(v), nil
}

// etcdCounter names the phases of what kube-apiserver sends etcd
// (kubeload.EtcdCounter) and reads them back; its zero value counts
// nothing.
type etcdCounter struct{ c kubeload.EtcdCounter }

// SetPhase attributes what etcd receives from now on to phase.
func (e etcdCounter) SetPhase(phase string) {
	if e.c != nil {
		e.c.SetPhase(phase)
	}
}

// ranges returns the LISTs etcd received in phase, Range and RangeStream
// requests over a prefix (etcdproxy's kinds "prefix ..."; kube-apiserver's
// reads of one key before its writes apart), and their response bytes.
func (e etcdCounter) ranges(phase string) (requests, bytes int64) {
	if e.c == nil {
		return 0, 0
	}
	for _, r := range e.c.Requests() {
		if r.Phase == phase && (r.Method == "Range" || r.Method == "RangeStream") && strings.HasPrefix(r.Kind, "prefix") {
			requests += r.Requests
			bytes += r.ResponseBytes
		}
	}
	return requests, bytes
}
