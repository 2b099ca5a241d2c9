package watchload

import (
	"context"
	"errors"
	"time"

	"github.com/kubestore/etcdkit/pkg/report"
)

// CaseOptions shape one Case of a Session's load.
type CaseOptions struct {
	// Watchers is the number of reflectors; 0 makes a case of writes only.
	Watchers int
	// Connections is the number of connections, one stream each, the
	// reflectors share (at least 1 when Watchers is).
	Connections int
	// Watcher returns reflector i's options on its stream (Stream and ID
	// are the caller's to set, as for StartWatchers).
	Watcher func(i int, stream *Stream) ReflectorOptions
	// SyncTimeout bounds the wait until every reflector has listed.
	SyncTimeout time.Duration
	// RingCapacity and Writers are the case's Env's (NewEnv): how many
	// revisions back an event can be joined with its write, and the
	// writer workers that publish into it.
	RingCapacity int64
	Writers      int
	// Workload is what Write writes, on the Session's writers'
	// connections; nil makes a case that does not write.
	Workload Workload
	// ConfirmPeriod is how often Confirm and Validate look whether the
	// reflectors and the history have reached the final revision (the
	// progress requests' period); 0 means 100 ms.
	ConfirmPeriod time.Duration
}

// Case is one case of a load on a Session, the model's ClientSet:
// reflectors and writers of their own, on an Env of their own, over the
// Session's writers' connections, history recorder and maintenance
// connection. A Session may run several
// cases one after another (an experiment's page sizes, a control), each
// validated on its own against the one history. The phases are methods,
// in this order (a case skips the phases it does not need):
//
//	Session.StartCase   the Env, the watchers' connections, the reflectors listed
//	Write               the writers, open loop, on the Session's writers' connections
//	StopWrites          end the writes and count them
//	Confirm             wait until every reflector has seen a revision
//	Validate            stop the reflectors, complete their validation, compare each cache with etcd
//	Close               stop what runs and close the watchers' connections
//
// A Case is used by one goroutine; its reflectors and writers run on
// their own until Validate or Close.
type Case struct {
	s       *Session
	o       CaseOptions
	env     *Env
	topo    *Topology // nil without watchers
	set     *ReflectorSet
	writing *Writing // nil when no writes run
	final   int64    // the revision Confirm waited for
}

// StartCase starts a case of the Session's load: a new Env joined to the
// Session's recorder, o.Watchers reflectors on o.Connections connections
// of their own, all listing at once, and waits until every one has
// listed. The reflectors run under a context of their own, outliving
// ctx's cancellation until Validate or Close. It returns an error if one
// has not listed within o.SyncTimeout or ctx ends; the case is then
// closed.
func (s *Session) StartCase(ctx context.Context, o CaseOptions) (*Case, error) {
	if o.ConfirmPeriod <= 0 {
		o.ConfirmPeriod = 100 * time.Millisecond
	}
	c := &Case{s: s, o: o, env: NewEnv(s.epoch, o.RingCapacity, o.Writers, s.rec)}
	if o.Watchers > 0 {
		var err error
		if c.topo, err = Connect(ctx, s.t.Dial, o.Connections, o.Connections, ""); err != nil {
			return nil, err
		}
	}
	c.set = NewReflectorSet(c.env, c.topo, o.Watchers, o.Watcher)
	if err := c.set.Start(ctx, context.WithoutCancel(ctx), 0, o.SyncTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Env returns the case's Env.
func (c *Case) Env() *Env { return c.env }

// Reflectors returns the case's reflectors; reflector i has ID i.
func (c *Case) Reflectors() []*Reflector { return c.set.Reflectors }

// Informers returns the case's reflectors as Informers; informer i has
// ID i.
func (c *Case) Informers() []Informer {
	out := make([]Informer, len(c.set.Reflectors))
	for i, r := range c.set.Reflectors {
		out[i] = r
	}
	return out
}

// HoldAll holds every reflector (HoldAll).
func (c *Case) HoldAll(ctx context.Context) (int64, error) { return HoldAll(ctx, c.set.Reflectors) }

// RequestProgress asks every stream of the reflectors for a progress
// notification (etcd's RequestProgress), so that idle reflectors learn
// the store's revision.
func (c *Case) RequestProgress(ctx context.Context) {
	for _, st := range c.Streams() {
		st.RequestProgress(ctx)
	}
}

// Streams returns the streams the reflectors watch on (none without
// watchers), e.g. to request progress notifications.
func (c *Case) Streams() []*Stream {
	if c.topo == nil {
		return nil
	}
	return c.topo.Streams
}

// Write starts writers of the case's Workload on the Session's writers'
// connections (StartWriting with the case's Env and o; o.Workers 0 means
// CaseOptions.Writers), under a context derived from parent, until their
// schedule is done, parent ends, or StopWrites, Validate or Close.
func (c *Case) Write(parent context.Context, o WriterOptions) error {
	if c.o.Workload == nil {
		return errors.New("the case has no workload to write")
	}
	if o.Workers <= 0 {
		o.Workers = c.o.Writers
	}
	w, err := StartWriting(parent, c.env, c.s.kvs, c.o.Workload, o)
	if err != nil {
		return err
	}
	c.writing = w
	return nil
}

// StopWrites ends the writes at once and returns what the writers did,
// with the latency of every write the Env recorded; zero if none ran or
// they were stopped before.
func (c *Case) StopWrites() report.WriteStats {
	ws := c.writing.StopMeasured(c.env)
	c.writing = nil
	return ws
}

// Confirm waits, looking every ConfirmPeriod, until every reflector has
// seen revision rev (ReflectorSet.WaitSynced, against the Session's
// history) or timeout passes, and returns the number that have not.
// Validate then waits for the history to reach rev too.
func (c *Case) Confirm(ctx context.Context, rev int64, timeout time.Duration) (unsynced int) {
	c.final = rev
	if len(c.set.Reflectors) == 0 {
		return 0
	}
	return c.set.WaitSynced(ctx, c.s.rec, rev, c.o.ConfirmPeriod, timeout)
}

// Validate stops the writes and the reflectors, waits (up to 30 s) until
// the Session's history covers the confirmed revision and every
// reflector's last revision, completes each reflector's validation
// against it, closes the watchers' connections, compares each cache with
// etcd at its reflector's last revision on the Session's maintenance
// connection, and counts the violations (ValidationOf; unsynced is what
// Confirm returned). It returns an error only if etcd could not be read.
func (c *Case) Validate(ctx context.Context, unsynced int) (report.Validation, error) {
	c.StopWrites()
	c.set.Stop()
	refls := c.set.Reflectors
	finishValidation(ctx, c.s.rec, refls, c.final, c.o.ConfirmPeriod, c.s.logf)
	c.closeConns()
	if err := c.set.CompareCaches(ctx, c.s.admin, c.s.rec, c.env.Violations, c.s.logf); err != nil {
		return report.Validation{}, err
	}
	var unverified int64
	for _, r := range refls {
		unverified += r.Stats().Unverified
	}
	return ValidationOf(c.env, unsynced, unverified, 0), nil
}

// Close ends the writes and the reflectors, waits for the reflectors and
// closes the watchers' connections. It may be called more than once.
func (c *Case) Close() {
	c.StopWrites()
	c.set.Stop()
	c.closeConns()
}

func (c *Case) closeConns() {
	if c.topo != nil {
		c.topo.Close()
	}
}
