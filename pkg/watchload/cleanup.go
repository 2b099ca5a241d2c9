package watchload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/report"
)

// cleanupConcurrency bounds the deletions in flight.
const cleanupConcurrency = 8

// cleanupBatch is the number of conditional deletes per transaction,
// below etcd's default --max-txn-ops of 128.
const cleanupBatch = 64

// DeleteWritten deletes what a run wrote on a cluster it does not own,
// and nothing else:
//
//   - every lease of leases (those the run granted) is revoked, which
//     deletes the keys attached to it (only the run attaches keys to its
//     leases); one that expired already is no error;
//   - every key of keys (those the run wrote or tried to write: the
//     workload's, the namespaced compact_rev_key, the probe's and the
//     faults' keys) is deleted in a transaction that succeeds only if the
//     key's create revision is above startRev, the revision before the
//     run wrote anything: a key created before the run (another client's,
//     under a reused prefix) is never touched, and a key deleted
//     meanwhile is left alone.
//
// It then calls settle, if set (a divided load's worker waits there
// until every worker has revoked its leases, which hold the keys it
// wrote), and counts what is left under prefix/ (KeysLeft; some left
// under a prefix that was empty when the run began, !reused, is an
// error). Errors do not stop it; the first is reported.
func DeleteWritten(ctx context.Context, c *clientv3.Client, keys []string, leases []clientv3.LeaseID, startRev int64, prefix string, reused bool,
	settle func(context.Context)) report.Cleanup {
	start := time.Now()
	var res report.Cleanup
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	revoked, err := revokeLeases(ctx, c, leases)
	res.LeasesRevoked = revoked
	if err != nil {
		fail(err)
	}
	jobs := make(chan string)
	var deleted atomic.Int64
	var wg sync.WaitGroup
	for range cleanupConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range jobs {
				resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), ">", startRev)).
					Then(clientv3.OpDelete(k)).Commit()
				if err != nil {
					fail(fmt.Errorf("delete %s: %w", k, err))
					continue
				}
				if resp.Succeeded {
					deleted.Add(resp.Responses[0].GetResponseDeleteRange().Deleted)
				}
			}
		}()
	}
	for _, k := range keys {
		if ctx.Err() != nil {
			break
		}
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	res.KeysDeleted = deleted.Load()
	if settle != nil {
		settle(ctx)
	}
	res.KeysLeft = -1
	if left, err := c.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
		res.KeysLeft = left.Count
		if left.Count > 0 && !reused && first == nil {
			first = fmt.Errorf("%d keys are left under %s/, which was empty when the run began (written by another client meanwhile?)", left.Count, prefix)
		}
	} else {
		fail(fmt.Errorf("count the keys left under %s/: %w", prefix, err))
	}
	if first != nil {
		res.Error = first.Error()
	}
	res.DurationMs = report.Ms(time.Since(start))
	return res
}

// KeysUnder counts the keys under prefix and returns etcd's current
// revision, read together.
func KeysUnder(ctx context.Context, c *clientv3.Client, prefix string) (count, rev int64, err error) {
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("count the keys under %s: %w", prefix, err)
	}
	return resp.Count, resp.Header.Revision, nil
}

// DeleteCreatedSince deletes every key under prefix created after
// revision rev, each in a transaction that holds only while the key's
// create revision is still above rev, so that a key created before
// (another client's, under a reused prefix) is never touched. It is the
// cleanup of the benchmarks that write raw keys (put, watch, list); Run
// deletes exactly the keys it wrote instead. KeysLeft counts the keys
// under prefix afterwards.
func DeleteCreatedSince(ctx context.Context, c *clientv3.Client, prefix string, rev int64) report.Cleanup {
	start := time.Now()
	res := report.Cleanup{KeysLeft: -1}
	var errs []error
	for key := prefix; ; {
		// Keys only, a page at a time, created after rev.
		resp, err := c.Get(ctx, key, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithKeysOnly(),
			clientv3.WithMinCreateRev(rev+1), clientv3.WithLimit(1000))
		if err != nil {
			errs = append(errs, fmt.Errorf("list the keys under %s: %w", prefix, err))
			break
		}
		// One transaction per batch, one nested conditional delete per key.
		for i := 0; i < len(resp.Kvs) && len(errs) == 0; i += cleanupBatch {
			var ops []clientv3.Op
			for _, kv := range resp.Kvs[i:min(i+cleanupBatch, len(resp.Kvs))] {
				k := string(kv.Key)
				ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), ">", rev)},
					[]clientv3.Op{clientv3.OpDelete(k)}, nil))
			}
			t, err := c.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				errs = append(errs, fmt.Errorf("delete %d keys from %s: %w", len(ops), resp.Kvs[i].Key, err))
				break
			}
			for _, r := range t.Responses {
				if nt := r.GetResponseTxn(); nt != nil && nt.Succeeded {
					res.KeysDeleted += nt.Responses[0].GetResponseDeleteRange().Deleted
				}
			}
		}
		if !resp.More || len(resp.Kvs) == 0 || len(errs) > 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return countLeft(ctx, c, prefix, res, errs, start)
}

// DeleteAllUnder deletes every key under prefix, a page of 1000 at a time,
// and counts the keys left under it afterwards (KeysLeft). It is
// DeleteCreatedSince for a prefix that held no key at rev (KeysUnder
// counted none): every key under it was created after rev, so each page,
// read keys only, is deleted by one DeleteRange from its first key to its
// last, where DeleteCreatedSince sends a transaction of 64 comparisons
// per 64 keys. A key another client creates in that span meanwhile is
// deleted too, as DeleteCreatedSince would delete it.
func DeleteAllUnder(ctx context.Context, c *clientv3.Client, prefix string) report.Cleanup {
	start := time.Now()
	res := report.Cleanup{KeysLeft: -1}
	var errs []error
	for key := prefix; ; {
		resp, err := c.Get(ctx, key, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithKeysOnly(),
			clientv3.WithLimit(1000))
		if err != nil {
			errs = append(errs, fmt.Errorf("list the keys under %s: %w", prefix, err))
			break
		}
		if len(resp.Kvs) == 0 {
			break
		}
		last := string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		d, err := c.Delete(ctx, string(resp.Kvs[0].Key), clientv3.WithRange(last))
		if err != nil {
			errs = append(errs, fmt.Errorf("delete the keys from %s to %s: %w", resp.Kvs[0].Key, resp.Kvs[len(resp.Kvs)-1].Key, err))
			break
		}
		res.KeysDeleted += d.Deleted
		if !resp.More {
			break
		}
		key = last
	}
	return countLeft(ctx, c, prefix, res, errs, start)
}

// countLeft completes a raw cleanup's result (DeleteCreatedSince,
// DeleteAllUnder): the keys left under prefix, the first of errs (and of
// the count's), the time since start.
func countLeft(ctx context.Context, c *clientv3.Client, prefix string, res report.Cleanup, errs []error, start time.Time) report.Cleanup {
	if n, _, err := KeysUnder(ctx, c, prefix); err == nil {
		res.KeysLeft = n
	} else {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		res.Error = errs[0].Error()
	}
	res.DurationMs = report.Ms(time.Since(start))
	return res
}

// revokeLeases revokes the leases ids, which deletes the keys attached to
// them, and returns how many it revoked. A lease that expired already (and
// its keys with it) is not an error; the first other error is returned
// after every lease has been tried.
func revokeLeases(ctx context.Context, c *clientv3.Client, ids []clientv3.LeaseID) (int64, error) {
	var revoked int64
	var first error
	for _, id := range ids {
		_, err := c.Revoke(ctx, id)
		switch {
		case err == nil:
			revoked++
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound):
			// expired already, and its keys with it
		case first == nil:
			first = fmt.Errorf("revoke lease %x: %w", int64(id), err)
		}
	}
	return revoked, first
}
