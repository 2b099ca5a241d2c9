package experiment_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// embedded returns a factory of fresh embedded members, one per call,
// stopped when the test ends.
func embedded(t *testing.T) experiment.TargetFactory {
	return func(ctx context.Context, name string) (watchload.Target, func(), error) {
		srv := etcdtest.RunEtcd(t)
		dial := func(ctx context.Context) (*clientv3.Client, error) {
			return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		}
		return watchload.Target{Endpoints: srv.Endpoints, Embedded: true, Dial: dial}, srv.Close, nil
	}
}

func quick(t *testing.T) experiment.Common {
	return experiment.Common{NewTarget: embedded(t), Quick: true, Logf: t.Logf}
}

func TestRelistStorm(t *testing.T) {
	res, err := experiment.RelistStorm(t.Context(), experiment.RelistStormOptions{Common: quick(t), Objects: []int{600}})
	if err != nil {
		t.Fatal(err)
	}
	rs := res.RelistStorm
	if len(rs.Cases) != 4 {
		t.Fatalf("got %d cases, want 3 page sizes and a control", len(rs.Cases))
	}
	for _, c := range rs.Cases {
		switch {
		case c.Compacted && c.Relists != c.Watchers:
			t.Errorf("%d objects, page size %d: %d relists after a compaction past %d informers", c.Objects, c.PageSize, c.Relists, c.Watchers)
		case !c.Compacted && c.Relists != 0:
			t.Errorf("control: %d relists without a compaction", c.Relists)
		}
		if c.Compacted && c.RelistObjects < int64(c.Watchers)*int64(c.Objects)*8/10 {
			t.Errorf("page size %d: relists read %d objects, want about %d x %d", c.PageSize, c.RelistObjects, c.Watchers, c.Objects)
		}
		if c.Validation.Lost != 0 || c.Validation.Others() != 0 {
			t.Errorf("page size %d: watch violations %+v", c.PageSize, c.Validation)
		}
		// The probe sends 20 operations a second: a window of two
		// intervals holds at least one (the control's resync may be
		// shorter than one).
		if c.Probe.Ops == 0 && c.Probe.ToMs-c.Probe.FromMs >= 100 {
			t.Errorf("page size %d: no probe operation in the %.0f ms of the storm", c.PageSize, c.Probe.ToMs-c.Probe.FromMs)
		}
	}
	// The informer whose first list took several pages relists at its
	// revision with a limit, gets 410, and lists again at the latest.
	if c := rs.Cases[0]; c.PageSize != 500 || c.Expired != c.Watchers || c.RelistRequests != 2*c.Watchers {
		t.Errorf("page size 500 over 600 objects: %d expired of %d requests, want one 410 and one list per informer (%d)", c.Expired, c.RelistRequests, c.Watchers)
	}
	// One that listed in one page relists unpaginated at its revision,
	// which etcd serves at the latest: no 410.
	if c := rs.Cases[1]; c.PageSize != 10000 || c.Expired != 0 || c.RelistRequests != c.Watchers {
		t.Errorf("page size 10000 over 600 objects: %d expired of %d requests, want one list per informer", c.Expired, c.RelistRequests)
	}
	if len(res.Timelines) != 1 || len(res.Timelines[0].Probe.Series) == 0 {
		t.Errorf("timeline missing: %+v", res.Timelines)
	}
}

func TestContinuation(t *testing.T) {
	res, err := experiment.Continuation(t.Context(), experiment.ContinuationOptions{Common: quick(t), Objects: 500,
		PageSizes: []int64{50}, Lists: 3, PageDelay: 20 * time.Millisecond, CompactEvery: 5, Retain: 5})
	if err != nil {
		t.Fatal(err)
	}
	cases := res.Continuation.Cases
	if len(cases) != 3 {
		t.Fatalf("got %d cases, want control, restart, full-list", len(cases))
	}
	for _, c := range cases {
		if !c.Compacting {
			if c.Restarts != 0 || c.Compactions != 0 || c.Failed != 0 {
				t.Errorf("control: %d restarts, %d compactions, %d failed; want none", c.Restarts, c.Compactions, c.Failed)
			}
			continue
		}
		// Ten pages 20 ms apart under 200 writes/s and a compaction every
		// 5 revisions: every list is compacted under its feet.
		if c.Compactions == 0 || c.Expired != c.Lists {
			t.Errorf("%s: %d of %d lists expired with %d compactions; want all", c.Fallback, c.Expired, c.Lists, c.Compactions)
		}
		switch c.Fallback {
		case experiment.FallbackFullList:
			if c.Fallbacks != c.Lists || c.Failed != 0 || c.Restarts != c.Lists {
				t.Errorf("full-list: %d fallbacks, %d restarts, %d failed; want one fallback per list", c.Fallbacks, c.Restarts, c.Failed)
			}
		case experiment.FallbackRestart:
			if c.Fallbacks != 0 || c.Restarts < c.Lists {
				t.Errorf("restart: %d fallbacks, %d restarts; want a restart per list at least", c.Fallbacks, c.Restarts)
			}
		}
	}
}

func TestCompactionSweep(t *testing.T) {
	// Informers disconnected for 1.5 s relist only when the compactor,
	// which keeps one interval of history, compacts past them: at a 500 ms
	// interval, never at 10 s (which compacts nothing in 4 s) or never.
	res, err := experiment.CompactionSweep(t.Context(), experiment.CompactionSweepOptions{Common: quick(t),
		Intervals: []time.Duration{-1, 500 * time.Millisecond, 10 * time.Second}, Duration: 4 * time.Second,
		Disconnect: 1500 * time.Millisecond, DisconnectEvery: 2 * time.Second, Objects: 200})
	if err != nil {
		t.Fatal(err)
	}
	cases := res.CompactionSweep.Cases
	if len(cases) != 3 || len(res.Timelines) != 3 {
		t.Fatalf("got %d cases and %d timelines, want 3 each", len(cases), len(res.Timelines))
	}
	for _, c := range cases {
		if c.Disconnections == 0 {
			t.Errorf("interval %v ms: no informer was disconnected", c.IntervalMs)
		}
		if c.Validation.Lost != 0 || c.Validation.Others() != 0 {
			t.Errorf("interval %v ms: watch violations %+v", c.IntervalMs, c.Validation)
		}
		if len(res.Timelines[0].DBSize) == 0 {
			t.Errorf("no db size sampled")
		}
	}
	if c := cases[0]; c.Compactions != 0 || c.Relists != 0 {
		t.Errorf("never: %d compactions, %d relists; want none", c.Compactions, c.Relists)
	}
	if c := cases[1]; c.Compactions < 2 || c.Relists == 0 {
		t.Errorf("500 ms: %d compactions, %d relists; want relists after compactions", c.Compactions, c.Relists)
	}
	if c := cases[2]; c.Compactions != 0 || c.Relists != 0 {
		t.Errorf("10 s over 4 s: %d compactions, %d relists; want none", c.Compactions, c.Relists)
	}
}

func TestDefragStall(t *testing.T) {
	res, err := experiment.DefragStall(t.Context(), experiment.DefragStallOptions{Common: quick(t), Sizes: []int64{4e6, 8e6}, ValueSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	cases := res.DefragStall.Cases
	if len(cases) != 4 {
		t.Fatalf("got %d cases, want a clean and an overlapping one per size", len(cases))
	}
	for _, c := range cases {
		if c.BeforeBytes < c.TargetBytes/2 {
			t.Errorf("%+v: db of %d bytes before defrag, want about %d", c, c.BeforeBytes, c.TargetBytes)
		}
		// The file never grows; the pages in use may, by a little: the
		// defragmented copy fills its pages to bbolt's fill percent, not
		// fuller.
		if c.AfterBytes > c.BeforeBytes || c.AfterInUseBytes > c.BeforeInUseBytes+c.BeforeInUseBytes/50 {
			t.Errorf("size %d overlapping %v: %d (%d in use) bytes after defrag, %d (%d) before; want not larger",
				c.TargetBytes, c.Overlapping, c.AfterBytes, c.AfterInUseBytes, c.BeforeBytes, c.BeforeInUseBytes)
		}
		if len(c.Members) != 1 || c.Members[0].AfterBytes != c.AfterBytes {
			t.Errorf("size %d: members %+v, want the one member with the case's sizes", c.TargetBytes, c.Members)
		}
		if c.DefragMs <= 0 || c.Probe.Ops == 0 {
			t.Errorf("size %d: defrag %v ms, %d probe operations during it", c.TargetBytes, c.DefragMs, c.Probe.Ops)
		}
		if c.Overlapping && (c.OverlapMs <= 0 || c.CompactionMs <= 0) {
			t.Errorf("size %d: overlap %v ms of a %v ms compaction, want some", c.TargetBytes, c.OverlapMs, c.CompactionMs)
		}
	}
	// A defragmentation of history that was compacted away shrinks the file.
	if c := cases[0]; c.AfterBytes >= c.BeforeBytes {
		t.Errorf("first defrag: %d bytes before, %d after; want smaller", c.BeforeBytes, c.AfterBytes)
	}
}

func TestCatchup(t *testing.T) {
	res, err := experiment.Catchup(t.Context(), experiment.CatchupOptions{Common: quick(t), Behind: []int64{500, 3000}, Objects: 100})
	if err != nil {
		t.Fatal(err)
	}
	cases := res.Catchup.Cases
	if len(cases) != 2 {
		t.Fatalf("got %d cases, want 2", len(cases))
	}
	for _, c := range cases {
		if c.Missing != 0 || c.Unexpected != 0 || c.Events != c.Behind {
			t.Errorf("%d behind: %d events, %d missing, %d unexpected; want every update once", c.Behind, c.Events, c.Missing, c.Unexpected)
		}
		if c.RelistObjects != 100 {
			t.Errorf("relist read %d objects, want 100", c.RelistObjects)
		}
		// etcd sends a lagging watcher at most 1,000 revisions a response.
		if min := c.Revisions / experiment.CatchupMaxRevisionsPerResponse; c.Responses < min {
			t.Errorf("%d revisions in %d responses, want at least %d", c.Revisions, c.Responses, min)
		}
	}
}
