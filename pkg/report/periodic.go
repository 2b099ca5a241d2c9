package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// PeriodicTraffic is one periodic source of a cluster's etcd traffic
// (../shared/reference/cluster-traffic.md, section 1) and what a run
// through kube-apiserver saw of it (PeriodicTrafficOf).
type PeriodicTraffic struct {
	// Source names it, e.g. "node Lease renewals".
	Source string `json:"source"`
	// Request is what etcd receives from it, e.g. "Txn
	// leases/kube-node-lease/<node>".
	Request string `json:"request"`
	// Seen is true when the window holds at least one of its requests.
	Seen bool `json:"seen"`
	// Count is its requests in the window.
	Count int64 `json:"count"`
	// Instances is how many renew or poll each at its own interval: the
	// nodes, the leaders and kube-apiservers seen (distinct Lease names),
	// the resources polled; 1 for the cluster's compaction.
	Instances int `json:"instances"`
	// WindowMs is the time the counts cover: every phase after the
	// seeding (EtcdPhase durations).
	WindowMs float64 `json:"windowMs"`
	// ObservedIntervalMs is the interval per instance the counts give,
	// WindowMs x Instances / Count; for compactions, the mean time between
	// those seen when there were two or more. 0 when not seen.
	ObservedIntervalMs float64 `json:"observedIntervalMs"`
	// ExpectedIntervalMs is upstream's interval per instance and
	// ExpectedMaxIntervalMs, when jittered, the longest it can be (0:
	// not jittered beyond a few percent).
	ExpectedIntervalMs    float64 `json:"expectedIntervalMs"`
	ExpectedMaxIntervalMs float64 `json:"expectedMaxIntervalMs,omitempty"`
	// Upstream is the source path of the expected interval.
	Upstream string `json:"upstream"`
	// Note says why a source may not be seen, when it was not.
	Note string `json:"note,omitempty"`
}

// PeriodicInput is what PeriodicTrafficOf reads.
type PeriodicInput struct {
	// Requests are the counting proxy's rows with their Namespace, Name
	// and PrefixKey (kubeload's scoped rows, not RunResult.Etcd).
	Requests []EtcdRequests
	// Phases are the rows' phases with their durations.
	Phases []EtcdPhase
	// Compactions are kube-apiserver's compactions seen, in order.
	Compactions []Compaction
	// Nodes is the cluster's node count; APIServers its kube-apiservers.
	Nodes, APIServers int
	// CompactionIntervalMs is kube-apiserver's --etcd-compaction-interval
	// (0: off).
	CompactionIntervalMs float64
	// APIServerVersion is kube-apiserver's version ("v1.37.2"; "": not
	// known): from 1.37 on nothing polls etcd's db size on a timer.
	APIServerVersion string
	// EndpointReconcilerNone is true when the kube-apiservers run with
	// --endpoint-reconciler-type none, as those lwbench starts do
	// (internal/apiserverproc): no master lease is written.
	EndpointReconcilerNone bool
	// KWOK is true when the nodes are KWOK's, which report their status
	// on KWOK's stage timer rather than the kubelet's.
	KWOK bool
}

// apiserverMinor returns the minor version of a kube-apiserver version
// such as "v1.37.2" (0 if it is not one).
func apiserverMinor(v string) int {
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimPrefix(v, "v"), "%d.%d", &major, &minor); err != nil || major != 1 {
		return 0
	}
	return minor
}

// Lease namespaces and names the periodic sources write.
const (
	leaseResource         = "leases.coordination.k8s.io"
	namespaceNodeLease    = "kube-node-lease"
	namespaceSystem       = "kube-system"
	apiserverIdentityName = "apiserver-" // kube-apiserver's identity Lease, apiserver-<hash>
)

// periodicSource is one source PeriodicTrafficOf looks for: the rows of
// its requests and how many instances they come from.
type periodicSource struct {
	source, request, upstream string
	expected, expectedMax     time.Duration
	match                     func(r EtcdRequests) bool
	// instances returns the instances given the matching rows; nil:
	// one per distinct resource.
	instances func(in PeriodicInput, rows []EtcdRequests) int
	// capped leaves out the resources with more requests than one per
	// expected interval allows (window / expected + 1): other requests
	// of the same shape are mixed in there.
	capped bool
}

// isLeaseWrite reports whether r writes Leases of namespace ns.
func isLeaseWrite(r EtcdRequests, ns string) bool {
	return r.Resource == leaseResource && r.Namespace == ns && EtcdVerb(r.Method, r.Kind) == EtcdWrite
}

// isIdentityLease reports whether a kube-system Lease name is a
// kube-apiserver's identity Lease.
func isIdentityLease(name string) bool {
	return strings.HasPrefix(name, apiserverIdentityName) || strings.HasPrefix(name, "kube-"+apiserverIdentityName)
}

// distinctNames counts the distinct Names of rows.
func distinctNames(_ PeriodicInput, rows []EtcdRequests) int {
	var names []string
	for _, r := range rows {
		if !slices.Contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	return len(names)
}

func nodes(in PeriodicInput, _ []EtcdRequests) int      { return in.Nodes }
func apiservers(in PeriodicInput, _ []EtcdRequests) int { return max(in.APIServers, 1) }
func one(PeriodicInput, []EtcdRequests) int             { return 1 }

// periodicSources are the sources of cluster-traffic.md section 1 a run
// on one machine can show, in its order.
var periodicSources = []periodicSource{
	{source: "node Lease renewals", request: "Txn leases/kube-node-lease/<node>", expected: 10 * time.Second,
		upstream: "pkg/kubelet/kubelet.go nodeLeaseRenewIntervalFraction 0.25 x pkg/kubelet/apis/config/v1beta1/defaults.go NodeLeaseDurationSeconds 40 (KWOK renews as kubelet)",
		match:    func(r EtcdRequests) bool { return isLeaseWrite(r, namespaceNodeLease) }, instances: nodes},
	{source: "leader-election Lease renewals", request: "Txn leases/kube-system/<leader>", expected: 2 * time.Second,
		upstream: "k8s.io/client-go/tools/leaderelection/leaderelection.go renew every RetryPeriod, k8s.io/component-base/config/v1alpha1/defaults.go RetryPeriod 2s",
		match: func(r EtcdRequests) bool {
			return isLeaseWrite(r, namespaceSystem) && r.Name != "" && !isIdentityLease(r.Name)
		}, instances: distinctNames},
	{source: "kube-apiserver identity Lease renewals", request: "Txn leases/kube-system/apiserver-<hash>", expected: 10 * time.Second,
		upstream: "pkg/controlplane/apiserver/server.go IdentityLeaseRenewIntervalPeriod",
		match:    func(r EtcdRequests) bool { return isLeaseWrite(r, namespaceSystem) && isIdentityLease(r.Name) }, instances: distinctNames},
	{source: "node status updates", request: "Txn minions/<node>", expected: 5 * time.Minute, expectedMax: 7*time.Minute + 30*time.Second,
		upstream: "pkg/kubelet/apis/config/v1beta1/defaults.go NodeStatusReportFrequency 5m, pkg/kubelet/kubelet_node_status.go (or on change; KWOK's node stages)",
		match:    func(r EtcdRequests) bool { return r.Resource == "nodes" && EtcdVerb(r.Method, r.Kind) == EtcdWrite }, instances: nodes},
	{source: "compactions", request: "Compact", expected: 5 * time.Minute,
		upstream: "k8s.io/apiserver/pkg/storage/etcd3/compact.go, storagebackend/config.go DefaultCompactInterval (--etcd-compaction-interval)",
		match:    func(r EtcdRequests) bool { return r.Method == "Compact" }, instances: one},
	{source: "compactor's compact_rev_key transactions", request: "Txn compact_rev_key", expected: 5 * time.Minute,
		upstream: "k8s.io/apiserver/pkg/storage/etcd3/compact.go compact (one per interval per kube-apiserver)",
		match:    func(r EtcdRequests) bool { return r.Method == "Txn" && r.Resource == "(compact_rev_key)" }, instances: apiservers},
	{source: "object count polls", request: "Range <prefix>/<resource> (the prefix key)", expected: time.Minute, expectedMax: 2*time.Minute + 12*time.Second,
		upstream: "k8s.io/apiserver/pkg/registry/generic/registry/store.go startObservingCount (resourceCountPollPeriodJitter 1.2), server/options/etcd.go CountMetricPollPeriod 1m",
		match: func(r EtcdRequests) bool {
			return r.PrefixKey && EtcdVerb(r.Method, r.Kind) == EtcdRead
		},
		// Other callers read the prefix key the same way, e.g. a
		// consistent LIST or watch-list served from the watch cache, for
		// the current revision (cluster-traffic.md: cacher.go
		// getWatchCacheResourceVersion); in a 10-node run the kubelet
		// watches' lists read configmaps' and secrets' about 20 times a
		// second: resources read more often than polled are left out.
		capped: true},
	{source: "cache consistency checks", request: "Range <prefix>/<resource>/ limit rev (first pages)", expected: 5 * time.Minute, expectedMax: 7*time.Minute + 30*time.Second,
		upstream: "k8s.io/apiserver/pkg/storage/cacher/consistency/checker.go (CheckPeriod 5m, jitter 0.5; DetectCacheInconsistency, on since 1.34)",
		match: func(r EtcdRequests) bool {
			return (r.Method == "Range" || r.Method == "RangeStream") && strings.HasPrefix(r.Kind, "prefix ") &&
				hasWord(r.Kind, "limit") && hasWord(r.Kind, "rev")
		}},
	{source: "DB-size polls", request: "Status", expected: 30 * time.Second,
		// In 1.37 nothing polls on a timer: --etcd-db-metric-poll-interval
		// (DefaultDBMetricPollInterval 30s) is parsed and unused, and each
		// scrape of kube-apiserver's /metrics calls Status once per storage
		// monitor. A run's own meter scrapes at every phase change, so the
		// interval seen is the run's, not a cluster's (there: Prometheus').
		upstream: "k8s.io/apiserver/pkg/storage/etcd3/metrics/metrics.go monitorCollector (on each /metrics scrape) -> storagebackend/factory/etcd3.go Monitor: Status; --etcd-db-metric-poll-interval (30s) is unused in 1.37",
		match:    func(r EtcdRequests) bool { return r.Method == "Status" }, instances: apiservers},
	{source: "master-lease reconciler", request: "Txn masterleases/<ip>", expected: 10 * time.Second,
		upstream: "pkg/controlplane/reconcilers/lease.go, pkg/controlplane/instance.go DefaultEndpointReconcilerInterval 10s",
		match: func(r EtcdRequests) bool {
			return r.Resource == "masterleases" && EtcdVerb(r.Method, r.Kind) == EtcdWrite
		}, instances: apiservers},
	{source: "peer-endpoint lease reconciler", request: "Txn peerserverleases/<id>", expected: 10 * time.Second,
		upstream: "pkg/controlplane/apiserver/peer.go DefaultPeerEndpointReconcileInterval 10s",
		match: func(r EtcdRequests) bool {
			return r.Resource == "peerserverleases" && EtcdVerb(r.Method, r.Kind) == EtcdWrite
		}, instances: apiservers},
}

// cmpDesc orders larger counts first.
func cmpDesc(a, b int64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// hasWord reports whether the space separated words of kind hold w.
func hasWord(kind, w string) bool { return slices.Contains(strings.Fields(kind), w) }

// periodicWindowPhase reports whether a phase counts towards the window
// of PeriodicTrafficOf: every phase but those before and during the
// seeding, when the nodes and their Leases are still being made.
func periodicWindowPhase(phase string) bool {
	base, _, _ := strings.Cut(phase, " after compaction ")
	switch base {
	case "before", "start", "seed":
		return false
	}
	return true
}

// PeriodicTrafficOf finds each periodic source of a cluster's etcd
// traffic in the counting proxy's rows of the phases after the seeding,
// one PeriodicTraffic per source in a fixed order, seen or not. The
// expected compaction interval is in.CompactionIntervalMs when set. Node
// sources need in.Nodes; with 0 nodes their observed interval is 0.
func PeriodicTrafficOf(in PeriodicInput) []PeriodicTraffic {
	var window float64
	for _, p := range in.Phases {
		if periodicWindowPhase(p.Phase) {
			window += p.DurationMs
		}
	}
	out := make([]PeriodicTraffic, 0, len(periodicSources))
	for _, s := range periodicSources {
		t := PeriodicTraffic{Source: s.source, Request: s.request, WindowMs: window, ExpectedIntervalMs: Ms(s.expected),
			ExpectedMaxIntervalMs: Ms(s.expectedMax), Upstream: s.upstream}
		if s.request == "Compact" || s.request == "Txn compact_rev_key" {
			if in.CompactionIntervalMs > 0 {
				t.ExpectedIntervalMs = in.CompactionIntervalMs
			}
		}
		var rows []EtcdRequests
		resources := map[string]int64{}
		for _, r := range in.Requests {
			if periodicWindowPhase(r.Phase) && r.Requests > 0 && s.match(r) {
				rows = append(rows, r)
				t.Count += r.Requests
				resources[r.Resource] += r.Requests
			}
		}
		if limit := int64(window/t.ExpectedIntervalMs) + 1; s.capped {
			var mixed []string
			var left int64
			for _, res := range slices.Sorted(maps.Keys(resources)) {
				if n := resources[res]; n > limit {
					mixed = append(mixed, res)
					left += n
				}
			}
			slices.SortStableFunc(mixed, func(a, b string) int { return cmpDesc(resources[a], resources[b]) })
			var top []string
			for i, res := range mixed {
				if i == 5 {
					top = append(top, fmt.Sprintf("%d more", len(mixed)-5))
					break
				}
				top = append(top, fmt.Sprintf("%s %d", res, resources[res]))
			}
			for _, res := range mixed {
				delete(resources, res)
			}
			if len(mixed) > 0 {
				t.Count -= left
				t.Note = fmt.Sprintf("left out: %d reads of %d resources with more than %d each, more often than polled "+
					"(other callers read the prefix key too, e.g. consistent reads served from the watch cache): %s",
					left, len(mixed), limit, strings.Join(top, ", "))
			}
		}
		t.Seen = t.Count > 0
		if s.instances != nil {
			t.Instances = s.instances(in, rows)
		} else {
			t.Instances = len(resources)
		}
		if t.Seen && t.Instances > 0 {
			t.ObservedIntervalMs = window * float64(t.Instances) / float64(t.Count)
		}
		if s.request == "Compact" {
			if gaps := compactionGapsMs(in.Compactions); len(gaps) > 0 {
				var sum float64
				for _, g := range gaps {
					sum += g
				}
				t.ObservedIntervalMs = sum / float64(len(gaps))
			}
		}
		switch {
		case s.request == "Status" && apiserverMinor(in.APIServerVersion) >= 37:
			t.ExpectedIntervalMs, t.ExpectedMaxIntervalMs = 0, 0
			t.Note = "no timer from 1.37 on: kube-apiserver asks etcd's Status on each scrape of its own /metrics (--etcd-db-metric-poll-interval is parsed and unused), " +
				"so the interval seen is the scrapes': lwbench's meter scrapes at each phase change, a cluster's Prometheus every 15-60 s"
		case s.request == "Status" && in.APIServerVersion != "":
			// 1.35 and 1.36: every --etcd-db-metric-poll-interval plus up
			// to half again (storagebackend/factory/etcd3.go
			// startDBSizeMonitorPerEndpoint, wait.JitterUntil 0.5).
			t.ExpectedMaxIntervalMs = Ms(s.expected * 3 / 2)
		case s.source == "master-lease reconciler" && in.EndpointReconcilerNone:
			t.ExpectedIntervalMs = 0
			t.Note = "off: lwbench runs kube-apiserver with --endpoint-reconciler-type none, since the lease reconciler refuses a loopback address as the " +
				"kubernetes Service's endpoint (pkg/controlplane/reconcilers/lease.go ValidateIP, pkg/apis/core/validation ValidateEndpointIP); a real cluster's kube-apiservers write it"
		case s.source == "node status updates" && in.KWOK:
			t.Note = "KWOK writes each node's status every 600-610 s (the delay of its node-heartbeat-with-lease stage: sigs.k8s.io/kwok " +
				"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml), where a kubelet reports every 5 min " +
				"plus up to half again or on a change: a KWOK cluster writes about half the node status a real one does"
		}
		if !t.Seen && t.Note == "" {
			switch {
			case window < t.ExpectedIntervalMs:
				t.Note = "the window is shorter than the interval"
			case s.request == "Compact" && in.CompactionIntervalMs <= 0:
				t.Note = "compaction off"
			}
		}
		out = append(out, t)
	}
	return out
}

// compactionGapsMs returns the times between successive compactions
// that succeeded, ms.
func compactionGapsMs(cs []Compaction) []float64 {
	var gaps []float64
	last := -1.0
	for _, c := range cs {
		if c.Error != "" {
			continue
		}
		if last >= 0 {
			gaps = append(gaps, c.AtMs-last)
		}
		last = c.AtMs
	}
	return gaps
}
