package clustermodel

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// The periods of a cluster's steady traffic, each from the upstream code
// that sets it.
const (
	// NodeLeaseRenewInterval is how often each node's Lease in
	// kube-node-lease is renewed: a quarter of its 40-s duration, jitter
	// 4 % (kubelet: pkg/kubelet/kubelet.go nodeLeaseRenewIntervalFraction
	// 0.25, component-helpers/apimachinery/lease/controller.go
	// JitterUntil(..., 0.04); KWOK the same, pkg/kwok/controllers/
	// node_lease_controller.go). One Txn each, from the holder's last
	// Lease: no read.
	NodeLeaseRenewInterval = 10 * time.Second
	nodeLeaseJitter        = 0.04
	// LeaderElectionRetryPeriod is how often the leaders of
	// kube-controller-manager and kube-scheduler renew their Lease in
	// kube-system (component-base/config/v1alpha1/defaults.go
	// RetryPeriod 2 s; client-go/tools/leaderelection/leaderelection.go
	// renews optimistically from the record it last wrote: one Txn).
	LeaderElectionRetryPeriod = 2 * time.Second
	// IdentityLeaseRenewInterval is how often kube-apiserver renews its
	// identity Lease in kube-system (pkg/controlplane/apiserver/server.go
	// IdentityLeaseRenewIntervalPeriod).
	IdentityLeaseRenewInterval = 10 * time.Second
	// PeerLeaseRenewInterval is how often kube-apiserver renews its peer
	// endpoint lease under <prefix>/peerserverleases/: a read, a lease
	// grant of 15 s (too short for the lease manager's reuse) and a Txn
	// (k8s.io/apiserver/pkg/reconcilers/peer_endpoint_lease.go,
	// pkg/controlplane/apiserver/peer.go DefaultPeerEndpointReconcilerTTL).
	PeerLeaseRenewInterval = 10 * time.Second
	peerLeaseTTL           = 15
	// KWOKNodeStatusPeriod and its jitter are KWOK's node heartbeat with
	// node Leases (kustomize/stage/node/heartbeat-with-lease: delay
	// 600,000 ms, jitter 610,000 ms; a jitter is the delay's upper bound,
	// the delay plus a uniform draw below jitter-delay:
	// sigs.k8s.io/kwok pkg/utils/lifecycle/lifecycle.go Delay): a KWOK
	// node's status is written every 600 to 610 s. A kubelet's is every 5 minutes, jitter
	// ±50 % (pkg/kubelet/apis/config/v1beta1/defaults.go
	// NodeStatusReportFrequency; kubelet_node_status.go).
	KWOKNodeStatusPeriod = 600 * time.Second
	kwokNodeStatusJitter = 610 * time.Second
	// CountPollPeriod is kube-apiserver's poll of each resource's object
	// count, waiting 1 to 2.2 periods (k8s.io/apiserver/pkg/registry/
	// generic/registry/store.go startObservingCount,
	// resourceCountPollPeriodJitter 1.2); with the watch cache it reads
	// etcd's current revision: a Range of the resource's prefix as a key,
	// limit 1 (cacher.go getKeys, etcd3/store.go GetCurrentResourceVersion).
	CountPollPeriod = time.Minute
	countPollJitter = 1.2
	// ConsistencyCheckPeriod is the watch cache's consistency checker:
	// every 5 to 7.5 minutes a LIST of each cached resource at the
	// cache's revision, in pages of 10,000 (k8s.io/apiserver/pkg/storage/
	// cacher/consistency/checker.go).
	ConsistencyCheckPeriod  = 5 * time.Minute
	consistencyCheckJitter  = 0.5
	consistencyCheckPerPage = 10000
)

// resource is one resource kube-apiserver serves from etcd.
type resource struct {
	group, name string
	cached      bool
}

// servedResources are the resources kube-apiserver 1.37.2 serves from
// etcd by default (k8s.io/kubernetes test/integration/etcd/data.go, its
// GA and on-by-default beta resources), whose counts it polls; all but
// events are watch-cached (pkg/kubeapiserver/
// default_storage_factory_builder.go DefaultWatchCacheSizes: events 0).
var servedResources = []resource{
	{"rbac.authorization.k8s.io", "clusterrolebindings", true}, {"rbac.authorization.k8s.io", "clusterroles", true},
	{"certificates.k8s.io", "clustertrustbundles", true}, {"", "configmaps", true}, {"batch", "cronjobs", true},
	{"storage.k8s.io", "csidrivers", true}, {"storage.k8s.io", "csistoragecapacities", true}, {"apps", "daemonsets", true},
	{"apps", "deployments", true}, {"resource.k8s.io", "deviceclasses", true}, {"resource.k8s.io", "devicetaintrules", true},
	{"", "endpoints", true}, {"discovery.k8s.io", "endpointslices", true}, {"", "events", false},
	{"autoscaling", "horizontalpodautoscalers", true}, {"networking.k8s.io", "ingressclasses", true},
	{"coordination.k8s.io", "leases", true}, {"", "limitranges", true},
	{"admissionregistration.k8s.io", "mutatingadmissionpolicies", true}, {"admissionregistration.k8s.io", "mutatingadmissionpolicybindings", true},
	{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", true}, {"", "namespaces", true},
	{"networking.k8s.io", "networkpolicies", true}, {"", "nodes", true}, {"", "persistentvolumeclaims", true},
	{"", "persistentvolumes", true}, {"certificates.k8s.io", "podcertificaterequests", true}, {"", "pods", true},
	{"", "podtemplates", true}, {"scheduling.k8s.io", "priorityclasses", true}, {"apps", "replicasets", true},
	{"", "replicationcontrollers", true}, {"", "resourcequotas", true}, {"resource.k8s.io", "resourceslices", true},
	{"rbac.authorization.k8s.io", "rolebindings", true}, {"rbac.authorization.k8s.io", "roles", true},
	{"node.k8s.io", "runtimeclasses", true}, {"", "secrets", true}, {"", "serviceaccounts", true},
	{"networking.k8s.io", "servicecidrs", true}, {"", "services", true}, {"apps", "statefulsets", true},
	{"storagemigration.k8s.io", "storageversionmigrations", true},
	{"admissionregistration.k8s.io", "validatingadmissionpolicies", true},
	{"admissionregistration.k8s.io", "validatingadmissionpolicybindings", true},
	{"admissionregistration.k8s.io", "validatingwebhookconfigurations", true},
	{"storage.k8s.io", "volumeattributesclasses", true}, {"apps", "controllerrevisions", true},
	{"batch", "jobs", true}, {"networking.k8s.io", "ingresses", true}, {"policy", "poddisruptionbudgets", true},
	{"certificates.k8s.io", "certificatesigningrequests", true}, {"flowcontrol.apiserver.k8s.io", "flowschemas", true},
	{"flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations", true}, {"apiregistration.k8s.io", "apiservices", true},
	{"apiextensions.k8s.io", "customresourcedefinitions", true}, {"storage.k8s.io", "csinodes", true},
	{"storage.k8s.io", "storageclasses", true}, {"storage.k8s.io", "volumeattachments", true},
	{"resource.k8s.io", "resourceclaims", true}, {"resource.k8s.io", "resourceclaimtemplates", true},
	{"networking.k8s.io", "ipaddresses", true}, {"coordination.k8s.io", "leasecandidates", true},
}

// prefixKey is the resource's prefix as kube-apiserver reads it for its
// current revision: "<prefix>/<resource path>", no trailing slash.
func (r resource) prefixKey(prefix string) string {
	return strings.TrimSuffix(prefix, "/") + "/" + keyspace.ResourcePath(r.group, r.name)
}

// periodic is a cluster's traffic that runs on timers whatever the load
// does: node and control-plane Leases, kube-apiserver's count polls and
// consistency checks, and the cacher's watches whose events it receives.
type periodic struct {
	st     *store
	prefix string
	// nodeFrom and nodeTo are the block of nodes whose Leases and
	// heartbeats it sends (Part).
	nodeFrom, nodeTo int
	rng              func() float64
	logf             func(string, ...any)

	// What it sent (counts): each node's Lease renewals by node from
	// nodeFrom, the shortest and longest interval between two of one
	// node's, when the node Leases' timers started.
	nodeRenewals                       []atomic.Int64
	intervalMu                         sync.Mutex
	intervalMin, intervalMax           time.Duration
	nodeLeasesStarted                  time.Time
	nodeStatus, cpRenewals, peerWrites atomic.Int64

	wg       sync.WaitGroup
	watching atomic.Int64 // cacher watch events received
	// cacheRevs is the revision each cached resource's cache has reached,
	// by prefix (startWatches); read-only once made.
	cacheRevs map[string]*atomic.Int64
	failures  atomic.Int64
	lastErr   atomic.Value
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool { return clockwait.SleepReal(ctx, d) }

// jittered is d plus up to jitter times d (k8s.io/apimachinery wait.Jitter).
func jittered(d time.Duration, jitter float64, rnd func() float64) time.Duration {
	return d + time.Duration(jitter*rnd()*float64(d))
}

// every runs f every jittered period until ctx ends, the first time after
// first.
func (p *periodic) every(ctx context.Context, first time.Duration, period func() time.Duration, f func(ctx context.Context) error) {
	p.wg.Go(func() {
		if !sleep(ctx, first) {
			return
		}
		for {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				p.failures.Add(1)
				p.lastErr.Store(err.Error())
			}
			if !sleep(ctx, period()) {
				return
			}
		}
	})
}

// leaseObject is a Lease held by holder, renewed now.
func leaseObject(ns, name, holder string, durationSeconds int32) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(durationSeconds),
			AcquireTime: &now, RenewTime: &now}}
}

func leaseKey(prefix, ns, name string) string {
	return keyspace.Build(keyspace.Key{Prefix: prefix, Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: name})
}

// nodeLeaseKey is node i's Lease.
func nodeLeaseKey(prefix string, i int) string {
	return leaseKey(prefix, corev1.NamespaceNodeLease, controlplane.NodeName(i))
}

// controlPlaneLease is a Lease in kube-system that the control plane
// renews: a leader election's or kube-apiserver's identity.
type controlPlaneLease struct {
	name, holder string
	seconds      int32
	period       time.Duration
}

// controlPlaneLeases are the Leases in kube-system the control plane in
// front of the kube-apiserver apiserverID renews: kube-controller-manager's
// and kube-scheduler's leader elections and the apiserver's identity.
func controlPlaneLeases(apiserverID string) []controlPlaneLease {
	return []controlPlaneLease{
		{"kube-controller-manager", "kube-controller-manager_" + apiserverID, 15, LeaderElectionRetryPeriod},
		{"kube-scheduler", "kube-scheduler_" + apiserverID, 15, LeaderElectionRetryPeriod},
		{"apiserver-" + apiserverID, "apiserver-" + apiserverID, 3600, IdentityLeaseRenewInterval},
	}
}

// startLeases starts the renewals of the control plane's Leases, which it
// creates first, and of kube-apiserver's peer endpoint lease.
func (p *periodic) startLeases(ctx context.Context, apiserverID string) error {
	renew := func(ns, name, holder string, seconds int32) func(ctx context.Context) error {
		key := leaseKey(p.prefix, ns, name)
		return func(ctx context.Context) error {
			_, err := p.st.update(ctx, key, leaseObject(ns, name, holder, seconds), false, false)
			if err == nil {
				p.cpRenewals.Add(1)
			}
			return err
		}
	}
	for _, l := range controlPlaneLeases(apiserverID) {
		key := leaseKey(p.prefix, metav1.NamespaceSystem, l.name)
		if _, err := p.st.create(ctx, key, leaseObject(metav1.NamespaceSystem, l.name, l.holder, l.seconds), false); err != nil {
			return err
		}
		period := l.period
		p.every(ctx, time.Duration(p.rng()*float64(period)), func() time.Duration { return period }, renew(metav1.NamespaceSystem, l.name, l.holder, l.seconds))
	}
	peerKey := strings.TrimSuffix(p.prefix, "/") + "/peerserverleases/" + apiserverID
	peer := func(ctx context.Context) error {
		if _, err := p.st.kv.Get(ctx, peerKey, clientv3.WithLimit(1)); err != nil {
			return err
		}
		lease, err := p.st.grant(ctx, peerLeaseTTL)
		if err != nil {
			return err
		}
		cur := p.st.rev(peerKey)
		if cur == 0 {
			p.st.creating(peerKey)
		}
		resp, err := p.st.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(peerKey), "=", cur)).
			Then(clientv3.OpPut(peerKey, "127.0.0.1:6443", clientv3.WithLease(lease.ID))).Else(clientv3.OpGet(peerKey)).Commit()
		if err == nil && resp.Succeeded {
			p.st.setRev(peerKey, resp.Header.Revision)
			p.peerWrites.Add(1)
		}
		return err
	}
	p.every(ctx, 0, func() time.Duration { return PeerLeaseRenewInterval }, peer)
	return nil
}

// startNodeLeases starts the renewals of the block's node Leases, which
// must exist (Seed creates them with the nodes), and counts them.
func (p *periodic) startNodeLeases(ctx context.Context) {
	p.nodeLeasesStarted = time.Now()
	p.nodeRenewals = make([]atomic.Int64, p.nodeTo-p.nodeFrom)
	for i := p.nodeFrom; i < p.nodeTo; i++ {
		name := controlplane.NodeName(i)
		key := nodeLeaseKey(p.prefix, i)
		var last time.Time // touched only by this node's timer
		p.every(ctx, time.Duration(p.rng()*float64(NodeLeaseRenewInterval)),
			func() time.Duration { return jittered(NodeLeaseRenewInterval, nodeLeaseJitter, p.rng) },
			func(ctx context.Context) error {
				if _, err := p.st.update(ctx, key, leaseObject(corev1.NamespaceNodeLease, name, name, 40), false, false); err != nil {
					return err
				}
				now := time.Now()
				p.nodeRenewals[i-p.nodeFrom].Add(1)
				if !last.IsZero() {
					p.interval(now.Sub(last))
				}
				last = now
				return nil
			})
	}
}

// interval records d between two renewals of one node's Lease.
func (p *periodic) interval(d time.Duration) {
	p.intervalMu.Lock()
	defer p.intervalMu.Unlock()
	if p.intervalMin == 0 || d < p.intervalMin {
		p.intervalMin = d
	}
	p.intervalMax = max(p.intervalMax, d)
}

// nodeStatusDelay is KWOK's delay before a node's next status write for a
// uniform draw u in [0, 1): KWOKNodeStatusPeriod plus u times the jitter's
// excess over it.
func nodeStatusDelay(u float64) time.Duration {
	return KWOKNodeStatusPeriod + time.Duration(u*float64(kwokNodeStatusJitter-KWOKNodeStatusPeriod))
}

// startNodeStatus starts each node's status writes, KWOK's heartbeat
// (KWOKNodeStatusPeriod), the node object of nodeSize bytes.
func (p *periodic) startNodeStatus(ctx context.Context, nodeSize int) {
	period := func() time.Duration { return nodeStatusDelay(p.rng()) }
	for i := p.nodeFrom; i < p.nodeTo; i++ {
		key := nodeKey(p.prefix, i)
		p.every(ctx, period(), period, func(ctx context.Context) error {
			n := clusterload.Node(i, nodeSize)
			now := metav1.Now()
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now}}
			_, err := p.st.update(ctx, key, n, false, false)
			if err == nil {
				p.nodeStatus.Add(1)
			}
			return err
		})
	}
}

// startReads starts kube-apiserver's reads of every served resource: the
// count poll and, for a cached resource, the size estimator's refresh of
// its keys, each a read of etcd's current revision followed by a wait
// until the watch cache has caught up, which asks etcd for a progress
// notification (keysReader); and the consistency checks of the cached
// ones.
func (p *periodic) startReads(ctx context.Context, env *watchload.Env) {
	for _, r := range servedResources {
		kr := &keysReader{p: p, key: r.prefixKey(p.prefix), cached: r.cached}
		p.every(ctx, jittered(CountPollPeriod, countPollJitter, p.rng),
			func() time.Duration { return jittered(CountPollPeriod, countPollJitter, p.rng) }, kr.poll)
		if !r.cached {
			continue
		}
		p.every(ctx, jittered(SizeEstimatorRefresh, sizeEstimatorJitter, p.rng),
			func() time.Duration { return jittered(SizeEstimatorRefresh, sizeEstimatorJitter, p.rng) }, kr.refresh)
		p.every(ctx, jittered(ConsistencyCheckPeriod, consistencyCheckJitter, p.rng),
			func() time.Duration { return jittered(ConsistencyCheckPeriod, consistencyCheckJitter, p.rng) },
			func(ctx context.Context) error { return p.check(ctx, env, kr.key+"/") })
	}
}

// SizeEstimatorRefresh is how often the size estimator of a cached
// resource (SizeBasedListCostEstimate, on by default since 1.34) reads
// the cache's keys on its own, when neither it nor a count poll has for
// that long: every 1 to 1.5 minutes (k8s.io/apiserver/pkg/storage/etcd3/
// stats.go sizerRefreshInterval, jitter 0.5, cleanKeysIfNeeded).
const (
	SizeEstimatorRefresh = time.Minute
	sizeEstimatorJitter  = 0.5
)

// keysReader is one resource's count poll and size estimator.
type keysReader struct {
	p      *periodic
	key    string
	cached bool

	mu   sync.Mutex
	last time.Time // the last read of the keys
}

// poll is the count poll: with the watch cache, the size estimator's
// Stats (etcd3/stats.go resourceSizeEstimator.Stats: the cacher's
// getKeys); without, a count of the prefix (etcd3/store.go Stats).
func (k *keysReader) poll(ctx context.Context) error {
	if !k.cached {
		_, err := k.p.st.kv.Get(ctx, k.key+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err
	}
	return k.readKeys(ctx)
}

// refresh is the size estimator's cleanKeysIfNeeded: the keys again
// unless read within SizeEstimatorRefresh.
func (k *keysReader) refresh(ctx context.Context) error {
	k.mu.Lock()
	recent := time.Since(k.last) < SizeEstimatorRefresh
	k.mu.Unlock()
	if recent {
		return nil
	}
	return k.readKeys(ctx)
}

// readKeys is the cacher's getKeys (cacher.go): etcd's current revision
// (etcd3/store.go GetCurrentResourceVersion: a Range of the prefix as a
// key, limit 1), then a wait until the watch cache has seen it, for which
// the cache's progress requester asks etcd for a progress notification
// (cacher/progress/watch_progress.go; an idle resource's cache is behind
// etcd's revision, which other resources' writes move on).
func (k *keysReader) readKeys(ctx context.Context) error {
	k.mu.Lock()
	k.last = time.Now()
	k.mu.Unlock()
	if _, err := k.p.st.kv.Get(ctx, k.key, clientv3.WithLimit(1)); err != nil {
		return err
	}
	return k.p.st.kv.RequestProgress(ctx)
}

// check is the watch cache consistency checker's read of etcd: every key
// under prefix at the revision the cache has reached, in pages of
// consistencyCheckPerPage (checker.go calculateStoreDigest lists the
// cache, then etcd at the cache's resourceVersion, match Exact), each page
// one RangeStream pinned to that revision while env's EtcdRangeStream gate
// is on (1.37) and etcd serves it, else one Range (etcd3/store.go GetList,
// shouldStream). Before the cache's watch has answered, the revision is
// etcd's latest.
func (p *periodic) check(ctx context.Context, env *watchload.Env, prefix string) error {
	var rev int64
	if r := p.cacheRevs[prefix]; r != nil {
		rev = r.Load()
	}
	if _, _, err := env.ListExact(ctx, p.st.kv, prefix, rev, consistencyCheckPerPage); err != nil {
		return fmt.Errorf("consistency check of %s: %w", prefix, err)
	}
	return nil
}

// startWatches opens the cacher's one watch per cached resource from
// revision from (with prev_kv and progress notifications, as
// k8s.io/apiserver/pkg/storage/etcd3/watcher.go asks), and one of
// compact_rev_key (etcd3/compact.go; compactRevKey, as stored:
// watchload.CompactRevKeyName), on c's one watch stream (ctx
// carries no metadata, as the progress requests' contexts, so that they
// reach that stream), and drains them until ctx ends. The revision each
// cached resource's cache has reached, its last event's mod_revision or
// its last progress notification's revision (cacher/watch_cache.go), goes
// to p.cacheRevs. Call it once, before startReads.
func (p *periodic) startWatches(ctx context.Context, c *clientv3.Client, from int64, compactRevKey string) {
	watch := func(key string, rev *atomic.Int64, opts ...clientv3.OpOption) {
		wch := c.Watch(ctx, key, append(opts, clientv3.WithRev(from))...)
		p.wg.Go(func() {
			for resp := range wch {
				p.watching.Add(int64(len(resp.Events)))
				switch {
				case rev == nil:
				case len(resp.Events) > 0:
					rev.Store(resp.Events[len(resp.Events)-1].Kv.ModRevision)
				case resp.IsProgressNotify():
					rev.Store(resp.Header.Revision)
				}
			}
		})
	}
	p.cacheRevs = map[string]*atomic.Int64{}
	for _, r := range servedResources {
		if r.cached {
			prefix := r.prefixKey(p.prefix) + "/"
			p.cacheRevs[prefix] = new(atomic.Int64)
			watch(prefix, p.cacheRevs[prefix], clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
		}
	}
	watch(compactRevKey, nil)
}

// wait waits until every timer and watch has ended (ctx ended).
func (p *periodic) wait() { p.wg.Wait() }

// newPeriodic returns the periodic traffic of the nodes [from, to) on st.
func newPeriodic(st *store, prefix string, from, to int, seed uint64, logf func(string, ...any)) *periodic {
	rng := rand.New(rand.NewPCG(seed, seed^0x7065726f646963))
	var mu sync.Mutex
	return &periodic{st: st, prefix: prefix, nodeFrom: from, nodeTo: to, logf: logf, rng: func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}}
}
