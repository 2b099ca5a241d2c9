package clusterload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// The churn's kinds of op, by the pod-level change each asks the control
// plane for (watchload.Op.Kind): a Deployment scaled up by one (one pod
// created), scaled down by one (one pod deleted), or rolled out (its pod
// template's RolloutAnnotation changed, so that the Deployment controller
// replaces each of its pods). Only small Deployments roll out, so that
// an op stays a few pods.
const (
	ChurnScaleUp   = watchload.OpCreate
	ChurnScaleDown = watchload.OpDelete
	ChurnRollout   = watchload.OpUpdate
	// RolloutAnnotation on the pod template starts a rollout.
	RolloutAnnotation = "lwbench.kubestore.io/rollout"
)

// DefaultRolloutPercent is the churn's default share of rollouts, in
// percent of ops, the rest scaling up and down by one pod, half each:
// CL2's load test scales every Deployment to within [0.5, 1.5] of its
// size and rolls objects over; here each op changes one or a few pods,
// so that pods churn at a steady rate rather than in bursts.
const DefaultRolloutPercent = 20

// PodsPerOp is how many pods the average churn op of p creates (and as
// many it deletes): a rate of ops/s is PodsPerOp times as many pods/s,
// CL2's throughput (CL2_LOAD_TEST_THROUGHPUT, 10 pods/s by default). A
// rollout replaces a small Deployment's SmallReplicas pods, a scale-up
// creates one: 1.4 at DefaultRolloutPercent, 0.5 without rollouts.
func (p *Plan) PodsPerOp() float64 {
	return (float64(p.scaleUpPercent()) + float64(p.RolloutPercent*SmallReplicas)) / 100
}

// scaleUpPercent is the share of ops that scale up by one, in percent;
// the rest scale down.
func (p *Plan) scaleUpPercent() int { return (100 - p.RolloutPercent) / 2 }

// Churn is a Plan's churn as a watchload.Workload: ops on its Deployments
// through the API (a patch of spec.replicas or of the pod template),
// each Deployment's ops on one worker, in order. Its revisions are those
// of the Deployment writes; the pod writes they cause are the control
// plane's.
type Churn struct {
	plan    *Plan
	clients []kubernetes.Interface
	rng     *rand.Rand
	small   []int // indexes of the small Deployments
	// next and done are each Deployment's replicas as Next planned them
	// and as Do has made them (each touched only by the Deployment's
	// worker).
	next, done []int
	rollouts   []int
	byName     map[types.NamespacedName]int // a Deployment's index in the plan
}

// NewChurn returns the churn of p performed with clients (one per
// worker), reproducible from seed.
func NewChurn(p *Plan, clients []kubernetes.Interface, seed uint64) (*Churn, error) {
	if len(clients) == 0 || len(p.Deployments) == 0 {
		return nil, fmt.Errorf("churn: %d clients and %d deployments, want at least one of each", len(clients), len(p.Deployments))
	}
	c := &Churn{plan: p, clients: clients, rng: rand.New(rand.NewPCG(seed, seed^0x636c7573746572)),
		next: make([]int, len(p.Deployments)), done: make([]int, len(p.Deployments)), rollouts: make([]int, len(p.Deployments)),
		byName: make(map[types.NamespacedName]int, len(p.Deployments))}
	for i, d := range p.Deployments {
		c.byName[types.NamespacedName{Namespace: d.Namespace, Name: d.Name}] = i
		c.next[i], c.done[i] = d.Replicas, d.Replicas
		if d.Replicas == SmallReplicas {
			c.small = append(c.small, i)
		}
	}
	return c, nil
}

// Next returns op i: a Deployment chosen at random, scaled up or down by
// one within [0.5, 1.5] of its planned size, or a small one rolled out.
func (c *Churn) Next(i int64) watchload.Op {
	kind := ChurnScaleUp
	r := c.rng.IntN(100)
	switch {
	case r < c.plan.RolloutPercent && len(c.small) > 0:
		kind = ChurnRollout
	case r < 100-c.plan.scaleUpPercent():
		kind = ChurnScaleDown
	}
	var d int
	if kind == ChurnRollout {
		d = c.small[c.rng.IntN(len(c.small))]
	} else {
		d = c.rng.IntN(len(c.plan.Deployments))
		planned := c.plan.Deployments[d].Replicas
		if kind == ChurnScaleUp && c.next[d] >= planned+planned/2 {
			kind = ChurnScaleDown
		} else if kind == ChurnScaleDown && c.next[d] <= planned/2 {
			kind = ChurnScaleUp
		}
		if kind == ChurnScaleUp {
			c.next[d]++
		} else {
			c.next[d]--
		}
	}
	dep := c.plan.Deployments[d]
	return watchload.Op{Kind: kind, Resource: "deployments", Namespace: dep.Namespace, Name: dep.Name,
		Key:   keyspace.Build(keyspace.Key{Prefix: "/registry", Group: "apps", Resource: "deployments", Namespace: dep.Namespace, Name: dep.Name}),
		Shard: d % len(c.clients)}
}

// Do performs op with worker's client: a merge patch of the Deployment's
// spec.replicas, or a strategic merge patch of its pod template's
// RolloutAnnotation; kv is not used. It returns the revision of the
// Deployment's write.
func (c *Churn) Do(ctx context.Context, worker int, _ watchload.KV, op watchload.Op) (int64, bool, error) {
	d, ok := c.byName[types.NamespacedName{Namespace: op.Namespace, Name: op.Name}]
	if !ok {
		return 0, false, fmt.Errorf("churn: no deployment %s/%s in the plan", op.Namespace, op.Name)
	}
	deployments := c.clients[worker].AppsV1().Deployments(op.Namespace)
	var rv string
	switch op.Kind {
	case ChurnScaleUp, ChurnScaleDown:
		replicas := c.done[d] + 1
		if op.Kind == ChurnScaleDown {
			replicas = max(c.done[d]-1, 0)
		}
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
		// On the Deployment itself: the typed client would decode the
		// scale subresource's answer (an autoscaling/v1 Scale) as a
		// Deployment. The write at etcd is the same, the Deployment's.
		s, err := deployments.Patch(ctx, op.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return 0, false, fmt.Errorf("scale deployment %s/%s to %d: %w", op.Namespace, op.Name, replicas, err)
		}
		c.done[d], rv = replicas, s.ResourceVersion
	default:
		c.rollouts[d]++
		patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, RolloutAnnotation, strconv.Itoa(c.rollouts[d]))
		dep, err := deployments.Patch(ctx, op.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return 0, false, fmt.Errorf("roll out deployment %s/%s: %w", op.Namespace, op.Name, err)
		}
		rv = dep.ResourceVersion
	}
	rev, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("deployment %s/%s: resourceVersion %q: %w", op.Namespace, op.Name, rv, err)
	}
	return rev, false, nil
}
