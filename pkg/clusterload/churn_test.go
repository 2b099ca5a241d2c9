package clusterload

import (
	"fmt"
	"math"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// TestChurnPlan checks the churn's ops: reproducible from the seed, in
// the mix's shares, scaling only within [0.5, 1.5] of each Deployment's
// planned size, rolling out only small Deployments, and each
// Deployment's ops on one worker.
func TestChurnPlan(t *testing.T) {
	for _, tt := range []struct {
		rolloutPercent      int
		wantRollout, wantUp int
		wantPodsPerOp       float64
	}{
		{0, DefaultRolloutPercent, 40, 1.4},
		{-1, 0, 50, 0.5},
		{60, 60, 20, 3.2},
	} {
		t.Run(fmt.Sprint(tt.rolloutPercent), func(t *testing.T) {
			p, err := NewPlan(Options{Nodes: 100, RolloutPercent: tt.rolloutPercent})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.PodsPerOp(); math.Abs(got-tt.wantPodsPerOp) > 1e-9 {
				t.Errorf("pods per op %v, want %v", got, tt.wantPodsPerOp)
			}
			checkChurn(t, p, map[any]int{ChurnScaleUp: tt.wantUp, ChurnScaleDown: 100 - tt.wantUp - tt.wantRollout, ChurnRollout: tt.wantRollout})
		})
	}
	if _, err := NewPlan(Options{Nodes: 100, RolloutPercent: 101}); err == nil {
		t.Error("rollout percent 101: no error")
	}
}

// checkChurn holds p's churn to the checks of TestChurnPlan, with the
// kinds of op in shares (percent) of want.
func checkChurn(t *testing.T, p *Plan, want map[any]int) {
	clients := []kubernetes.Interface{fake.NewClientset(), fake.NewClientset(), fake.NewClientset()}
	a, err := NewChurn(p, clients, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewChurn(p, clients, 7)
	const n = 20000
	kinds := map[any]int{}
	replicas := map[string]int{}
	worker := map[string]int{}
	for _, d := range p.Deployments {
		replicas[d.Name] = d.Replicas
	}
	for i := range int64(n) {
		op := a.Next(i)
		if op2 := b.Next(i); op2 != op {
			t.Fatalf("op %d: got %+v and %+v from one seed", i, op, op2)
		}
		kinds[op.Kind]++
		if w, ok := worker[op.Name]; ok && w != op.Shard {
			t.Fatalf("deployment %s on workers %d and %d", op.Name, w, op.Shard)
		}
		worker[op.Name] = op.Shard
		var planned int
		for _, d := range p.Deployments {
			if d.Name == op.Name {
				planned = d.Replicas
			}
		}
		switch op.Kind {
		case ChurnScaleUp:
			replicas[op.Name]++
		case ChurnScaleDown:
			replicas[op.Name]--
		case ChurnRollout:
			if planned != SmallReplicas {
				t.Errorf("op %d rolls out %s of %d replicas", i, op.Name, planned)
			}
		}
		if r := replicas[op.Name]; r < planned/2 || r > planned+planned/2 {
			t.Fatalf("op %d: %s at %d replicas, planned %d", i, op.Name, r, planned)
		}
	}
	for kind, want := range want {
		if got := kinds[kind] * 100 / n; got < want-3 || got > want+3 {
			t.Errorf("kind %v: %d %% of ops, want about %d %%", kind, got, want)
		}
	}
}
