package kubeload

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// Setting is one real-stack configuration a conformance case runs.
type Setting struct {
	// WatchCache is kube-apiserver's --watch-cache.
	WatchCache bool
	// WatchList is client-go's WatchListClient in the informers (nil:
	// client-go's default).
	WatchList *bool
}

// Name names the setting, e.g. "watch cache off, WatchList on".
func (s Setting) Name() string {
	return "watch cache " + s.watchCache() + ", WatchList " + s.ClientWatchList()
}

// Key is the setting's short name, e.g. "cache-off/watchlist-on" (WatchList
// "default" when nil).
func (s Setting) Key() string {
	return "cache-" + s.watchCache() + "/watchlist-" + s.ClientWatchList()
}

// ClientWatchList is the informers' WatchListClient: "on", "off", or
// "default" when WatchList is nil.
func (s Setting) ClientWatchList() string {
	switch {
	case s.WatchList == nil:
		return "default"
	case *s.WatchList:
		return "on"
	}
	return "off"
}

// watchCache is "on" or "off".
func (s Setting) watchCache() string {
	if s.WatchCache {
		return "on"
	}
	return "off"
}

// SelectSettings returns the Settings whose Key is in keys, in Settings'
// order; no keys selects all four. It fails on a key that names none.
func SelectSettings(keys []string) ([]Setting, error) {
	all := Settings()
	if len(keys) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	var out []Setting
	for _, s := range all {
		if want[s.Key()] {
			out = append(out, s)
			delete(want, s.Key())
		}
	}
	for k := range want {
		names := make([]string, len(all))
		for i, s := range all {
			names[i] = s.Key()
		}
		return nil, fmt.Errorf("unknown setting %q (want %s)", k, strings.Join(names, ", "))
	}
	return out, nil
}

// Settings are the four settings `lwbench conformance` compares: watch
// cache on and off, each with WatchListClient on and off.
func Settings() []Setting {
	on, off := true, false
	return []Setting{
		{WatchCache: false, WatchList: &on}, {WatchCache: false, WatchList: &off},
		{WatchCache: true, WatchList: &on}, {WatchCache: true, WatchList: &off},
	}
}

// excludedPhases are not compared: "before" is what the counter saw
// before the load (the apiservers starting), "seed" the objects' creation,
// which the model writes without the API's namespace and admission reads;
// "seed after compaction 1" is seeding too (BasePhase); and "stop" is the
// watchers' end once the final revision is confirmed: the watch cancels
// kube-apiserver sends when the harness stops its informers arrive after
// the counts are read or before, as it happens.
var excludedPhases = map[string]bool{"before": true, "start": true, "seed": true, "stop": true}

// Compare lays the model's and the real stack's etcd requests side by side
// by method and kind, summed over every phase but the excluded ones, sorted
// by method then kind. A row counts requests, or responses for the rows
// without requests (watch responses), and the bytes both ways of both,
// with the ratio of each; it is within 10 % when the counts are,
// |model-real| <= real/10, and its note says what is known of a
// difference.
func Compare(model, real []report.EtcdRequests) []report.ConformanceRow {
	return compare(model, real, false)
}

// CompareByResource is Compare with the rows split by resource too
// (report.ConformanceRow.Resource), sorted by resource, method and kind:
// a cluster's comparison (lwbench conformance --nodes), whose rows are
// explained by clusterNote.
func CompareByResource(model, real []report.EtcdRequests) []report.ConformanceRow {
	return compare(model, real, true)
}

func compare(model, real []report.EtcdRequests, byResource bool) []report.ConformanceRow {
	type key struct{ resource, method, kind string }
	rows := map[key]*report.ConformanceRow{}
	add := func(rs []report.EtcdRequests, isModel bool) {
		for _, r := range rs {
			if excludedPhases[BasePhase(r.Phase)] || byResource && BasePhase(r.Phase) == watchload.PhaseDrain {
				continue
			}
			k := key{"", r.Method, r.Kind}
			if byResource {
				k.resource = r.Resource
			}
			row := rows[k]
			if row == nil {
				row = &report.ConformanceRow{Resource: k.resource, Method: r.Method, Kind: r.Kind}
				rows[k] = row
			}
			n := r.Requests
			if n == 0 {
				n = r.Responses
			}
			if isModel {
				row.Model += n
				row.ModelBytes += r.RequestBytes + r.ResponseBytes
				row.ModelFailedCompares += r.FailedCompares
			} else {
				row.Real += n
				row.RealBytes += r.RequestBytes + r.ResponseBytes
				row.RealFailedCompares += r.FailedCompares
			}
		}
	}
	add(model, true)
	add(real, false)
	// A cluster's pods created in the window, both sides: the real control
	// plane may fall behind the churn the model keeps up with.
	var pods podsCreated
	if row := rows[key{"pods", "Txn", "if mod_revision=0 then put"}]; byResource && row != nil {
		pods = podsCreated{model: row.Model, real: row.Real}
	}
	// The watch cache's consistency checks, every cached resource's.
	var checks checksSeen
	for k, row := range rows {
		if byResource && k.method == "RangeStream" && k.kind == consistencyCheckKind {
			checks.model += row.Model
			checks.real += row.Real
		}
	}
	// Each resource's writes, both sides: the load's Txns and those whose
	// compare failed, which made no watch event.
	writes := map[string]*resourceWrites{}
	for k, row := range rows {
		if byResource && PlanWrite(k.method, k.kind) {
			w := writes[k.resource]
			if w == nil {
				w = &resourceWrites{}
				writes[k.resource] = w
			}
			w.model += row.Model
			w.real += row.Real
			w.modelFailed += row.ModelFailedCompares
			w.realFailed += row.RealFailedCompares
		}
	}
	out := make([]report.ConformanceRow, 0, len(rows))
	for _, r := range rows {
		if r.Real > 0 {
			r.Ratio = float64(r.Model) / float64(r.Real)
		}
		if r.RealBytes > 0 {
			r.BytesRatio = float64(r.ModelBytes) / float64(r.RealBytes)
		}
		d := r.Model - r.Real
		if d < 0 {
			d = -d
		}
		r.Within10 = d*10 <= r.Real
		if !r.Within10 {
			if byResource {
				r.Note = clusterNote(r, pods, checks, writes[r.Resource])
			} else {
				r.Note = note(r)
			}
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Resource != out[j].Resource {
			return out[i].Resource < out[j].Resource
		}
		if out[i].Method != out[j].Method {
			return out[i].Method < out[j].Method
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// Judged reports whether the rows of method judge the model: the reads
// (Range, RangeStream) and the watches (Watch), what the model is for. The
// writes agree by construction (PlanWrite); the rest (leases, the
// compactor's Txn and Compact, Status) are kube-apiserver's housekeeping,
// each row explained by its note.
func Judged(method string) bool {
	return method == "Range" || method == "RangeStream" || method == "Watch"
}

// PlanWrite reports whether the rows of method and kind are the load's
// writes: every Txn but the compactor's compare-and-swap of
// compact_rev_key ("if version=...", k8s.io/apiserver/pkg/storage/etcd3/compact.go).
// Both sides perform one write plan (watchload.KubernetesWorkload: the
// same creates, updates and deletes of the same objects, in the same
// order), so these rows agree by construction and differ only by retries
// (a conflict, a delete that failed on a stale cached object).
func PlanWrite(method, kind string) bool {
	return method == "Txn" && !strings.HasPrefix(kind, "if version=")
}

// peerLeaseGrant is the kind of kube-apiserver's peer endpoint lease
// grants (internal/etcdproxy: the TTL asked for): 15 s
// (k8s.io/kubernetes/pkg/controlplane/apiserver/peer.go
// DefaultPeerEndpointReconcilerTTL) and no reuse duration.
const peerLeaseGrant = "grant ttl=15s"

// note says what is known of a row outside 10 %: the differences of the
// model listed in issue 11, where the row's shape shows one.
func note(r *report.ConformanceRow) string {
	switch {
	case r.Method == "LeaseGrant" && r.Kind == peerLeaseGrant && r.Model == 0:
		return "kube-apiserver's own: its peer endpoint lease (/registry/peerserverleases/), renewed every 10 s with a TTL of 15 s, a new lease each time (5 % of 15 s is no reuse), since 1.36 (UnknownVersionInteroperabilityProxy, beta): k8s.io/apiserver/pkg/reconcilers/peer_endpoint_lease.go, pkg/storage/etcd3/lease_manager.go"
	case r.Method == "Txn" && strings.HasPrefix(r.Kind, "if mod_revision=0 then put else ") && r.Real == 0:
		return "model: a txn shape kube-apiserver does not send (its create has no Else branch: k8s.io/apiserver/pkg/storage/etcd3/store.go Create)"
	case r.Method == "Txn" && r.Kind == "if mod_revision=? then delete else range" && r.Model < r.Real:
		return "model: with the watch cache on, a delete starts from the cached object (k8s.io/apiserver/pkg/storage/cacher/delegator.go Delete), " +
			"which is stale right after the grace-0 update and fails once (etcd3/store.go conditionalDelete); the model's cache catches up sooner than kube-apiserver's cacher, so fewer of its deletes fail"
	case r.Method == "Watch" && (r.Kind == "progress" || strings.HasPrefix(r.Kind, "progress notify")) && r.Model < r.Real:
		return "real: also LimitRanger admission's live LISTs (see the prefix rows), which with the watch cache on are consistent reads served from the cache: " +
			"each reads etcd's current revision (a Range of one key: storage/etcd3/store.go GetCurrentResourceVersion) and waits until the limitranges cache has caught up with it, asking etcd for progress every 100 ms while one waits " +
			"(k8s.io/apiserver/pkg/storage/cacher/watch_cache.go waitUntilFreshLocked, cacher/progress/watch_progress.go ConditionalProgressRequester); " +
			"the cache of limitranges receives no event, so only a progress notification moves it (measured on 1.37.2 with the count polls off: " +
			"none with --apiserver-arg=--disable-admission-plugins=LimitRanger or --apiserver-arg=--watch-cache-sizes=limitranges#0). " +
			"kube-apiserver's count polls of its cached resources wait so too (k8s.io/apiserver/pkg/registry/generic/registry/store.go startObservingCount), " +
			"but poll at its start and then every 60 to 132 s: only a run lasting longer sees them, with a Range prefix count_only row"
	case r.Method == "Compact" || (r.Method == "Txn" && strings.HasPrefix(r.Kind, "if version=")):
		return "timing: the compactor ticks every --etcd-compaction-interval (here a third of --duration) from its start, kube-apiserver's from kube-apiserver's, the model's from the load's, the first tick only noting a revision (k8s.io/apiserver/pkg/storage/etcd3/compact.go runCompactLoop): the counts follow each run's wall-clock length and kube-apiserver's start-up time"
	case r.Method == "Range" && r.Kind == "prefix count_only" && r.Model == 0:
		return "kube-apiserver's own: it counts every resource's objects every --etcd-count-metric-poll-period (1 min) from its start (k8s.io/apiserver/pkg/registry/generic/registry/store.go startObservingCount, pkg/storage/etcd3/store.go Stats); a run shorter than that from kube-apiserver's start sends none"
	case r.Method == "Watch" && r.Kind == "progress" && r.Real == 0:
		return "model: its informers ask etcd for progress notifications; upstream only the watch cache does (k8s.io/apiserver/pkg/storage/cacher)"
	case r.Method == "Watch" && strings.HasPrefix(r.Kind, "progress notify") && r.Real == 0:
		return "model: answers to its progress requests"
	case (r.Method == "RangeStream" || r.Method == "Range") && r.Kind == "prefix" && r.Real > r.Model:
		return "real: also LimitRanger admission's live LIST of each namespace's limitranges (0 keys: its informer holds none, so it asks etcd), " +
			"on a pod CREATE, once per namespace per 30 s (k8s.io/kubernetes/plugin/pkg/admission/limitranger/admission.go GetLimitRanges, liveTTL); " +
			"with the watch cache on these LISTs are served from the cache (see the progress rows). Not ResourceQuota admission: its live lookup " +
			"runs only until its informer has synced (k8s.io/apiserver/pkg/admission/plugin/resourcequota/resource_access.go GetQuotas, hasSynced, since kubernetes PR 130113). " +
			"Measured: gone with --apiserver-arg=--disable-admission-plugins=LimitRanger"
	case r.Method == "Watch" && r.Kind == "stream":
		return "gRPC watch streams: kube-apiserver gives each resource's storage an etcd client of its own (k8s.io/apiserver/pkg/storage/storagebackend/factory/etcd3.go newETCD3Storage), " +
			"and a client puts every watch with the same gRPC metadata on one stream (go.etcd.io/etcd/client/v3 watch.go streamKeyFromCtx; kube-apiserver's carry only require-leader, storage/etcd3/store.go watchContext): " +
			"the pods' and configmaps' streams open at its start (their watch caches, or with the cache off its own informers: PodSecurity's pods, kube-system's configmaps, " +
			"k8s.io/kubernetes/pkg/controlplane/controller/clusterauthenticationtrust), the events' with the informers' first events WATCH (phase sync: events have no watch cache and kube-apiserver watches none; " +
			"measured: with --watch-resources pods,configmaps, 1.37.2 opens none then); " +
			"the model lays its watchers' streams over --conns and --streams whatever the resource, so with the watch cache on its caches open the one stream before the load and its events informers share it"
	case r.Method == "Watch" && (r.Kind == "cancel" || r.Kind == "canceled") && max(r.Model, r.Real) <= 5:
		return "watch cancels: the harness breaking the held informer's watch off, its compacted watch, and client-go ending a watch it no longer needs; one or two more or fewer follow when client-go's next request comes relative to the hold's release (not established further)"
	case r.Method == "Status" && r.Model == 0:
		return "kube-apiserver 1.35 and 1.36's own: its etcd db size monitor (etcd_db_total_size_in_bytes) calls Maintenance Status on each endpoint at its start and then " +
			"every --etcd-db-metric-poll-interval (30 s) plus up to half again, 30 to 45 s apart (k8s.io/apiserver/pkg/storage/storagebackend/factory/etcd3.go startDBSizeMonitorPerEndpoint; measured: 44, 43, 33 s on 1.36.3, 34, 30, 40, 40 s on 1.35.4); " +
			"a run whose writes end 35 to 40 s after kube-apiserver's start sees the second call only when its interval is short (8 cases of 20 on 1.35.4 and 1.36.3), at the end of the writes; " +
			"1.37 removed the monitor and calls Status only when /metrics is scraped (etcd3ProberMonitor.Monitor), which conformance does not (measured: 1.37.2 called it once at its start, then not in 150 s)"
	case r.Model == 0:
		return "not modelled: only kube-apiserver sends it"
	case r.Real == 0:
		return "only the model sends it"
	}
	return ""
}

// consistencyCheckKind is the counting proxy's kind of the watch cache
// consistency checker's read of etcd through kube-apiserver 1.37: a
// RangeStream of the resource's prefix with the page limit, pinned to the
// cache's revision (k8s.io/apiserver/pkg/storage/cacher/consistency/
// checker.go calculateStoreDigest, etcd3/store.go streamChunks).
const consistencyCheckKind = "prefix limit rev"

// checksSeen are the consistency checks (consistencyCheckKind) of every
// cached resource in the compared phases, both sides.
type checksSeen struct{ model, real int64 }

// resourceWrites are one resource's write Txns (PlanWrite) in the
// compared phases, both sides, and how many of them failed their compare.
type resourceWrites struct{ model, real, modelFailed, realFailed int64 }

// text says how many of each side's Txns wrote, when a compare failed on
// either side; "" when none did (or failures were not counted: results
// written before the proxy counted them).
func (w *resourceWrites) text() string {
	if w == nil || w.modelFailed == 0 && w.realFailed == 0 {
		return ""
	}
	return fmt.Sprintf("Txns that wrote (each one watch event): model %d of %d, real %d of %d; "+
		"the others failed their compare, a write from a stale object that kube-apiserver retries from the Else branch's read "+
		"(k8s.io/apiserver/pkg/storage/etcd3/store.go GuaranteedUpdate, conditionalDelete)",
		w.model-w.modelFailed, w.model, w.real-w.realFailed, w.real)
}

// podsCreated are a cluster's pods created in the compared phases, by
// the model and by the real control plane.
type podsCreated struct{ model, real int64 }

// text says how many pods each side created in the window: the real
// control plane fell behind the churn when it created fewer than the
// model (which answers every op of the churn's plan at once) by more than
// 2 % and at least 2 pods; a smaller difference, either way, is where the
// window's edges cut the churn's ops.
func (p podsCreated) text() string {
	if d := p.model - p.real; d >= 2 && d*50 > p.model {
		return fmt.Sprintf("the real control plane fell behind the churn: it created %d pods in the window, the model %d (every op of the churn's plan, answered at once)",
			p.real, p.model)
	}
	return fmt.Sprintf("the real control plane created %d pods in the window, the model %d: the window's edges cut the churn's ops apart", p.real, p.model)
}

// perPod returns a row's counts per pod created, both sides, and whether
// they are within 10 % of each other; ok is false without pods.
func (p podsCreated) perPod(r *report.ConformanceRow) (model, real float64, within, ok bool) {
	if p.model == 0 || p.real == 0 {
		return 0, 0, false, false
	}
	model, real = float64(r.Model)/float64(p.model), float64(r.Real)/float64(p.real)
	return model, real, math.Abs(model-real) <= real/10, true
}

// podResources are the resources whose writes follow the pods' changes.
var podResources = map[string]bool{"pods": true, "replicasets.apps": true, "deployments.apps": true, "endpoints": true,
	"endpointslices.discovery.k8s.io": true, "events": true}

// clusterNote says what is known of a cluster's row outside 10 %
// (CompareByResource): the differences between the model of a cluster
// (pkg/clustermodel) and the real control plane, each with its source
// (clusterCause), led, for a row of writes or watch events, by how many
// Txns wrote on each side when a compare failed on either (writes: the
// row's resource's). A row without a known cause gets no note.
func clusterNote(r *report.ConformanceRow, pods podsCreated, checks checksSeen, writes *resourceWrites) string {
	note := clusterCause(r, pods, checks)
	if note == "" {
		return ""
	}
	// What wrote: a Txn row's own, the resource's for its watch events.
	if PlanWrite(r.Method, r.Kind) {
		writes = &resourceWrites{r.Model, r.Real, r.ModelFailedCompares, r.RealFailedCompares}
	} else if r.Method != "Watch" || r.Kind != "events" {
		return note
	}
	if w := writes.text(); w != "" {
		return w + "; " + note
	}
	return note
}

// clusterCause is clusterNote's cause of a row, without the failed
// compares.
func clusterCause(r *report.ConformanceRow, pods podsCreated, checks checksSeen) string {
	switch {
	case r.Method == "RangeStream" && r.Kind == consistencyCheckKind && r.Model <= 1 && r.Real <= 1:
		return fmt.Sprintf("timers: the watch cache's consistency checker reads each cached resource every 5 to 7.5 minutes, the first after as long again "+
			"from its cache's start (k8s.io/apiserver/pkg/storage/cacher/consistency/checker.go Run: wait.Jitter(CheckPeriod 5m, 0.5), sliding); "+
			"the first checks come 5 to 7.5 minutes after each side's kube-apiserver start, from which the compared window begins at a different distance on each side, "+
			"so one check or none falls in the window, by resource and side; over every cached resource, model %d, real %d", checks.model, checks.real)
	case r.Resource == "events" && (r.Method == "RangeStream" || r.Method == "Range") && r.Kind == "prefix":
		return "the run's informers of events (not cached): kube-apiserver 1.37 lists them with RangeStream (EtcdRangeStream: k8s.io/apiserver/pkg/storage/etcd3/store.go), the model's stand-in with a Range"
	case r.Method == "Watch" && r.Kind == "stream":
		return "watch streams opened in the window: client-go's informers of events open one through kube-apiserver; the model's stand-ins share the cacher's"
	case r.Resource == "events" && (r.Kind == "key limit" || r.Method == "Txn"):
		m, re, _, _ := pods.perPod(r)
		return fmt.Sprintf("per pod created, model %.2f, real %.2f; ", m, re) +
			"both sides' events go through client-go's EventCorrelator per component (k8s.io/client-go/tools/record/events_cache.go: " +
			"after 10 similar events of one object in 10 minutes an aggregate event, whose repeats are patches, each a read and a Txn, events having no watch cache; " +
			"a spam filter per object); the model's rollouts step as the deployment controller's with every new pod available by the sync after its scale-up " +
			"(pkg/controller/deployment/rolling.go; clustermodel rolloutSteps), the real controller's steps follow when it sees them available, " +
			"so the ScalingReplicaSet events per rollout, and which Deployments reach aggregation, differ by timing (a model stepping one pod at a time made 1.38x the real patches)"
	case r.Resource == "pods" && r.Kind == "if mod_revision=? then delete else range":
		m, re, _, _ := pods.perPod(r)
		return fmt.Sprintf("per pod created, model %.2f, real %.2f; ", m, re) +
			"real: KWOK's DELETE comes milliseconds after the replicaset controller's graceful one, and its delete starts from the watch cache's object, " +
			"which may be one or two writes behind (k8s.io/apiserver/pkg/storage/cacher/delegator.go Delete; etcd3/store.go conditionalDelete retries from the else branch's object); " +
			"the model's cache is exactly one write behind: one failed transaction per pod. No switch turns it off"
	case r.Resource == "leases.coordination.k8s.io" && r.Model > r.Real:
		return "real: KWOK renewed fewer node Leases than its nodes hold: its node lease controller renews them with 4 workers " +
			"(sigs.k8s.io/kwok pkg/apis/config/v1alpha1/zz_generated.defaults.go NodeLeaseParallelism 4, pkg/kwok/controllers/node_lease_controller.go), " +
			"each renewal a round trip through kube-apiserver, and on a busy machine they fall behind the 10-s period (kubelets renew one Lease each); " +
			"the model renews every node's Lease every 10 s (pkg/kubelet/kubelet.go nodeLeaseRenewIntervalFraction, component-helpers lease/controller.go)"
	case r.Method == "Range" && r.Kind == "key limit" && (r.Resource == "deployments.apps" || r.Resource == "replicasets.apps"):
		return "real: a controller's write of an object it wrote a moment before reaches kube-apiserver before the watch cache has the first write; " +
			"GuaranteedUpdate's precondition fails against the cached object and it reads the object from etcd (k8s.io/apiserver/pkg/storage/etcd3/store.go " +
			"GuaranteedUpdate, getCurrentState when the cached state is not current; the deployment controller writes a ReplicaSet and then the Deployment's status " +
			"from its answers: pkg/controller/deployment/sync.go); the model's cache is never behind its own writes. No switch turns it off"
	case r.Method == "Range" && r.Kind == "key limit", r.Method == "Watch" && (r.Kind == "progress" || r.Kind == "progress notify all"),
		r.Method == "Range" && strings.HasSuffix(r.Kind, "count_only"):
		return "timers: each resource's count poll (every 1-2.2 min from kube-apiserver's start: k8s.io/apiserver/pkg/registry/generic/registry/store.go startObservingCount) " +
			"and size-estimator refresh (every 1-1.5 min unless read within a minute: pkg/storage/etcd3/stats.go), each a Range of one key and a progress request, " +
			"and, for limitranges, LimitRanger's live lookup on a pod's create (at most every 30 s per namespace: plugin/pkg/admission/limitranger/admission.go); " +
			"the real kube-apiserver started minutes before the compared window, the model with it: one to three per resource, which differ by where the window falls"
	case r.Method == "Compact" || r.Resource == "(compact_rev_key)" || r.Method == "LeaseGrant" || r.Resource == "peerserverleases":
		return "timers: the compactor (every --compaction-interval from kube-apiserver's start: k8s.io/apiserver/pkg/storage/etcd3/compact.go), the peer endpoint " +
			"lease (every 10 s, a grant each: pkg/reconcilers/peer_endpoint_lease.go) and the events' lease (a grant at most once a minute: etcd3/lease_manager.go) " +
			"run on timers from each side's start; counts this small differ by where the window falls"
	}
	if !podResources[r.Resource] {
		return ""
	}
	merged := r.Model > r.Real && rolloutMerged[r.Resource] &&
		(r.Method == "Watch" && r.Kind == "events" || r.Method == "Txn" && r.Kind == "if mod_revision=? then put else range")
	m, re, within, ok := pods.perPod(r)
	if !ok || pods.model == pods.real {
		if merged {
			return rolloutMergeNote
		}
		return ""
	}
	note := pods.text() + fmt.Sprintf("; per pod created, model %.2f, real %.2f", m, re)
	switch {
	case within:
		return note + ": within 10 %"
	case merged:
		return note + "; " + rolloutMergeNote
	}
	return note
}

// rolloutMerged are the resources whose controllers write once for the
// changes of several pods of one owner that reach them together
// (rolloutMergeNote).
var rolloutMerged = map[string]bool{"replicasets.apps": true, "endpoints": true, "endpointslices.discovery.k8s.io": true}

// rolloutMergeNote explains why the real control plane writes fewer
// ReplicaSet statuses, Endpoints and EndpointSlices than the model when
// the churn rolls out, as measured by the case whose churn never does
// (scripts/clusterconformance nodes-1000-scale-only).
const rolloutMergeNote = "real: in a rollout the deployment controller starts or stops up to two pods of one Deployment at a time " +
	"(of 5 replicas, maxSurge 25 % rounds up to 2, maxUnavailable down to 1: pkg/controller/deployment/rolling.go; clustermodel rolloutSteps), and the replicaset, endpoints and " +
	"endpointslice controllers sync a key once for the changes that arrive while it waits in their workqueue (k8s.io/client-go/util/workqueue queue.go Add: " +
	"a key already queued is not queued again), writing the object once per sync and not at all when it is unchanged " +
	"(pkg/controller/replicaset/replica_set.go syncReplicaSet, replica_set_utils.go updateReplicaSetStatus; pkg/controller/endpoint/endpoints_controller.go syncService; " +
	"k8s.io/endpointslice reconciler.go), so two pods' changes often make one write; the model writes each pod's. " +
	"Measured: with --rollout-percent 0 (every churn op changes one pod) these rows agree within 1 % at 1,000 nodes " +
	"(results/cluster-conformance, case nodes-1000-scale-only)"
