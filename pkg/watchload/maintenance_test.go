package watchload

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/report"
)

// TestMaintenanceHeldWatcher runs a run's maintenance on a fake clock
// against etcd with one real reflector, step by step through the
// held-watcher sequence of compaction.Scheduler's timeline with
// kube-apiserver's first tick (interval I, writes from 0, hold at I/2):
// hold, wait until the reflector has stopped, the first tick at I, which
// only notes a revision (k8s.io/apiserver/pkg/storage/etcd3/compact.go
// waits a full interval, and does not compact on bootstrap), a compaction
// at 2I above heldRev+1, release, defragmentation; the reflector relists
// exactly once, from the failed watch at heldRev+1, and the result
// records every step. The compactor ticks on a connection of its own.
func TestMaintenanceHeldWatcher(t *testing.T) {
	const I = 10 * time.Second
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	prefix := "/registry/pods/"
	putKeys(t, c, prefix, 0, 3)
	env := NewEnv(time.Now(), 1024, 1, nil)
	r := NewReflector(env, ReflectorOptions{Prefix: prefix, Stream: NewStream(0, 0, c, ""), Rand: func() float64 { return 0 }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-r.Synced()
	waitFor(t, "the watch", func() bool { return r.State().Phase == PhaseWatch })

	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	o := Options{CompactionInterval: I, Duration: 4 * I, HoldBack: 1, PhysicalCompaction: true, Defragment: true, Clock: clk}
	res := &report.RunResult{}
	m := newMaintenance(Target{Endpoints: srv.Endpoints}, c, etcdtest.NewClient(t, srv), o, env, []*Reflector{r}, t.Logf, res)
	schedDone := make(chan struct{})
	go func() { defer close(schedDone); m.run(ctx, 0) }()
	// step moves the fake clock once the schedule waits on it.
	step := func(d time.Duration) {
		t.Helper()
		waitFor(t, "the schedule to wait", clk.HasWaiters)
		clk.Step(d)
	}

	// Nothing ticks at t=0; events go on before the hold.
	rev := putKeys(t, c, prefix, 3, 4)
	waitFor(t, "the event of a put", func() bool { return r.LastRevision() >= rev })
	step(I / 2) // t=I/2: hold
	waitFor(t, "the schedule to wait", clk.HasWaiters)
	heldRev := m.heldRev
	if st := r.State(); st.Phase != PhaseHeld || st.LastRevision != heldRev || heldRev < rev {
		t.Fatalf("after the hold: reflector %v, held revision %d; want phase %s at the held revision, at least %d", st, heldRev, PhaseHeld, rev)
	}
	last := putKeys(t, c, prefix, 4, 6) // writes while held

	step(I / 2) // t=I: the first tick notes a revision, compacts nothing
	waitFor(t, "the schedule to wait", clk.HasWaiters)
	if len(res.Compactions) != 0 {
		t.Fatalf("after the first tick at I: %+v; want no compaction", res.Compactions)
	}
	if st := r.State(); st.Phase != PhaseHeld || len(r.Lists()) != 1 {
		t.Fatalf("after the first tick at I: reflector %v, %d lists; want still held, listed once", st, len(r.Lists()))
	}

	step(I / 2)
	step(I / 2) // t=2I: compacts past the hold: release, defragment
	waitFor(t, "the relist", func() bool { return len(r.Lists()) == 2 && r.Lists()[1].Err == nil && r.Lists()[1].Revision != 0 })
	if len(res.Compactions) != 1 || res.Compactions[0].Revision <= heldRev+1 || res.Compactions[0].Error != "" {
		t.Fatalf("after the compaction at 2I: %+v; want one compaction above heldRev+1 = %d", res.Compactions, heldRev+1)
	}
	compacted := res.Compactions[0].Revision
	rl := r.Lists()[1]
	if rl.Reason != ListAfterCompaction || rl.FailedWatchFrom != heldRev+1 || rl.CompactRevision != compacted || rl.Revision < last {
		t.Errorf("relist %+v; want one after the watch from %d failed at compact revision %d, served at >= %d", rl, heldRev+1, compacted, last)
	}

	// Events flow again; the schedule ticks once more at 3I and ends.
	rev = putKeys(t, c, prefix, 6, 7)
	waitFor(t, "the event of a put after the release", func() bool { return r.LastRevision() >= rev })
	step(I / 2)
	step(I / 2)
	<-schedDone
	if n := len(r.Lists()); n != 2 {
		t.Errorf("got %d lists, want 2: the initial one and exactly one relist", n)
	}
	if got := len(res.Compactions); got != 2 {
		t.Errorf("got %d compactions, want 2 (at 2I and 3I)", got)
	}
	if got, want := m.compacted, res.Compactions[len(res.Compactions)-1].Revision; got != want {
		t.Errorf("got last compacted revision %d, want %d", got, want)
	}
	if res.DBSize.AfterCompactionBytes == 0 || res.DBSize.BeforeCompactionBytes == 0 {
		t.Errorf("db sizes around the compaction not recorded: %+v", res.DBSize)
	}
	if d := res.Defrag; d == nil || d.Error != "" || len(d.Members) != 1 || !d.Members[0].Leader || d.Members[0].AtMs < d.AtMs {
		t.Errorf("defragmentation %+v; want one member, the leader, without error, started within the pass", d)
	}
}
