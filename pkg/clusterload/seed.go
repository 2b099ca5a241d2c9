package clusterload

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/parallel"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// SeedOptions shape Seed.
type SeedOptions struct {
	// QPS bounds the creates per second, all clients together
	// (DefaultQPS(nodes) if 0).
	QPS float64
	// PodSize and NodeSize are the objects' sizes in bytes
	// (DefaultPodSize, DefaultNodeSize if 0).
	PodSize, NodeSize int
	// Logf, if set, receives a line per step.
	Logf func(format string, args ...any)
	// Shard is the part of the plan to create, of a load divided among
	// workers (zero: the whole): shard.Range's block of the nodes and of
	// the namespaces with their Deployments' objects, and, on shard 0,
	// the DaemonSet. The shards share QPS, each 1/Count of it.
	Shard shard.Shard
}

// DefaultQPS is CL2's rate of object creates for a cluster of nodes
// (perf-tests clusterloader2/testing/load/config.yaml defaultQps: 10 up to
// 500 nodes, else 100).
func DefaultQPS(nodes int) float64 {
	if nodes <= 500 {
		return 10
	}
	return 100
}

// Seed creates p's KWOK nodes, its namespaces, then for each Deployment
// its ConfigMap, Secret, Service and the Deployment, and the DaemonSet,
// through clients (in parallel, one create at a time each) at o.QPS
// creates per second in all; with o.Shard, only that shard's part. An
// object that exists already is an error (the cluster is not lwbench's to
// reuse).
func Seed(ctx context.Context, clients []kubernetes.Interface, p *Plan, o SeedOptions) error {
	if o.QPS <= 0 {
		o.QPS = DefaultQPS(p.Nodes)
	}
	sh := o.Shard
	if sh == (shard.Shard{}) {
		sh = shard.Whole
	}
	if err := sh.Validate(); err != nil {
		return err
	}
	o.QPS = sh.Share(o.QPS, 0)
	nodeFrom, nodeTo := sh.Range(p.Nodes)
	nsFrom, nsTo := sh.Range(len(p.Namespaces))
	namespaces := p.Namespaces[nsFrom:nsTo]
	var deployments []Deployment
	for _, d := range p.Deployments {
		if slices.Contains(namespaces, d.Namespace) {
			deployments = append(deployments, d)
		}
	}
	if o.PodSize <= 0 {
		o.PodSize = DefaultPodSize
	}
	if o.NodeSize <= 0 {
		o.NodeSize = DefaultNodeSize
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	limit := flowcontrol.NewTokenBucketRateLimiter(float32(o.QPS), max(1, int(o.QPS)))
	defer limit.Stop()
	each := func(n int, create func(ctx context.Context, cs kubernetes.Interface, i int) error) error {
		return parallel.Each(ctx, len(clients), n, func(ctx context.Context, w, i int) error {
			if err := limit.Wait(ctx); err != nil {
				return err
			}
			return create(ctx, clients[w], i)
		})
	}
	logf("creating %d KWOK nodes of %d bytes at %.0f/s", nodeTo-nodeFrom, o.NodeSize, o.QPS)
	if err := each(nodeTo-nodeFrom, func(ctx context.Context, cs kubernetes.Interface, i int) error {
		_, err := cs.CoreV1().Nodes().Create(ctx, Node(nodeFrom+i, o.NodeSize), metav1.CreateOptions{})
		return created("node "+controlplane.NodeName(nodeFrom+i), err)
	}); err != nil {
		return err
	}
	if err := each(len(namespaces), func(ctx context.Context, cs kubernetes.Interface, i int) error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaces[i]}}, metav1.CreateOptions{})
		return created("namespace "+namespaces[i], err)
	}); err != nil {
		return err
	}
	pods, services := 0, 0
	for _, d := range deployments {
		pods += d.Replicas
		if d.Service {
			services++
		}
	}
	daemonSet := ""
	if sh.Index == 0 {
		daemonSet = ", and a daemonset"
	}
	logf("creating %d deployments (%d pods of about %d bytes), %d services, %d configmaps and secrets in %d namespaces%s",
		len(deployments), pods, o.PodSize, services, len(deployments), len(namespaces), daemonSet)
	if err := each(len(deployments), func(ctx context.Context, cs kubernetes.Interface, i int) error {
		d := deployments[i]
		ob := d.Build(o.PodSize)
		if _, err := cs.CoreV1().ConfigMaps(d.Namespace).Create(ctx, ob.ConfigMap, metav1.CreateOptions{}); err != nil {
			return created("configmap "+d.Namespace+"/"+d.Name, err)
		}
		if _, err := cs.CoreV1().Secrets(d.Namespace).Create(ctx, ob.Secret, metav1.CreateOptions{}); err != nil {
			return created("secret "+d.Namespace+"/"+d.Name, err)
		}
		if ob.Service != nil {
			if _, err := cs.CoreV1().Services(d.Namespace).Create(ctx, ob.Service, metav1.CreateOptions{}); err != nil {
				return created("service "+d.Namespace+"/"+d.Name, err)
			}
		}
		_, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, ob.Deployment, metav1.CreateOptions{})
		return created("deployment "+d.Namespace+"/"+d.Name, err)
	}); err != nil {
		return err
	}
	if sh.Index != 0 {
		return nil // the DaemonSet is shard 0's
	}
	ds := p.DaemonSet(o.PodSize)
	_, err := clients[0].AppsV1().DaemonSets(ds.Namespace).Create(ctx, ds, metav1.CreateOptions{})
	return created("daemonset "+ds.Namespace+"/"+ds.Name, err)
}

// created wraps a create's error with what was created, naming an object
// that exists already.
func created(what string, err error) error {
	if err == nil {
		return nil
	}
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s: it exists already (a cluster lwbench did not start, or an earlier run's): %w", what, err)
	}
	return fmt.Errorf("create %s: %w", what, err)
}

// WaitRunning waits until want pods of the load (label group=load) are
// Running, counting them with a paginated LIST every RunningPollInterval
// of want; it gives up when stall passes without one more pod Running
// (so a slow control plane that keeps making progress is waited for, and
// one that stopped is not). It returns how many were Running when it
// stopped, and an error if that is fewer than want.
func WaitRunning(ctx context.Context, cs kubernetes.Interface, want int, stall time.Duration, logf func(string, ...any)) (int, error) {
	every := RunningPollInterval(want)
	best, bestAt := -1, time.Now()
	for {
		running := 0
		opts := metav1.ListOptions{LabelSelector: "group=load", Limit: 5000}
		for {
			l, err := cs.CoreV1().Pods("").List(ctx, opts)
			if err != nil {
				return running, fmt.Errorf("list the load's pods: %w", err)
			}
			for _, pod := range l.Items {
				if pod.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if opts.Continue = l.Continue; opts.Continue == "" {
				break
			}
		}
		if running >= want {
			return running, nil
		}
		if running > best {
			best, bestAt = running, time.Now()
		} else if time.Since(bestAt) >= stall {
			return running, fmt.Errorf("%d of %d pods Running, none more for %v", running, want, stall)
		}
		if logf != nil {
			logf("%d of %d pods Running", running, want)
		}
		if !clockwait.SleepReal(ctx, every) {
			return running, ctx.Err()
		}
	}
}

// RunningPollInterval is how often WaitRunning counts want pods: a
// second per 1,000 pods, at least one. Each count LISTs every pod of the
// load (4 KiB each by default): at 11,500 pods once a second that is
// about 46 MB a second that kube-apiserver encodes on the cores the
// control plane needs to run the pods.
func RunningPollInterval(want int) time.Duration {
	return max(time.Second, time.Duration(want)*time.Second/1000)
}
