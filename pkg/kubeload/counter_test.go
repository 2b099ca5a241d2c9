package kubeload_test

import (
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/internal/proxytest"
	"github.com/kubestore/etcdkit/pkg/kubeload"
)

// TestCounterOfResources: a run's etcd counts carry each request's
// resource, and its phases their durations.
func TestCounterOfResources(t *testing.T) {
	p, c := proxytest.Start(t, etcdtest.RunEtcd(t), "/custom")
	counter := kubeload.CounterOf(p.Counter())
	counter.Reset()
	counter.SetPhase("steady")
	for _, k := range []string{"/custom/pods/ns/a", "/custom/leases/kube-node-lease/n1", "/custom/leases/kube-node-lease/n2"} {
		if _, err := c.Put(t.Context(), k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond)
	got := map[string]int64{}
	for _, r := range counter.Requests() {
		got[r.Phase+" "+r.Method+" "+r.Resource] += r.Requests
	}
	want := map[string]int64{"steady Put pods": 1, "steady Put leases.coordination.k8s.io": 2}
	if len(got) != len(want) || got["steady Put pods"] != 1 || got["steady Put leases.coordination.k8s.io"] != 2 {
		t.Errorf("got %v, want %v", got, want)
	}
	phases := counter.Phases()
	if len(phases) != 2 || phases[0].Phase != "before" || phases[1].Phase != "steady" || phases[1].DurationMs < 10 ||
		phases[1].StartedAt.Location() != time.UTC || phases[1].StartedAt.Before(phases[0].StartedAt) {
		t.Errorf("got phases %+v, want before, then steady for at least 10 ms, in UTC", phases)
	}
}
