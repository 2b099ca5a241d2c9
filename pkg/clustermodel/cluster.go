package clustermodel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// Event sources, as the components name themselves.
const (
	sourceDeployment = "deployment-controller"
	sourceReplicaSet = "replicaset-controller"
	sourceScheduler  = "default-scheduler"
	sourceDaemonSet  = "daemonset-controller"
)

// deployment is the model's state of one planned Deployment: its
// objects as the control plane last wrote them. Only one writer worker
// touches it at a time (the churn's ops on one Deployment go to one
// worker, in order).
type deployment struct {
	plan    clusterload.Deployment
	obj     *appsv1.Deployment
	rs      *appsv1.ReplicaSet // the current ReplicaSet
	rsRev   int                // its revision, from 0
	pods    []*corev1.Pod      // the current ReplicaSet's pods, Running
	podSeq  int
	service bool
}

// cluster is the control plane the model stands for: what
// kube-controller-manager, kube-scheduler and KWOK write through
// kube-apiserver when a Deployment changes, each write one of store's
// requests (doc.go lists them with their sources).
type cluster struct {
	st      *store
	prefix  string
	plan    *clusterload.Plan
	podSize int
	deps    []*deployment
	byName  map[string]int

	node, ip atomic.Int64 // the scheduler's next node, the next pod IP

	evMu        sync.Mutex
	correlators map[string]*record.EventCorrelator

	lrMu     sync.Mutex
	lrExpiry map[string]time.Time // LimitRanger's live lookups by namespace

	podsCreated, podsDeleted, events atomic.Int64

	// shard numbers the pod IPs and names so that the shards' never meet
	// (nextIP, podName).
	shard shard.Shard

	nameMu   sync.Mutex
	nameSeqs map[string]int64 // the pod names generated, by owner (podName)
}

func newCluster(st *store, prefix string, plan *clusterload.Plan, podSize int, sh shard.Shard) *cluster {
	c := &cluster{st: st, prefix: prefix, plan: plan, podSize: podSize, byName: map[string]int{}, correlators: map[string]*record.EventCorrelator{},
		lrExpiry: map[string]time.Time{}, shard: sh, nameSeqs: map[string]int64{}}
	for i, d := range plan.Deployments {
		ob := deploymentObjects(d, podSize)
		c.deps = append(c.deps, &deployment{plan: d, obj: ob.Deployment, service: d.Service})
		c.byName[d.Namespace+"/"+d.Name] = i
	}
	return c
}

// event records an event of source about the object ref as client-go's
// event recorder does (k8s.io/client-go/tools/record/event.go
// recordToSink): through the source's EventCorrelator (events_cache.go:
// similar events aggregated, repeats counted, a spam filter per source
// and object), whose result is dropped, patched (an event with no watch
// cache: a read, then the update) or created, with the events' lease.
// The scheduler's events.k8s.io events are never correlated here: each
// is about a new pod.
func (c *cluster) event(ctx context.Context, source string, ref corev1.ObjectReference, reason, message string) error {
	now := metav1.Now()
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano())},
		InvolvedObject: ref, Reason: reason, Message: message, Source: corev1.EventSource{Component: source},
		FirstTimestamp: now, LastTimestamp: now, Count: 1, Type: corev1.EventTypeNormal}
	if source != sourceScheduler {
		c.evMu.Lock()
		corr := c.correlators[source]
		if corr == nil {
			corr = record.NewEventCorrelator(clock.RealClock{})
			c.correlators[source] = corr
		}
		res, err := corr.EventCorrelate(ev)
		c.evMu.Unlock()
		if err != nil {
			return err
		}
		if res.Skip {
			return nil
		}
		ev = res.Event
	}
	c.events.Add(1)
	k := key(c.prefix, "", "events", ev.Namespace, ev.Name)
	if ev.Count > 1 {
		if _, err := c.st.update(ctx, k, ev, true, true); err == nil {
			return nil
		}
	}
	_, err := c.st.create(ctx, k, ev, true)
	return err
}

func ref(kind, ns, name string) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name, UID: uid(ns, name)}
}

// limitRanger is the LimitRanger admission plugin on a pod's CREATE in
// ns: with no LimitRange in its informer, it lists the namespace's
// LimitRanges live, at most once per 30 s per namespace
// (plugin/pkg/admission/limitranger/admission.go GetLimitRanges,
// liveLookupCache, liveTTL); with the watch cache that list is a
// consistent read from the cache, which asks etcd for its current
// revision (a Range of the prefix as a key, limit 1) and waits for the
// cache with a progress request.
func (c *cluster) limitRanger(ctx context.Context, ns string) error {
	c.lrMu.Lock()
	now := time.Now()
	fresh := now.Before(c.lrExpiry[ns])
	if !fresh {
		c.lrExpiry[ns] = now.Add(limitRangerLiveTTL)
	}
	c.lrMu.Unlock()
	if fresh {
		return nil
	}
	if _, err := c.st.kv.Get(ctx, resource{name: "limitranges"}.prefixKey(c.prefix), clientv3.WithLimit(1)); err != nil {
		return err
	}
	return c.st.kv.RequestProgress(ctx)
}

// limitRangerLiveTTL is LimitRanger's liveTTL.
const limitRangerLiveTTL = 30 * time.Second

// nextIP returns a pod IP, one of the shard's (every Count-th from its
// Index), so that a divided load's shards never hand out the same.
func (c *cluster) nextIP() string {
	n := (c.ip.Add(1)-1)*int64(c.shard.Count) + int64(c.shard.Index) + 1
	return fmt.Sprintf("10.%d.%d.%d", 64+n>>16&63, n>>8&255, n&255)
}

// Pod names are the controllers' generateName "<owner>-" completed by
// kube-apiserver's SimpleNameGenerator with 5 characters of
// "bcdfghjklmnpqrstvwxz2456789" (k8s.io/apiserver/pkg/storage/names
// generate.go; k8s.io/apimachinery/pkg/util/rand String), 27^5 =
// 14,348,907 names per owner. Drawn at random, as kube-apiserver draws
// them, the 5,000 pods of the DaemonSet at --nodes 5000 would share a
// name with a probability of 1 - exp(-5000^2 / (2 x 27^5)), 58 %;
// kube-apiserver then draws another (createWithGenerateNameRetry). The
// model numbers each owner's names instead, each shard every Count-th
// number from its Index, and maps the numbers one to one onto the 27^5
// suffixes (podSuffix), so that its names never meet, its own or another
// shard's, while they look like kube-apiserver's.
const (
	podSuffixLength = 5
	podSuffixes     = 27 * 27 * 27 * 27 * 27 // the alphabet's size to the suffix's length
	// podSuffixStride is coprime with podSuffixes (a power of 3), so that
	// n -> n x podSuffixStride + offset mod podSuffixes is one to one.
	podSuffixStride = 5217953
	// maxNameGenerationCreateAttempts is kube-apiserver's: how often a
	// create with generateName is tried, each time with a new name, while
	// the name exists (k8s.io/apiserver/pkg/registry/generic/registry/
	// store.go createWithGenerateNameRetry).
	maxNameGenerationCreateAttempts = 8
)

// podSuffix returns the suffix numbered n (0 <= n < podSuffixes) of an
// owner whose suffixes start at offset: n scrambled one to one over the
// 27^5 suffixes, written in base 27 with the generator's alphabet
// (rand.SafeEncodeString maps the digit d to its d-th character).
func podSuffix(n, offset int64) string {
	v := (n%podSuffixes*podSuffixStride + offset) % podSuffixes
	digits := make([]byte, podSuffixLength)
	for i := range digits {
		digits[i] = byte(v % 27)
		v /= 27
	}
	return rand.SafeEncodeString(string(digits))
}

// podName returns the next name of a pod of owner: "<owner>-" and a
// suffix no other call of any shard returns for owner (the owner's
// sequence number times the shards plus the shard's index, podSuffix), or
// an error once the owner's share of the 27^5 suffixes is spent.
func (c *cluster) podName(owner string) (string, error) {
	c.nameMu.Lock()
	k := c.nameSeqs[owner]
	c.nameSeqs[owner] = k + 1
	c.nameMu.Unlock()
	n := k*int64(max(c.shard.Count, 1)) + int64(c.shard.Index)
	if n >= podSuffixes {
		return "", fmt.Errorf("%s: more than %d pod names (27^5 in all, shared by %d shards)", owner, k, max(c.shard.Count, 1))
	}
	return owner + "-" + podSuffix(n, int64(fnv32(owner))%podSuffixes), nil
}

// createPod creates a pod of tmpl for ownerName in ns, named as
// kube-apiserver names a pod with generateName (podName): when the name
// exists already (a key the model never wrote, under a reused prefix), it
// tries again with the next, each attempt a create transaction at etcd,
// as kube-apiserver does, up to maxNameGenerationCreateAttempts; a name
// that exists is never counted as a pod created. It returns the pod and
// its key.
func (c *cluster) createPod(ctx context.Context, tmpl corev1.PodTemplateSpec, ns, ownerKind, ownerName string) (*corev1.Pod, string, error) {
	var err error
	for range maxNameGenerationCreateAttempts {
		var name string
		if name, err = c.podName(ownerName); err != nil {
			return nil, "", err
		}
		p := pod(tmpl, ns, name, ownerKind, ownerName)
		k := key(c.prefix, "", "pods", ns, name)
		if _, err = c.st.create(ctx, k, p, false); err == nil {
			c.podsCreated.Add(1)
			return p, k, nil
		}
		if !errors.Is(err, errExists) {
			return nil, "", err
		}
	}
	return nil, "", fmt.Errorf("%d attempts at a name for a pod of %s/%s: %w", maxNameGenerationCreateAttempts, ns, ownerName, err)
}

// startPod is one pod's start, once its controller decided on it: the
// create (replicaset or daemonset controller, with its SuccessfulCreate
// event; createPod), the Binding (kube-scheduler: pkg/registry/core/pod/storage/
// storage.go BindingREST hands GuaranteedUpdate no cached object, so a
// read and a Txn; and its Scheduled event), then KWOK's status patch
// (pod-ready stage: one Txn from the cached pod). It returns the pod as
// Running.
func (c *cluster) startPod(ctx context.Context, tmpl corev1.PodTemplateSpec, ns, ownerKind, ownerName, node string, source string) (*corev1.Pod, error) {
	if err := c.limitRanger(ctx, ns); err != nil {
		return nil, err
	}
	p, k, err := c.createPod(ctx, tmpl, ns, ownerKind, ownerName)
	if err != nil {
		return nil, err
	}
	name := p.Name
	if err := c.event(ctx, source, ref(ownerKind, ns, ownerName), "SuccessfulCreate", "Created pod: "+name); err != nil {
		return nil, err
	}
	if node == "" {
		node = controlplane.NodeName(int(c.node.Add(1)-1) % c.plan.Nodes)
	}
	bound(p, node)
	if _, err := c.st.update(ctx, k, p, true, false); err != nil {
		return nil, err
	}
	if err := c.event(ctx, sourceScheduler, ref("Pod", ns, name), "Scheduled", "Successfully assigned "+ns+"/"+name+" to "+node); err != nil {
		return nil, err
	}
	running(p, c.nextIP())
	if _, err := c.st.update(ctx, k, p, false, false); err != nil {
		return nil, err
	}
	return p, nil
}

// terminate and remove are one pod's end: the replicaset controller's
// DELETE (terminate: the registry's Delete reads the pod from etcd,
// then, the pod being graceful, a GuaranteedUpdate sets
// deletionTimestamp: k8s.io/apiserver/pkg/registry/generic/registry/
// store.go Delete, updateForGracefulDeletionAndFinalizers; its
// SuccessfulDelete event), then KWOK's pod-delete stage's DELETE with
// grace 0 (remove: sigs.k8s.io/kwok pkg/kwok/controllers/pod_controller.go
// deleteOpt): the read, the update shortening the grace period, and the
// delete, whose first transaction starts from the cached pod, one write
// behind, and fails (cacher/delegator.go Delete; etcd3/store.go
// conditionalDelete retries from the else branch's object).
func (c *cluster) terminate(ctx context.Context, p *corev1.Pod, ownerKind, ownerName string) error {
	k := key(c.prefix, "", "pods", p.Namespace, p.Name)
	if _, err := c.st.get(ctx, k); err != nil {
		return err
	}
	terminating(p, 30)
	if _, err := c.st.update(ctx, k, p, false, false); err != nil {
		return err
	}
	return c.event(ctx, sourceReplicaSet, ref(ownerKind, p.Namespace, ownerName), "SuccessfulDelete", "Deleted pod: "+p.Name)
}

// remove is the second step of a pod's end (terminate).
func (c *cluster) remove(ctx context.Context, p *corev1.Pod) error {
	k := key(c.prefix, "", "pods", p.Namespace, p.Name)
	stale, err := c.st.get(ctx, k)
	if err != nil {
		return err
	}
	terminating(p, 0)
	if _, err := c.st.update(ctx, k, p, false, false); err != nil {
		return err
	}
	if _, err := c.st.delete(ctx, k, stale); err != nil {
		return err
	}
	c.podsDeleted.Add(1)
	return nil
}

// updateRS writes the ReplicaSet (spec or status).
func (c *cluster) updateRS(ctx context.Context, rs *appsv1.ReplicaSet) error {
	_, err := c.st.update(ctx, key(c.prefix, "apps", "replicasets", rs.Namespace, rs.Name), rs, false, false)
	return err
}

// observeRS is the replicaset controller's status write after rs was
// created or its spec changed: observedGeneration catches up before the
// pods it creates or deletes reach its cache, so the counts come in
// writes of their own (k8s.io/kubernetes pkg/controller/replicaset/
// replica_set.go syncReplicaSet: the status is calculated from the pods
// listed before manageReplicas; replica_set_utils.go
// updateReplicaSetStatus writes when observedGeneration differs from the
// generation, which each spec change raises).
func (c *cluster) observeRS(ctx context.Context, rs *appsv1.ReplicaSet) error {
	rs.Generation++
	rs.Status.ObservedGeneration = rs.Generation
	return c.updateRS(ctx, rs)
}

// updateDeployment writes the Deployment (spec or status).
func (c *cluster) updateDeployment(ctx context.Context, d *deployment) error {
	_, err := c.st.update(ctx, key(c.prefix, "apps", "deployments", d.obj.Namespace, d.obj.Name), d.obj, false, false)
	return err
}

// syncEndpoints writes the Service's Endpoints and EndpointSlice as the
// set of its pods changes: the endpoints controller
// (pkg/controller/endpoint/endpoints_controller.go syncService) lists the
// ready pods, which a terminating pod leaves; the endpointslice
// controller (k8s.io/endpointslice reconciler.go) keeps a terminating
// pod, serving and not ready, until it is gone. Each writes its object
// once per sync that changes it: endpoints when a pod turns ready or
// starts terminating, the slice then and again when the pod is deleted.
func (c *cluster) syncEndpoints(ctx context.Context, d *deployment, endpointsToo bool) error {
	if !d.service {
		return nil
	}
	ips := make([]string, 0, len(d.pods))
	for _, p := range d.pods {
		ips = append(ips, p.Status.PodIP)
	}
	ns, name := d.plan.Namespace, d.plan.Name
	if endpointsToo {
		if _, err := c.st.update(ctx, key(c.prefix, "", "endpoints", ns, name), endpoints(ns, name, ips), false, false); err != nil {
			return err
		}
	}
	_, err := c.st.update(ctx, key(c.prefix, "discovery.k8s.io", "endpointslices", ns, endpointSlice(ns, name, nil).Name), endpointSlice(ns, name, ips), false, false)
	return err
}

// setReplicas sets the Deployment's spec.replicas as the churn's PATCH
// does: one Txn from the cached object (a PATCH's GuaranteedUpdate starts
// from the watch cache).
func (c *cluster) setReplicas(ctx context.Context, d *deployment, replicas int) error {
	d.obj.Spec.Replicas = ptr32(replicas)
	d.obj.Generation++
	return c.updateDeployment(ctx, d)
}

func ptr32(n int) *int32 { v := int32(n); return &v }

// The deployment controller writes a Deployment's status after each
// sync that changes it (pkg/controller/deployment/sync.go
// syncDeploymentStatus, progress.go syncRolloutStatus): after it scales
// a ReplicaSet (observedGeneration) and after each change of its
// ReplicaSets' status (replicas, ready, available and, with
// DeploymentReplicaSetTerminatingReplicas, beta and on since 1.35,
// terminating replicas). During a rollout its queue merges the changes
// of the two ReplicaSets of one step: one write per pod started and one
// per pod gone. The replicaset controller writes a ReplicaSet's status
// on each such change (replica_set_utils.go updateReplicaSetStatus).

// scaleUp is a Deployment scaled up by one (the churn's PATCH) and the
// control plane's answer (addPod).
func (c *cluster) scaleUp(ctx context.Context, d *deployment) error {
	n := len(d.pods) + 1
	if err := c.setReplicas(ctx, d, n); err != nil {
		return err
	}
	return c.addPod(ctx, d, n, false)
}

// addPod is the current ReplicaSet scaled to n by the deployment
// controller (scaleRS) and one pod started under it (startOne).
func (c *cluster) addPod(ctx context.Context, d *deployment, n int, rollout bool) error {
	if err := c.scaleRS(ctx, d, d.rs, n-1, n, rollout); err != nil {
		return err
	}
	return c.startOne(ctx, d, rollout)
}

// scaleRS is rs scaled from to to by the deployment controller
// (sync.go scaleReplicaSet: an update of its spec and a ScalingReplicaSet
// event "Scaled up|down replica set NAME from FROM to TO"), and the
// Deployment's status written unless in a rollout.
func (c *cluster) scaleRS(ctx context.Context, d *deployment, rs *appsv1.ReplicaSet, from, to int, rollout bool) error {
	rs.Spec.Replicas = ptr32(to)
	if err := c.updateRS(ctx, rs); err != nil {
		return err
	}
	if err := c.observeRS(ctx, rs); err != nil {
		return err
	}
	dir := "up"
	if to < from {
		dir = "down"
	}
	if err := c.event(ctx, sourceDeployment, ref("Deployment", d.plan.Namespace, d.plan.Name), "ScalingReplicaSet",
		fmt.Sprintf("Scaled %s replica set %s from %d to %d", dir, rs.Name, from, to)); err != nil {
		return err
	}
	return c.deploymentStatus(ctx, d, !rollout)
}

// startOne is one pod started under the current ReplicaSet (startPod),
// with the status writes it causes; in a rollout the Deployment's status
// is written once, when the pod is ready.
func (c *cluster) startOne(ctx context.Context, d *deployment, rollout bool) error {
	p, err := c.startPod(ctx, d.rs.Spec.Template, d.plan.Namespace, "ReplicaSet", d.rs.Name, "", sourceReplicaSet)
	if err != nil {
		return err
	}
	d.pods = append(d.pods, p)
	d.rs.Status.Replicas = int32(len(d.pods))
	if err := c.updateRS(ctx, d.rs); err != nil {
		return err
	}
	if err := c.deploymentStatus(ctx, d, !rollout); err != nil {
		return err
	}
	d.rs.Status.ReadyReplicas, d.rs.Status.AvailableReplicas = int32(len(d.pods)), int32(len(d.pods))
	if err := c.updateRS(ctx, d.rs); err != nil {
		return err
	}
	if err := c.syncEndpoints(ctx, d, true); err != nil {
		return err
	}
	return c.deploymentStatus(ctx, d, true)
}

// deploymentStatus writes the Deployment's status from its pods, if
// write.
func (c *cluster) deploymentStatus(ctx context.Context, d *deployment, write bool) error {
	if !write {
		return nil
	}
	n := int32(len(d.pods))
	d.obj.Status.ObservedGeneration = d.obj.Generation
	d.obj.Status.Replicas, d.obj.Status.ReadyReplicas, d.obj.Status.AvailableReplicas, d.obj.Status.UpdatedReplicas = n, n, n, n
	return c.updateDeployment(ctx, d)
}

// scaleDown is a Deployment scaled down by one (the churn's PATCH) and
// the control plane's answer (removePod).
func (c *cluster) scaleDown(ctx context.Context, d *deployment) error {
	if len(d.pods) == 0 {
		return nil
	}
	n := len(d.pods) - 1
	if err := c.setReplicas(ctx, d, n); err != nil {
		return err
	}
	return c.removePod(ctx, d, d.rs, n, false)
}

// removePod is rs scaled to n by the deployment controller (scaleRS)
// and its oldest pod stopped (stopOne).
func (c *cluster) removePod(ctx context.Context, d *deployment, rs *appsv1.ReplicaSet, n int, rollout bool) error {
	if err := c.scaleRS(ctx, d, rs, n+1, n, rollout); err != nil {
		return err
	}
	return c.stopOne(ctx, d, rs, n, rollout)
}

// stopOne is the oldest of d.pods, of rs, stopped (terminate, remove),
// rs left with n pods, with the endpoint controllers' writes as the pod
// terminates and goes and the status writes they cause; in a rollout the
// Deployment's status is written once, when the pod is gone.
func (c *cluster) stopOne(ctx context.Context, d *deployment, rs *appsv1.ReplicaSet, n int, rollout bool) error {
	p := d.pods[0]
	d.pods = d.pods[1:]
	if err := c.deploymentStatus(ctx, d, !rollout); err != nil {
		return err
	}
	if err := c.terminate(ctx, p, "ReplicaSet", rs.Name); err != nil {
		return err
	}
	rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = int32(n), int32(n), int32(n)
	rs.Status.TerminatingReplicas = ptr32(1)
	if err := c.updateRS(ctx, rs); err != nil {
		return err
	}
	if err := c.deploymentStatus(ctx, d, !rollout); err != nil {
		return err
	}
	if err := c.syncEndpoints(ctx, d, true); err != nil {
		return err
	}
	if err := c.remove(ctx, p); err != nil {
		return err
	}
	if err := c.syncEndpoints(ctx, d, false); err != nil {
		return err
	}
	rs.Status.TerminatingReplicas = ptr32(0)
	if err := c.updateRS(ctx, rs); err != nil {
		return err
	}
	return c.deploymentStatus(ctx, d, true)
}

// rollout is a Deployment's pod template changed (the churn's PATCH):
// the deployment controller creates a new ReplicaSet at the size of the
// rollout's first step (sync.go getNewReplicaSet, NewRSNewReplicas: one
// ScalingReplicaSet event "from 0 to N"; the Deployment's status
// follows) and moves the pods over in rolloutSteps, each step one scale
// of a ReplicaSet (scaleRS) and its pods started (startOne) or stopped
// (stopOne).
func (c *cluster) rollout(ctx context.Context, d *deployment) error {
	d.obj.Generation++
	if d.obj.Spec.Template.Annotations == nil {
		d.obj.Spec.Template.Annotations = map[string]string{}
	}
	d.obj.Spec.Template.Annotations[clusterload.RolloutAnnotation] = fmt.Sprint(d.rsRev + 1)
	if err := c.updateDeployment(ctx, d); err != nil {
		return err
	}
	old, oldPods := d.rs, d.pods
	steps := rolloutSteps(len(oldPods))
	if len(steps) == 0 {
		return nil
	}
	d.rsRev++
	d.rs, d.pods = replicaSet(d.obj, d.rsRev, steps[0].To), nil
	if _, err := c.st.create(ctx, key(c.prefix, "apps", "replicasets", d.rs.Namespace, d.rs.Name), d.rs, false); err != nil {
		return err
	}
	if err := c.observeRS(ctx, d.rs); err != nil {
		return err
	}
	if err := c.event(ctx, sourceDeployment, ref("Deployment", d.plan.Namespace, d.plan.Name), "ScalingReplicaSet",
		fmt.Sprintf("Scaled up replica set %s from 0 to %d", d.rs.Name, steps[0].To)); err != nil {
		return err
	}
	if err := c.deploymentStatus(ctx, d, true); err != nil {
		return err
	}
	for i, st := range steps {
		if st.New {
			if i > 0 {
				if err := c.scaleRS(ctx, d, d.rs, st.From, st.To, true); err != nil {
					return err
				}
			}
			for range st.To - st.From {
				if err := c.startOne(ctx, d, true); err != nil {
					return err
				}
			}
			continue
		}
		if err := c.scaleRS(ctx, d, old, st.From, st.To, true); err != nil {
			return err
		}
		keep := d.pods
		d.pods = oldPods // stopOne stops the oldest of d.pods
		for n := st.From - 1; n >= st.To; n-- {
			if err := c.stopOne(ctx, d, old, n, true); err != nil {
				return err
			}
		}
		oldPods, d.pods = d.pods, keep
	}
	return nil
}

// rolloutStep is one scale of a rollout: the new ReplicaSet (New) or
// the old one, from From to To replicas.
type rolloutStep struct {
	New      bool
	From, To int
}

// rolloutSteps are the scales the deployment controller makes to roll r
// replicas from an old ReplicaSet to a new one with the default
// RollingUpdate strategy, maxSurge and maxUnavailable 25 % (surge
// rounded up, unavailable down, at least one of them 1:
// pkg/controller/deployment/util/deployment_util.go ResolveFenceposts),
// one per sync (rolling.go rolloutRolling: the new ReplicaSet scaled up
// when the surge allows, reconcileNewReplicaSet and NewRSNewReplicas,
// else the old one scaled down to the available pods above
// r - maxUnavailable, reconcileOldReplicaSets and
// scaleDownOldReplicaSetsForRollingUpdate, the new ReplicaSet's
// not-yet-available pods held against it). The sync after a scale-up
// runs before the new pods are available (the ReplicaSet's status change
// triggers it); they are available at the sync after that (KWOK makes a
// pod Running within a second). For 5 replicas: new 0-2, old 5-4, new
// 2-3, old 4-2, new 3-5, old 2-1, old 1-0.
func rolloutSteps(r int) []rolloutStep {
	if r <= 0 {
		return nil
	}
	surge, unavailable := (r+3)/4, r/4
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	var steps []rolloutStep
	old, nw, unready := r, 0, 0
	for i := 0; (old > 0 || nw < r) && i < 4*r+4; i++ { // each sync moves a pod, or makes the new ones available
		total := old + nw
		if up := min(r+surge-total, r-nw); up > 0 && unready == 0 {
			steps = append(steps, rolloutStep{New: true, From: nw, To: nw + up})
			nw, unready = nw+up, up
			continue
		}
		minAvailable := r - unavailable
		down := min(old, total-unready-minAvailable)
		unready = 0
		if down <= 0 {
			continue // the new pods became available: the next sync scales up
		}
		steps = append(steps, rolloutStep{From: old, To: old - down})
		old -= down
	}
	return steps
}

// seedDeployment creates a Deployment's objects as the seeding's API
// creates do (its ConfigMap, Secret, Service and the Deployment), the
// Service's Endpoints and EndpointSlice (endpoint controllers, on the
// Service's creation), and the control plane's answer: the ReplicaSet,
// at its full size and its pods. createAt waits for the seeding's
// rate before each of the API's creates.
func (c *cluster) seedDeployment(ctx context.Context, d *deployment, wait func() error) error {
	ob := deploymentObjects(d.plan, c.podSize)
	ns, name := d.plan.Namespace, d.plan.Name
	for _, step := range []func() error{
		func() error { return c.createAt(ctx, wait, "", "configmaps", ns, name, ob.ConfigMap) },
		func() error { return c.createAt(ctx, wait, "", "secrets", ns, name, ob.Secret) },
		func() error {
			if ob.Service == nil {
				return nil
			}
			if err := c.createAt(ctx, wait, "", "services", ns, name, ob.Service); err != nil {
				return err
			}
			if _, err := c.st.create(ctx, key(c.prefix, "", "endpoints", ns, name), endpoints(ns, name, nil), false); err != nil {
				return err
			}
			s := endpointSlice(ns, name, nil)
			_, err := c.st.create(ctx, key(c.prefix, "discovery.k8s.io", "endpointslices", ns, s.Name), s, false)
			return err
		},
		func() error { return c.createAt(ctx, wait, "apps", "deployments", ns, name, d.obj) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	// The deployment controller creates the ReplicaSet at its full size
	// (sync.go getNewReplicaSet: one ScalingReplicaSet event "from 0 to
	// N"), the replicaset controller creates its pods (slow-start batches:
	// replica_set.go manageReplicas) and reports their progress.
	n := d.plan.Replicas
	d.rs = replicaSet(d.obj, 0, n)
	if _, err := c.st.create(ctx, key(c.prefix, "apps", "replicasets", ns, d.rs.Name), d.rs, false); err != nil {
		return err
	}
	if err := c.observeRS(ctx, d.rs); err != nil {
		return err
	}
	if err := c.event(ctx, sourceDeployment, ref("Deployment", ns, name), "ScalingReplicaSet",
		fmt.Sprintf("Scaled up replica set %s from 0 to %d", d.rs.Name, n)); err != nil {
		return err
	}
	for range n {
		p, err := c.startPod(ctx, d.rs.Spec.Template, ns, "ReplicaSet", d.rs.Name, "", sourceReplicaSet)
		if err != nil {
			return err
		}
		d.pods = append(d.pods, p)
		d.rs.Status.Replicas, d.rs.Status.ReadyReplicas, d.rs.Status.AvailableReplicas = int32(len(d.pods)), int32(len(d.pods)), int32(len(d.pods))
		if err := c.updateRS(ctx, d.rs); err != nil {
			return err
		}
	}
	if err := c.syncEndpoints(ctx, d, true); err != nil {
		return err
	}
	return c.deploymentStatus(ctx, d, true)
}

// createAt creates obj at the seeding's rate (wait first).
func (c *cluster) createAt(ctx context.Context, wait func() error, group, resource, ns, name string, obj runtime.Object) error {
	if err := wait(); err != nil {
		return err
	}
	_, err := c.st.create(ctx, key(c.prefix, group, resource, ns, name), obj, false)
	return err
}

// seedDaemonSet creates the Plan's DaemonSet (pt's singleton) and one
// pod on each of pt's nodes (the daemonset controller; kube-scheduler
// binds them).
func (c *cluster) seedDaemonSet(ctx context.Context, wait func() error, pt Part) error {
	ds := c.plan.DaemonSet(c.podSize)
	if pt.Singletons() {
		if err := c.createAt(ctx, wait, "apps", "daemonsets", ds.Namespace, ds.Name, ds); err != nil {
			return err
		}
	}
	for i := pt.NodeFrom; i < pt.NodeTo; i++ {
		if _, err := c.startPod(ctx, ds.Spec.Template, ds.Namespace, "DaemonSet", ds.Name, controlplane.NodeName(i), sourceDaemonSet); err != nil {
			return err
		}
	}
	// The daemonset controller's status once its pods are scheduled and
	// once they are ready (pkg/controller/daemon/daemon_controller.go
	// updateDaemonSetStatus), written once, when shard 0's pods are
	// (the others' may still be starting).
	if !pt.Singletons() {
		return nil
	}
	n := int32(c.plan.Nodes)
	k := key(c.prefix, "apps", "daemonsets", ds.Namespace, ds.Name)
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: n, CurrentNumberScheduled: n, UpdatedNumberScheduled: n, ObservedGeneration: 1}
	if _, err := c.st.update(ctx, k, ds, false, false); err != nil {
		return err
	}
	ds.Status.NumberReady, ds.Status.NumberAvailable = n, n
	_, err := c.st.update(ctx, k, ds, false, false)
	return err
}
