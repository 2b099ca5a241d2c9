package kubeload

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/revision"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// Informer is one real client-go SharedIndexInformer
// (k8s.io/client-go/tools/cache NewSharedIndexInformerWithOptions) of one
// resource in every namespace, on a client of its own, whose
// ListerWatcher records every request (listWatch). It runs client-go's
// reflector unchanged: its LIST/WATCH sequence, relists, backoff and
// WatchList use are client-go's own.
type Informer struct {
	// ID numbers the informer within its set, from 0; violations and
	// requests carry it.
	ID int
	// Resource is the resource it watches: pods, configmaps or events.
	Resource string

	lw  *listWatch
	inf cache.SharedIndexInformer
}

// InformerSet is a set of informers sharing one request log.
type InformerSet struct {
	// Informers are in ID order, from the first's ID on
	// (NewInformerBlock; 0 for NewInformerSet).
	Informers []*Informer
	// StartConcurrency bounds the informers syncing at once in Start, as
	// watchload.Options.StartConcurrency bounds the model's watchers: an
	// informer starts once fewer than this many started ones have not
	// synced yet. 0 or negative: all start at once. With kube-apiserver's
	// watch cache off every informer's initial LIST or WATCHLIST is a read
	// of etcd pinned at one revision (a RangeStream of the resource's
	// prefix, k8s.io/apiserver/pkg/storage/etcd3/watcher.go
	// syncStreamRecursive; etcd server/etcdserver/v3_server.go rangeStream
	// pins every chunk at the first's revision), which fails with "too
	// old" once kube-apiserver's compactor passes that revision
	// (k8s.io/apiserver/pkg/storage/etcd3/compact.go compacts to the
	// revision seen one interval before). Hundreds of such reads at once
	// share the stack's throughput, each outlives two compaction
	// intervals, fails and starts again: none syncs.
	StartConcurrency int

	log       *requestLog
	watchList *bool
	first     int // the first informer's ID (NewInformerBlock)
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// objectFor returns the object type client-go decodes a resource into.
func objectFor(resource string) (runtime.Object, error) {
	switch resource {
	case watchload.ResourcePods:
		return &corev1.Pod{}, nil
	case watchload.ResourceConfigMaps:
		return &corev1.ConfigMap{}, nil
	case watchload.ResourceEvents:
		return &corev1.Event{}, nil
	}
	return nil, fmt.Errorf("resource %q: informers watch pods, configmaps or events", resource)
}

// NewInformerSet makes one informer per entry of resources (informer i
// watches resources[i]), each on a clientset of its own from conns (a
// connection of its own, as separate controllers have, or the one of
// conns' shared layout), reporting into env. prefix is kube-apiserver's
// --etcd-prefix, which maps objects to the keys env's Recorder records.
// watchList sets client-go's WatchListClient gate for these informers
// (nil: client-go's default). The informers do not run until Start.
func NewInformerSet(conns *Connections, env *watchload.Env, prefix string, resources []string, watchList *bool) (*InformerSet, error) {
	return NewInformerBlock(conns, env, prefix, 0, resources, watchList)
}

// NewInformerBlock is NewInformerSet for a block of a load's informers
// (a worker's part of a load divided into shards: shard.Shard.Range):
// the set's informer j has ID first+j, which its requests, violations and
// result carry, and watches resources[j]. The set's methods that take an
// informer (Hold, Release, LastRevision, Cache) take its position in the
// set, j.
func NewInformerBlock(conns *Connections, env *watchload.Env, prefix string, first int, resources []string, watchList *bool) (*InformerSet, error) {
	s := &InformerSet{log: &requestLog{}, watchList: watchList, first: first}
	for j, res := range resources {
		id := first + j
		obj, err := objectFor(res)
		if err != nil {
			return nil, err
		}
		cs, err := conns.NewClientset()
		if err != nil {
			return nil, fmt.Errorf("informer %d: %w", id, err)
		}
		keyPrefix := watchload.ResourcePrefix(prefix, res)
		lw := &listWatch{id: id, resource: res, prefix: prefix, client: cs.CoreV1().RESTClient(), log: s.log, env: env,
			obs: env.NewObserver(id, keyPrefix)}
		inf := cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{})
		if err := inf.SetTransform(StoreMetadata); err != nil {
			return nil, fmt.Errorf("informer %d: %w", id, err)
		}
		s.Informers = append(s.Informers, &Informer{ID: id, Resource: res, lw: lw, inf: inf})
	}
	return s, nil
}

// position returns the position in the set of the informer with ID id
// (NewInformerBlock).
func (s *InformerSet) position(id int) int { return id - s.first }

// TrimManagedFields drops an object's metadata.managedFields, as
// kube-controller-manager's shared informers do "for memory efficiency"
// (k8s.io/kubernetes/cmd/kube-controller-manager/app/controllermanager.go
// CreateControllerContext): a bare client-go informer set shaped like a
// controller's (BenchmarkInformerMemory's). Objects without metadata are
// returned unchanged.
func TrimManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// StoreMetadata is the transform of every informer of an InformerSet: the
// informer stores, in place of each object it decoded, a StoredObject of
// its name, namespace and resourceVersion, which is all lwbench reads back
// (Cache, the checks). The requests, the bytes kube-apiserver sends and
// client-go's decoding of every object are unchanged; only what the 300
// caches of one process hold is: a pod as lwbench writes it is about
// 8.5 KB decoded even without managedFields, so 100 informers over 3,000
// pods would hold 2.5 GB of pods alone. A metav1.PartialObjectMetadata
// with the labels, as it stored before, still came to about 820 bytes an
// object in a heap profile of 300 informers (`lwbench --heap-profile`,
// 2026-11-28): the ObjectMeta struct 322, the labels map and strings
// it kept about 500; a StoredObject is 48 bytes and its three strings.
// Objects without metadata are returned unchanged (client-go passes
// tombstones by).
func StoreMetadata(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	return &StoredObject{Name: m.GetName(), Namespace: m.GetNamespace(), ResourceVersion: m.GetResourceVersion()}, nil
}

// StoredObject is what an informer of an InformerSet stores of an object
// (StoreMetadata): its identity and resourceVersion. It is a metav1.Object,
// as client-go's stores key objects through meta.Accessor
// (cache.DeletionHandlingMetaNamespaceKeyFunc); every other field reads as
// unset and setting it does nothing.
type StoredObject struct {
	Name, Namespace, ResourceVersion string
}

var _ metav1.Object = (*StoredObject)(nil)

func (o *StoredObject) GetNamespace() string                          { return o.Namespace }
func (o *StoredObject) SetNamespace(ns string)                        { o.Namespace = ns }
func (o *StoredObject) GetName() string                               { return o.Name }
func (o *StoredObject) SetName(name string)                           { o.Name = name }
func (o *StoredObject) GetResourceVersion() string                    { return o.ResourceVersion }
func (o *StoredObject) SetResourceVersion(rv string)                  { o.ResourceVersion = rv }
func (o *StoredObject) GetGenerateName() string                       { return "" }
func (o *StoredObject) SetGenerateName(string)                        {}
func (o *StoredObject) GetUID() types.UID                             { return "" }
func (o *StoredObject) SetUID(types.UID)                              {}
func (o *StoredObject) GetGeneration() int64                          { return 0 }
func (o *StoredObject) SetGeneration(int64)                           {}
func (o *StoredObject) GetSelfLink() string                           { return "" }
func (o *StoredObject) SetSelfLink(string)                            {}
func (o *StoredObject) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (o *StoredObject) SetCreationTimestamp(metav1.Time)              {}
func (o *StoredObject) GetDeletionTimestamp() *metav1.Time            { return nil }
func (o *StoredObject) SetDeletionTimestamp(*metav1.Time)             {}
func (o *StoredObject) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (o *StoredObject) SetDeletionGracePeriodSeconds(*int64)          {}
func (o *StoredObject) GetLabels() map[string]string                  { return nil }
func (o *StoredObject) SetLabels(map[string]string)                   {}
func (o *StoredObject) GetAnnotations() map[string]string             { return nil }
func (o *StoredObject) SetAnnotations(map[string]string)              {}
func (o *StoredObject) GetFinalizers() []string                       { return nil }
func (o *StoredObject) SetFinalizers([]string)                        {}
func (o *StoredObject) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (o *StoredObject) SetOwnerReferences([]metav1.OwnerReference)    {}
func (o *StoredObject) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (o *StoredObject) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// clientConfig is cfg for one client: protobuf, as Kubernetes' own
// controllers talk to kube-apiserver, no client-side rate limit (the load
// is open loop; kube-apiserver's Priority and Fairness still applies), and
// a transport that counts response bytes (countingTransport). Its
// clientsets share client-go's cached transport, and one connection, with
// every other of the same TLS settings (Connections gives the informers and
// writers their own).
func clientConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	c.QPS, c.Burst = -1, 0
	prev := c.WrapTransport
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return countingTransport{next: rt}
	}
	return c
}

// Start runs every informer until Stop, at most StartConcurrency syncing
// at once, and waits until each has synced (listed, or received its
// initial events) or timeout passes; it returns an error naming the
// informers that have not.
func (s *InformerSet) Start(ctx context.Context, timeout time.Duration) error {
	setWatchListClient(s.watchList)
	defer gatesMu.Unlock() // every reflector exists once its informer synced, or Start gave up
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	wctx, wcancel := context.WithTimeout(ctx, timeout)
	defer wcancel()
	slots := len(s.Informers)
	if s.StartConcurrency > 0 {
		slots = s.StartConcurrency
	}
	sem := make(chan struct{}, slots)
	synced := make([]bool, len(s.Informers))
	var waits sync.WaitGroup
	for i, in := range s.Informers {
		select {
		case sem <- struct{}{}:
		case <-wctx.Done():
		}
		if wctx.Err() != nil {
			break
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			in.inf.RunWithContext(rctx)
		}()
		waits.Add(1)
		go func() {
			defer waits.Done()
			synced[i] = cache.WaitForCacheSync(wctx.Done(), in.inf.HasSynced)
			<-sem
		}()
	}
	waits.Wait()
	var unsynced []int
	for i, in := range s.Informers {
		if !synced[i] {
			unsynced = append(unsynced, in.ID)
		}
	}
	if len(unsynced) > 0 {
		return fmt.Errorf("informers %v did not sync within %v", unsynced, timeout)
	}
	return nil
}

// Stop stops every informer and waits until they have, and until every
// request they sent is recorded as ended.
func (s *InformerSet) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	for _, in := range s.Informers {
		in.lw.Release() // a held informer's watch may still wait
		in.lw.running.Wait()
	}
}

// SelectLabels makes every informer list and watch only the objects
// matching selector (a label selector, e.g. "lwbench-run=1a2b3c4d"), as
// an informer made with a tweak of ListOptions.LabelSelector does. Call it
// before Start.
func (s *InformerSet) SelectLabels(selector string) {
	for _, in := range s.Informers {
		in.lw.selector = selector
	}
}

// Requests returns every request the informers sent, in the order sent.
func (s *InformerSet) Requests() []Request { return s.log.snapshot() }

// Hold holds informer i back (see Release): its watch breaks off and its
// next LIST or WATCH waits. Its events from now on, for the rest of the
// run, are timed apart (watchload.Observer.HoldBack,
// report.DeliveryStats.HeldBack).
func (s *InformerSet) Hold(i int) { s.Informers[i].lw.Hold() }

// Release lets informer i list and watch again.
func (s *InformerSet) Release(i int) { s.Informers[i].lw.Release() }

// LastRevision is the last revision informer i's watches delivered, in an
// event or a bookmark (0 if none): its last resourceVersion that was a
// revision (the others are counted as unparsed where they arrived).
func (s *InformerSet) LastRevision(i int) int64 { return s.Informers[i].lw.LastRevision() }

// LastRevisionOfAll is the highest LastRevision of the set's informers
// (0 if none delivered anything): once they have stopped, the revision
// the history must reach to check every event they delivered.
func (s *InformerSet) LastRevisionOfAll() int64 {
	var r int64
	for _, in := range s.Informers {
		r = max(r, in.lw.LastRevision())
	}
	return r
}

// Cache returns informer i's cache as etcd keys (under prefix, as
// NewInformerSet's) to mod_revision (the objects' resourceVersions).
func (s *InformerSet) Cache(i int) map[string]int64 {
	in := s.Informers[i]
	out := map[string]int64{}
	for _, obj := range in.inf.GetStore().List() {
		m, err := meta.Accessor(obj)
		if err != nil {
			continue
		}
		rev, err := revision.ParseResourceVersion(m.GetResourceVersion())
		if err != nil {
			// Not a revision: 0, which no key of etcd's state has, so
			// CompareCache reports the key as a cache mismatch.
			rev = 0
		}
		key := keyspace.Build(keyspace.Key{Prefix: in.lw.prefix, Resource: in.Resource, Namespace: m.GetNamespace(), Name: m.GetName()})
		out[key] = rev
	}
	return out
}
