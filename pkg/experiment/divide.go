package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kubestore/etcdkit/pkg/shard"
)

// # Dividing an experiment among workers
//
// A divisible experiment (Divisible) runs as one process per shard of
// Common.Shard, every process planning the whole experiment from the same
// options, so that the shards agree without talking; they meet at barrier
// points (Common.Barrier) named by BarrierPoint. Shard 0 leads: it alone
// seeds each load, writes, compacts, releases and, in the catch-up, lays
// down the history the watchers resume over and times the relist. Every
// shard runs its block of the watchers (WatcherBlock), numbered in the
// whole experiment. For the relist storm, per case:
//
//	every shard         shard 0                   every shard
//	list (its block) -> listed -> writes start ->
//	hold (its block) -> held   -> compact past every held revision ->
//	                    released (shard 0 arrives once compacted) -> release ->
//	resync           -> resynced -> validate
//
// and for the catch-up, per distance: shard 0 notes the revision, writes
// the updates and publishes the plan (CatchupPlan) under the load's
// prefix -> written -> every shard resumes its block of watchers from the
// plan's revision -> caught-up -> shard 0 relists.

// WatcherBlock returns the block [from, to) of an experiment's watchers,
// numbered 0 to watchers-1 in the whole experiment, that shard s runs:
// s.Range(watchers), contiguous, disjoint from every other shard's, all
// shards' together every watcher, sizes within one of each other. A
// divided experiment asks for at least as many watchers as shards, so
// that no shard runs none. It panics on an invalid shard, as Range.
func WatcherBlock(s shard.Shard, watchers int) (from, to int) { return s.Range(watchers) }

// BarrierPoint names a barrier point of a divided experiment from its
// parts (a load, a case, a step): joined by dashes, lowercased, every
// character other than a-z, 0-9 and '-' made a dash, cut to 63
// characters, as pkg/barrier accepts point names.
func BarrierPoint(parts ...string) string {
	p := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, strings.Join(parts, "-"))
	p = strings.TrimLeft(p, "-")
	if len(p) > 63 {
		p = p[:63]
	}
	if p == "" {
		p = "point"
	}
	return p
}

// CatchupPlan is what shard 0 of a divided catch-up publishes for every
// worker after laying down a distance's history: the revision the
// watchers resume after and the updates' revisions, as ascending runs of
// consecutive revisions ([first, last], inclusive) so that tens of
// thousands of revisions fit one etcd value.
type CatchupPlan struct {
	From int64      `json:"from"` // the store's revision before the updates
	Runs [][2]int64 `json:"runs"` // the updates' revisions, ascending runs
	// OwnWrites is shard 0's count of the experiment's own writes from
	// From+1 to the last update (CatchupCase.Revisions), for every worker
	// to report alike.
	OwnWrites int64 `json:"ownWrites"`
}

// NewCatchupPlan returns the plan of updates at revisions revs (any
// order, each once) written after revision from.
func NewCatchupPlan(from int64, revs []int64) CatchupPlan {
	sorted := slices.Clone(revs)
	slices.Sort(sorted)
	p := CatchupPlan{From: from, Runs: [][2]int64{}}
	for _, r := range sorted {
		if n := len(p.Runs); n > 0 && p.Runs[n-1][1]+1 == r {
			p.Runs[n-1][1] = r
			continue
		}
		p.Runs = append(p.Runs, [2]int64{r, r})
	}
	return p
}

// Revisions returns the plan's revisions, ascending.
func (p CatchupPlan) Revisions() []int64 {
	var out []int64
	for _, r := range p.Runs {
		for v := r[0]; v <= r[1]; v++ {
			out = append(out, v)
		}
	}
	return out
}

// catchupPlanKey is where shard 0 publishes a distance's plan, outside
// the pods, so no watcher of the pods sees it: under
// /lwbench-catchup-plan/<Common.RunID> when the run has an ID (never in
// a cluster's own --etcd-prefix), else under the load's prefix.
func catchupPlanKey(l *load, behind int64) string {
	if l.s.runID != "" {
		return fmt.Sprintf("/lwbench-catchup-plan/%s/behind-%d", l.s.runID, behind)
	}
	return fmt.Sprintf("%s/lwbench-catchup-plan/behind-%d", l.prefix, behind)
}

// publishCatchupPlan writes p for the other workers (shard 0).
func publishCatchupPlan(ctx context.Context, l *load, behind int64, p CatchupPlan) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := l.s.admin.Put(ctx, catchupPlanKey(l, behind), string(b)); err != nil {
		return fmt.Errorf("publish the catch-up plan of %d behind: %w", behind, err)
	}
	return nil
}

// readCatchupPlan reads the plan shard 0 published.
func readCatchupPlan(ctx context.Context, l *load, behind int64) (CatchupPlan, error) {
	key := catchupPlanKey(l, behind)
	resp, err := l.s.admin.Get(ctx, key)
	if err != nil {
		return CatchupPlan{}, fmt.Errorf("read the catch-up plan %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return CatchupPlan{}, fmt.Errorf("read the catch-up plan: %s is missing", key)
	}
	var p CatchupPlan
	if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
		return CatchupPlan{}, fmt.Errorf("catch-up plan %s: %w", key, err)
	}
	if len(p.Runs) == 0 {
		return CatchupPlan{}, fmt.Errorf("catch-up plan %s holds no revision", key)
	}
	return p, nil
}

// deleteCatchupPlan removes a published plan (shard 0, once every
// worker has caught up).
func deleteCatchupPlan(ctx context.Context, l *load, behind int64) error {
	_, err := l.s.admin.Delete(ctx, catchupPlanKey(l, behind))
	return err
}
