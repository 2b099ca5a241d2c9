package command

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/embedetcd"
	"github.com/kubestore/etcdkit/internal/runtemp"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/clustermodel"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// clusterRelease is the Kubernetes release of --nodes without
// --kube-apiserver: the one kube-controller-manager, kube-scheduler and
// KWOK were tried with here (../shared/reference/kwok-control-plane.md).
const clusterRelease = "1.37"

// clusterOptions make `lwbench run` a whole cluster's load (--nodes N): a
// real control plane (kube-apiserver, kube-controller-manager,
// kube-scheduler) and KWOK nodes in front of the etcd target, the objects
// of ClusterLoader2's load test seeded, then churned (pkg/clusterload,
// kubeload.ClusterOptions).
type clusterOptions struct {
	nodes          int
	podsPerNode    int
	nodesPerNS     int
	podSize        string
	nodeSize       string
	podChurn       float64
	rolloutPercent int
	createQPS      float64
	kubeletWatches int
	dbSize         string
	defragAt       time.Duration
	restart        string
	restartAt      time.Duration
	eventsEtcd     bool
	model          bool
	flags          *pflag.FlagSet

	podBytes, nodeBytes int   // from podSize, nodeSize
	fillerBytes         int64 // from dbSize
}

// clusterQuotaBytes is etcd's --quota-backend-bytes with --db-size: 8 GiB,
// the largest etcd's documentation recommends (etcd.io "Space quota");
// --db-size may take at most clusterMaxFiller of it.
const (
	clusterQuotaBytes = 8 << 30
	clusterMaxFiller  = 6 << 30
)

func (o *clusterOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.nodes, "nodes", 0, "run a whole cluster's load: a real control plane (kube-apiserver of --kube-apiserver, default "+clusterRelease+", kube-controller-manager, kube-scheduler) and this many KWOK nodes, with ClusterLoader2's load test objects (Deployments of 250/30/5 pods, Services for half, a ConfigMap and Secret each, a DaemonSet; one namespace per 100 nodes), then --pod-churn; the components are built from the Go module proxy on first use. With it, --compaction-interval defaults to kube-apiserver's 5m and --duration to three intervals and a minute (16m), so that the steady phase holds two compactions")
	fs.IntVar(&o.podsPerNode, "pods-per-node", clusterload.DefaultPodsPerNode, "with --nodes: the load's pods per node (ClusterLoader2's PODS_PER_NODE)")
	fs.IntVar(&o.nodesPerNS, "nodes-per-namespace", clusterload.DefaultNodesPerNamespace, "with --nodes: one namespace of load per this many nodes, at least one (ClusterLoader2's NODES_PER_NAMESPACE); with --workers each worker drives a block of the namespaces")
	fs.StringVar(&o.podSize, "pod-size", "4Ki", "with --nodes: each pod's size in etcd (protobuf), padded by an annotation: ClusterLoader2's pods are about 4 KiB, real clusters' 10-20 KiB")
	fs.StringVar(&o.nodeSize, "node-size", "12Ki", "with --nodes: each Node's size in etcd, padded by status.images as kubelets report them (real nodes: 10-30 KiB)")
	fs.Float64Var(&o.podChurn, "pod-churn", 10, "with --nodes: pods created (and as many deleted) per second once seeded, by scaling Deployments and rolling small ones out (ClusterLoader2's CL2_LOAD_TEST_THROUGHPUT)")
	fs.IntVar(&o.rolloutPercent, "rollout-percent", clusterload.DefaultRolloutPercent, "with --nodes: the churn's share of ops that roll a small Deployment out (its 5 pods replaced in steps of 1-2), in percent; the rest scale a Deployment up or down by one pod; 0: no rollouts")
	fs.Float64Var(&o.createQPS, "create-qps", 0, "with --nodes: creates per second while seeding (default ClusterLoader2's: 10 up to 500 nodes, else 100)")
	fs.IntVar(&o.kubeletWatches, "kubelet-watches", 10, "with --nodes: how many nodes also get the watches their kubelets would open (pods on the node, its Node, Services, each mounted ConfigMap and Secret); 0 none")
	fs.StringVar(&o.dbSize, "db-size", "0", "with --nodes: grow etcd's db by this much live data (keys under "+kubeload.FillerPrefix+", outside the prefix: no watch cache or informer holds them) after the seeding, e.g. 2Gi, so that a defragmentation copies a db of the size operators report stalls with; etcd then runs with --quota-backend-bytes 8Gi; needs an etcd lwbench starts")
	fs.DurationVar(&o.defragAt, "defrag-at", 0, "with --nodes: defragment every member once, this long after the churn began (the nodes' Lease renewals and Ready conditions are followed throughout); instead of holding informers back (--hold-back 0)")
	fs.BoolVar(&o.eventsEtcd, "events-etcd", false, "with --nodes: store events in a second embedded etcd, as kops runs etcd-events beside etcd-main (kube-apiserver --etcd-servers-overrides=/events#URL); the counting proxy counts both; the informers then watch no events")
	fs.StringVar(&o.restart, "restart", "", "with --nodes: restart this control-plane component during the churn (kube-apiserver: its watch cache is rebuilt from etcd; kube-controller-manager: its informers relist; kube-scheduler; kwok), SIGTERM then start, as a rollout does")
	fs.DurationVar(&o.restartAt, "restart-at", 0, "with --restart: how long after the churn began (default a third of --duration)")
	fs.BoolVar(&o.model, "cluster-model", false, "with --nodes: no control plane; lwbench's etcd-direct model sends etcd the cluster's traffic itself (node and control-plane Leases, the plan's objects and each pod's writes, events, kube-apiserver's watches, count polls and consistency checks; pkg/clustermodel), for sizes the control plane cannot hold here")
	o.flags = fs
}

// enabled reports whether --nodes was given.
func (o *clusterOptions) enabled() bool {
	return o.nodes != 0 || (o.flags != nil && o.flags.Changed("nodes"))
}

// Validate checks the flags: the --nodes flags need --nodes, which needs
// a control plane lwbench starts (not --kubeconfig, unless ownedAPI: a
// worker of lwbench run --workers reaching its coordinator's); it turns
// the kube-apiserver options on (kube: the default release unless given,
// the watch cache on unless --watch-cache says otherwise), except in such
// a worker, which drives the coordinator's.
func (o *clusterOptions) Validate(kube *kubeOptions, kubeconfig, ownedAPI bool, load *watchload.Options, target *targetOptions) error {
	if !o.enabled() {
		for _, name := range []string{"pods-per-node", "nodes-per-namespace", "pod-size", "node-size", "pod-churn", "rollout-percent", "create-qps", "kubelet-watches", "db-size", "defrag-at", "restart", "restart-at", "events-etcd", "cluster-model"} {
			if o.flags != nil && o.flags.Changed(name) {
				return cli.FlagErrorf("--%s needs --nodes", name)
			}
		}
		return nil
	}
	switch {
	case o.nodes < 1:
		return cli.FlagErrorf("--nodes: Invalid value: %d: must be at least 1", o.nodes)
	case kubeconfig && !ownedAPI:
		return cli.FlagErrorf("--nodes cannot be used with --kubeconfig: a cluster's load needs a control plane and KWOK lwbench starts")
	case o.podsPerNode < 1:
		return cli.FlagErrorf("--pods-per-node: Invalid value: %d: must be at least 1", o.podsPerNode)
	case o.nodesPerNS < 1:
		return cli.FlagErrorf("--nodes-per-namespace: Invalid value: %d: must be at least 1", o.nodesPerNS)
	case o.podChurn <= 0:
		return cli.FlagErrorf("--pod-churn: Invalid value: %v: must be above 0", o.podChurn)
	case o.rolloutPercent < 0 || o.rolloutPercent > 100:
		return cli.FlagErrorf("--rollout-percent: Invalid value: %d: must be 0 to 100", o.rolloutPercent)
	case o.createQPS < 0:
		return cli.FlagErrorf("--create-qps: Invalid value: %v: must be 0 (ClusterLoader2's) or more", o.createQPS)
	case o.kubeletWatches < 0:
		return cli.FlagErrorf("--kubelet-watches: Invalid value: %d: must be 0 or more", o.kubeletWatches)
	}
	var err error
	if o.podBytes, err = byteSize("pod-size", o.podSize, 1<<20); err != nil {
		return err
	}
	if o.nodeBytes, err = byteSize("node-size", o.nodeSize, 1<<20); err != nil {
		return err
	}
	if o.model {
		switch {
		case kube.enabled():
			return cli.FlagErrorf("--cluster-model cannot be used with --kube-apiserver: the model stands for the control plane")
		case o.flags != nil && o.flags.Changed("kubelet-watches"):
			return cli.FlagErrorf("--kubelet-watches cannot be used with --cluster-model: kubelets' watches are served by kube-apiserver's watch cache, which the model's etcd does not see")
		}
		for _, name := range []string{"db-size", "defrag-at", "restart", "restart-at", "events-etcd"} {
			if o.flags != nil && o.flags.Changed(name) {
				return cli.FlagErrorf("--%s cannot be used with --cluster-model: it is an experiment on the real control plane", name)
			}
		}
		return nil
	}
	if err := o.validateExperiments(load, target); err != nil {
		return err
	}
	if ownedAPI {
		return nil // the coordinator's control plane
	}
	if kube.version == "" {
		kube.version = clusterRelease
	}
	if kube.flags == nil || !kube.flags.Changed("watch-cache") {
		kube.watchCache = true // a cluster's kube-apiserver caches
	}
	return nil
}

// validateExperiments checks --db-size, --defrag-at and --restart: the
// filler needs an etcd lwbench starts (whose quota it raises), the
// defragmentation and restart replace the informers held back (--hold-back
// 0 unless given), and --restart-at defaults to a third of the run.
func (o *clusterOptions) validateExperiments(load *watchload.Options, target *targetOptions) error {
	q, err := resource.ParseQuantity(o.dbSize)
	if err != nil {
		return cli.FlagErrorf("--db-size: Invalid value: %q: give a size such as 2Gi", o.dbSize)
	}
	if v, ok := q.AsInt64(); !ok || v < 0 || v > clusterMaxFiller {
		return cli.FlagErrorf("--db-size: Invalid value: %q: must be 0 to %d bytes (6Gi) of etcd's 8Gi quota", o.dbSize, int64(clusterMaxFiller))
	} else {
		o.fillerBytes = v
	}
	if o.fillerBytes > 0 {
		if len(target.endpoints) > 0 {
			return cli.FlagErrorf("--db-size needs an etcd lwbench starts: it writes outside --prefix, which it never does to an --endpoints cluster")
		}
		target.quotaBackendBytes = clusterQuotaBytes
	}
	if o.defragAt < 0 {
		return cli.FlagErrorf("--defrag-at: Invalid value: %v: must be above 0", o.defragAt)
	}
	if o.restart != "" && !slices.Contains(controlplane.Components, o.restart) {
		return cli.FlagErrorf("--restart: Unsupported value: %q: supported values: %s", o.restart, strings.Join(controlplane.Components, ", "))
	}
	if o.restartAt < 0 || (o.restartAt > 0 && o.restart == "") {
		return cli.FlagErrorf("--restart-at needs --restart and a duration above 0")
	}
	if o.defragAt > 0 || o.restart != "" {
		if o.flags.Changed("hold-back") && load.HoldBack > 0 {
			return cli.FlagErrorf("--hold-back cannot be used with --defrag-at or --restart: the run defragments or restarts at a fixed time instead of after a held informer's compaction")
		}
		load.HoldBack = 0
	}
	if o.restart != "" && o.restartAt == 0 {
		o.restartAt = load.Duration / 3
	}
	return nil
}

// clusterCompactionInterval is --compaction-interval's default with
// --nodes: kube-apiserver's own --etcd-compaction-interval default
// (k8s.io/apiserver/pkg/storage/storagebackend/config.go
// DefaultCompactInterval).
const clusterCompactionInterval = 5 * time.Minute

// clusterDuration is --duration's default with --nodes for a compaction
// interval: three intervals and a minute. kube-apiserver's compactor
// first only notes a revision one interval after it starts and compacts
// from the second interval on, then every interval
// (k8s.io/apiserver/pkg/storage/etcd3/compact.go), so a steady phase that
// long holds two compactions (and so the consistency checks and count
// polls of a cluster) however long the seeding took: 16 minutes at 5.
func clusterDuration(interval time.Duration) time.Duration { return 3*interval + time.Minute }

// defaultTiming gives --compaction-interval and --duration their
// defaults with --nodes, unless changed says the user set them
// (kubeload then warns when the steady phase cannot hold two
// compactions).
func (o *clusterOptions) defaultTiming(load *watchload.Options, changed func(string) bool) {
	if !o.enabled() {
		return
	}
	if !changed("compaction-interval") {
		load.CompactionInterval = clusterCompactionInterval
	}
	if !changed("duration") && load.CompactionInterval > 0 {
		load.Duration = clusterDuration(load.CompactionInterval)
	}
}

// byteSize reads flag's size, a Kubernetes quantity (4Ki, 10000), of at
// most limit bytes.
func byteSize(flag, s string, limit int64) (int, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, cli.FlagErrorf("--%s: Invalid value: %q: give a size such as 4Ki or 20000", flag, s)
	}
	v, ok := q.AsInt64()
	if !ok || v < 0 || v > limit {
		return 0, cli.FlagErrorf("--%s: Invalid value: %q: must be 0 to %d bytes", flag, s, limit)
	}
	return int(v), nil
}

// modelled reports whether --nodes runs the etcd-direct model of the
// cluster (--cluster-model) rather than a control plane.
func (o *clusterOptions) modelled() bool { return o.enabled() && o.model }

// planOptions are the flags' clusterload.Options (--rollout-percent 0:
// none, which the Options spell negative).
func (o *clusterOptions) planOptions() clusterload.Options {
	rollouts := o.rolloutPercent
	if rollouts == 0 {
		rollouts = -1
	}
	return clusterload.Options{Nodes: o.nodes, PodsPerNode: o.podsPerNode, NodesPerNamespace: o.nodesPerNS, RolloutPercent: rollouts}
}

// clusterModel is the run's clustermodel.Options, counting with counter.
func (o *clusterOptions) clusterModel(counter clustermodel.Counter) (clustermodel.Options, error) {
	plan, err := clusterload.NewPlan(o.planOptions())
	if err != nil {
		return clustermodel.Options{}, fmt.Errorf("--nodes: %w", err)
	}
	return clustermodel.Options{Plan: plan, PodSize: o.podBytes, NodeSize: o.nodeBytes, QPS: o.createQPS, PodChurn: o.podChurn, Counter: counter}, nil
}

// clusterLoad is the run's kubeload.ClusterOptions.
func (o *clusterOptions) clusterLoad() (*kubeload.ClusterOptions, error) {
	plan, err := clusterload.NewPlan(o.planOptions())
	if err != nil {
		return nil, fmt.Errorf("--nodes: %w", err)
	}
	return &kubeload.ClusterOptions{Plan: plan, PodSize: o.podBytes, NodeSize: o.nodeBytes, QPS: o.createQPS,
		PodChurn: o.podChurn, KubeletWatches: o.kubeletWatches, FillerBytes: o.fillerBytes, DefragAt: o.defragAt,
		Restart: o.restart, RestartAt: o.restartAt}, nil
}

// startEventsEtcd starts the embedded etcd member of --events-etcd in a
// directory of its own, removed by the returned close with the member.
func startEventsEtcd(ctx context.Context, unsafeNoFsync bool, logf func(string, ...any)) ([]string, func(), error) {
	dir, err := runtemp.New("", runtemp.EtcdPrefix)
	if err != nil {
		return nil, func() {}, err
	}
	srv, err := embedetcd.Start(ctx, embedetcd.Config{Dir: dir, UnsafeNoFsync: unsafeNoFsync})
	if err != nil {
		os.RemoveAll(dir)
		return nil, func() {}, fmt.Errorf("the events etcd: %w", err)
	}
	logf("started an embedded etcd member for events in %s at %s", dir, strings.Join(srv.Endpoints, ","))
	return srv.Endpoints, func() {
		srv.Close()
		os.RemoveAll(dir)
	}, nil
}
