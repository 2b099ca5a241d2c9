package clustermodel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// kube-apiserver's lease manager for objects with a TTL (events):
// k8s.io/apiserver/pkg/storage/etcd3/lease_manager.go
// defaultLeaseReuseDurationSeconds, defaultLeaseReuseDurationPercent,
// defaultLeaseMaxObjectCount.
const (
	leaseReuseSeconds   = 60
	leaseReusePercent   = 0.05
	leaseMaxObjectCount = 1000
)

// errNotFound is an object the model expected and etcd does not hold.
var errNotFound = errors.New("object not found")

// errExists is a create whose key exists already: kube-apiserver's
// AlreadyExists.
var errExists = errors.New("it exists already")

// store is kube-apiserver's etcd3 storage
// (k8s.io/apiserver/pkg/storage/etcd3/store.go) as the model drives it:
// each object's mod_revision as the watch cache would hold it (the model
// is the only writer, so its cache is current), the Kubernetes codec and
// the lease manager of events. It is safe for concurrent use; the
// writes to one key must come from one goroutine at a time.
type store struct {
	kv       *clientv3.Client
	codec    *keyspace.Codec
	eventTTL time.Duration

	mu   sync.Mutex
	revs map[string]int64 // the cached object's mod_revision by key
	// written are the keys the model may have created and not deleted
	// since: each create's, from the moment it is sent (a create whose
	// response was lost may have happened), until a delete of it
	// succeeds. The cleanup deletes them (clients.CleanUp).
	written map[string]struct{}

	leaseMu     sync.Mutex
	leaseID     clientv3.LeaseID
	leaseExpiry time.Time
	leaseUsed   int
	granted     []clientv3.LeaseID // every lease granted (grant), in order
}

func newStore(kv *clientv3.Client, eventTTL time.Duration) (*store, error) {
	codec, err := keyspace.NewCodec()
	if err != nil {
		return nil, err
	}
	return &store{kv: kv, codec: codec, eventTTL: eventTTL, revs: map[string]int64{}, written: map[string]struct{}{}}, nil
}

// creating notes that a request that may create key is about to be sent.
func (s *store) creating(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written[key] = struct{}{}
}

// writtenKeys returns the keys the model may have created and not
// deleted since (written), in no order.
func (s *store) writtenKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.written))
	for k := range s.written {
		keys = append(keys, k)
	}
	return keys
}

// grant grants a lease of ttl seconds and notes it (grantedLeases).
func (s *store) grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	resp, err := s.kv.Grant(ctx, ttl)
	if err != nil {
		return nil, err
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	s.granted = append(s.granted, resp.ID)
	return resp, nil
}

// grantedLeases returns every lease the model granted, in order.
func (s *store) grantedLeases() []clientv3.LeaseID {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	return append([]clientv3.LeaseID(nil), s.granted...)
}

// rev returns key's cached mod_revision, 0 when it holds none.
func (s *store) rev(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revs[key]
}

func (s *store) setRev(key string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev == 0 {
		delete(s.revs, key)
		return
	}
	s.revs[key] = rev
}

// create is store.Create: "if mod_revision=0 then put", with a lease
// from the lease manager when withTTL (events).
func (s *store) create(ctx context.Context, key string, obj runtime.Object, withTTL bool) (int64, error) {
	val, err := s.codec.Encode(obj)
	if err != nil {
		return 0, err
	}
	var opts []clientv3.OpOption
	if withTTL {
		id, err := s.lease(ctx)
		if err != nil {
			return 0, err
		}
		opts = append(opts, clientv3.WithLease(id))
	}
	s.creating(key)
	resp, err := s.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), opts...)).Commit()
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", key, err)
	}
	if !resp.Succeeded {
		s.mu.Lock()
		if _, ours := s.revs[key]; !ours {
			delete(s.written, key) // another's: the cleanup leaves it
		}
		s.mu.Unlock()
		return 0, fmt.Errorf("create %s: %w", key, errExists)
	}
	s.setRev(key, resp.Header.Revision)
	return resp.Header.Revision, nil
}

// get is store.Get with resourceVersion "" (a quorum read, which the
// cacher delegates to etcd: k8s.io/apiserver/pkg/storage/cacher/
// delegator.go Get): a Range of the key, limit 1. It refreshes the
// cached revision.
func (s *store) get(ctx context.Context, key string) (int64, error) {
	resp, err := s.kv.Get(ctx, key, clientv3.WithLimit(1))
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, fmt.Errorf("get %s: %w", key, errNotFound)
	}
	s.setRev(key, resp.Kvs[0].ModRevision)
	return resp.Kvs[0].ModRevision, nil
}

// update is store.GuaranteedUpdate: "if mod_revision=R then put else
// range" from the cached object (R its mod_revision), or, when read,
// after a get (an update kube-apiserver hands no cached object: the
// Binding subresource, an event's patch), adopting what the else branch
// returns until the comparison holds. withTTL attaches the put to the
// events' lease.
func (s *store) update(ctx context.Context, key string, obj runtime.Object, read, withTTL bool) (int64, error) {
	val, err := s.codec.Encode(obj)
	if err != nil {
		return 0, err
	}
	cur := s.rev(key)
	if read || cur == 0 {
		if cur, err = s.get(ctx, key); err != nil {
			return 0, err
		}
	}
	for range 5 {
		var opts []clientv3.OpOption
		if withTTL {
			id, err := s.lease(ctx)
			if err != nil {
				return 0, err
			}
			opts = append(opts, clientv3.WithLease(id))
		}
		resp, err := s.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cur)).
			Then(clientv3.OpPut(key, string(val), opts...)).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return 0, fmt.Errorf("update %s: %w", key, err)
		}
		if resp.Succeeded {
			s.setRev(key, resp.Header.Revision)
			return resp.Header.Revision, nil
		}
		if cur = elseRevision(resp); cur == 0 {
			return 0, fmt.Errorf("update %s: %w", key, errNotFound)
		}
	}
	return 0, fmt.Errorf("update %s: conflicts on every attempt", key)
}

// delete is store.Delete (conditionalDelete): "if mod_revision=R then
// delete else range" from R, until the comparison holds. stale sends the
// first transaction with the revision before the object's latest write,
// as kube-apiserver does when its cached object lags the update just
// made (k8s.io/apiserver/pkg/storage/cacher/delegator.go Delete hands the
// cached object; etcd3/store.go conditionalDelete retries from the else
// branch's object).
func (s *store) delete(ctx context.Context, key string, stale int64) (int64, error) {
	cur := s.rev(key)
	if stale > 0 {
		cur = stale
	}
	for range 5 {
		resp, err := s.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cur)).
			Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return 0, fmt.Errorf("delete %s: %w", key, err)
		}
		if resp.Succeeded {
			s.setRev(key, 0)
			s.mu.Lock()
			delete(s.written, key)
			s.mu.Unlock()
			return resp.Header.Revision, nil
		}
		if cur = elseRevision(resp); cur == 0 {
			return 0, fmt.Errorf("delete %s: %w", key, errNotFound)
		}
	}
	return 0, fmt.Errorf("delete %s: conflicts on every attempt", key)
}

// lease returns the events' lease as kube-apiserver's lease manager does:
// the previous one while it outlives the TTL by less than the reuse
// duration (min(5 % of the TTL, 60 s)) and holds fewer than 1,000
// objects, else a new grant of TTL + the reuse duration.
func (s *store) lease(ctx context.Context) (clientv3.LeaseID, error) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	ttl := int64(s.eventTTL.Seconds())
	reuse := min(int64(leaseReusePercent*float64(ttl)), leaseReuseSeconds)
	now := time.Now()
	valid := now.Add(time.Duration(ttl) * time.Second).Before(s.leaseExpiry)
	sufficient := now.Add(time.Duration(ttl+reuse) * time.Second).After(s.leaseExpiry)
	if s.leaseID != 0 && valid && sufficient && s.leaseUsed < leaseMaxObjectCount {
		s.leaseUsed++
		return s.leaseID, nil
	}
	resp, err := s.kv.Grant(ctx, ttl+reuse)
	if err != nil {
		return 0, fmt.Errorf("grant the events' lease: %w", err)
	}
	s.granted = append(s.granted, resp.ID) // leaseMu held (grant's list)
	s.leaseID, s.leaseExpiry, s.leaseUsed = resp.ID, now.Add(time.Duration(ttl+reuse)*time.Second), 1
	return resp.ID, nil
}

// elseRevision returns the mod_revision of the object a failed
// transaction's else branch read, 0 when it is absent.
func elseRevision(resp *clientv3.TxnResponse) int64 {
	if len(resp.Responses) == 0 {
		return 0
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return 0
	}
	return kvs[0].ModRevision
}
