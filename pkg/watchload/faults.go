package watchload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/report"
)

// FaultKind names a fault a run injects into one member of a cluster
// whose processes it controls: an action (kill, pause, partition) on the
// leader or on a follower, chosen when the fault begins.
type FaultKind string

// The faults.
const (
	// FaultKillLeader kills the leader with SIGKILL, as a crash would, and
	// restarts it on its data directory after the fault's duration.
	FaultKillLeader FaultKind = "kill-leader"
	// FaultKillFollower does the same to a follower.
	FaultKillFollower FaultKind = "kill-follower"
	// FaultPauseLeader stops the leader with SIGSTOP and continues it with
	// SIGCONT: it keeps its connections open but answers nothing, like a
	// member stuck on a disk.
	FaultPauseLeader FaultKind = "pause-leader"
	// FaultPauseFollower does the same to a follower.
	FaultPauseFollower FaultKind = "pause-follower"
	// FaultPartitionLeader cuts the leader off from its peers and clients
	// by taking its network link down (network namespaces), then brings it
	// back; the process keeps running.
	FaultPartitionLeader FaultKind = "partition-leader"
	// FaultPartitionFollower does the same to a follower.
	FaultPartitionFollower FaultKind = "partition-follower"
)

// FaultKinds lists every fault kind.
var FaultKinds = []FaultKind{FaultKillLeader, FaultKillFollower, FaultPauseLeader, FaultPauseFollower, FaultPartitionLeader, FaultPartitionFollower}

// ParseFaultKind returns the fault kind named s, or an error listing them.
func ParseFaultKind(s string) (FaultKind, error) {
	for _, k := range FaultKinds {
		if string(k) == s {
			return k, nil
		}
	}
	names := make([]string, len(FaultKinds))
	for i, k := range FaultKinds {
		names[i] = string(k)
	}
	return "", fmt.Errorf("unknown fault %q: want one of %s", s, strings.Join(names, ", "))
}

// Leader reports whether the fault strikes the leader (else a follower).
func (k FaultKind) Leader() bool { return strings.HasSuffix(string(k), "-leader") }

// Partition reports whether the fault cuts a member's network off, which
// needs members in network namespaces.
func (k FaultKind) Partition() bool { return strings.HasPrefix(string(k), "partition-") }

// MemberControl controls one member's process; *etcdproc.Member
// satisfies it. Kill waits for the process to exit; Restart starts it
// again on the same data directory and ports without waiting for it to
// rejoin; Pause and Resume send SIGSTOP and SIGCONT; Partition and Heal
// take its network link down and up.
type MemberControl interface {
	Kill() error
	Restart() error
	Pause() error
	Resume() error
	Partition() error
	Heal() error
}

// Fault is one fault of a run.
type Fault struct {
	// Kind is what happens, and to which member.
	Kind FaultKind
	// At is when it begins, from the start of the writes.
	At time.Duration
	// Duration is how long the member stays killed, paused or cut off
	// before it is restarted, resumed or healed.
	Duration time.Duration
}

// validateFaults reports, under fldPath, faults of unknown kinds, bad
// times, faults that begin after the write phase of length d ends, and
// faults that begin before the previous one is undone.
func validateFaults(faults []Fault, d time.Duration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	var end time.Duration
	for i, f := range faults {
		p := fldPath.Index(i)
		if _, err := ParseFaultKind(string(f.Kind)); err != nil {
			errs = append(errs, field.NotSupported(p.Child("kind"), string(f.Kind), FaultKinds))
		}
		errs = append(errs, fieldcheck.NonNegativeDuration(f.At, p.Child("at"))...)
		if f.At >= d {
			errs = append(errs, field.Invalid(p.Child("at"), f.At.String(), fmt.Sprintf("must fall within the duration (%v)", d)))
		}
		errs = append(errs, fieldcheck.PositiveDuration(f.Duration, p.Child("duration"))...)
		if i > 0 && f.At < end {
			errs = append(errs, field.Invalid(p.Child("at"), f.At.String(), fmt.Sprintf("begins before the previous fault is undone at %v", end)))
		}
		end = f.At + f.Duration
	}
	return errs
}

// probeLead is how long before a fault its probe starts.
const probeLead = time.Second

// faultRunner injects a run's faults one after another and measures each
// (see inject).
type faultRunner struct {
	t           Target
	admin       *clientv3.Client   // every endpoint
	probeConn   *clientv3.Client   // every endpoint, the probe's own
	memberConns []*clientv3.Client // one per endpoint, to see writes succeed again
	o           Options
	env         *Env
	refls       []*Reflector
	rec         *Recorder
	streams     []*Stream // the watch streams and the recorder's
	writers     *Writers
	writersDone <-chan struct{}
	members     []report.MemberStats
	logf        func(string, ...any)

	results []report.Fault
}

// run injects every fault at its time; writeStart is the start of the
// writes, from the epoch.
func (f *faultRunner) run(ctx context.Context, writeStart time.Duration) {
	for i, spec := range f.o.Faults {
		next := time.Duration(-1)
		if i+1 < len(f.o.Faults) {
			next = writeStart + f.o.Faults[i+1].At
		}
		if !clockwait.SleepReal(ctx, writeStart+spec.At-probeLead-f.env.Since()) {
			return
		}
		f.results = append(f.results, f.inject(ctx, spec, writeStart+spec.At, next))
	}
}

// name returns member i's name, or its endpoint if the name is unknown.
func (f *faultRunner) name(i int) string {
	if i >= 0 && i < len(f.members) && f.members[i].Name != "" {
		return f.members[i].Name
	}
	if i >= 0 && i < len(f.t.Endpoints) {
		return f.t.Endpoints[i]
	}
	return ""
}

// inject runs one fault at offset at (from the epoch) and measures it:
//
//  1. a probe of small writes and reads starts a second before;
//  2. the leader is found, and the fault strikes it or the first
//     follower;
//  3. after spec.Duration the member is restarted, resumed or healed,
//     whatever happens meanwhile;
//  4. from the injection on, a write of one key under the prefix is sent
//     through every member at once, and again (one-second timeout) until
//     one succeeds: writes succeed again, at its revision R;
//  5. then every watcher and the history recorder must see a revision >=
//     R (an event or a progress notification, requested every 100 ms):
//     the time the last one does is when watchers have recovered;
//  6. once the member is back, every member must answer a status request
//     with a leader: the cluster is healthy;
//  7. the window closes a write timeout after recovery and health (a
//     write sent into the fault may fail that late), when the writers
//     have finished, or before the next fault; the writers' errors,
//     the relists started and the probe's figures are those of the
//     window.
//
// Recovery (4, 5) must happen within o.RecoveryTimeout of the member's
// return; health (6) too.
func (f *faultRunner) inject(ctx context.Context, spec Fault, at, next time.Duration) report.Fault {
	res := report.Fault{Kind: string(spec.Kind), PlannedDurationMs: report.Ms(spec.Duration), SlowestWatcher: -1}
	pctx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	probe := compaction.NewProbe(f.probeConn, compaction.ProbeOptions{Key: probeKey(f.o.Prefix), RatePerSecond: f.o.ProbeRate})
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		probe.Run(pctx)
	}()
	finish := func(windowStart time.Duration) report.Fault {
		stopProbe()
		<-probeDone
		res.Probe = probeReport(probe.Result())
		res.SettledAtMs = report.Ms(f.env.Since())
		if windowStart >= 0 {
			f.countRelists(&res, windowStart)
		}
		if res.Error != "" {
			f.logf("fault %s: %s", spec.Kind, res.Error)
		}
		return res
	}
	if !clockwait.SleepReal(ctx, at-f.env.Since()) {
		res.Error = "the run ended before the fault"
		return finish(-1)
	}

	leader := leaderIndex(ctx, f.admin, f.t.Endpoints)
	if leader < 0 {
		res.Error = "no member reports itself leader before the fault"
		return finish(-1)
	}
	target := leader
	if !spec.Kind.Leader() {
		target = (leader + 1) % len(f.t.Endpoints)
	}
	res.LeaderBefore, res.Member, res.Endpoint = f.name(leader), f.name(target), f.t.Endpoints[target]
	m := f.t.Members[target]
	before := f.writers.Progress()
	t0 := f.env.Since()
	res.AtMs = report.Ms(t0)
	if err := faultAction(m, spec.Kind, true); err != nil {
		res.Error = fmt.Sprintf("inject %s into %s: %v", spec.Kind, res.Member, err)
		return finish(t0)
	}
	f.logf("fault %s: %s member %s at %s (for %v)", spec.Kind, pastTense(spec.Kind), res.Member, res.Endpoint, spec.Duration)

	// Undo it on time whatever happens, even if the run is cancelled,
	// so that the member can be stopped cleanly.
	type undoResult struct {
		at  time.Duration
		err error
	}
	undone := make(chan undoResult, 1)
	go func() {
		t := time.NewTimer(t0 + spec.Duration - f.env.Since())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		err := faultAction(m, spec.Kind, false)
		undone <- undoResult{at: f.env.Since(), err: err}
	}()

	var recovered time.Duration
	rctx, cancel := context.WithDeadline(ctx, f.env.Epoch.Add(t0+spec.Duration+f.o.RecoveryTimeout))
	rev, wrote, err := f.writeAgain(rctx, spec.Kind)
	if err != nil {
		res.Error = err.Error()
	} else {
		res.RecoveryRevision, res.WriteRecoveryMs = rev, report.Ms(wrote-t0)
		seen, slowest, held, err := f.watchersSee(rctx, rev)
		res.HeldWatchers = held
		if err != nil {
			res.Error = err.Error()
		} else {
			recovered = max(seen, wrote)
			res.Recovered, res.SlowestWatcher = true, slowest
			res.WatchRecoveryMs, res.RecoveryMs = report.Ms(seen-t0), report.Ms(recovered-t0)
			f.logf("fault %s: writes succeeded again after %v (revision %d); every watcher saw it after %v",
				spec.Kind, (wrote - t0).Round(time.Millisecond), rev, (seen - t0).Round(time.Millisecond))
		}
	}
	cancel()

	u := <-undone
	if u.err != nil {
		if res.Error == "" {
			res.Error = fmt.Sprintf("undo %s of %s: %v", spec.Kind, res.Member, u.err)
		}
		return finish(t0)
	}
	res.EndedAtMs = report.Ms(u.at)
	healthy, leaderAfter, err := f.waitHealthy(ctx, u.at+f.o.RecoveryTimeout)
	if err != nil {
		if res.Error == "" {
			res.Error = err.Error()
		}
		return finish(t0)
	}
	res.HealthyMs, res.LeaderAfter = report.Ms(healthy-t0), f.name(leaderAfter)
	f.logf("fault %s: %s back after %v; cluster healthy after %v, leader %s", spec.Kind, res.Member,
		(u.at - t0).Round(time.Millisecond), (healthy - t0).Round(time.Millisecond), res.LeaderAfter)

	// The window: a write timeout past recovery and health.
	settle := max(recovered, healthy) + f.o.WriteTimeout
	if next >= 0 {
		settle = min(settle, next-probeLead)
	}
	t := time.NewTimer(max(settle-f.env.Since(), 0))
	select {
	case <-t.C:
	case <-f.writersDone:
		t.Stop()
	case <-ctx.Done():
		t.Stop()
	}
	after := f.writers.Progress()
	res.WriteErrors, res.WriteTimeouts = after.Errors-before.Errors, after.Timeouts-before.Timeouts
	return finish(t0)
}

// countRelists counts the LIST phases started from windowStart until now,
// except those the run forces by holding a watcher back across a
// compaction. A watcher cut off long enough for its revision to be
// compacted meanwhile relists for that reason too, and is counted.
func (f *faultRunner) countRelists(res *report.Fault, windowStart time.Duration) {
	end := f.env.Since()
	for _, r := range f.refls {
		heldBack := r.Stats().HeldBack
		relisted := false
		for _, l := range r.Lists() {
			if l.Reason == ListInitial || (heldBack && l.Reason == ListAfterCompaction) || l.At < windowStart || l.At > end {
				continue
			}
			if res.RelistReasons == nil {
				res.RelistReasons = map[string]int{}
			}
			res.Relists++
			res.RelistReasons[l.Reason]++
			relisted = true
		}
		if relisted {
			res.WatchersRelisted++
		}
	}
}

// faultAction injects (or, with inject false, undoes) a fault on m.
func faultAction(m MemberControl, k FaultKind, inject bool) error {
	switch action, _, _ := strings.Cut(string(k), "-"); {
	case action == "kill" && inject:
		return m.Kill()
	case action == "kill":
		return m.Restart()
	case action == "pause" && inject:
		return m.Pause()
	case action == "pause":
		return m.Resume()
	case action == "partition" && inject:
		return m.Partition()
	case action == "partition":
		return m.Heal()
	}
	return fmt.Errorf("unknown fault %q", k)
}

func pastTense(k FaultKind) string {
	action, _, _ := strings.Cut(string(k), "-")
	return map[string]string{"kill": "killed", "pause": "paused", "partition": "cut off"}[action]
}

// writeAgain writes the fault key through every member at once, each
// attempt bounded by one second, until one write succeeds: the cluster
// accepts writes again, through whichever member can take them. It
// returns that write's revision and when it succeeded.
func (f *faultRunner) writeAgain(ctx context.Context, k FaultKind) (int64, time.Duration, error) {
	conns := f.memberConns
	if len(conns) == 0 {
		conns = []*clientv3.Client{f.admin}
	}
	type result struct {
		rev int64
		at  time.Duration
		err error
	}
	for {
		results := make(chan result, len(conns))
		for _, c := range conns {
			go func() {
				wctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				resp, err := c.Put(wctx, faultKey(f.o.Prefix), fmt.Sprintf("%s at %s", k, time.Now().UTC().Format(time.RFC3339Nano)))
				if err != nil {
					results <- result{err: err}
					return
				}
				results <- result{rev: resp.Header.Revision, at: f.env.Since()}
			}()
		}
		var last error
		for range conns {
			r := <-results
			if r.err == nil {
				return r.rev, r.at, nil
			}
			last = r.err
		}
		if ctx.Err() != nil {
			return 0, 0, fmt.Errorf("no write succeeded after the fault within the recovery timeout (last error: %v)", last)
		}
		clockwait.SleepReal(ctx, 50*time.Millisecond)
	}
}

// watchersSee waits until every watcher and the history recorder have
// seen revision rev, asking for progress notifications every 100 ms on
// the streams of those behind (in the background: a stream to a paused
// member would block the request). Watchers the run holds back across a
// compaction are not waited for. It returns when the last one saw it and
// who that was (-1: the recorder).
func (f *faultRunner) watchersSee(ctx context.Context, rev int64) (last time.Duration, slowest, held int, err error) {
	n := len(f.refls)
	seen := make([]time.Duration, n+1) // the recorder last
	var wg sync.WaitGroup
	wait := func(i int, ch <-chan struct{}, cancel func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			select {
			case <-ch:
				seen[i] = f.env.Since()
			case <-ctx.Done():
			}
		}()
	}
	for i, r := range f.refls {
		if r.isHeld() {
			// Held back across a compaction by the run itself: it is
			// not watching, whatever the fault does.
			seen[i] = -1
			held++
			continue
		}
		ch, cancel := r.waitRevision(rev)
		wait(i, ch, cancel)
	}
	ch, cancel := f.rec.watermark.wait(rev)
	wait(n, ch, cancel)
	all := make(chan struct{})
	go func() {
		wg.Wait()
		close(all)
	}()

	inflight := map[*Stream]bool{}
	var mu sync.Mutex
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-all:
			done = true
			continue
		case <-tick.C:
		}
		behind := map[*Stream]bool{}
		for i, r := range f.refls {
			if seen[i] == 0 && r.LastRevision() < rev {
				behind[r.o.Stream] = true
			}
		}
		if f.rec.Watermark() < rev {
			behind[f.rec.stream] = true
		}
		for s := range behind {
			mu.Lock()
			busy := inflight[s]
			inflight[s] = true
			mu.Unlock()
			if busy {
				continue
			}
			go func() {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				s.RequestProgress(pctx) // best effort
				cancel()
				mu.Lock()
				inflight[s] = false
				mu.Unlock()
			}()
		}
	}
	who := 0
	var missing []string
	for i, t := range seen {
		if t < 0 {
			continue
		}
		if t == 0 {
			if i == n {
				missing = append(missing, "the history recorder")
			} else {
				missing = append(missing, fmt.Sprintf("watcher %d", f.refls[i].ID()))
			}
			continue
		}
		if t > last {
			last, who = t, i
		}
	}
	if len(missing) > 0 {
		if len(missing) > 5 {
			missing = append(missing[:5], fmt.Sprintf("%d more", len(missing)-5))
		}
		return 0, 0, held, fmt.Errorf("not every watcher saw revision %d within the recovery timeout: %s", rev, strings.Join(missing, ", "))
	}
	if who == n {
		return last, -1, held, nil
	}
	return last, f.refls[who].ID(), held, nil
}

// waitHealthy polls every member's status until all answer with a leader,
// or until offset deadline (from the epoch); it returns when and which
// endpoint leads.
func (f *faultRunner) waitHealthy(ctx context.Context, deadline time.Duration) (time.Duration, int, error) {
	var last error
	for {
		leader, err := f.health(ctx)
		if err == nil {
			return f.env.Since(), leader, nil
		}
		last = err
		if f.env.Since() > deadline || !clockwait.SleepReal(ctx, 200*time.Millisecond) {
			return 0, -1, fmt.Errorf("the cluster was not healthy again within the recovery timeout: %v", last)
		}
	}
}

// health checks that every member answers with the same leader and
// returns that leader's index.
func (f *faultRunner) health(ctx context.Context) (int, error) {
	var leaderID uint64
	ids := make([]uint64, len(f.t.Endpoints))
	for i, ep := range f.t.Endpoints {
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		st, err := f.admin.Status(sctx, ep)
		cancel()
		switch {
		case err != nil:
			return -1, fmt.Errorf("status of %s: %w", ep, err)
		case st.Leader == 0:
			return -1, fmt.Errorf("%s has no leader", ep)
		case leaderID != 0 && st.Leader != leaderID:
			return -1, fmt.Errorf("%s follows another leader", ep)
		}
		leaderID, ids[i] = st.Leader, st.Header.MemberId
	}
	for i, id := range ids {
		if id == leaderID {
			return i, nil
		}
	}
	return -1, errors.New("the leader is not among the endpoints")
}

// probeReport copies a probe's result into the report's types.
func probeReport(p compaction.ProbeResult) report.FaultProbe {
	ops := func(s compaction.ProbeStats) report.ProbeOps {
		return report.ProbeOps{Count: s.Count, Errors: s.Errors, Timeouts: s.Timeouts, Latency: s.Latency}
	}
	out := report.FaultProbe{Writes: ops(p.Writes), Reads: ops(p.Reads), LongestStallMs: p.LongestStallMs}
	if len(p.Errors) > 0 {
		out.Errors = p.Errors
	}
	return out
}
