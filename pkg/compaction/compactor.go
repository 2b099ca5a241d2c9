package compaction

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// KV is the part of the etcd client the compactor uses; *clientv3.Client
// satisfies it.
type KV interface {
	Txn(ctx context.Context) clientv3.Txn
	Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error)
}

var _ KV = (*clientv3.Client)(nil)

// Compactor is kube-apiserver's compactor, one tick at a time, so that a
// caller controls the schedule. The zero value is not usable; use
// NewCompactor. A Compactor is not safe for concurrent use.
type Compactor struct {
	kv KV
	// Physical makes each Compact wait until etcd has deleted the
	// compacted revisions from its backend (clientv3.WithCompactPhysical).
	// kube-apiserver does not wait; lwbench does by default so that the db
	// size after a compaction is meaningful.
	Physical bool

	version int64 // the version of compact_rev_key this compactor last saw
	rev     int64 // the header revision seen on the previous tick
}

// NewCompactor returns a compactor that has not ticked yet.
func NewCompactor(kv KV) *Compactor { return &Compactor{kv: kv} }

// Tick runs one round of kube-apiserver's algorithm (see the package
// documentation). An error from the transaction leaves the compactor's
// state unchanged; an error from Compact is returned after the state has
// advanced, as kube-apiserver does, so the next tick compacts further.
func (c *Compactor) Tick(ctx context.Context) (TickResult, error) {
	resp, err := c.kv.Txn(ctx).If(
		clientv3.Compare(clientv3.Version(keyspace.CompactRevKey), "=", c.version),
	).Then(
		clientv3.OpPut(keyspace.CompactRevKey, strconv.FormatInt(c.rev, 10)),
	).Else(
		clientv3.OpGet(keyspace.CompactRevKey),
	).Commit()
	if err != nil {
		return TickResult{}, fmt.Errorf("compact_rev_key transaction: %w", err)
	}
	res := TickResult{Won: resp.Succeeded, HeaderRevision: resp.Header.Revision}
	prev := c.rev
	c.rev = resp.Header.Revision
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			c.version = kvs[0].Version
		}
		return res, nil
	}
	c.version++
	if prev == 0 {
		return res, nil // kube-apiserver does not compact on bootstrap
	}
	var opts []clientv3.CompactOption
	if c.Physical {
		opts = append(opts, clientv3.WithCompactPhysical())
	}
	start := time.Now()
	_, err = c.kv.Compact(ctx, prev, opts...)
	res.Duration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("compact to revision %d: %w", prev, err)
	}
	res.Compacted = prev
	return res, nil
}
