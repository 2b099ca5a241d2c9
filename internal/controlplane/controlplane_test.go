package controlplane_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestControlPlaneRunsKWOKNodesAndPods starts kube-apiserver,
// kube-controller-manager, kube-scheduler and KWOK in front of an embedded
// etcd, creates 10 KWOK nodes and a Deployment of 20 pods, and asserts what
// a cluster does with them: the nodes become Ready with a Lease each in
// kube-node-lease, every pod is bound to one of them and Running (so the
// deployment and replicaset controllers, the scheduler and KWOK's stages
// ran), the namespace's default ServiceAccount exists and the pods carry
// its projected token (the serviceaccount controller ran and the
// ServiceAccount admission plugin is on), and both leader-election Leases
// are held. Then it watches etcd's /registry/leases/kube-node-lease/ for
// leaseWindow: every node's Lease is renewed every NodeLeaseRenewInterval
// (10.2 s mean, 10-10.4 s), so the node Lease writes reach etcd at
// nodes/10.2 s per second; the mean interval between one node's writes
// must be within 10 % of that. Stop ends every process.
func TestControlPlaneRunsKWOKNodesAndPods(t *testing.T) {
	const (
		nodes       = 10
		replicas    = 20
		ns          = "load-0"
		leaseWindow = 31 * time.Second
	)
	bins := apiservertest.ControlPlaneBinaries(t)
	srv := etcdtest.RunEtcd(t)
	etcd := etcdtest.NewClient(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	began := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Config{
		Binaries: bins, Dir: t.TempDir(),
		APIServer: apiserverproc.Config{EtcdServers: srv.Endpoints},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	t.Logf("control plane ready after %v", time.Since(began).Round(time.Millisecond))
	rc := cp.RESTConfig()
	rc.QPS, rc.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// fail reports err with whatever component died meanwhile.
	fail := func(format string, args ...any) {
		t.Helper()
		if err := cp.Err(); err != nil {
			t.Errorf("a component exited: %v", err)
		}
		t.Fatalf(format, args...)
	}

	if err := controlplane.CreateNodes(ctx, cs, 0, nodes, 4); err != nil {
		fail("%v", err)
	}
	nctx, ncancel := context.WithTimeout(ctx, time.Minute)
	defer ncancel()
	if err := controlplane.WaitNodesReady(nctx, cs, nodes, 500*time.Millisecond); err != nil {
		fail("%v", err)
	}
	t.Logf("%d nodes Ready after %v", nodes, time.Since(began).Round(time.Millisecond))
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		fail("create namespace: %v", err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("fake", replicas), metav1.CreateOptions{}); err != nil {
		fail("create deployment: %v", err)
	}

	var state string
	err = poll(ctx, func() (bool, error) {
		s, done, err := clusterState(ctx, cs, ns, nodes, replicas)
		state = s
		return done, err
	})
	if err != nil {
		fail("cluster did not settle: %v; last state: %s", err, state)
	}
	t.Logf("%s after %v", state, time.Since(began).Round(time.Millisecond))

	if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("default ServiceAccount of %s: %v", ns, err)
	}
	// The service range holds a cluster's Services (thousands, not a
	// /24's 254): its last address is a valid ClusterIP.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "last-ip"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.255.254",
		Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Errorf("a Service at the last address of %s: %v", controlplane.ServiceClusterIPRange, err)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fail("list pods: %v", err)
	}
	for _, p := range pods.Items {
		if p.Spec.ServiceAccountName != "default" || !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
			return strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil
		}) {
			t.Errorf("pod %s has service account %q and volumes %v, want default's projected kube-api-access token (ServiceAccount admission)",
				p.Name, p.Spec.ServiceAccountName, volumeNames(p.Spec.Volumes))
			break
		}
	}
	for _, name := range []string{controlplane.ControllerManagerLease, controlplane.SchedulerLease} {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("leader-election Lease %s: %v", name, err)
			continue
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > 15*time.Second {
			t.Errorf("got Lease %s held by %v renewed %v, want a holder that renewed within 15 s", name, l.Spec.HolderIdentity, l.Spec.RenewTime)
		}
	}

	// The node Lease writes etcd sees.
	rev, err := etcd.Get(ctx, "/registry/none")
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, leaseWindow)
	defer wcancel()
	const prefix = "/registry/leases/kube-node-lease/"
	puts := map[string][]time.Time{}
	total := 0
	for resp := range etcd.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev.Header.Revision+1)) {
		now := time.Now()
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut {
				puts[string(ev.Kv.Key)] = append(puts[string(ev.Kv.Key)], now)
				total++
			}
		}
	}
	if ctx.Err() != nil {
		fail("watch of %s: %v", prefix, ctx.Err())
	}
	// Each node renews every 10-10.4 s: in leaseWindow, 2 to 4 writes.
	var intervals time.Duration
	var n int
	for i := range nodes {
		key := prefix + controlplane.NodeName(i)
		ts := puts[key]
		if len(ts) < 2 || len(ts) > 4 {
			t.Errorf("got %d writes of %s in %v, want 2 to 4 (one every %v)", len(ts), key, leaseWindow, controlplane.NodeLeaseRenewInterval)
			continue
		}
		intervals += ts[len(ts)-1].Sub(ts[0])
		n += len(ts) - 1
	}
	if len(puts) != nodes {
		t.Errorf("got writes to %d node Leases, want %d", len(puts), nodes)
	}
	if n > 0 {
		mean := intervals / time.Duration(n)
		want := controlplane.NodeLeaseRenewInterval
		rate := float64(nodes) / mean.Seconds()
		t.Logf("%d node Lease writes in %v (%.2f/s raw); mean renewal interval %v, so %.2f writes/s for %d nodes (want %.2f/s)",
			total, leaseWindow, float64(total)/leaseWindow.Seconds(), mean.Round(time.Millisecond), rate, nodes, float64(nodes)/want.Seconds())
		if d := mean - want; d < -want/10 || d > want/10 {
			t.Errorf("got a mean node Lease renewal interval of %v, want %v within 10 %%", mean, want)
		}
	}
	if err := cp.Err(); err != nil {
		t.Errorf("a component exited: %v", err)
	}

	stopped := time.Now()
	cp.Stop()
	t.Logf("stopped in %v", time.Since(stopped).Round(time.Millisecond))
	for _, p := range cp.Processes() {
		if pid := p.PID(); pid != 0 {
			t.Errorf("%s still runs as PID %d after Stop", p.Name, pid)
		}
	}
}

// clusterState says how far the cluster is: nodes Ready with a Lease,
// pods bound and Running; done when all are.
func clusterState(ctx context.Context, cs kubernetes.Interface, ns string, nodes, replicas int) (string, bool, error) {
	nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: controlplane.NodeTypeLabel + "=" + controlplane.NodeTypeValue})
	if err != nil {
		return "", false, err
	}
	ready := 0
	for _, n := range nl.Items {
		if controlplane.NodeReady(&n) {
			ready++
		}
	}
	leases, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", false, err
	}
	held := 0
	for _, l := range leases.Items {
		// KWOK holds every node's Lease under its own identity.
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && l.Spec.RenewTime != nil &&
			time.Since(l.Spec.RenewTime.Time) < controlplane.NodeLeaseDuration && strings.HasPrefix(l.Name, "kwok-node-") {
			held++
		}
	}
	pl, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", false, err
	}
	bound, running := 0, 0
	for _, p := range pl.Items {
		if p.Spec.NodeName != "" && strings.HasPrefix(p.Spec.NodeName, "kwok-node-") {
			bound++
		}
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			running++
		}
	}
	s := fmt.Sprintf("%d/%d nodes Ready, %d node Leases held, %d pods: %d bound, %d Running", ready, nodes, held, len(pl.Items), bound, running)
	return s, ready == nodes && held == nodes && len(pl.Items) == replicas && bound == replicas && running == replicas, nil
}

// poll calls f every 500 ms until it is done, fails or ctx ends (at most
// 90 s).
func poll(ctx context.Context, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		done, err := f()
		if err != nil && ctx.Err() == nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// deployment is a Deployment of replicas pods for KWOK's nodes, as
// ClusterLoader2's load test shapes them: one container, small requests.
func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: controlplane.NodeSelector(),
					Tolerations:  controlplane.Tolerations(),
					Containers: []corev1.Container{{
						Name: "fake", Image: "fake-image",
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
						}},
					}},
				},
			},
		},
	}
}

func volumeNames(vs []corev1.Volume) []string {
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	return names
}
