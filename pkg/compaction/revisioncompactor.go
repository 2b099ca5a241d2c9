package compaction

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RevisionCompactor compacts every Every revisions, keeping Retain
// revisions of history: on each tick it reads the store's revision R and,
// when R-Retain has moved at least Every past the revision it last
// compacted to, compacts to R-Retain. This is etcd's
// --auto-compaction-mode=revision (server/etcdserver/api/v3compactor/
// revision.go, which checks every 5 minutes and compacts to R-retention)
// made explicit about how often it fires, and the shape of etcd's
// benchmark `put --compact-index-delta`. A worked timeline, Every 1000,
// Retain 1000, ticks every 100 ms while writes run:
//
//	R=1500  target 500  < 0+1000     -> nothing
//	R=2050  target 1050 >= 0+1000    -> compact(1050)
//	R=2900  target 1900 < 1050+1000  -> nothing
//	R=3100  target 2100 >= 2050      -> compact(2100)
//
// A RevisionCompactor is not safe for concurrent use.
type RevisionCompactor struct {
	kv KV
	// Every is how many revisions pass between compactions; it must be
	// positive.
	Every int64
	// Retain is how many revisions of history each compaction keeps; 0
	// means Every.
	Retain int64
	// Physical makes each Compact wait until etcd has deleted the
	// compacted revisions (clientv3.WithCompactPhysical).
	Physical bool

	last int64 // the revision last compacted to
}

// NewRevisionCompactor returns a compactor that compacts every `every`
// revisions, keeping as many.
func NewRevisionCompactor(kv KV, every int64) *RevisionCompactor {
	return &RevisionCompactor{kv: kv, Every: every}
}

// Tick reads the store's revision with an empty (read-only) transaction,
// which does not move it, and compacts if the policy says so. The result's
// HeaderRevision is the revision read. Errors from the transaction leave
// the compactor unchanged; an error from Compact is returned after the
// compactor has advanced past the target, so the next tick tries further
// on. A target at or below etcd's compact revision is reported by etcd as
// ErrCompacted (for example after another client compacted further).
func (c *RevisionCompactor) Tick(ctx context.Context) (TickResult, error) {
	if c.Every <= 0 {
		return TickResult{}, ErrNoRevisionInterval
	}
	retain := c.Retain
	if retain <= 0 {
		retain = c.Every
	}
	resp, err := c.kv.Txn(ctx).Commit()
	if err != nil {
		return TickResult{}, fmt.Errorf("read the current revision: %w", err)
	}
	res := TickResult{Won: true, HeaderRevision: resp.Header.Revision}
	target := resp.Header.Revision - retain
	if target < c.last+c.Every || target <= 0 {
		return res, nil
	}
	c.last = target
	var opts []clientv3.CompactOption
	if c.Physical {
		opts = append(opts, clientv3.WithCompactPhysical())
	}
	start := time.Now()
	_, err = c.kv.Compact(ctx, target, opts...)
	res.Duration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("compact to revision %d: %w", target, err)
	}
	res.Compacted = target
	return res, nil
}
