package watchload

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/report"
)

// maintenance is a run's compaction.Actor: a compaction.Scheduler decides
// when (compaction.Scheduler's documentation has the timeline), and
// maintenance holds the first o.HoldBack watchers, ticks kube-apiserver's
// compactor on the compactor's connection (the load's), releases the held
// watchers and defragments every member, recording each step into the
// result; the sizes and the defragmentation go on the admin connection
// (the harness's: Harness). It records failures and goes on, so the
// schedule ends only with the run.
type maintenance struct {
	t     Target // as the harness reaches it
	admin *clientv3.Client
	o     Options
	env   *Env
	refls []*Reflector
	logf  func(string, ...any)
	res   *report.RunResult

	c         *compaction.Compactor
	held      []*Reflector
	heldRev   int64
	before    compaction.Size // the first member's size before the last tick
	beforeErr error           // why before could not be read
	compacted int64           // the last revision compacted to
}

var _ compaction.Actor = (*maintenance)(nil)

// newMaintenance returns the maintenance of a run on t (as the harness
// reaches it), with the admin connection and the compactor's connection
// compactConn.
func newMaintenance(t Target, admin, compactConn *clientv3.Client, o Options, env *Env, refls []*Reflector, logf func(string, ...any), res *report.RunResult) *maintenance {
	c := compaction.NewCompactor(CompactKV(compactConn, o))
	c.Physical = o.PhysicalCompaction
	return &maintenance{t: t, admin: admin, o: o, env: env, refls: refls, logf: logf, res: res, c: c}
}

// schedule is the run's schedule, whose writes began at writesStart and
// which is elapsed into it now (both since the Env's epoch). The
// compactor started with the load, as kube-apiserver's starts with
// kube-apiserver, and, like it, waits a full interval before its first
// tick (k8s.io/apiserver/pkg/storage/etcd3/compact.go runCompactLoop:
// clock.After(interval) before each Compact), so its ticks come at the
// epoch + k x o.CompactionInterval, k >= 1, the first only noting a
// revision, and the first compaction at two intervals (compaction.
// SchedulerOptions.Offset: ticks due during the seeding are one tick at
// the writes' start). The hold comes half an interval or a sixth of the
// writes, whichever is sooner, into the writes; one defragmentation; the
// schedule ends with the writes.
func (m *maintenance) schedule(writesStart, elapsed time.Duration) compaction.SchedulerOptions {
	return compaction.SchedulerOptions{
		Interval: m.o.CompactionInterval, FirstTick: m.o.CompactionInterval, Offset: max(elapsed, 0),
		Duration: writesStart + m.o.Duration,
		Hold:     m.o.HoldBack > 0, HoldAfter: writesStart + min(m.o.CompactionInterval/2, m.o.Duration/6),
		Defragment: m.o.Defragment, Clock: m.o.Clock,
	}
}

// run follows the schedule of writes that began at writesStart (since the
// Env's epoch), unless o.CompactionInterval is negative (never compact).
func (m *maintenance) run(ctx context.Context, writesStart time.Duration) {
	if m.o.CompactionInterval < 0 {
		return
	}
	s, err := compaction.NewScheduler(m, m.schedule(writesStart, m.env.Since()))
	if err != nil {
		m.logf("no compaction: %v", err)
		return
	}
	if err := s.Run(ctx); err != nil && ctx.Err() == nil {
		m.logf("compaction schedule ended: %v", err)
	}
}

// Hold holds the first o.HoldBack watchers and waits until each has
// stopped; the highest revision they resume after is the held revision.
func (m *maintenance) Hold(ctx context.Context) (int64, error) {
	held := m.refls[:m.o.HoldBack]
	heldRev, err := HoldAll(ctx, held)
	if err != nil {
		return 0, err
	}
	m.held, m.heldRev = held, heldRev
	m.logf("holding %d watcher(s) back at revision %d", len(held), heldRev)
	return heldRev, nil
}

// Compact ticks the compactor and records a compaction or a failure; it
// notes the first member's size before the tick, which the result reports
// for the compaction the defragmentation follows.
func (m *maintenance) Compact(ctx context.Context) (compaction.TickResult, error) {
	m.before, m.beforeErr = memberSize(ctx, m.admin, m.t.Endpoints[0])
	at := m.env.Since()
	tick, err := m.c.Tick(ctx)
	if tick.Compacted != 0 || err != nil {
		rec := report.Compaction{AtMs: report.Ms(at), Revision: tick.Compacted, DurationMs: report.Ms(tick.Duration)}
		if err != nil {
			rec.Error = err.Error()
		} else {
			m.compacted = tick.Compacted
			m.logf("compacted to revision %d in %v", tick.Compacted, tick.Duration.Round(time.Millisecond))
		}
		m.res.Compactions = append(m.res.Compactions, rec)
	}
	if err != nil {
		tick.Compacted = 0
	}
	return tick, nil
}

// Release records the first member's size before and after the
// compaction that passed the held watchers, and lets them go.
func (m *maintenance) Release(ctx context.Context, compacted int64) {
	if m.beforeErr == nil {
		m.res.DBSize.BeforeCompactionBytes, m.res.DBSize.BeforeCompactionInUseBytes = m.before.Bytes, m.before.InUseBytes
	}
	if s, err := memberSize(ctx, m.admin, m.t.Endpoints[0]); err == nil {
		m.res.DBSize.AfterCompactionBytes, m.res.DBSize.AfterCompactionInUseBytes = s.Bytes, s.InUseBytes
	}
	if m.held == nil {
		return
	}
	for _, r := range m.held {
		r.Release()
	}
	m.logf("released the held watcher(s): revision %d is compacted", m.heldRev)
}

// Defragment defragments every member once (DefragmentMembers) and
// records the first member's size after it.
func (m *maintenance) Defragment(ctx context.Context) error {
	rec := DefragmentMembers(ctx, m.admin, m.t.Endpoints, m.env.Epoch, m.logf)
	for _, md := range rec.Members {
		if md.Endpoint == m.t.Endpoints[0] && md.Error == "" {
			m.res.DBSize.AfterDefragBytes, m.res.DBSize.AfterDefragInUseBytes = md.AfterBytes, md.AfterInUseBytes
		}
	}
	m.res.Defrag = rec
	return nil
}

// DefragmentMembers defragments every member of endpoints once, one at a
// time so that a quorum keeps serving, the leader last
// (compaction.LeaderLast and compaction.DefragmentAll), each measured
// (offsets from epoch); the pass stops at the first failure, which it
// records in the result (on the member and the pass) rather than
// returns. The etcd-direct model's maintenance and a run through
// kube-apiserver defragment with it.
func DefragmentMembers(ctx context.Context, admin *clientv3.Client, endpoints []string, epoch time.Time, logf func(string, ...any)) *report.Defrag {
	rec := &report.Defrag{AtMs: report.Ms(time.Since(epoch))}
	order, leader := compaction.LeaderLast(ctx, admin, endpoints, statusTimeout)
	ds, err := compaction.DefragmentAll(ctx, admin, order)
	for i, d := range ds {
		md := report.MemberDefrag{Endpoint: d.Endpoint, Leader: d.Endpoint == leader, AtMs: report.Ms(d.Start.Sub(epoch)),
			DurationMs: report.Ms(d.Duration), BeforeBytes: d.Before.Bytes, BeforeInUseBytes: d.Before.InUseBytes,
			AfterBytes: d.After.Bytes, AfterInUseBytes: d.After.InUseBytes}
		rec.DurationMs += md.DurationMs
		if err != nil && i == len(ds)-1 {
			md.Error, rec.Error = err.Error(), err.Error()
			rec.Members = append(rec.Members, md)
			logf("defragmentation of %s failed: %v", d.Endpoint, err)
			break
		}
		rec.Members = append(rec.Members, md)
		logf("defragmented %s in %v: %d -> %d bytes", d.Endpoint, d.Duration.Round(time.Millisecond), d.Before.Bytes, d.After.Bytes)
	}
	if err != nil && rec.Error == "" {
		rec.Error = err.Error()
	}
	return rec
}

// HoldAll holds every reflector (Reflector.Hold), all at once, then waits
// until each has stopped (Reflector.HeldRevision). It returns the highest
// revision R any of them will resume after: a compaction above R+1 makes
// every resumed watch fail. It returns ctx's error if ctx ends first; the
// reflectors stay held until Release either way.
func HoldAll(ctx context.Context, refls []*Reflector) (int64, error) {
	for _, r := range refls {
		r.Hold()
	}
	var heldRev int64
	for _, r := range refls {
		rev, err := r.HeldRevision(ctx)
		if err != nil {
			return 0, err
		}
		heldRev = max(heldRev, rev)
	}
	return heldRev, nil
}
