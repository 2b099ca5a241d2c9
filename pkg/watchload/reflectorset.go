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

// WaitSynced waits, looking every period, until every reflector has seen
// revision rev or timeout passes, and returns how many have not. A
// reflector has seen rev when its last revision reached it (an event, or
// a progress notification the load itself asked for), or when it is
// watching and rec's history, complete to rev, holds no event of its
// prefix after its last revision (Recorder.Quiet): nothing etcd could
// still send it is at or below rev. It asks etcd for nothing: a progress
// request on the reflectors' streams would be a request of the harness
// on the load's streams, which moves the reflectors' revisions and which
// kube-apiserver never sends for a client's watch with the watch cache
// off (k8s.io/apiserver/pkg/storage/etcd3/watcher.go: no progress_notify,
// no progress requests); rec may be nil (then only the first way counts).
// A reflector that has stopped and not seen rev never will: once only such
// remain, it returns without waiting for the timeout.
func (s *ReflectorSet) WaitSynced(ctx context.Context, rec *Recorder, rev int64, period, timeout time.Duration) int {
	return waitSynced(ctx, rec, s.Reflectors, rev, period, timeout)
}

// CompareCaches reports into vs, as ViolationCache, every key whose
// presence or mod_revision in a stopped reflector's cache differs from
// etcd's state at the reflector's last revision, read with c (one read per
// prefix and revision).
//
// A reflector's last revision may have been compacted since: one whose
// prefix saw no event after it (it was synced by rec's history,
// WaitSynced) ends with the state at it, so its state is read at rec's
// watermark instead (Recorder.Quiet: the prefix is the same there); one
// that missed events cannot be compared, which its validation against rec
// reports, and is logged with logf. Other read errors are returned.
func (s *ReflectorSet) CompareCaches(ctx context.Context, c Client, rec *Recorder, vs *Violations, logf func(string, ...any)) error {
	states := map[string]map[string]int64{}
	read := func(prefix string, rev int64) (map[string]int64, error) {
		id := fmt.Sprintf("%s@%d", prefix, rev)
		if state, ok := states[id]; ok {
			return state, nil
		}
		resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
		if err != nil {
			return nil, err
		}
		state := make(map[string]int64, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			state[string(kv.Key)] = kv.ModRevision
		}
		states[id] = state
		return state, nil
	}
	for _, r := range s.Reflectors {
		ro := r.Options()
		rev := r.LastRevision()
		state, err := read(ro.Prefix, rev)
		if isExpired(err) && rec != nil {
			if upTo := rec.Watermark(); upTo > rev && rec.Quiet(ro.Prefix, rev, upTo) {
				state, err = read(ro.Prefix, upTo)
			} else {
				logf("watcher %d: its last revision %d is compacted and its prefix %s changed after it: its cache is not compared", ro.ID, rev, ro.Prefix)
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("read %s at revision %d: %w", ro.Prefix, rev, err)
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

// waitSynced is ReflectorSet.WaitSynced over refls.
func waitSynced(ctx context.Context, rec *Recorder, refls []*Reflector, rev int64, period, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	pending := refls
	for {
		behind := pending[:0:0]
		stopped := 0
		for _, r := range pending {
			if !seen(r, rec, rev) {
				behind = append(behind, r)
				if isDone(r) {
					stopped++
				}
			}
		}
		pending = behind
		// A stopped reflector (its context ended: an interrupted load)
		// will see nothing more: waiting for it is waiting for the
		// timeout.
		if len(pending) == stopped || time.Now().After(deadline) || ctx.Err() != nil {
			return len(pending)
		}
		clockwait.SleepReal(ctx, period)
	}
}

// isDone reports whether reflector r has stopped.
func isDone(r *Reflector) bool {
	select {
	case <-r.Done():
		return true
	default:
		return false
	}
}

// seen reports whether reflector r has seen revision rev: its last
// revision reached rev, or it is watching and rec's history of its prefix
// holds nothing after its last revision up to rev.
func seen(r *Reflector, rec *Recorder, rev int64) bool {
	last := r.LastRevision()
	if last >= rev {
		return true
	}
	if rec == nil || r.State().Phase != PhaseWatch {
		return false
	}
	// The phase is read after the revision: a relist that began in
	// between is caught by the phase, and one that ended by a second look.
	return rec.Quiet(r.Options().Prefix, last, rev) && r.LastRevision() == last
}
