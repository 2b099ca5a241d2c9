package watchload

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// kube-apiserver's lease manager defaults
// (k8s.io/apiserver/pkg/storage/etcd3/lease_manager.go).
const (
	leaseReuseDurationSeconds = 60
	leaseReuseDurationPercent = 0.05
	leaseMaxObjectCount       = 1000
)

// leaseManager is kube-apiserver's lease manager: objects with a TTL
// (events) share one lease while it still outlives the requested TTL by
// less than the reuse duration (min(5% of the TTL, 60 s)) and has fewer
// than 1000 objects attached; a new lease is granted with TTL + the reuse
// duration. When a shared lease expires, etcd deletes all its keys in one
// revision. It is safe for concurrent use.
type leaseManager struct {
	mu         sync.Mutex
	prevID     clientv3.LeaseID
	prevExpiry time.Time
	attached   int64
	all        []clientv3.LeaseID
}

func newLeaseManager() *leaseManager { return &leaseManager{} }

func (l *leaseManager) get(ctx context.Context, kv KV, ttl time.Duration) (clientv3.LeaseID, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ttlSeconds := int64(ttl.Seconds())
	if ttlSeconds < 1 {
		ttlSeconds = 1
	}
	reuse := min(int64(leaseReuseDurationPercent*float64(ttlSeconds)), leaseReuseDurationSeconds)
	valid := now.Add(time.Duration(ttlSeconds) * time.Second).Before(l.prevExpiry)
	sufficient := now.Add(time.Duration(ttlSeconds+reuse) * time.Second).After(l.prevExpiry)
	l.attached++
	if valid && sufficient && l.attached <= leaseMaxObjectCount {
		return l.prevID, nil
	}
	grant := ttlSeconds + reuse
	resp, err := kv.Grant(ctx, grant)
	if err != nil {
		return 0, err
	}
	l.prevID = resp.ID
	l.prevExpiry = now.Add(time.Duration(grant) * time.Second)
	l.attached = 1
	l.all = append(l.all, resp.ID)
	return resp.ID, nil
}

// ids returns every lease granted, in order.
func (l *leaseManager) ids() []clientv3.LeaseID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]clientv3.LeaseID(nil), l.all...)
}
