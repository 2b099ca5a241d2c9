package experiment_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/quantile"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// TestWatcherBlock checks the division of an experiment's watchers: for
// every count of watchers and of shards (at most as many shards), the
// blocks are disjoint, cover every watcher once, in shard order, and none
// is empty.
func TestWatcherBlock(t *testing.T) {
	for watchers := 1; watchers <= 40; watchers++ {
		for n := 1; n <= watchers; n++ {
			owner := make([]int, watchers)
			for i := range owner {
				owner[i] = -1
			}
			next := 0
			for i := range n {
				from, to := experiment.WatcherBlock(shard.Shard{Index: i, Count: n}, watchers)
				if from != next || to <= from {
					t.Fatalf("%d watchers, shard %d/%d: block [%d, %d), want one starting at %d and not empty", watchers, i, n, from, to, next)
				}
				for w := from; w < to; w++ {
					if owner[w] != -1 {
						t.Fatalf("%d watchers: watcher %d in shards %d and %d of %d", watchers, w, owner[w], i, n)
					}
					owner[w] = i
				}
				next = to
			}
			if next != watchers {
				t.Fatalf("%d watchers in %d shards: the blocks end at %d", watchers, n, next)
			}
		}
	}
}

func TestBarrierPoint(t *testing.T) {
	tests := []struct {
		parts []string
		want  string
	}{
		{[]string{"n=100 ps=500", "listed"}, "n-100-ps-500-listed"},
		{[]string{"seeded", "relist-n100"}, "seeded-relist-n100"},
		{[]string{"Behind-5000", "caught-up"}, "behind-5000-caught-up"},
		{[]string{"", "x"}, "x"},
	}
	for _, tt := range tests {
		if got := experiment.BarrierPoint(tt.parts...); got != tt.want {
			t.Errorf("BarrierPoint(%q) = %q, want %q", tt.parts, got, tt.want)
		}
	}
	if got := experiment.BarrierPoint(string(make([]byte, 100))); len(got) > 63 {
		t.Errorf("a point of %d characters", len(got))
	}
}

// TestCatchupPlan checks that a plan keeps exactly the updates'
// revisions, ascending, in runs of consecutive ones.
func TestCatchupPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var revs []int64
	rev := int64(100)
	for range 5000 {
		rev += 1 + int64(r.IntN(3)/2) // mostly consecutive, some gaps
		revs = append(revs, rev)
	}
	want := slices.Clone(revs)
	r.Shuffle(len(revs), func(i, j int) { revs[i], revs[j] = revs[j], revs[i] })
	p := experiment.NewCatchupPlan(99, revs)
	if got := p.Revisions(); !slices.Equal(got, want) {
		t.Fatalf("plan gives %d revisions, want the %d written (first %v, want %v)", len(got), len(want), got[:3], want[:3])
	}
	if len(p.Runs) >= len(want)/2 {
		t.Errorf("%d runs for %d revisions mostly consecutive", len(p.Runs), len(want))
	}
	for i := 1; i < len(p.Runs); i++ {
		if p.Runs[i][0] <= p.Runs[i-1][1]+1 {
			t.Errorf("runs %v and %v touch or overlap", p.Runs[i-1], p.Runs[i])
		}
	}
}

// stormWorker returns a worker's relist storm result of one compacted
// case whose informers resynced in resync ms and relisted in lists ms.
func stormWorker(i, n int, start time.Time, resync, lists []float64) *experiment.Result {
	sh := shard.Shard{Index: i, Count: n}
	c := experiment.RelistStormCase{Objects: 100, PageSize: 500, Compacted: true, Watchers: len(resync), Relists: len(lists),
		RelistObjects: int64(100 * len(lists)), ResyncMs: resync, ListMs: lists, BackoffMs: lists, HeldRevision: int64(10 + i)}
	if i == 0 {
		c.CompactRevision = 20
	}
	return &experiment.Result{Kind: report.KindExperiment, SchemaVersion: experiment.SchemaVersion, Experiment: experiment.NameRelistStorm,
		StartedAt: start.Add(time.Duration(i) * time.Millisecond), DurationMs: 1000, Shard: &sh,
		Self:        &report.SelfStats{CPUSeconds: float64(i + 1), NumCPU: 2, WallMs: 1000},
		Cases:       []experiment.CaseSummary{{Experiment: experiment.NameRelistStorm, Case: "objects=100 pageSize=500"}},
		RelistStorm: &experiment.RelistStormResult{Options: experiment.RelistStormScenario{Watchers: 9}, Cases: []experiment.RelistStormCase{c}}}
}

// TestMergeRelistStorm splits one set of resync and relist samples
// among workers at random, many times, and checks that the merged
// quantiles are those of the whole set and the counts its size: what one
// process holding every informer reports.
func TestMergeRelistStorm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for trial := range 50 {
		n := 1 + r.IntN(4)
		all := make([]float64, 9)
		for i := range all {
			all[i] = float64(r.IntN(5000)) / 10
		}
		// Split 9 informers into n non-empty blocks.
		cuts := []int{0}
		for i := 1; i < n; i++ {
			from, _ := experiment.WatcherBlock(shard.Shard{Index: i, Count: n}, len(all))
			cuts = append(cuts, from)
		}
		cuts = append(cuts, len(all))
		var results []*experiment.Result
		for i := range n {
			part := all[cuts[i]:cuts[i+1]]
			results = append(results, stormWorker(i, n, start, slices.Clone(part), slices.Clone(part)))
		}
		r.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
		m, err := experiment.Merge(results)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		c := m.RelistStorm.Cases[0]
		sorted := slices.Sorted(slices.Values(all))
		if p50 := quantile.NearestRank(sorted, 0.5); c.ResyncP50Ms != p50 || c.ListP50Ms != p50 || c.BackoffP50Ms != p50 {
			t.Errorf("trial %d (%d workers): merged p50 resync %v list %v backoff %v, the whole set's %v", trial, n, c.ResyncP50Ms, c.ListP50Ms, c.BackoffP50Ms, p50)
		}
		if c.ResyncMaxMs != sorted[len(sorted)-1] || c.Watchers != 9 || c.Relists != 9 || c.RelistObjects != 900 {
			t.Errorf("trial %d: max %v (want %v), %d informers, %d relists, %d objects: want 9, 9, 900", trial, c.ResyncMaxMs, sorted[len(sorted)-1], c.Watchers, c.Relists, c.RelistObjects)
		}
		if c.CompactRevision != 20 || c.HeldRevision != int64(10+n-1) {
			t.Errorf("trial %d: compacted %d held %d, want shard 0's compaction and the highest hold", trial, c.CompactRevision, c.HeldRevision)
		}
		if len(m.Workers) != n || m.Self == nil || m.Self.CPUSeconds != float64(n*(n+1)/2) {
			t.Errorf("trial %d: %d workers, self %+v", trial, len(m.Workers), m.Self)
		}
		if !m.StartedAt.Equal(start) || m.Cases[0].Relists != 9 {
			t.Errorf("trial %d: started %v, summary %d relists", trial, m.StartedAt, m.Cases[0].Relists)
		}
	}
}

// TestMergeRefuses checks that results that are not one divided
// experiment's workers are refused with ErrNotOneExperiment.
func TestMergeRefuses(t *testing.T) {
	start := time.Now()
	w := func(i, n int) *experiment.Result { return stormWorker(i, n, start, []float64{1}, []float64{1}) }
	noSamples := w(1, 2)
	noSamples.RelistStorm.Cases[0].ResyncMs = nil
	wrote := w(1, 2)
	wrote.RelistStorm.Cases[0].Writes.Planned = 5
	other := w(1, 2)
	other.RelistStorm.Options.Watchers = 3
	undivided := w(0, 1)
	undivided.Shard = nil
	tests := []struct {
		name    string
		results []*experiment.Result
	}{
		{"none", nil},
		{"shard missing", []*experiment.Result{w(0, 3), w(2, 3)}},
		{"shard twice", []*experiment.Result{w(0, 2), w(0, 2)}},
		{"other count", []*experiment.Result{w(0, 2), w(1, 3)}},
		{"no shard", []*experiment.Result{undivided}},
		{"other scenario", []*experiment.Result{w(0, 2), other}},
		{"no samples", []*experiment.Result{w(0, 2), noSamples}},
		{"two writers", []*experiment.Result{w(0, 2), wrote}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := experiment.Merge(tt.results); !errors.Is(err, experiment.ErrNotOneExperiment) {
				t.Errorf("got %v, want ErrNotOneExperiment", err)
			}
		})
	}
}
