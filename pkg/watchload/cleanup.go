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

// cleanup deletes what a run wrote on a cluster it does not own, and
// nothing else:
//
//   - every lease the workload granted is revoked, which deletes the
//     events attached to it (only the run attaches keys to its leases);
//   - every key the workload wrote or tried to write, and the extra keys
//     (the namespaced compact_rev_key, the probe's and the faults' keys),
//     is deleted in a transaction that succeeds only if the key's create
//     revision is above startRev, the revision before the run wrote
//     anything: a key created before the run (another client's, under a
//     reused prefix) is never touched, and a key deleted meanwhile is left
//     alone.
//
// It then counts what is left under the prefix. Errors do not stop it;
// the first is reported.
func cleanup(ctx context.Context, c *clientv3.Client, wl *KubernetesWorkload, extra []string, startRev int64, prefix string, reused bool) report.Cleanup {
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
	for _, id := range wl.Leases() {
		_, err := c.Revoke(ctx, id)
		switch {
		case err == nil:
			res.LeasesRevoked++
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound):
			// expired already, and its keys with it
		default:
			fail(fmt.Errorf("revoke lease %x: %w", int64(id), err))
		}
	}
	keys := append(wl.Keys(), extra...)
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
