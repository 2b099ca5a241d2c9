package watchload

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/parallel"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// KV is what writers need from one etcd connection; *clientv3.Client
// satisfies it.
type KV interface {
	Txn(ctx context.Context) clientv3.Txn
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error)
	Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error)
}

var _ KV = (*clientv3.Client)(nil)

// OpType is a write's kind.
type OpType uint8

// The write kinds. Create, update and delete are kube-apiserver's
// transactions (k8s.io/apiserver/pkg/storage/etcd3/store.go Create,
// GuaranteedUpdate, Delete); put is a plain Put, as etcd's benchmark
// sends.
const (
	OpCreate OpType = iota
	OpUpdate
	OpDelete
	OpPut
)

// String returns create, update, delete or put.
func (o OpType) String() string {
	return [...]string{"create", "update", "delete", "put"}[o]
}

// Op is one planned write.
type Op struct {
	Kind      OpType // create, update, delete or put
	Resource  string // e.g. pods; empty for raw puts
	Namespace string // the object's namespace
	Name      string // the object's name
	Key       string // the etcd key
	// Shard is the worker that must perform it (ops on one key go to one
	// worker, in order), or -1 for any.
	Shard int
	// Scheduled is when it is due, since the Env's epoch.
	Scheduled time.Duration
}

// Workload plans and performs writes for Writers.
type Workload interface {
	// Next returns op i. Writers call it from one goroutine, for i = 0,
	// 1, ... in order; the same seed gives the same ops.
	Next(i int64) Op
	// Do performs op on worker's behalf with kv and returns the revision
	// it committed at, whether it met a conflict on the way, and its
	// error. A worker calls Do for its ops in order, never concurrently
	// with itself.
	Do(ctx context.Context, worker int, kv KV, op Op) (rev int64, conflict bool, err error)
}

// Mix is the share of each write kind for pods and configmaps, in
// percent; they sum to 100.
type Mix struct {
	CreatePercent int // percent of writes that create
	UpdatePercent int // percent that update
	DeletePercent int // percent that delete
}

// DefaultMix is a churning workload: pods mostly get status updates, some
// are created and deleted.
var DefaultMix = Mix{CreatePercent: 20, UpdatePercent: 70, DeletePercent: 10}

// Validate reports, at fldPath, shares that are negative or do not sum to
// 100; the value shown is create/update/delete.
func (m Mix) Validate(fldPath *field.Path) field.ErrorList {
	if m.CreatePercent < 0 || m.UpdatePercent < 0 || m.DeletePercent < 0 ||
		m.CreatePercent+m.UpdatePercent+m.DeletePercent != 100 {
		v := fmt.Sprintf("%d/%d/%d", m.CreatePercent, m.UpdatePercent, m.DeletePercent)
		return field.ErrorList{field.Invalid(fldPath, v, "create/update/delete percentages must be non-negative and sum to 100")}
	}
	return nil
}

// The resources of the Kubernetes workload.
const (
	ResourcePods       = "pods"
	ResourceConfigMaps = "configmaps"
	ResourceEvents     = "events"
)

// Resources lists them, in the order results show them.
var Resources = []string{ResourcePods, ResourceConfigMaps, ResourceEvents}

// ResourceMix is the share of writes going to each resource, in percent;
// they sum to 100.
type ResourceMix struct {
	PodsPercent       int // percent of writes to pods
	ConfigMapsPercent int // percent to configmaps
	EventsPercent     int // percent to events
}

// DefaultResourceMix: most writes are pod status updates and events, a few
// touch configmaps.
var DefaultResourceMix = ResourceMix{PodsPercent: 60, ConfigMapsPercent: 10, EventsPercent: 30}

// Validate reports, at fldPath, shares that are negative or do not sum to
// 100; the value shown is the mix as ParseResourceMix reads it.
func (m ResourceMix) Validate(fldPath *field.Path) field.ErrorList {
	if m.PodsPercent < 0 || m.ConfigMapsPercent < 0 || m.EventsPercent < 0 ||
		m.PodsPercent+m.ConfigMapsPercent+m.EventsPercent != 100 {
		return field.ErrorList{field.Invalid(fldPath, m.String(), "percentages must be non-negative and sum to 100")}
	}
	return nil
}

// ParseResourceMix parses "pods=60,configmaps=10,events=30"; resources
// left out get 0.
func ParseResourceMix(s string) (ResourceMix, error) {
	var m ResourceMix
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		var n int
		if _, err := fmt.Sscanf(val, "%d", &n); !ok || err != nil {
			return m, fmt.Errorf("resource mix %q: want resource=percent, got %q", s, part)
		}
		switch name {
		case ResourcePods:
			m.PodsPercent = n
		case ResourceConfigMaps:
			m.ConfigMapsPercent = n
		case ResourceEvents:
			m.EventsPercent = n
		default:
			return m, fmt.Errorf("resource mix %q: unknown resource %q (want pods, configmaps, events)", s, name)
		}
	}
	return m, m.Validate(field.NewPath("resourceMix")).ToAggregate()
}

// String formats the mix as ParseResourceMix reads it.
func (m ResourceMix) String() string {
	return fmt.Sprintf("pods=%d,configmaps=%d,events=%d", m.PodsPercent, m.ConfigMapsPercent, m.EventsPercent)
}

// eventCreatePercent is the share of event writes that create an event;
// the rest are repeats that bump an existing event's count (client-go's
// event correlator patches count and lastTimestamp: tools/record/
// events_cache.go). Events are never
// deleted by writers: their lease expires.
const eventCreatePercent = 80

// DefaultEventTTL is kube-apiserver's --event-ttl default
// (k8s.io/kubernetes cmd/kube-apiserver/app/options/options.go EventTTL).
const DefaultEventTTL = time.Hour

// KubernetesWorkloadOptions shape a KubernetesWorkload.
type KubernetesWorkloadOptions struct {
	// Prefix is kube-apiserver's --etcd-prefix, e.g. "/registry".
	Prefix string
	// Namespaces the objects are spread across.
	Namespaces int
	// Pods, ConfigMaps and Events are created by Seed.
	Pods, ConfigMaps, Events int
	// Mix of creates, updates and deletes for pods and configmaps.
	Mix Mix
	// ResourceMix is the share of writes per resource.
	ResourceMix ResourceMix
	// EventTTL is the events' lease TTL (--event-ttl); 0 means
	// DefaultEventTTL.
	EventTTL time.Duration
	// Workers is the number of writer workers ops are sharded over.
	Workers int
	// Seed makes objects and the op plan reproducible.
	Seed uint64
	// NamespacePrefix starts every namespace name, followed by its
	// number; empty means "ns-". A run that reuses a prefix gives its
	// objects namespaces of their own this way.
	NamespacePrefix string
	// NoWatchCache models kube-apiserver with --watch-cache=false (the
	// informer profile): every update and delete reads the object from
	// etcd before its transaction. By default (the apiserver-cache
	// profile, kube-apiserver's default) pods and configmaps start from
	// the watch cache's object: see UseWatchCache. Events are never
	// cached either way (registry.go).
	NoWatchCache bool
	// Shard is this worker's part of a load divided among workers: it
	// seeds and writes only the objects of the namespaces it owns
	// (shard.Shard.Range over Namespaces), while planning every op of the
	// undivided load, so shards that share Seed write it exactly once
	// between them (ShardedWorkload). The zero value is the whole load.
	Shard shard.Shard
}

// KubernetesWorkload writes pods, configmaps and events encoded with
// Kubernetes' own protobuf serializer, sending etcd what kube-apiserver
// sends for the real writers' API requests (registry.go): creates if the
// key does not exist; reads and GuaranteedUpdate's transactions for
// updates, event patches and a pod's graceful deletion (two updates, then
// the delete), retried until they apply, with client-go's
// RetryOnConflict around the updates; events attached to leases shared as
// kube-apiserver's lease manager shares them, one lease manager per
// connection as each kube-apiserver has its own (a grant stuck on one
// member then holds up only the writes of that connection, as it holds up
// one apiserver). Ops on one key go to one worker, so each worker knows
// its keys' mod_revisions.
type KubernetesWorkload struct {
	o        KubernetesWorkloadOptions
	codec    *keyspace.Codec
	leasesMu sync.Mutex
	leases   map[KV]*leaseManager  // per connection
	granted  []*leaseManager       // in the order first used
	gens     []*keyspace.Generator // per worker

	cacheMu  sync.RWMutex
	cacheRev func(resource string) (int64, bool) // UseWatchCache's
	observer func(worker int, rev int64)         // ObserveCommits'

	// planner state (Next's goroutine)
	rng     *rand.Rand
	live    map[string][]plannedObject
	created map[string]int

	states []map[string]*objectState // per worker
}

type plannedObject struct{ ns, name, owner string }

// objectState is a worker's knowledge of one key it owns.
type objectState struct {
	modRevision int64 // the object's mod_revision (the client's resourceVersion); 0: absent or unknown
	generation  int
	owner       string // the pod an event is about
	// createRevision and revs are the key's creation revision and its
	// last stateRevisions mod_revisions, oldest first, from which
	// cachedAt tells what a watch cache at some revision holds.
	createRevision int64
	revs           [stateRevisions]int64
}

// stateRevisions is how many of a key's mod_revisions objectState keeps.
const stateRevisions = 4

// created records the object's creation at rev.
func (s *objectState) created(rev int64) {
	s.modRevision, s.generation, s.createRevision = rev, 0, rev
	s.revs = [stateRevisions]int64{}
	s.revs[stateRevisions-1] = rev
}

// updated records an update of the object the worker made at rev.
func (s *objectState) updated(rev int64) {
	s.adopt(rev)
	s.generation++
}

// adopt records rev as the object's mod_revision, read from etcd.
func (s *objectState) adopt(rev int64) {
	if rev == s.modRevision {
		return
	}
	s.modRevision = rev
	copy(s.revs[:], s.revs[1:])
	s.revs[stateRevisions-1] = rev
}

// cachedAt returns the mod_revision of the object as a watch cache that
// has applied etcd's events up to revision seen holds it: the latest of
// its known revisions at or below seen; if all are later, an earlier,
// stale one (any revision but the current one makes the same requests).
// ok is false when the cache does not hold it: created after seen, or
// absent.
func (s *objectState) cachedAt(seen int64) (rev int64, ok bool) {
	if s.modRevision == 0 || seen < s.createRevision {
		return 0, false
	}
	oldest := s.modRevision
	for i := stateRevisions - 1; i >= 0 && s.revs[i] != 0; i-- {
		if s.revs[i] <= seen {
			return s.revs[i], true
		}
		oldest = s.revs[i]
	}
	if oldest == s.modRevision {
		return s.modRevision - 1, true
	}
	return oldest, true
}

// NewKubernetesWorkload returns the workload; Seed must run before the
// writers start.
func NewKubernetesWorkload(o KubernetesWorkloadOptions) (*KubernetesWorkload, error) {
	if o.Workers < 1 {
		return nil, errors.New("kubernetes workload: workers must be positive")
	}
	if o.Namespaces < 1 {
		o.Namespaces = 1
	}
	if o.EventTTL <= 0 {
		o.EventTTL = DefaultEventTTL
	}
	if o.NamespacePrefix == "" {
		o.NamespacePrefix = "ns-"
	}
	if o.Shard == (shard.Shard{}) {
		o.Shard = shard.Whole
	}
	if err := o.Shard.Validate(); err != nil {
		return nil, fmt.Errorf("kubernetes workload: %w", err)
	}
	if o.Shard.Count > o.Namespaces {
		return nil, fmt.Errorf("kubernetes workload: %d shards need at least as many namespaces, have %d", o.Shard.Count, o.Namespaces)
	}
	codec, err := keyspace.NewCodec()
	if err != nil {
		return nil, err
	}
	w := &KubernetesWorkload{
		o: o, codec: codec, leases: map[KV]*leaseManager{},
		rng:     rand.New(rand.NewPCG(o.Seed, 0x5eed)),
		live:    map[string][]plannedObject{},
		created: map[string]int{},
	}
	for range o.Workers {
		w.gens = append(w.gens, keyspace.NewGenerator(o.Seed))
		w.states = append(w.states, map[string]*objectState{})
	}
	return w, nil
}

// Prefixes returns the etcd prefixes of the workload's resources, e.g.
// "/registry/pods/", in the order of Resources.
func (w *KubernetesWorkload) Prefixes() []string {
	out := make([]string, len(Resources))
	for i, r := range Resources {
		out[i] = ResourcePrefix(w.o.Prefix, r)
	}
	return out
}

// ResourcePrefix returns the etcd prefix of a built-in namespaced resource
// under prefix, e.g. "/registry/pods/".
func ResourcePrefix(prefix, resource string) string {
	return strings.TrimSuffix(keyspace.Build(keyspace.Key{Prefix: prefix, Resource: resource, Name: "x"}), "x")
}

func (w *KubernetesWorkload) key(resource, ns, name string) string {
	return keyspace.Build(keyspace.Key{Prefix: w.o.Prefix, Resource: resource, Namespace: ns, Name: name})
}

func (w *KubernetesWorkload) shard(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(w.o.Workers))
}

// Seed creates the initial objects with `concurrency` parallel creates on
// kvs (round robin) and returns how many of each resource it created. It
// fails, wrapping ErrObjectExists, if a key already exists: the prefix
// holds an earlier run's objects.
//
// With a Shard other than the whole load it creates only the objects of
// the namespaces the shard owns, and counts those; the others are planned
// all the same, as the shards that own them create them.
func (w *KubernetesWorkload) Seed(ctx context.Context, kvs []KV, concurrency int) (map[string]int, error) {
	var objs []seedObject
	for _, o := range w.planSeed() {
		if w.ownsNamespace(o.obj.ns) {
			objs = append(objs, o)
		}
	}
	counts := map[string]int{}
	for _, o := range objs {
		counts[o.resource]++
	}
	return counts, w.create(ctx, kvs, concurrency, objs)
}

// Shard returns the part of the load this workload writes
// (KubernetesWorkloadOptions.Shard; shard.Whole by default).
func (w *KubernetesWorkload) Shard() shard.Shard { return w.o.Shard }

// Owns reports whether op is this shard's: its namespace is one the
// shard owns (ShardedWorkload). Every op is the whole load's.
func (w *KubernetesWorkload) Owns(op Op) bool { return w.ownsNamespace(op.Namespace) }

// ownsNamespace reports whether namespace ns (NamespacePrefix and its
// number) is among the shard's; a namespace not of the workload's naming
// belongs to shard 0, so nothing is left unwritten.
func (w *KubernetesWorkload) ownsNamespace(ns string) bool {
	if w.o.Shard.Count <= 1 {
		return true
	}
	i, err := strconv.Atoi(strings.TrimPrefix(ns, w.o.NamespacePrefix))
	if err != nil || !strings.HasPrefix(ns, w.o.NamespacePrefix) || i < 0 || i >= w.o.Namespaces {
		return w.o.Shard.Index == 0
	}
	return w.o.Shard.Owns(i, w.o.Namespaces)
}

// planSeed lists the seeded objects, pods then configmaps then events, and
// plans them as existing.
func (w *KubernetesWorkload) planSeed() []seedObject {
	var objs []seedObject
	for i := range w.o.Pods {
		objs = append(objs, seedObject{ResourcePods, w.seedName(ResourcePods, i)})
	}
	for i := range w.o.ConfigMaps {
		objs = append(objs, seedObject{ResourceConfigMaps, w.seedName(ResourceConfigMaps, i)})
	}
	for i := range w.o.Events {
		objs = append(objs, seedObject{ResourceEvents, w.seedName(ResourceEvents, i)})
	}
	for _, o := range objs {
		w.live[o.resource] = append(w.live[o.resource], o.obj)
	}
	return objs
}

// PlanSeed returns the creates Seed would perform, pods then configmaps
// then events, for a writer that performs them another way (through
// kube-apiserver: pkg/kubeload), and plans those objects as existing, as
// Seed does. Call it once, instead of Seed, before the first Next.
func (w *KubernetesWorkload) PlanSeed() []Op {
	objs := w.planSeed()
	ops := make([]Op, len(objs))
	for i, o := range objs {
		key := w.key(o.resource, o.obj.ns, o.obj.name)
		ops[i] = Op{Kind: OpCreate, Resource: o.resource, Namespace: o.obj.ns, Name: o.obj.name, Key: key, Shard: w.shard(key)}
	}
	return ops
}

// Namespaces returns the namespaces the workload's objects are spread
// across, in order.
func (w *KubernetesWorkload) Namespaces() []string {
	out := make([]string, w.o.Namespaces)
	for i := range out {
		out[i] = w.ns(i)
	}
	return out
}

// SeedRange creates objects [from, to) of one resource, named as Seed
// names them, without planning writes to them: for LIST benchmarks that
// grow a resource step by step.
func (w *KubernetesWorkload) SeedRange(ctx context.Context, kvs []KV, resource string, from, to, concurrency int) error {
	var objs []seedObject
	for i := from; i < to; i++ {
		objs = append(objs, seedObject{resource, w.seedName(resource, i)})
	}
	return w.create(ctx, kvs, concurrency, objs)
}

type seedObject struct {
	resource string
	obj      plannedObject
}

// seedName returns seeded object i of a resource: pods seed-i,
// configmaps seed-cm-i, and events about seeded pods.
func (w *KubernetesWorkload) seedName(resource string, i int) plannedObject {
	switch resource {
	case ResourceConfigMaps:
		return plannedObject{ns: w.ns(i), name: fmt.Sprintf("seed-cm-%d", i)}
	case ResourceEvents:
		owner := plannedObject{ns: w.ns(i), name: fmt.Sprintf("pod-%d", i)}
		if w.o.Pods > 0 {
			owner = w.seedName(ResourcePods, i%w.o.Pods)
		}
		return plannedObject{ns: owner.ns, name: eventName(owner.name, uint64(i)), owner: owner.name}
	}
	return plannedObject{ns: w.ns(i), name: fmt.Sprintf("seed-%d", i)}
}

// create writes objs with concurrent creates and records their state for
// the worker that owns each key.
func (w *KubernetesWorkload) create(ctx context.Context, kvs []KV, concurrency int, objs []seedObject) error {
	concurrency = max(concurrency, 1)
	gens := make([]*keyspace.Generator, concurrency) // one per worker
	for i := range gens {
		gens[i] = keyspace.NewGenerator(w.o.Seed)
	}
	var mu sync.Mutex
	return parallel.Each(ctx, concurrency, len(objs), func(ctx context.Context, c, i int) error {
		j := objs[i]
		key := w.key(j.resource, j.obj.ns, j.obj.name)
		st := &objectState{owner: j.obj.owner}
		if _, _, err := w.write(ctx, -1, gens[c], kvs[c%len(kvs)], OpCreate, j.resource, j.obj.ns, j.obj.name, key, st); err != nil {
			return fmt.Errorf("seed %s: %w", key, err)
		}
		mu.Lock()
		w.states[w.shard(key)][key] = st
		mu.Unlock()
		return nil
	})
}

func (w *KubernetesWorkload) ns(i int) string {
	return w.o.NamespacePrefix + strconv.Itoa(i%w.o.Namespaces)
}

// Keys returns every key the workload has written or tried to write
// (seeded, created, updated or deleted), sorted. Call it after the writers
// have stopped.
func (w *KubernetesWorkload) Keys() []string {
	var keys []string
	for _, states := range w.states {
		for k := range states {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// Leases returns the IDs of the leases the workload granted, connection
// by connection, each in the order granted.
func (w *KubernetesWorkload) Leases() []clientv3.LeaseID {
	w.leasesMu.Lock()
	defer w.leasesMu.Unlock()
	var ids []clientv3.LeaseID
	for _, l := range w.granted {
		ids = append(ids, l.ids()...)
	}
	return ids
}

// leaseManager returns the lease manager of connection kv.
func (w *KubernetesWorkload) leaseManager(kv KV) *leaseManager {
	w.leasesMu.Lock()
	defer w.leasesMu.Unlock()
	l, ok := w.leases[kv]
	if !ok {
		l = newLeaseManager()
		w.leases[kv] = l
		w.granted = append(w.granted, l)
	}
	return l
}

// eventName is the name client-go's recorder gives an event: the object's
// name, a dot and a hexadecimal timestamp.
func eventName(owner string, n uint64) string {
	return fmt.Sprintf("%s.%016x", owner, 0x188a000000000000+n*7919)
}

// Next plans op i: a resource by the resource mix, a kind by the write
// mix, a target among the objects planned to exist.
func (w *KubernetesWorkload) Next(i int64) Op {
	r := w.rng
	p := r.IntN(100)
	m := w.o.ResourceMix
	resource := ResourceEvents
	switch {
	case p < m.PodsPercent:
		resource = ResourcePods
	case p < m.PodsPercent+m.ConfigMapsPercent:
		resource = ResourceConfigMaps
	}
	live := w.live[resource]
	var op Op
	op.Resource = resource
	if resource == ResourceEvents {
		if r.IntN(100) < eventCreatePercent || len(live) == 0 {
			pods := w.live[ResourcePods]
			owner := plannedObject{ns: w.ns(int(i)), name: fmt.Sprintf("pod-%d", i)}
			if len(pods) > 0 {
				owner = pods[r.IntN(len(pods))]
			}
			n := w.created[resource]
			w.created[resource]++
			obj := plannedObject{ns: owner.ns, name: eventName(owner.name, uint64(1<<32+n)), owner: owner.name}
			w.live[resource] = append(live, obj)
			op.Kind, op.Namespace, op.Name = OpCreate, obj.ns, obj.name
		} else {
			t := live[r.IntN(len(live))]
			op.Kind, op.Namespace, op.Name = OpUpdate, t.ns, t.name
		}
	} else {
		q := r.IntN(100)
		switch {
		case q < w.o.Mix.CreatePercent || len(live) == 0:
			n := w.created[resource]
			w.created[resource]++
			name := fmt.Sprintf("churn-%d", n)
			if resource == ResourceConfigMaps {
				name = fmt.Sprintf("churn-cm-%d", n)
			}
			obj := plannedObject{ns: w.ns(n), name: name}
			w.live[resource] = append(live, obj)
			op.Kind, op.Namespace, op.Name = OpCreate, obj.ns, obj.name
		case q < w.o.Mix.CreatePercent+w.o.Mix.UpdatePercent:
			t := live[r.IntN(len(live))]
			op.Kind, op.Namespace, op.Name = OpUpdate, t.ns, t.name
		default:
			j := r.IntN(len(live))
			t := live[j]
			live[j] = live[len(live)-1]
			w.live[resource] = live[:len(live)-1]
			op.Kind, op.Namespace, op.Name = OpDelete, t.ns, t.name
		}
	}
	op.Key = w.key(resource, op.Namespace, op.Name)
	op.Shard = w.shard(op.Key)
	return op
}

// Do performs op as kube-apiserver performs the real writers' request
// (registry.go). Its revision is the op's last: a pod's delete commits
// two updates first, which it hands to the commit observer
// (ObserveCommits).
func (w *KubernetesWorkload) Do(ctx context.Context, worker int, kv KV, op Op) (int64, bool, error) {
	states := w.states[worker]
	st := states[op.Key]
	if st == nil {
		st = &objectState{}
		if op.Resource == ResourceEvents {
			st.owner = strings.SplitN(op.Name, ".", 2)[0]
		}
		states[op.Key] = st
	}
	return w.write(ctx, worker, w.gens[worker], kv, op.Kind, op.Resource, op.Namespace, op.Name, op.Key, st)
}

// write performs one op on worker's behalf (-1 while seeding).
func (w *KubernetesWorkload) write(ctx context.Context, worker int, gen *keyspace.Generator, kv KV, kind OpType, resource, ns, name, key string, st *objectState) (rev int64, conflict bool, err error) {
	switch {
	case kind == OpCreate:
		return w.createObject(ctx, gen, kv, resource, ns, name, key, st)
	case kind == OpUpdate && resource == ResourceEvents:
		return w.patch(ctx, gen, kv, resource, ns, name, key, st)
	case kind == OpUpdate:
		return w.update(ctx, gen, kv, resource, ns, name, key, st)
	case kind == OpDelete && resource == ResourcePods:
		return w.deletePod(ctx, worker, gen, kv, ns, name, key, st)
	case kind == OpDelete:
		return w.deleteObject(ctx, kv, resource, key, st)
	}
	return 0, false, fmt.Errorf("%s: not a Kubernetes write", kind)
}

// object returns the object's content at a generation.
func (w *KubernetesWorkload) object(gen *keyspace.Generator, resource, ns, name string, st *objectState, generation int) runtime.Object {
	switch resource {
	case ResourceConfigMaps:
		return gen.ConfigMap(ns, name, generation, gen.ConfigMapDataBytes(ns, name))
	case ResourceEvents:
		return gen.Event(ns, name, st.owner, generation+1)
	}
	return gen.Pod(ns, name, generation)
}

// UseWatchCache gives the workload, unless NoWatchCache is set, the
// revision up to which the watch cache of each resource has applied
// etcd's events (rev; ok false when there is no cache of the resource),
// from which it tells whether the object the cacher hands an update or a
// delete is current or stale (registry.go). Run passes each of its watch
// caches' revision (apiserver-cache); what a cache has seen when a write
// starts stands for what kube-apiserver's cache had seen, which the model
// cannot know. Without it, or for a resource
// rev knows nothing of, the cache is taken to be current. Call it before
// the writers start; rev is called from the writers' goroutines.
func (w *KubernetesWorkload) UseWatchCache(rev func(resource string) (int64, bool)) {
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	w.cacheRev = rev
}

// ObserveCommits implements CommitObserver: f gets the revisions of a
// pod delete's two updates as they commit.
func (w *KubernetesWorkload) ObserveCommits(f func(worker int, rev int64)) {
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	w.observer = f
}

// rawWorkload writes values of a fixed size to a key space with plain
// Puts, as etcd's benchmark put does: key i of Keys is the prefix and i
// zero-padded to KeySize bytes, and every op picks a key uniformly at
// random (or in turn with Sequential). Ops go to any worker.
type rawWorkload struct {
	// Prefix starts every key.
	Prefix string
	// Keys is the key space size (etcd benchmark's --key-space-size).
	Keys int
	// KeySize pads keys to this many bytes at least.
	KeySize int
	// ValueSize is the value size in bytes.
	ValueSize int
	// Sequential picks keys in turn instead of at random.
	Sequential bool
	// Seed makes the key choice reproducible.
	Seed uint64

	rng   *rand.Rand
	value string
	// valueBytes is value, which every put sends (never written to).
	valueBytes []byte
	// keys holds every key of a key space of at most rawKeysPrecomputed
	// end to end, each keyBytes long (the numbers are zero-padded to one
	// width), so that key i is a substring: no allocation per op, and one
	// object without pointers, where a string per key held 24 bytes more
	// each for the collector to scan.
	keys     string
	keyBytes int
	once     sync.Once
}

// rawKeysPrecomputed bounds the key space whose keys are built once.
const rawKeysPrecomputed = 1 << 20

// digits returns the width keys' numbers are zero-padded to.
func (w *rawWorkload) digits() int {
	return max(w.KeySize-len(w.Prefix), len(strconv.Itoa(max(w.Keys-1, 0))))
}

// Key returns key i.
func (w *rawWorkload) Key(i int) string {
	if w.keyBytes > 0 && i < len(w.keys)/w.keyBytes {
		return w.keys[i*w.keyBytes : (i+1)*w.keyBytes]
	}
	return fmt.Sprintf("%s%0*d", w.Prefix, w.digits(), i)
}

// Next picks op i's key.
func (w *rawWorkload) Next(i int64) Op {
	w.once.Do(w.init)
	k := int(i % int64(max(w.Keys, 1)))
	if !w.Sequential {
		k = w.rng.IntN(max(w.Keys, 1))
	}
	return Op{Kind: OpPut, Key: w.Key(k), Shard: -1}
}

func (w *rawWorkload) init() {
	w.rng = rand.New(rand.NewPCG(w.Seed, 0xbe4c))
	w.value = strings.Repeat("v", w.ValueSize)
	w.valueBytes = []byte(w.value)
	if w.Keys <= rawKeysPrecomputed {
		digits := w.digits()
		keyBytes := len(w.Prefix) + digits
		var b strings.Builder
		b.Grow(w.Keys * keyBytes)
		num := make([]byte, 0, digits)
		for i := range w.Keys {
			num = strconv.AppendInt(num[:0], int64(i), 10)
			b.WriteString(w.Prefix)
			for range digits - len(num) {
				b.WriteByte('0')
			}
			b.Write(num)
		}
		w.keys, w.keyBytes = b.String(), keyBytes
	}
}

// opDoer is a KV that performs a prepared Op, as clientv3.Client does
// (KV.Put is Do of OpPut).
type opDoer interface {
	Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error)
}

var _ opDoer = (*clientv3.Client)(nil)

// Do puts the value. On a KV that performs prepared Ops (opDoer) every
// put sends the one value made by init: Put would copy it, the string,
// into a new slice on every call (4 KiB a put at 4 KiB values, 40 % of
// what a put allocates). The request etcd receives is the same.
func (w *rawWorkload) Do(ctx context.Context, _ int, kv KV, op Op) (int64, bool, error) {
	w.once.Do(w.init)
	d, ok := kv.(opDoer)
	if !ok {
		resp, err := kv.Put(ctx, op.Key, w.value)
		if err != nil {
			return 0, false, err
		}
		return resp.Header.Revision, false, nil
	}
	put := clientv3.OpPut("", "")
	put.WithKeyBytes([]byte(op.Key))
	put.WithValueBytes(w.valueBytes)
	resp, err := d.Do(ctx, put)
	if err != nil {
		return 0, false, err
	}
	return resp.Put().Header.Revision, false, nil
}

// anyWorker implements anyWorkerWorkload: every op goes to any worker.
func (w *rawWorkload) anyWorker() {}

var (
	_ Workload          = (*KubernetesWorkload)(nil)
	_ anyWorkerWorkload = (*rawWorkload)(nil)
)
