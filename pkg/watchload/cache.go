package watchload

import (
	"fmt"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type cacheEntry struct{ rev int64 }

// cache is a reflector's store of the objects it listed and watched, key
// -> mod_revision: every list replaces it and every event updates it
// (client-go tools/cache/store.go Replace, Add, Update and Delete, fed by
// the reflector's watch handler). apply also checks each event's prevKV
// and create flag against it, as kube-apiserver relies on them (it takes
// an update's or a delete's old object from prevKV and fails the watch
// without it: k8s.io/apiserver/pkg/storage/etcd3/event.go parseEvent).
// A worked
// example, the cache holding a at mod_revision 5:
//
//	PUT a mod 6, prevKV mod 5    -> consistent update; a at 6
//	PUT a mod 8, prevKV mod 7    -> prevKV violation: the update at 7 was missed
//	PUT b mod 9, created         -> b at 9
//	PUT b mod 10, created        -> prevKV violation: created, but the cache holds 9
//	DELETE c mod 11, prevKV 3    -> prevKV violation: absent from the cache
//	PUT b mod 12, no prevKV      -> counted in prevKVMissing, not a violation
//
// A cache is safe for concurrent use through its methods other than
// apply.
type cache struct {
	watcher    int          // the reflector's id, for violations
	noPrevKV   bool         // the watch does not ask for prevKV
	violations *Violations  // where violations go
	prevKVMiss atomic.Int64 // updates and deletes without prevKV

	mu    sync.Mutex
	items map[string]*cacheEntry
}

func newCache(watcher int, noPrevKV bool, violations *Violations) *cache {
	return &cache{watcher: watcher, noPrevKV: noPrevKV, violations: violations, items: map[string]*cacheEntry{}}
}

// replace makes the listed keys the cache's whole content.
func (c *cache) replace(kvs []*mvccpb.KeyValue) {
	items := make(map[string]*cacheEntry, len(kvs))
	for _, kv := range kvs {
		items[string(kv.Key)] = &cacheEntry{rev: kv.ModRevision}
	}
	c.mu.Lock()
	c.items = items
	c.mu.Unlock()
}

// applyAll applies the events of one watch response, in order.
func (c *cache) applyAll(evs []*clientv3.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range evs {
		c.apply(ev)
	}
}

// apply updates the cache with one event and checks its prevKV and create
// flag against it. c.mu is held.
func (c *cache) apply(ev *clientv3.Event) {
	kv := ev.Kv
	rev := kv.ModRevision
	e, ok := c.items[string(kv.Key)]
	prev := int64(0)
	if ev.PrevKv != nil {
		prev = ev.PrevKv.ModRevision
	}
	switch ev.Type {
	case mvccpb.PUT:
		switch {
		case ev.IsCreate():
			if ok {
				c.violation(rev, kv.Key, fmt.Sprintf("created, but the cache holds mod_revision %d", e.rev))
			}
		case ev.PrevKv == nil && !c.noPrevKV:
			c.prevKVMiss.Add(1)
		case !ok:
			c.violation(rev, kv.Key, fmt.Sprintf("update of mod_revision %d, absent from the cache", prev))
		case ev.PrevKv != nil && prev != e.rev:
			c.violation(rev, kv.Key, fmt.Sprintf("update of mod_revision %d, cache holds %d", prev, e.rev))
		}
		if ok {
			e.rev = rev
		} else {
			c.items[string(kv.Key)] = &cacheEntry{rev: rev}
		}
	case mvccpb.DELETE:
		switch {
		case !ok:
			c.violation(rev, kv.Key, fmt.Sprintf("delete of mod_revision %d, absent from the cache", prev))
		case ev.PrevKv == nil && !c.noPrevKV:
			c.prevKVMiss.Add(1)
		case ev.PrevKv != nil && prev != e.rev:
			c.violation(rev, kv.Key, fmt.Sprintf("delete of mod_revision %d, cache holds %d", prev, e.rev))
		}
		delete(c.items, string(kv.Key))
	}
}

func (c *cache) violation(rev int64, key []byte, detail string) {
	c.violations.Add(Violation{Watcher: c.watcher, Kind: ViolationPrevKV, Revision: rev, Key: string(key), Detail: detail})
}

// len returns the number of keys cached.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// snapshot returns a copy, key -> mod_revision.
func (c *cache) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.items))
	for k, e := range c.items {
		out[k] = e.rev
	}
	return out
}
