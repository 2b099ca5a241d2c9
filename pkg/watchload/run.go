package watchload

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/report"
)

// Clients are a run's client set: the part of the load Run's one script
// drives that differs between the etcd-direct model (the default,
// Options.Clients nil) and client-go through kube-apiservers
// (kubeload.NewClients). Run calls Begin, Seed, StartInformers,
// StartWrites with Maintain beside the writes, Confirm, Validate and
// Collect in that order, each at most once, stopping at the first error;
// then, whatever happened, Stop and CleanUp. Every method may use the
// Script Begin was given; none is called concurrently with another
// except Maintain (beside the writes) and Stop.
type Clients interface {
	// Begin prepares the clients before anything is written: it may
	// adjust r.Options to what the clients do (the prefix, no
	// defragmentation of a cluster lwbench does not own), describes what
	// they reach in r.Result (members, versions, scenario), refuses a
	// target lwbench must not write to, and plans the objects. r.Start
	// is not known yet.
	Begin(ctx context.Context, r *Script) error
	// Seed creates the load's objects and starts the history recorder
	// (Session.StartRecorder) from r.Start+1 or later, before any
	// revision an informer may see.
	Seed(ctx context.Context) error
	// StartInformers starts the informers (r.Options.Watchers) and waits
	// until they have listed, at most r.Options.SyncTimeout.
	StartInformers(ctx context.Context) error
	// StartWrites starts the writers on their open-loop schedule
	// (r.Options.WriteRate for r.Options.Duration, Session.Write).
	StartWrites(ctx context.Context) (*Writing, error)
	// Maintain runs beside the writes what the run does to etcd and the
	// informers: compaction, informers held back across it,
	// defragmentation, faults, consistent reads. It returns once that is
	// done, or ctx has ended, with every informer released.
	Maintain(ctx context.Context, w *Writing)
	// Confirm waits until every informer has seen revision rev, at most
	// timeout, and returns how many did not and the revision confirmed
	// (rev, or a later one when a write cancelled at the end committed
	// after rev was read).
	Confirm(ctx context.Context, rev int64, timeout time.Duration) (unsynced int, confirmed int64)
	// Validate stops the informers and completes each one's validation
	// against the recorded history.
	Validate(ctx context.Context)
	// Collect fills r.Result with what the clients measured; unsynced is
	// what Confirm returned. Its error means the result is incomplete.
	Collect(ctx context.Context, unsynced int) error
	// Stop tells everything the clients started to stop, without
	// waiting; it may be called before Begin returned.
	Stop()
	// CleanUp deletes what the run wrote, if the clients were asked to
	// (r.Result.Cleanup), on success, failure and interruption alike;
	// ctx outlives the run's and ends at a second interrupt.
	CleanUp(ctx context.Context)
}

// Script is what Run shares with its Clients: the Session, the
// maintenance connection, the options as the clients adjusted them, the
// result being filled and etcd's revision before the run wrote anything.
type Script struct {
	Session *Session
	// Admin is the maintenance connection (Session.DialAdmin).
	Admin *clientv3.Client
	// Options are the run's, defaulted and validated; Begin may adjust
	// them.
	Options Options
	// Result is the run's result, filled by the script and the clients.
	Result *report.RunResult
	// Start is etcd's revision read before anything was written, once
	// Begin has returned.
	Start int64
}

// Meet waits at point (a Barrier* constant) with the other workers of a
// divided load (Options.Barrier) and returns the latest arrival, or the
// barrier's error; at once, with the time now, for an undivided load.
// Every worker must meet at the same points, in the same order.
func (r *Script) Meet(ctx context.Context, point string) (time.Time, error) {
	return r.Session.meet(ctx, r.Options, point)
}

// Logf logs a line of the run (Options.Logf).
func (r *Script) Logf(format string, args ...any) { r.Session.logf(format, args...) }

// The phases of Run's script, in order (Options.OnPhase, the status line;
// kubeload also counts etcd's requests and scrapes kube-apiserver's
// metrics by them). Clients may begin phases of their own between them
// (Session.SetPhase: "held", "released", "defrag").
const (
	PhaseSeed   = "seed"   // the objects are created
	PhaseSync   = "sync"   // the informers list
	PhaseSteady = "steady" // the writes, with compaction and the rest beside them
	PhaseDrain  = "drain"  // the informers confirm the final revision
	PhaseStop   = "stop"   // the informers stop and are validated
)

// Run seeds objects, starts the history recorder and the informers, waits
// until they have listed, then writes on schedule for o.Duration while
// the clients maintain etcd beside the writes (Clients.Maintain: the
// model's compactor on kube-apiserver's algorithm, informers held back
// across a compaction, defragmentation, faults, consistent reads; through
// kube-apiserver, its own compactor and the hold). At the end it waits
// until every informer confirms the final revision, validates every
// informer against the recorded history, collects the result and, if
// asked, deletes what it wrote. o.Clients is the client set (nil: the
// etcd-direct model, modelClients).
//
// Interrupted (ctx ends) during the writes, it collects what was
// measured within a grace period and returns the result with the
// interruption wrapped; interrupted again (o.Abandon) it gives up at the
// step it is in and returns ErrAbandoned and no result. Errors are
// returned only when the run could not be carried out (seeding failed,
// the target is unreachable, a prefix that holds keys: ErrPrefixNotEmpty);
// broken watch guarantees are results, in RunResult.Validation.
func Run(ctx context.Context, t Target, o Options) (_ *report.RunResult, err error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := o.Clients
	if c == nil {
		c = &modelClients{}
	}
	s := NewSession(t, time.Now(), o.Logf)
	defer s.Close()
	s.OnPhase(o.OnPhase)
	s.SetAbandon(o.Abandon)
	s.SampleSelf(ctx)
	r := &Script{Session: s, Options: o, Result: &report.RunResult{Kind: report.KindRun, SchemaVersion: report.RunSchemaVersion,
		StartedAt: s.epoch.UTC(), Target: s.reportTarget()}}
	res := r.Result
	if o.Divided() {
		sh := o.Shard
		res.Shard = &sh
	}
	if r.Admin, err = s.DialAdmin(ctx); err != nil {
		return nil, err
	}
	defer c.Stop()
	// A worker of a divided load that fails, from Begin on (a client set
	// may refuse the target there), tells the others, so that they stop
	// instead of waiting for it.
	divided := o.Divided()
	if divided {
		defer func() {
			if err != nil {
				actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if aerr := o.Barrier.Abort(actx, err.Error()); aerr != nil {
					r.Logf("tell the other workers this one failed: %v", aerr)
				}
			}
		}()
	}
	if err := c.Begin(ctx, r); err != nil {
		return nil, err
	}
	o = r.Options

	// Nothing is written before the prefix is known to be empty (or its
	// reuse allowed).
	head, err := r.Admin.Get(ctx, o.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("count the keys under %s/: %w", o.Prefix, err)
	}
	if head.Count > 0 && !o.ReusePrefix {
		return nil, fmt.Errorf("%w: %s/ holds %d keys (an earlier run's, or another client's); choose another prefix or reuse it explicitly",
			ErrPrefixNotEmpty, o.Prefix, head.Count)
	}
	r.Start = head.Header.Revision
	// Runs once everything has been told to stop, on success and failure
	// alike, even when ctx has ended; a second interrupt cuts it short.
	defer func() {
		s.stop()
		c.Stop()
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		if o.Abandon != nil {
			defer context.AfterFunc(o.Abandon, cancel)()
		}
		if err == nil && o.BeforeCleanup != nil {
			err = o.BeforeCleanup(cctx)
		}
		if divided && err == nil {
			// Another worker may still be confirming what the cleanup
			// would delete; and whoever follows the barrier (the
			// coordinator) learns that every worker has its result.
			if _, werr := s.meet(cctx, o, BarrierDone); werr != nil {
				r.Logf("cleanup without waiting for the other workers: %v", werr)
			}
		}
		c.CleanUp(cctx)
	}()
	if _, err := s.meet(ctx, o, BarrierBegin); err != nil {
		return nil, err
	}

	s.ReportStatus(ctx, o.OnStatus, o.StatusInterval, o.Shard.Len(o.Watchers), PhaseSeed)
	if err := c.Seed(ctx); err != nil {
		return nil, err
	}
	if _, err := s.meet(ctx, o, BarrierSeeded); err != nil {
		return nil, err
	}
	s.SetPhase(PhaseSync)
	if err := c.StartInformers(ctx); err != nil {
		return nil, err
	}
	if divided {
		latest, err := s.meet(ctx, o, BarrierSynced)
		if err != nil {
			return nil, err
		}
		start := latest.Add(BarrierLead)
		r.Logf("every worker's informers synced; the writes start at %s", start.Format(time.RFC3339Nano))
		if err := sleepUntil(ctx, start); err != nil {
			return nil, err
		}
	}
	writing, err := c.StartWrites(ctx)
	if err != nil {
		return nil, err
	}
	maintained := make(chan struct{})
	go func() {
		defer close(maintained)
		c.Maintain(ctx, writing)
	}()
	res.Writes = writing.Wait()
	<-maintained
	if divided {
		// The workers' series are aligned on it (report.MergeRuns).
		res.Writes.StartMs = report.Ms(writing.Start)
	}

	// Interrupted (SIGINT): keep what was measured; the recorder runs on
	// (its connection outlives ctx) so that the informers' deliveries
	// can still be confirmed.
	interruptedAfter := s.env.Since() - writing.Start
	ctx, interrupted, cancel := s.AfterWrites(ctx)
	defer cancel()
	timeout := o.SyncTimeout
	if interrupted != nil {
		timeout = min(timeout, interruptedGrace/2)
		res.Interrupted = true
	}

	// The final state, then every informer confirms it. An interrupted
	// run interrupted again gives up at the step it is in (abandoned).
	step := collectConfirm
	abandoned := func(err error) error {
		if s.Abandoned() {
			return abandonedError(interrupted, time.Duration(interruptedAfter), step)
		}
		return err
	}
	s.SetPhase(PhaseDrain)
	if divided && interrupted == nil {
		// The final revision must follow every worker's writes.
		if _, err := s.meet(ctx, o, BarrierWritten); err != nil {
			return nil, abandoned(err)
		}
	}
	finalRev, err := currentRevision(ctx, r.Admin, o.Prefix)
	if err != nil {
		return nil, abandoned(fmt.Errorf("read the final revision: %w", err))
	}
	res.Final.Revision = finalRev
	r.Logf("writes done at revision %d; waiting for the informers to confirm it", finalRev)
	unsynced, confirmed := c.Confirm(ctx, finalRev, timeout)
	res.Final.Revision = confirmed
	if err := abandoned(nil); err != nil {
		return nil, err
	}
	step = collectValidate
	s.SetPhase(PhaseStop)
	c.Validate(ctx)
	if err := abandoned(nil); err != nil {
		return nil, err
	}
	step = collectFinal
	if err := c.Collect(ctx, unsynced); err != nil {
		return nil, abandoned(err)
	}
	if err := abandoned(nil); err != nil {
		return nil, err
	}
	res.Self = s.SelfStats(ctx)
	res.Warnings = append(res.Warnings, report.ScheduleWarnings(res)...) // after the client set's own (Collect)
	res.Warnings = append(res.Warnings, report.BusyWarnings(res.Self)...)
	res.Verdict = report.RunVerdict(res)
	if interrupted != nil {
		return res, fmt.Errorf("run stopped after %s of writes: the result holds what was measured until then: %w", time.Duration(interruptedAfter).Round(time.Millisecond), interrupted)
	}
	return res, nil
}

// meet waits at point of o.Barrier with the other workers of a divided
// load (Options.Barrier) and returns the latest arrival; at once, with
// the time now, for an undivided one.
func (s *Session) meet(ctx context.Context, o Options, point string) (time.Time, error) {
	if o.Barrier == nil {
		return time.Now(), nil
	}
	s.logf("worker %s at %q: waiting for the other workers", o.Shard, point)
	t, err := o.Barrier.Wait(ctx, point)
	if err != nil {
		return t, fmt.Errorf("barrier %q: %w", point, err)
	}
	return t, nil
}

// sleepUntil waits until t by the wall clock, or until ctx ends (its
// error).
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The steps an interrupted run still takes to hand back its result, in
// order; abandonedError names those not taken.
const (
	collectConfirm  = iota // the informers confirm the final revision
	collectValidate        // every informer validated against the history
	collectFinal           // final counts, cache comparison, sizes
)

// collectSteps say what each collection step gathers, by step.
var collectSteps = []string{
	collectConfirm:  "the informers' confirmation of the final revision",
	collectValidate: "the validation of every informer against the recorded history",
	collectFinal:    "the final object counts, the comparison of every cache with etcd and the db sizes",
}

// abandonedError is Run's error when an interrupted run (interrupted,
// after writing for after) was interrupted again at step: it names what
// was not collected (ErrAbandoned) and wraps the interruption.
func abandonedError(interrupted error, after time.Duration, step int) error {
	if interrupted == nil { // both signals came once the writes had ended
		interrupted = context.Canceled
	}
	return fmt.Errorf("run stopped after %s of writes, then interrupted again: %w: %s; no result: %w",
		after.Round(time.Millisecond), ErrAbandoned, strings.Join(collectSteps[step:], ", "), interrupted)
}

// currentRevision returns etcd's current revision, read with a
// linearizable get of one key under the prefix (a user limited to the
// prefix may read nothing else).
func currentRevision(ctx context.Context, c *clientv3.Client, prefix string) (int64, error) {
	resp, err := c.Get(ctx, prefix+"/")
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}
