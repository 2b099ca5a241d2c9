package watchload

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// KV is what writers need from etcd; *clientv3.Client satisfies it.
type KV interface {
	Txn(ctx context.Context) clientv3.Txn
}

var _ KV = (*clientv3.Client)(nil)

// OpType is a write's kind.
type OpType uint8

// The write kinds, as kube-apiserver issues them (etcd3/store.go Create,
// GuaranteedUpdate, Delete).
const (
	OpCreate OpType = iota
	OpUpdate
	OpDelete
)

func (o OpType) String() string {
	return [...]string{"create", "update", "delete"}[o]
}

// Mix is the share of each write kind, in percent; they sum to 100.
type Mix struct {
	CreatePercent, UpdatePercent, DeletePercent int
}

// DefaultMix is a churning workload: pods mostly get status updates, some
// are created and deleted.
var DefaultMix = Mix{CreatePercent: 20, UpdatePercent: 70, DeletePercent: 10}

// Validate checks that the shares are not negative and sum to 100.
func (m Mix) Validate() error {
	if m.CreatePercent < 0 || m.UpdatePercent < 0 || m.DeletePercent < 0 ||
		m.CreatePercent+m.UpdatePercent+m.DeletePercent != 100 {
		return fmt.Errorf("write mix %d/%d/%d must be non-negative and sum to 100", m.CreatePercent, m.UpdatePercent, m.DeletePercent)
	}
	return nil
}

// writeRecord is one write as the writer saw it. Times are offsets from
// the run's start.
type writeRecord struct {
	op        OpType
	key       string
	rev       int64 // the write's revision; 0 if it failed
	scheduled time.Duration
	sent      time.Duration
	done      time.Duration
	err       error
	conflict  bool
}

// plannedOp is a write the dispatcher decided on.
type plannedOp struct {
	op        OpType
	ns, name  string
	scheduled time.Duration
}

// objectState is a writer's knowledge of one key it owns.
type objectState struct {
	modRevision int64
	generation  int
}

// writers runs open-loop writes: op i is scheduled at start + i/rate
// whatever happened to earlier ops, and its latency counts from that
// moment. Ops on one key go to the same worker, in order, so each worker
// knows its keys' mod_revisions and writes with kube-apiserver's
// compare-and-swap transactions.
type writers struct {
	kv      KV
	prefix  string // e.g. "/registry"
	codec   *keyspace.Codec
	seed    uint64
	workers int
	start   time.Time
	timeout time.Duration

	mu      sync.Mutex
	records []writeRecord
}

// objectKey returns the etcd key of pod ns/name.
func (w *writers) objectKey(ns, name string) string {
	return keyspace.Build(keyspace.Key{Prefix: w.prefix, Resource: "pods", Namespace: ns, Name: name})
}

// seedObjects creates n pods across namespaces before the run and returns
// their names per namespace, with their state for the workers.
func (w *writers) seedObjects(ctx context.Context, n, namespaces, concurrency int) ([]plannedOp, map[string]*objectState, error) {
	gen := keyspace.NewGenerator(w.seed)
	live := make([]plannedOp, n)
	for i := range n {
		live[i] = plannedOp{op: OpCreate, ns: fmt.Sprintf("ns-%d", i%namespaces), name: fmt.Sprintf("seed-%d", i)}
	}
	states := make(map[string]*objectState, n)
	var mu sync.Mutex
	errc := make(chan error, concurrency)
	next := make(chan plannedOp)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := range next {
				val, err := w.codec.Encode(gen.Pod(op.ns, op.name, 0))
				if err != nil {
					errc <- err
					return
				}
				key := w.objectKey(op.ns, op.name)
				resp, err := w.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
					Then(clientv3.OpPut(key, string(val))).Commit()
				if err != nil {
					errc <- fmt.Errorf("seed %s: %w", key, err)
					return
				}
				if !resp.Succeeded {
					errc <- fmt.Errorf("seed %s: key already exists; the prefix %s is not empty", key, w.prefix)
					return
				}
				mu.Lock()
				states[key] = &objectState{modRevision: resp.Header.Revision}
				mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for _, op := range live {
		select {
		case next <- op:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return live, states, err
}

// plan decides every op of the run up front, deterministically from the
// seed: which kind, which object, when.
func plan(seed uint64, live []plannedOp, total int64, rate float64, mix Mix, namespaces int) []plannedOp {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	names := make([]plannedOp, len(live))
	copy(names, live)
	ops := make([]plannedOp, 0, total)
	created := 0
	for i := range total {
		at := time.Duration(float64(i) / rate * float64(time.Second))
		p := r.IntN(100)
		switch {
		case p < mix.CreatePercent || len(names) == 0:
			op := plannedOp{op: OpCreate, ns: fmt.Sprintf("ns-%d", created%namespaces), name: fmt.Sprintf("churn-%d", created), scheduled: at}
			created++
			names = append(names, op)
			ops = append(ops, op)
		case p < mix.CreatePercent+mix.UpdatePercent:
			t := names[r.IntN(len(names))]
			ops = append(ops, plannedOp{op: OpUpdate, ns: t.ns, name: t.name, scheduled: at})
		default:
			j := r.IntN(len(names))
			t := names[j]
			names[j] = names[len(names)-1]
			names = names[:len(names)-1]
			ops = append(ops, plannedOp{op: OpDelete, ns: t.ns, name: t.name, scheduled: at})
		}
	}
	return ops
}

// run executes ops on schedule until they are all done or ctx ends.
func (w *writers) run(ctx context.Context, ops []plannedOp, states map[string]*objectState) {
	queues := make([]chan plannedOp, w.workers)
	owned := make([]map[string]*objectState, w.workers)
	for i := range queues {
		queues[i] = make(chan plannedOp, 1024)
		owned[i] = map[string]*objectState{}
	}
	shard := func(key string) int {
		h := fnv.New32a()
		h.Write([]byte(key))
		return int(h.Sum32() % uint32(w.workers))
	}
	for key, st := range states {
		owned[shard(key)][key] = st
	}
	var wg sync.WaitGroup
	for i := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.work(ctx, queues[i], owned[i])
		}()
	}
	for _, op := range ops {
		if d := time.Until(w.start.Add(op.scheduled)); d > 0 {
			if !sleep(ctx, d) {
				break
			}
		}
		q := queues[shard(w.objectKey(op.ns, op.name))]
		select {
		case q <- op:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
}

// work executes one worker's ops in order.
func (w *writers) work(ctx context.Context, q <-chan plannedOp, states map[string]*objectState) {
	gen := keyspace.NewGenerator(w.seed)
	for op := range q {
		if ctx.Err() != nil {
			continue // drain; unsent ops are not recorded
		}
		key := w.objectKey(op.ns, op.name)
		rec := writeRecord{op: op.op, key: key, scheduled: op.scheduled, sent: time.Since(w.start)}
		st := states[key]
		if st == nil {
			st = &objectState{}
			states[key] = st
		}
		rec.rev, rec.conflict, rec.err = w.do(ctx, gen, op, key, st)
		rec.done = time.Since(w.start)
		w.mu.Lock()
		w.records = append(w.records, rec)
		w.mu.Unlock()
	}
}

var errNotFound = errors.New("object not found")

// do performs one op with kube-apiserver's transactions: create if the key
// does not exist; update and delete if its mod_revision is the one last
// seen, re-reading it once on a conflict as GuaranteedUpdate retries
// (k8s.io/apiserver/pkg/storage/etcd3/store.go). It returns the write's
// revision.
func (w *writers) do(ctx context.Context, gen *keyspace.Generator, op plannedOp, key string, st *objectState) (rev int64, conflict bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	for attempt := 0; attempt < 2; attempt++ {
		var cmp clientv3.Cmp
		var then clientv3.Op
		switch op.op {
		case OpCreate:
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", 0)
			val, err := w.codec.Encode(gen.Pod(op.ns, op.name, 0))
			if err != nil {
				return 0, conflict, err
			}
			then = clientv3.OpPut(key, string(val))
		case OpUpdate:
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", st.modRevision)
			val, err := w.codec.Encode(gen.Pod(op.ns, op.name, st.generation+1))
			if err != nil {
				return 0, conflict, err
			}
			then = clientv3.OpPut(key, string(val))
		case OpDelete:
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", st.modRevision)
			then = clientv3.OpDelete(key)
		}
		resp, err := w.kv.Txn(ctx).If(cmp).Then(then).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return 0, conflict, err
		}
		if resp.Succeeded {
			switch op.op {
			case OpCreate:
				st.modRevision, st.generation = resp.Header.Revision, 0
			case OpUpdate:
				st.modRevision = resp.Header.Revision
				st.generation++
			case OpDelete:
				st.modRevision = 0
			}
			return resp.Header.Revision, conflict, nil
		}
		// Someone else (or an earlier write whose response was lost) moved
		// the key: adopt what etcd holds and try once more.
		conflict = true
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			st.modRevision = 0
			if op.op != OpCreate {
				return 0, conflict, fmt.Errorf("%s %s: %w", op.op, key, errNotFound)
			}
			continue
		}
		st.modRevision = kvs[0].ModRevision
		if op.op == OpCreate {
			return 0, conflict, fmt.Errorf("create %s: already exists", key)
		}
	}
	return 0, conflict, fmt.Errorf("%s %s: conflict persisted", op.op, key)
}
