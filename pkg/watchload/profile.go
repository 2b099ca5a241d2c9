package watchload

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// Profile names the Kubernetes client a Reflector models.
type Profile string

// The profiles.
const (
	// ProfileInformer is client-go's reflector reading etcd through a
	// kube-apiserver whose watch cache is off (--watch-cache=false), so
	// that every LIST and WATCH reaches etcd. With WatchListClient
	// (Options.WatchList, on by default since client-go 1.35) it loads its
	// state with a WATCH carrying sendInitialEvents, which kube-apiserver
	// serves with one read of the whole prefix at the latest revision,
	// also when relisting at its last revision; without, it LISTs in pages
	// of 500 (the pager's default) pinned to the first page's revision
	// and relists on "too old resource version" first at the last
	// revision seen and, if that is compacted too, at the latest. Either
	// way it then WATCHes from the revision read with prevKV, and pauses
	// with client-go's backoff between iterations; with the
	// EtcdRangeStream gate on (Options.RangeStream, kube-apiserver 1.37),
	// etcd 3.7 serves every read as a RangeStream, else each is a Range
	// (client-go tools/cache/reflector.go,
	// tools/pager/pager.go; k8s.io/apiserver/pkg/storage/etcd3/store.go,
	// watcher.go). A run of this profile also runs kube-apiserver's own
	// informer of pods (PodSecurity admission's), which with the watch
	// cache off watches etcd too (ownInformer).
	ProfileInformer Profile = "informer"
	// ProfileAPIServerCache is kube-apiserver with its watch cache on
	// (k8s.io/apiserver/pkg/storage/cacher). A run of this profile makes
	// one watch cache per cached resource and serves the watchers
	// (client-go informers, as ProfileInformer) from the caches
	// in-process: etcd sees each cache's reflector (LIST in pages of
	// 10,000 at the latest revision, whatever resourceVersion it asks for,
	// since its listerWatcher drops it; one WATCH with prevKV that never
	// times out, watched again after watch errors other than compaction
	// for up to 30 s, relisted one second after it fails otherwise) and,
	// for each watcher, only what the cache cannot serve: a consistent
	// LIST's read of etcd's current revision, the progress requests while
	// it waits for the cache, and a LIST from etcd when the wait times out
	// (KEP-2340; cacher/cacher.go, delegator.go, lister_watcher.go,
	// watch_cache.go, progress/watch_progress.go). Events are not cached
	// (kube-apiserver gives them watch cache size 0,
	// k8s.io/kubernetes/pkg/kubeapiserver/default_storage_factory_builder.go),
	// so events watchers reach etcd as with ProfileInformer. A Reflector
	// of this profile is one watch cache's reflector.
	ProfileAPIServerCache Profile = "apiserver-cache"
)

// Profiles lists every profile.
var Profiles = []Profile{ProfileInformer, ProfileAPIServerCache}

// ParseProfile returns the profile named s.
func ParseProfile(s string) (Profile, error) {
	for _, p := range Profiles {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown profile %q (want %s or %s)", s, ProfileInformer, ProfileAPIServerCache)
}

// Page sizes of the profiles.
const (
	// DefaultPageSize is client-go's pager page size (tools/pager/pager.go
	// defaultPageSize), the LIST limit of an informer.
	DefaultPageSize = 500
	// CacherPageSize is the watch cache's LIST page size
	// (k8s.io/apiserver/pkg/storage/cacher/cacher.go
	// storageWatchListPageSize), also etcd's benchmark range --paginate.
	CacherPageSize = 10000
)

// defaultMinWatchTimeout is client-go's shortest watch: each watch asks
// for a timeout uniform in [5 min, 10 min) (tools/cache/reflector.go
// defaultMinWatchTimeout), after which the reflector watches again from
// its last revision without listing.
const defaultMinWatchTimeout = 5 * time.Minute

// SourceCache is the gRPC "source" metadata kube-apiserver gave its watch
// caches' watches and progress requests while SeparateCacheWatchRPC was on
// (1.28 to 1.32); the gate is off since 1.33 and locked off since 1.36
// (k8s.io/apiserver/pkg/features/kube_features.go), so the caches of
// ProfileAPIServerCache carry none: each resource's storage has an etcd
// client of its own instead (storagebackend/factory/etcd3.go
// newETCD3Storage), and a progress request reaches only that resource's
// watches.
const SourceCache = "cache"

// profileSpec is what distinguishes the profiles' list/watch behaviour.
type profileSpec struct {
	// pageSize is the pager's default page size.
	pageSize int64
	// forcePageSize is set when the reflector's WatchListPageSize is set,
	// so every list is paginated at pageSize, whatever its
	// resourceVersion.
	forcePageSize bool
	// listIgnoresRV: the cacher's listerWatcher does not pass the
	// resourceVersion to storage, so every list reads the latest revision.
	listIgnoresRV bool
	// source is the gRPC "source" metadata of its streams.
	source string
	// internalErrorRetry is the reflector's MaxInternalErrorRetryDuration:
	// for that long after the first, watch errors other than a
	// compaction (internal errors at the API) are retried by watching
	// again without a list (client-go tools/cache/
	// retry_with_deadline.go). 0 for informers; the cacher sets 30 s.
	internalErrorRetry time.Duration
	// delayer makes the pause between ListAndWatch iterations.
	delayer func(clk clock.Clock, rnd func() float64) Delayer
	// noWatchTimeout: the watch never ends on its own. The cacher's
	// listerWatcher drops the reflector's timeoutSeconds and watches with
	// context.Background() (cacher/lister_watcher.go Watch), so its etcd
	// watch lives until it fails; a client's watch through kube-apiserver
	// ends after 5 to 10 minutes (defaultMinWatchTimeout).
	noWatchTimeout bool
}

func (p Profile) spec() profileSpec {
	if p == ProfileAPIServerCache {
		return profileSpec{
			pageSize: CacherPageSize, forcePageSize: true, listIgnoresRV: true, noWatchTimeout: true,
			internalErrorRetry: 30 * time.Second,
			delayer:            func(clock.Clock, func() float64) Delayer { return fixedDelay(cacherRestartPeriod) },
		}
	}
	return profileSpec{
		pageSize: DefaultPageSize,
		delayer: func(clk clock.Clock, rnd func() float64) Delayer {
			return newReflectorBackoff(clk, rnd)
		},
	}
}

// Source returns the gRPC "source" metadata of the profile's watch
// streams: empty for both profiles since kube-apiserver 1.36 (see
// SourceCache).
func (p Profile) Source() string { return p.spec().source }

// DefaultPageSize returns the profile's LIST page size.
func (p Profile) DefaultPageSize() int64 { return p.spec().pageSize }

// cached reports whether kube-apiserver keeps a watch cache of resource,
// one of Resources: pods and configmaps yes, events no (watch cache size 0:
// k8s.io/kubernetes/pkg/kubeapiserver/default_storage_factory_builder.go
// NewStorageFactoryConfig, so every events LIST and WATCH reaches etcd).
func cached(resource string) bool { return resource != ResourceEvents }
