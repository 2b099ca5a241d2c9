package watchload

import (
	"context"
	"time"

	"github.com/kubestore/etcdkit/pkg/report"
)

// ClientSet is one case's informers and writers, whichever clients they
// are: lwbench's model of client-go reading etcd directly (Case, on a
// Session), or real client-go informers and writers through
// kube-apiserver (pkg/kubeload's Case, on a Load). A script over a
// ClientSet (an experiment's) is the same over both. The phases come in
// this order, a script skipping those it does not need:
//
//	Write           the writers, open loop
//	HoldAll         hold every informer back (Informer.Hold one)
//	StopWrites      end the writes and count them
//	Confirm         wait until every informer has seen a revision
//	Validate        stop the informers, complete their validation
//	Close           stop what runs
//
// A ClientSet is used by one goroutine; its informers and writers run on
// their own until Validate or Close.
type ClientSet interface {
	// Informers returns the case's informers, informer i with ID i.
	Informers() []Informer
	// Write starts the writers updating the load's objects on o's
	// schedule (o.Workers 0: the load's), open loop; they outlive ctx's
	// cancellation until StopWrites, Validate or Close.
	Write(ctx context.Context, o WriterOptions) error
	// HoldAll holds every informer, waits until each has stopped, and
	// returns the highest revision any of them will resume after: a
	// compaction above it + 1 makes every resumed watch that reaches etcd
	// fail. It returns ctx's error if ctx ends first; the informers stay
	// held until released.
	HoldAll(ctx context.Context) (int64, error)
	// RequestProgress lets idle informers learn the store's revision: the
	// model's ask their streams for progress notifications (etcd's
	// RequestProgress); client-go through kube-apiserver gets bookmarks
	// on kube-apiserver's own schedule, so it does nothing there.
	RequestProgress(ctx context.Context)
	// StopWrites ends the writes and returns what the writers did; zero
	// if none ran or they were stopped before.
	StopWrites() report.WriteStats
	// Confirm waits until every informer has seen revision rev (the
	// model: an event or progress notification at rev; client-go: its
	// cache equal to etcd's state at rev, or at a later revision if a
	// write cancelled at the end committed late) or timeout passes, and
	// returns how many did not.
	Confirm(ctx context.Context, rev int64, timeout time.Duration) (unsynced int)
	// Validate stops the writes and the informers, completes every
	// informer's validation against the recorded history and counts the
	// violations (unsynced is what Confirm returned). It returns an error
	// only if etcd could not be read.
	Validate(ctx context.Context, unsynced int) (report.Validation, error)
	// Close stops what the case runs; it may be called more than once.
	Close()
}

// Informer is one informer of a ClientSet: a model reflector (Reflector)
// or a client-go informer through kube-apiserver.
type Informer interface {
	// ID is its number in the case, from 0.
	ID() int
	// Hold breaks its watch off and holds its next request until
	// Release.
	Hold()
	Release()
	// LastRevision is the newest revision it has seen.
	LastRevision() int64
	// Relists are its LIST phases after its first, in order, as the
	// result reports them: the model's with every attempt, client-go's
	// only once listed (report.Relist).
	Relists() []report.Relist
}

var (
	_ ClientSet = (*Case)(nil)
	_ Informer  = (*Reflector)(nil)
)

// Relists returns the reflector's LIST phases after its first, in order,
// as the result reports them (report.Relist, with every attempt).
func (r *Reflector) Relists() []report.Relist {
	lists := r.Lists()
	if len(lists) < 2 {
		return nil
	}
	out := make([]report.Relist, 0, len(lists)-1)
	for _, l := range lists[1:] {
		out = append(out, relistReport(r.o, l))
	}
	return out
}
