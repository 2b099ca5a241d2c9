package watchload

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/clockwait"
)

// ReflectorSet is a set of reflectors on one Topology, started, confirmed,
// stopped and checked together: a Session's watchers, or one case of an
// experiment.
type ReflectorSet struct {
	// Reflectors are the set's reflectors; reflector i has ID i and uses
	// stream i mod the number of streams.
	Reflectors []*Reflector
	topo       *Topology
	ctx        context.Context // the reflectors' context, ended by Stop
	stop       context.CancelFunc
	wg         sync.WaitGroup
}

// NewReflectorSet makes n reflectors on env, reflector i with the options
// opts(i, its stream of topo) returns. Start runs them.
func NewReflectorSet(env *Env, topo *Topology, n int, opts func(i int, stream *Stream) ReflectorOptions) *ReflectorSet {
	s := &ReflectorSet{topo: topo, Reflectors: make([]*Reflector, n)}
	for i := range s.Reflectors {
		s.Reflectors[i] = NewReflector(env, opts(i, topo.StreamFor(i)))
	}
	return s
}

// Start runs the reflectors under a context derived from parent, at most
// concurrency listing at once (0 or less: all), and waits, under ctx,
// until every one has listed. It returns an error if one has not within
// timeout or ctx ends; the reflectors run until Stop either way. Call it
// once.
func (s *ReflectorSet) Start(ctx, parent context.Context, concurrency int, timeout time.Duration) error {
	s.ctx, s.stop = context.WithCancel(parent)
	return startReflectors(ctx, s.ctx, s.Reflectors, concurrency, timeout, &s.wg)
}

// Context returns the reflectors' context, which Stop ends: for what runs
// alongside them (progress requesters).
func (s *ReflectorSet) Context() context.Context { return s.ctx }

// Stop ends every reflector and waits until each has stopped; before
// Start it does nothing.
func (s *ReflectorSet) Stop() {
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
}

// WaitSynced requests a progress notification every period on each stream
// that carries a reflector behind revision rev, until every reflector has
// seen rev (an event or a progress notification) or timeout passes, and
// returns how many have not.
func (s *ReflectorSet) WaitSynced(ctx context.Context, rev int64, period, timeout time.Duration) int {
	return waitSynced(ctx, s.topo.Streams, s.Reflectors, rev, period, timeout)
}

// CompareCaches reports into vs, as ViolationCache, every key whose
// presence or mod_revision in a stopped reflector's cache differs from
// etcd's state at the reflector's last revision, read with c (one read per
// prefix and revision).
func (s *ReflectorSet) CompareCaches(ctx context.Context, c Client, vs *Violations) error {
	states := map[string]map[string]int64{}
	for _, r := range s.Reflectors {
		ro := r.Options()
		rev := r.LastRevision()
		id := fmt.Sprintf("%s@%d", ro.Prefix, rev)
		state, ok := states[id]
		if !ok {
			resp, err := c.Get(ctx, ro.Prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
			if err != nil {
				return fmt.Errorf("read %s at revision %d: %w", ro.Prefix, rev, err)
			}
			state = make(map[string]int64, len(resp.Kvs))
			for _, kv := range resp.Kvs {
				state[string(kv.Key)] = kv.ModRevision
			}
			states[id] = state
		}
		compareCache(vs, ro.ID, rev, r.Cache(), state)
	}
	return nil
}

// compareCache reports every key whose presence or mod_revision differs
// between a cache and etcd's state, in key order.
func compareCache(vs *Violations, watcher int, rev int64, cache, state map[string]int64) {
	var keys []string
	for k, want := range state {
		if got, ok := cache[k]; !ok || got != want {
			keys = append(keys, k)
		}
	}
	for k := range cache {
		if _, ok := state[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, inEtcd := state[k]
		got, cached := cache[k]
		detail := fmt.Sprintf("at revision %d etcd holds mod_revision %d (present %v), the cache %d (present %v)", rev, want, inEtcd, got, cached)
		vs.Add(Violation{Watcher: watcher, Kind: ViolationCache, Revision: max(want, got), Key: k, Detail: detail})
	}
}

// startReflectors runs every reflector under wctx, at most concurrency
// listing at once, and waits until all have synced or timeout passes.
func startReflectors(ctx, wctx context.Context, refls []*Reflector, concurrency int, timeout time.Duration, wg *sync.WaitGroup) error {
	if concurrency <= 0 {
		concurrency = len(refls)
	}
	sem := make(chan struct{}, concurrency)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, r := range refls {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("watchers did not list within %v", timeout)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Run(wctx)
		}()
		go func() {
			select {
			case <-r.Synced():
			case <-r.Done():
			}
			<-sem
		}()
	}
	for _, r := range refls {
		select {
		case <-r.Synced():
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("watcher %d did not list within %v", r.ID(), timeout)
		}
	}
	return nil
}

// waitSynced requests progress notifications on every stream until every
// reflector has seen revision rev or the timeout passes, and returns how
// many did not.
func waitSynced(ctx context.Context, streams []*Stream, refls []*Reflector, rev int64, period, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		behind := map[int]bool{}
		n := 0
		for _, r := range refls {
			if r.LastRevision() < rev {
				behind[r.Options().Stream.ID] = true
				n++
			}
		}
		if n == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		for _, s := range streams {
			if behind[s.ID] {
				s.RequestProgress(ctx) // one request reaches every watch on the stream
			}
		}
		clockwait.SleepReal(ctx, period)
	}
}
