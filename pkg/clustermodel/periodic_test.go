package clustermodel

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/internal/proxytest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestNodeStatusDelay: KWOK's node heartbeat waits 600 s plus up to 10 s
// (the stage's delay 600,000 ms and jitter 610,000 ms).
func TestNodeStatusDelay(t *testing.T) {
	for _, tc := range []struct {
		u    float64
		want time.Duration
	}{{0, 600 * time.Second}, {0.5, 605 * time.Second}, {0.999999, 610*time.Second - 10*time.Microsecond}} {
		if got := nodeStatusDelay(tc.u); got < tc.want-time.Millisecond || got > tc.want+time.Millisecond {
			t.Errorf("nodeStatusDelay(%v): got %v, want %v", tc.u, got, tc.want)
		}
	}
}

// TestConsistencyCheck runs the model's consistency check of the Leases
// against an etcd 3.7 behind the counting proxy, after a write elsewhere
// moved etcd past the Leases' last: the cache's revision is the Leases'
// last write, not etcd's latest, and etcd sees one RangeStream pinned to
// a revision with the page limit, no Range, as from kube-apiserver 1.37
// (k8s.io/apiserver/pkg/storage/cacher/consistency/checker.go,
// etcd3/store.go shouldStream).
func TestConsistencyCheck(t *testing.T) {
	p, c := proxytest.Start(t, etcdtest.RunEtcd(t), "/registry")
	st, err := newStore(c, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pe := newPeriodic(st, "/registry", 0, 0, 1, t.Logf)
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); pe.wait() }()
	pe.startWatches(ctx, c, 1, keyspace.CompactRevKey)
	var leasesRev int64
	for i := range 3 {
		resp, err := c.Put(t.Context(), leaseKey("/registry", "kube-node-lease", fmt.Sprintf("node-%d", i)), "v")
		if err != nil {
			t.Fatal(err)
		}
		leasesRev = resp.Header.Revision
	}
	if _, err := c.Put(t.Context(), "/registry/configmaps/default/c", "v"); err != nil {
		t.Fatal(err)
	}
	prefix := "/registry/leases/"
	deadline := time.Now().Add(10 * time.Second)
	for pe.cacheRevs[prefix].Load() != leasesRev && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := pe.cacheRevs[prefix].Load(); got != leasesRev {
		t.Fatalf("the Leases' cache reached revision %d, want %d (their last write)", got, leasesRev)
	}
	p.Counter().SetPhase("check")
	if err := pe.check(t.Context(), watchload.NewEnv(time.Now(), 16, 1, nil), prefix); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Counter().Counts() {
		if r.Phase == "check" && r.Resource == "leases.coordination.k8s.io" {
			got = append(got, fmt.Sprintf("%s %s %d", r.Method, r.Kind, r.Requests))
		}
	}
	if want := []string{"RangeStream prefix limit rev 1"}; !slices.Equal(got, want) {
		t.Errorf("the check sent etcd %q, want %q", got, want)
	}
}
