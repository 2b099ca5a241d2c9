package kubeload

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestNodeHealthCountsRenewalsInTheirPhase renews node Leases on an
// embedded etcd while the run moves from phase to phase: each renewal
// counts in the phase it happened in, the first renewal seen of a Lease
// too (it ends no interval), and a Lease's create is no renewal. Counting
// intervals alone, a steady phase shorter than a renewal interval showed
// no renewal and the drain every one.
func TestNodeHealthCountsRenewalsInTheirPhase(t *testing.T) {
	c := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	ctx := t.Context()
	const prefix = "/registry/leases/kube-node-lease/"
	put := func(node string) {
		t.Helper()
		if _, err := c.Put(ctx, prefix+node, "renewed"); err != nil {
			t.Fatal(err)
		}
	}
	put("node-a") // created before the observation began
	resp, err := c.Put(ctx, prefix+"node-b", "created")
	if err != nil {
		t.Fatal(err)
	}
	h := newNodeHealth(time.Now(), "seed")
	wctx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	h.watchLeases(wctx, c, prefix, resp.Header.Revision+1, func() {})
	// seen waits until h has seen n renewals and leases Leases.
	seen := func(n int64, leases int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			h.mu.Lock()
			var got int64
			for _, r := range h.renewals {
				got += r
			}
			k := len(h.last)
			h.mu.Unlock()
			if got == n && k == leases {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("got %d renewals of %d Leases, want %d of %d", got, k, n, leases)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	put("node-c") // created in the seeding
	seen(0, 1)
	h.setPhase("sync")
	h.setPhase("steady")
	put("node-a")
	put("node-b")
	put("node-c")
	seen(3, 3)
	h.setPhase("drain")
	put("node-a")
	put("node-b")
	seen(5, 3)
	got := h.finish()

	if got.Renewals != 5 || got.Nodes != 3 {
		t.Errorf("got %d renewals of %d nodes, want 5 of 3", got.Renewals, got.Nodes)
	}
	want := []struct {
		phase               string
		renewals, intervals int64
	}{{"steady", 3, 1}, {"drain", 2, 2}}
	if len(got.Phases) != len(want) {
		t.Fatalf("got phases %+v, want steady and drain", got.Phases)
	}
	for i, w := range want {
		p := got.Phases[i]
		if p.Phase != w.phase || p.Renewals != w.renewals || (p.IntervalMaxMs > 0) != (w.intervals > 0) {
			t.Errorf("phase %d: got %+v, want %s with %d renewals ending %d intervals", i, p, w.phase, w.renewals, w.intervals)
		}
	}
}

// TestNodeHealthCountsNodesThatLeftReady feeds nodes' states as the node
// informer sees them from the seeding on: a node created without a Ready
// condition (before KWOK's node-initialize stage) has not left Ready;
// one that was Ready and turned Unknown has, once until Ready again; one
// first seen with Ready False or Unknown has too.
func TestNodeHealthCountsNodesThatLeftReady(t *testing.T) {
	node := func(name string, ready corev1.ConditionStatus) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		}
		return n
	}
	h := newNodeHealth(time.Now(), "seed")
	for _, n := range []*corev1.Node{
		node("created", ""), node("created", corev1.ConditionTrue), // the seeding's nodes, initialized
		node("stale", ""), node("stale", corev1.ConditionTrue), node("stale", corev1.ConditionUnknown), node("stale", corev1.ConditionUnknown),
		node("stale", corev1.ConditionTrue), node("stale", corev1.ConditionUnknown), // left Ready twice
		node("found", corev1.ConditionFalse), // not Ready when first seen, and stays so
	} {
		h.node(n)
	}
	got := h.finish()
	if got.NotReady != 2 || got.Transitions != 3 || got.StillNotReady != 2 {
		t.Errorf("got %d nodes NotReady, %d transitions, %d still NotReady; want 2 (stale, found), 3 (stale twice, found), 2", got.NotReady, got.Transitions, got.StillNotReady)
	}
}
