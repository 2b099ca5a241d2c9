package watchload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// This file models what kube-apiserver sends etcd for each API write the
// real writers make (pkg/kubeload/writer.go), request by request:
//
//   - create: the registry's Create (k8s.io/apiserver/pkg/registry/generic/
//     registry/store.go create) is one etcd3 store.Create transaction,
//     "if mod_revision=0 then put", with a lease for events; when the key
//     exists it reads the object back (the Storage.Get after
//     AlreadyExists) to word its error.
//   - update (a pod's UpdateStatus, a configmap's Update, both carrying the
//     resourceVersion the client last got) and patch (an event's repeat):
//     the registry's Update is one etcd3 store.GuaranteedUpdate
//     (k8s.io/apiserver/pkg/storage/etcd3/store.go); see guaranteedUpdate.
//     A conflict the client sees (409, its resourceVersion is not the
//     object's) is retried by client-go's retry.RetryOnConflict with
//     retry.DefaultRetry (k8s.io/client-go/util/retry/util.go: 5 attempts,
//     10 ms apart, jitter 10 %), each retry after a GET of the object,
//     which kube-apiserver serves from etcd (resourceVersion "").
//   - delete: the registry's Delete (store.go Delete) first reads the
//     object from etcd (Storage.Get with resourceVersion "", which the
//     cacher delegates to etcd: k8s.io/apiserver/pkg/storage/cacher/
//     delegator.go Get). A pod is deleted gracefully
//     (k8s.io/kubernetes/pkg/registry/core/pod/strategy.go
//     CheckGracefulDelete: it is bound to a node and running, so its
//     grace period is its terminationGracePeriodSeconds, 30 s), which
//     registry/rest/delete.go BeforeDelete turns into a GuaranteedUpdate
//     setting deletionTimestamp (store.go
//     updateForGracefulDeletionAndFinalizers) and no delete; the kubelet's
//     second DELETE, gracePeriodSeconds 0 with the pod's UID as
//     precondition, reads it again, shortens the grace period with a
//     second GuaranteedUpdate, then deletes it (etcd3 store.Delete,
//     conditionalDelete). A configmap has no graceful strategy: the read,
//     then conditionalDelete.
//
// With the watch cache on, the cacher hands GuaranteedUpdate and Delete
// the object its watch cache holds (cacher/delegator.go GuaranteedUpdate,
// Delete), so they skip the read when the cache is current; a stale cached
// object costs a read (an update, whose client resourceVersion is newer:
// a conflict inside tryUpdate, then getCurrentState) or a failed
// transaction and another (a delete or graceful-deletion update, which
// check no resourceVersion: the "else range" gives the current object).
// Events have no watch cache (k8s.io/kubernetes/pkg/kubeapiserver/
// default_storage_factory_builder.go DefaultWatchCacheSizes: size 0), so
// their patches always read from etcd.
//
// Not modelled: the no-op short cut of GuaranteedUpdate (an update whose
// encoding equals the stored bytes writes nothing: the model's updates
// always change the object), admission and the namespace lookups
// kube-apiserver makes outside the objects' keys.

// clientRetrySteps and clientRetryDelay are client-go's retry.DefaultRetry
// (k8s.io/client-go/util/retry/util.go): at most 5 attempts, 10 ms apart
// with up to 10 % jitter.
const (
	clientRetrySteps = 5
	clientRetryDelay = 10 * time.Millisecond
)

// podGracePeriod is the generated pods' terminationGracePeriodSeconds
// (pkg/keyspace objects.go), which the graceful DELETE sets as
// deletionGracePeriodSeconds.
const podGracePeriod = 30 * time.Second

// errConflict is a 409 Conflict: the client's resourceVersion is not the
// object's (registry/generic/registry/store.go Update's tryUpdate).
var errConflict = errors.New("conflict: the object has been modified")

// getCurrentState reads key as etcd3's store reads one object
// (store.go getCurrentState and Get: kubernetes.Client.Get, a Range of the
// key with limit 1) and returns its mod_revision, 0 when it is absent.
func getCurrentState(ctx context.Context, kv KV, key string) (int64, error) {
	resp, err := kv.Get(ctx, key, clientv3.WithLimit(1))
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].ModRevision, nil
}

// origin is where GuaranteedUpdate and conditionalDelete start: the
// watch cache's object (cached, its mod_revision rev) or none, when they
// read the object from etcd first.
type origin struct {
	rev    int64
	cached bool
}

// state returns the mod_revision GuaranteedUpdate or conditionalDelete
// starts from, and whether it was read from etcd (origStateIsCurrent):
// the cached object's, or etcd's (getCurrentState) when there is none.
func (o origin) state(ctx context.Context, kv KV, key string) (rev int64, current bool, err error) {
	if o.cached {
		return o.rev, false, nil
	}
	rev, err = getCurrentState(ctx, kv, key)
	return rev, true, err
}

// guaranteedUpdate is etcd3's store.GuaranteedUpdate
// (k8s.io/apiserver/pkg/storage/etcd3/store.go) for one key, and returns
// the revision it committed and whether a transaction failed its
// comparison (etcd's object had moved since the apiserver read it; a
// stale cached object does not count). It starts from from (or reads the
// object from etcd), asks tryUpdate whether the object at a mod_revision
// may be updated, and sends "if mod_revision=R then put else range" until
// the comparison holds, adopting the object the else branch returns. When
// tryUpdate refuses a cached object, it reads the object from etcd, and
// returns tryUpdate's error if the cache was not stale after all
// (origStateIsCurrent); when it refuses a current one, it returns the
// error. An absent object (mod_revision 0) is ErrObjectNotFound. lease
// attaches each put to a lease from the connection's lease manager, taken
// before each transaction as GuaranteedUpdate asks its lease manager.
func (w *KubernetesWorkload) guaranteedUpdate(ctx context.Context, kv KV, key, val string, from origin, lease bool,
	tryUpdate func(rev int64) error) (rev int64, conflict bool, err error) {
	cur, current, err := from.state(ctx, kv, key)
	if err != nil {
		return 0, false, err
	}
	for {
		if cur == 0 {
			return 0, conflict, fmt.Errorf("update %s: %w", key, ErrObjectNotFound)
		}
		if err := tryUpdate(cur); err != nil {
			if current {
				return 0, conflict, err
			}
			cachedRev := cur
			if cur, err = getCurrentState(ctx, kv, key); err != nil {
				return 0, conflict, err
			}
			current = true
			if cur == cachedRev {
				return 0, conflict, fmt.Errorf("update %s: %w", key, errConflict)
			}
			continue
		}
		var opts []clientv3.OpOption
		if lease {
			id, err := w.leaseManager(kv).get(ctx, kv, w.o.EventTTL)
			if err != nil {
				return 0, conflict, fmt.Errorf("lease for %s: %w", key, err)
			}
			opts = append(opts, clientv3.WithLease(id))
		}
		resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cur)).
			Then(clientv3.OpPut(key, val, opts...)).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return 0, conflict, err
		}
		if resp.Succeeded {
			return resp.Header.Revision, conflict, nil
		}
		conflict = conflict || current
		cur, current = elseRevision(resp), true
	}
}

// conditionalDelete is etcd3's store.Delete (store.go conditionalDelete)
// for one key: from the cached object, or one read from etcd, it sends
// "if mod_revision=R then delete else range" until the comparison holds,
// adopting the object the else branch returns, and returns the
// revision of the delete and whether a transaction failed its comparison
// against an object read from etcd. The preconditions (the pod's UID) and
// validation always pass in the model. An absent object is
// ErrObjectNotFound.
func conditionalDelete(ctx context.Context, kv KV, key string, from origin) (rev int64, conflict bool, err error) {
	cur, current, err := from.state(ctx, kv, key)
	if err != nil {
		return 0, false, err
	}
	for {
		if cur == 0 {
			return 0, conflict, fmt.Errorf("delete %s: %w", key, ErrObjectNotFound)
		}
		resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cur)).
			Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return 0, conflict, err
		}
		if resp.Succeeded {
			if resp.Responses[0].GetResponseDeleteRange().Deleted == 0 {
				return 0, conflict, fmt.Errorf("delete %s: %w", key, ErrObjectNotFound)
			}
			return resp.Header.Revision, conflict, nil
		}
		conflict = conflict || current
		cur, current = elseRevision(resp), true
	}
}

// elseRevision returns the mod_revision of the object a failed
// transaction's else branch read, 0 when it is absent.
func elseRevision(resp *clientv3.TxnResponse) int64 {
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		return kvs[0].ModRevision
	}
	return 0
}

// origin returns where an update or delete of the object starts: with
// NoWatchCache, or for events (never cached), or when the cache has not
// yet seen the object's creation, a read from etcd; else the object the
// watch cache holds (objectState.cachedAt, at the revision the
// watch-cache revision function gives for the resource; without one, the
// cache is taken to be current).
func (w *KubernetesWorkload) origin(resource string, st *objectState) origin {
	if w.o.NoWatchCache || resource == ResourceEvents || st.modRevision == 0 {
		return origin{}
	}
	w.cacheMu.RLock()
	f := w.cacheRev
	w.cacheMu.RUnlock()
	if f == nil {
		return origin{rev: st.modRevision, cached: true}
	}
	seen, ok := f(resource)
	if !ok {
		return origin{rev: st.modRevision, cached: true}
	}
	rev, ok := st.cachedAt(seen)
	return origin{rev: rev, cached: ok}
}

// createObject is the registry's Create: one "if mod_revision=0 then put" (with
// a lease for events); if the key exists, the registry's read of it
// (store.go create, after AlreadyExists), and ErrObjectExists.
func (w *KubernetesWorkload) createObject(ctx context.Context, gen *keyspace.Generator, kv KV, resource, ns, name, key string, st *objectState) (int64, bool, error) {
	var opts []clientv3.OpOption
	if resource == ResourceEvents {
		id, err := w.leaseManager(kv).get(ctx, kv, w.o.EventTTL)
		if err != nil {
			return 0, false, fmt.Errorf("lease for %s: %w", key, err)
		}
		opts = append(opts, clientv3.WithLease(id))
	}
	val, err := w.codec.Encode(w.object(gen, resource, ns, name, st, 0))
	if err != nil {
		return 0, false, err
	}
	resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), opts...)).Commit()
	if err != nil {
		return 0, false, err
	}
	if !resp.Succeeded {
		// The key exists (an earlier create whose response was lost).
		rev, err := getCurrentState(ctx, kv, key)
		if err != nil {
			return 0, true, err
		}
		st.adopt(rev)
		return 0, true, fmt.Errorf("create %s: %w", key, ErrObjectExists)
	}
	st.created(resp.Header.Revision)
	return resp.Header.Revision, false, nil
}

// update is a pod's UpdateStatus or a configmap's Update, carrying the
// resourceVersion the worker last got (st.modRevision), with client-go's
// RetryOnConflict around it: a 409 is followed by a GET and another
// attempt, at most clientRetrySteps in all. A worker that knows no
// resourceVersion GETs the object first, as the real writer does.
func (w *KubernetesWorkload) update(ctx context.Context, gen *keyspace.Generator, kv KV, resource, ns, name, key string, st *objectState) (int64, bool, error) {
	val, err := w.codec.Encode(w.object(gen, resource, ns, name, st, st.generation+1))
	if err != nil {
		return 0, false, err
	}
	conflict := false
	for attempt := 0; ; attempt++ {
		if attempt > 0 || st.modRevision == 0 {
			if attempt > 0 {
				d := clientRetryDelay + time.Duration(rand.Float64()*0.1*float64(clientRetryDelay))
				if !clockwait.SleepReal(ctx, d) {
					return 0, conflict, ctx.Err()
				}
			}
			rev, err := getCurrentState(ctx, kv, key)
			if err != nil {
				return 0, conflict, err
			}
			if rev == 0 {
				return 0, conflict, fmt.Errorf("update %s: %w", key, ErrObjectNotFound)
			}
			st.adopt(rev)
		}
		clientRV := st.modRevision
		rev, c, err := w.guaranteedUpdate(ctx, kv, key, string(val), w.origin(resource, st), false, func(cur int64) error {
			if cur != clientRV {
				return errConflict
			}
			return nil
		})
		conflict = conflict || c
		if errors.Is(err, errConflict) {
			conflict = true
			if attempt+1 < clientRetrySteps {
				continue
			}
		}
		if err != nil {
			if errors.Is(err, ErrObjectNotFound) {
				st.modRevision = 0
			}
			return 0, conflict, err
		}
		st.updated(rev)
		return rev, conflict, nil
	}
}

// patch is an event's repeat: client-go's recorder patches count and
// lastTimestamp (a strategic merge patch: k8s.io/apiserver/pkg/endpoints/
// handlers/patch.go patchResource, the registry's Update with no
// resourceVersion, so GuaranteedUpdate retries until it applies); events
// are never cached, so it reads the event from etcd first. When the event
// is gone (its lease expired) the recorder creates it again
// (k8s.io/client-go/tools/record/event.go recordEvent).
func (w *KubernetesWorkload) patch(ctx context.Context, gen *keyspace.Generator, kv KV, resource, ns, name, key string, st *objectState) (int64, bool, error) {
	val, err := w.codec.Encode(w.object(gen, resource, ns, name, st, st.generation+1))
	if err != nil {
		return 0, false, err
	}
	rev, conflict, err := w.guaranteedUpdate(ctx, kv, key, string(val), w.origin(resource, st), resource == ResourceEvents, func(int64) error { return nil })
	if errors.Is(err, ErrObjectNotFound) {
		st.modRevision, st.generation = 0, 0
		rev, _, err := w.createObject(ctx, gen, kv, resource, ns, name, key, st)
		return rev, true, err
	}
	if err != nil {
		return 0, conflict, err
	}
	st.updated(rev)
	return rev, conflict, nil
}

// deleteObject is the registry's Delete of an object without a graceful
// strategy (a configmap): a read from etcd, then conditionalDelete.
func (w *KubernetesWorkload) deleteObject(ctx context.Context, kv KV, resource, key string, st *objectState) (int64, bool, error) {
	rev, err := getCurrentState(ctx, kv, key)
	if err != nil {
		return 0, false, err
	}
	if rev == 0 {
		st.modRevision = 0
		return 0, false, fmt.Errorf("delete %s: %w", key, ErrObjectNotFound)
	}
	st.adopt(rev)
	rev, conflict, err := conditionalDelete(ctx, kv, key, w.origin(resource, st))
	st.modRevision = 0
	return rev, conflict, err
}

// deletePod is the graceful deletion of a running pod as the real writers
// make it: a DELETE (a read, then a GuaranteedUpdate setting
// deletionTimestamp 30 s ahead and deletionGracePeriodSeconds 30, and
// bumping metadata.generation, as the first graceful deletion does:
// k8s.io/apiserver/pkg/registry/rest/delete.go BeforeDelete), then a
// DELETE with gracePeriodSeconds 0 and the pod's UID (a read, a
// GuaranteedUpdate shortening the grace period to 0, and
// conditionalDelete). Neither touches status or managedFields: both
// updates store the pod's last status. It returns the delete's revision;
// the two updates' revisions go to the commit observer (ObserveCommits)
// as they commit. A pod already gone at the second DELETE is deleted (the
// writer ignores NotFound there).
func (w *KubernetesWorkload) deletePod(ctx context.Context, worker int, gen *keyspace.Generator, kv KV, ns, name, key string, st *objectState) (rev int64, conflict bool, err error) {
	var last int64
	generation := st.generation // the status both updates keep
	for _, grace := range []time.Duration{podGracePeriod, 0} {
		cur, err := getCurrentState(ctx, kv, key)
		if err != nil {
			return last, conflict, err
		}
		if cur == 0 {
			st.modRevision = 0
			if grace == 0 {
				return last, conflict, nil
			}
			return 0, conflict, fmt.Errorf("delete %s: %w", key, ErrObjectNotFound)
		}
		st.adopt(cur)
		pod := gen.Pod(ns, name, generation)
		deleteAt := metav1.NewTime(time.Now().Add(grace).Truncate(time.Second))
		seconds := int64(grace / time.Second)
		pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &deleteAt, &seconds
		pod.Generation++
		val, err := w.codec.Encode(pod)
		if err != nil {
			return last, conflict, err
		}
		rev, c, err := w.guaranteedUpdate(ctx, kv, key, string(val), w.origin(ResourcePods, st), false, func(int64) error { return nil })
		conflict = conflict || c
		if err != nil {
			if errors.Is(err, ErrObjectNotFound) {
				st.modRevision = 0
			}
			return last, conflict, err
		}
		st.updated(rev)
		last = rev
		w.observe(worker, rev)
	}
	rev, c, err := conditionalDelete(ctx, kv, key, w.origin(ResourcePods, st))
	st.modRevision = 0
	return rev, conflict || c, err
}

// observe hands an intermediate revision of worker's op to the commit
// observer, if any.
func (w *KubernetesWorkload) observe(worker int, rev int64) {
	w.cacheMu.RLock()
	f := w.observer
	w.cacheMu.RUnlock()
	if f != nil {
		f(worker, rev)
	}
}
