package report

import (
	"math"
	"strings"
	"testing"
)

func TestPeriodicTrafficOf(t *testing.T) {
	const update = "if mod_revision=? then put else range"
	phases := []EtcdPhase{{Phase: "seed", DurationMs: 40000}, {Phase: "steady", DurationMs: 50000}, {Phase: "steady after compaction 1", DurationMs: 10000}}
	lease := func(phase, ns, name string, n int64) EtcdRequests {
		return EtcdRequests{Phase: phase, Method: "Txn", Kind: update, Resource: leaseResource, Namespace: ns, Name: name, Requests: n}
	}
	type want struct {
		seen      bool
		count     int64
		instances int
		interval  float64 // ms
		note      string  // its beginning
	}
	tests := []struct {
		name   string
		source string
		in     PeriodicInput
		want   want
	}{
		{
			name: "node leases at 1/10 s per node, the seeding left out", source: "node Lease renewals",
			in: PeriodicInput{Nodes: 10, Phases: phases, Requests: []EtcdRequests{
				lease("seed", namespaceNodeLease, "", 999), // nodes still being made
				lease("steady", namespaceNodeLease, "", 50),
				lease("steady after compaction 1", namespaceNodeLease, "", 10),
				{Phase: "steady", Method: "Range", Kind: "key limit", Resource: leaseResource, Namespace: namespaceNodeLease, Requests: 7}, // reads are not renewals
				lease("steady", namespaceSystem, "kube-scheduler", 30),
			}},
			want: want{seen: true, count: 60, instances: 10, interval: 10000},
		},
		{
			name: "node leases at half the rate", source: "node Lease renewals",
			in:   PeriodicInput{Nodes: 10, Phases: phases, Requests: []EtcdRequests{lease("steady", namespaceNodeLease, "", 30)}},
			want: want{seen: true, count: 30, instances: 10, interval: 20000},
		},
		{
			name: "two leaders, the identity lease apart", source: "leader-election Lease renewals",
			in: PeriodicInput{Phases: phases, Requests: []EtcdRequests{
				lease("steady", namespaceSystem, "kube-scheduler", 30),
				lease("steady", namespaceSystem, "kube-controller-manager", 30),
				lease("steady", namespaceSystem, "apiserver-3f2a", 6),
			}},
			want: want{seen: true, count: 60, instances: 2, interval: 2000},
		},
		{
			name: "identity lease", source: "kube-apiserver identity Lease renewals",
			in: PeriodicInput{APIServers: 1, Phases: phases, Requests: []EtcdRequests{
				lease("steady", namespaceSystem, "kube-scheduler", 30),
				lease("steady", namespaceSystem, "apiserver-3f2a", 6),
			}},
			want: want{seen: true, count: 6, instances: 1, interval: 10000},
		},
		{
			name: "compactions: the interval between those seen", source: "compactions",
			in: PeriodicInput{CompactionIntervalMs: 20000, Phases: phases,
				Compactions: []Compaction{{N: 1, AtMs: 50000}, {N: 2, AtMs: 71000}, {N: 3, AtMs: 80000, Error: "etcdserver: mvcc: required revision has been compacted"}},
				Requests:    []EtcdRequests{{Phase: "steady", Method: "Compact", Kind: "compact", Requests: 1}, {Phase: "steady after compaction 1", Method: "Compact", Kind: "compact", Requests: 1}}},
			want: want{seen: true, count: 2, instances: 1, interval: 21000},
		},
		{
			name: "no compaction in a short window", source: "compactions",
			in:   PeriodicInput{Phases: []EtcdPhase{{Phase: "steady", DurationMs: 60000}}},
			want: want{instances: 1, note: "the window is shorter than the interval"},
		},
		{
			name: "count polls: prefix keys only, one instance per resource", source: "object count polls",
			in: PeriodicInput{Phases: phases, Requests: []EtcdRequests{
				{Phase: "steady", Method: "Range", Kind: "key limit", Resource: "pods", PrefixKey: true, Requests: 1},
				{Phase: "steady", Method: "Range", Kind: "key limit", Resource: "configmaps", PrefixKey: true, Requests: 1},
				{Phase: "steady", Method: "Range", Kind: "key limit", Resource: "pods", Requests: 500}, // GETs of pods
			}},
			want: want{seen: true, count: 2, instances: 2, interval: 60000},
		},
		{
			name: "count polls: resources read more often than polled are left out", source: "object count polls",
			in: PeriodicInput{Phases: []EtcdPhase{{Phase: "steady", DurationMs: 180000}}, Requests: []EtcdRequests{
				{Phase: "steady", Method: "Range", Kind: "key limit", Resource: "pods", PrefixKey: true, Requests: 3},
				{Phase: "steady", Method: "Range", Kind: "key limit", Resource: "nodes", PrefixKey: true, Requests: 2},
				{Phase: "steady", Method: "Range", Kind: "key limit", Resource: "configmaps", PrefixKey: true, Requests: 500}, // consistent LISTs
				{Phase: "steady", Method: "Range", Kind: "key limit", Resource: "secrets", PrefixKey: true, Requests: 5},
			}},
			want: want{seen: true, count: 5, instances: 2, interval: 72000,
				note: "left out: 505 reads of 2 resources with more than 4 each, more often than polled (other callers read the prefix key too, e.g. consistent reads served from the watch cache): configmaps 500, secrets 5"},
		},
		{
			name: "consistency checks: first pages at a revision", source: "cache consistency checks",
			in: PeriodicInput{Phases: []EtcdPhase{{Phase: "steady", DurationMs: 600000}}, Requests: []EtcdRequests{
				{Phase: "steady", Method: "Range", Kind: "prefix limit rev", Resource: "pods", Requests: 2},
				{Phase: "steady", Method: "Range", Kind: "range limit rev", Resource: "pods", Requests: 5}, // later pages
				{Phase: "steady", Method: "RangeStream", Kind: "prefix", Resource: "events", Requests: 3},  // a cache's initial list
				{Phase: "steady", Method: "Range", Kind: "prefix limit", Resource: "secrets", Requests: 1},
				{Phase: "steady", Method: "Range", Kind: "prefix limit rev", Resource: "secrets", Requests: 1},
			}},
			want: want{seen: true, count: 3, instances: 2, interval: 400000},
		},
		{
			name: "DB-size polls per kube-apiserver", source: "DB-size polls",
			in:   PeriodicInput{APIServers: 2, Phases: phases, Requests: []EtcdRequests{{Phase: "steady", Method: "Status", Kind: "call", Requests: 4}}},
			want: want{seen: true, count: 4, instances: 2, interval: 30000},
		},
		{
			name: "no master leases", source: "master-lease reconciler",
			in:   PeriodicInput{APIServers: 1, Phases: phases, Requests: []EtcdRequests{{Phase: "steady", Method: "Txn", Kind: update, Resource: "peerserverleases", Requests: 6}}},
			want: want{instances: 1},
		},
		{
			name: "no master leases from lwbench's kube-apiservers", source: "master-lease reconciler",
			in:   PeriodicInput{APIServers: 1, EndpointReconcilerNone: true, Phases: phases},
			want: want{instances: 1, note: "off: lwbench runs kube-apiserver with --endpoint-reconciler-type none"},
		},
		{
			name: "DB-size reads of 1.37 on scrapes", source: "DB-size polls",
			in:   PeriodicInput{APIServers: 1, APIServerVersion: "v1.37.2", Phases: phases, Requests: []EtcdRequests{{Phase: "steady", Method: "Status", Kind: "call", Requests: 4}}},
			want: want{seen: true, count: 4, instances: 1, interval: 15000, note: "no timer from 1.37 on"},
		},
		{
			name: "KWOK's node status", source: "node status updates",
			in:   PeriodicInput{Nodes: 2, KWOK: true, Phases: phases, Requests: []EtcdRequests{{Phase: "steady", Method: "Txn", Kind: update, Resource: "nodes", Requests: 2}}},
			want: want{seen: true, count: 2, instances: 2, interval: 60000, note: "KWOK writes each node's status every 600-610 s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := PeriodicTrafficOf(tt.in)
			if len(all) != len(periodicSources) {
				t.Fatalf("got %d sources, want %d", len(all), len(periodicSources))
			}
			var got *PeriodicTraffic
			for i := range all {
				if all[i].Source == tt.source {
					got = &all[i]
				}
			}
			if got == nil {
				t.Fatalf("no source %q", tt.source)
			}
			// want.note is the note's beginning; "" wants none.
			noteOK := got.Note == tt.want.note || tt.want.note != "" && strings.HasPrefix(got.Note, tt.want.note)
			if got.Seen != tt.want.seen || got.Count != tt.want.count || got.Instances != tt.want.instances || !noteOK {
				t.Errorf("got seen %v, count %d, instances %d, note %q; want %v, %d, %d, %q...",
					got.Seen, got.Count, got.Instances, got.Note, tt.want.seen, tt.want.count, tt.want.instances, tt.want.note)
			}
			if math.Abs(got.ObservedIntervalMs-tt.want.interval) > 1e-6 {
				t.Errorf("got interval %v ms, want %v", got.ObservedIntervalMs, tt.want.interval)
			}
		})
	}
}

// TestPeriodicExpectedCompaction checks that the compaction sources expect
// the run's own interval, and upstream's 5 minutes without one.
func TestPeriodicExpectedCompaction(t *testing.T) {
	for _, tt := range []struct {
		intervalMs, want float64
	}{{20000, 20000}, {0, 300000}} {
		for _, p := range PeriodicTrafficOf(PeriodicInput{CompactionIntervalMs: tt.intervalMs}) {
			if (p.Source == "compactions" || p.Source == "compactor's compact_rev_key transactions") && p.ExpectedIntervalMs != tt.want {
				t.Errorf("interval %v: %s expects %v ms, want %v", tt.intervalMs, p.Source, p.ExpectedIntervalMs, tt.want)
			}
		}
	}
}
