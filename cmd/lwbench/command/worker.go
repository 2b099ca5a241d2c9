package command

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// The environment a worker reads its shard from when its flags do not
// give it: the completion index a Kubernetes Indexed Job gives each pod
// (k8s.io/api batch/v1 JobCompletionIndexEnvName, pkg/controller/job
// utils.go addCompletionIndexEnvVariable), and the shard count, which the
// Job's pods do not learn from Kubernetes: `lwbench manifest` sets it to
// the Job's completions.
const (
	envCompletionIndex = "JOB_COMPLETION_INDEX"
	envShards          = "LWBENCH_SHARDS"
)

// workerOptions are `lwbench worker`'s: `lwbench run`'s, which shard of
// how many, and where the workers meet.
type workerOptions struct {
	runOptions
	index, shards  int
	barrierEtcdKey string
	// barrierConfigMap is NAMESPACE/NAME of the barrier's ConfigMap,
	// reached with barrierKubeconfig or the pod's in-cluster config.
	barrierConfigMap  string
	barrierKubeconfig string
	// targetOwned is set by `lwbench run --workers` (a hidden flag): the
	// coordinator started the etcd the workers drive, so they treat it as
	// lwbench's own member (compaction and defragmentation on shard 0,
	// compact_rev_key at the root, no cleanup) rather than as a cluster
	// lwbench does not own.
	targetOwned bool
	// logResult prints the result as one line of the pod's log
	// (resultLinePrefix and the JSON), for kubectl logs and lwbench merge.
	logResult bool
}

// resultLinePrefix starts the one line of a worker's log that holds its
// result (lwbench worker --log-result): its JSON follows on that line.
// lwbench merge finds it in a pod's log, whatever else the log holds
// (kubectl logs interleaves the container's standard error).
const resultLinePrefix = "lwbench-result "

// maxResultLineBytes bounds the result line merge reads from a log.
const maxResultLineBytes = 64 << 20

// loggedResult returns the JSON of the last result line in a log
// (resultLinePrefix), and false when the log holds none.
func loggedResult(log []byte) ([]byte, bool) { return loggedLine(log, resultLinePrefix) }

// loggedLine returns what follows prefix on the last line of a log that
// holds it (at the start of the line, or after a space: kubectl logs
// --timestamps puts an RFC 3339 time first), and false when none does.
func loggedLine(log []byte, prefix string) ([]byte, bool) {
	var found []byte
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), maxResultLineBytes)
	for sc.Scan() {
		line := sc.Bytes()
		if i := bytes.Index(line, []byte(prefix)); i >= 0 && (i == 0 || line[i-1] == ' ') {
			found = bytes.Clone(line[i+len(prefix):])
		}
	}
	return found, found != nil
}

func (o *workerOptions) AddFlags(fs *pflag.FlagSet) {
	o.isWorker = true
	o.runOptions.AddFlags(fs)
	fs.IntVar(&o.index, "index", 0, "this worker's shard, 0-based (default: $"+envCompletionIndex+", as a Kubernetes Indexed Job sets it)")
	fs.IntVar(&o.shards, "shards", 0, "shards the load is divided into, one worker each (default: $"+envShards+")")
	fs.StringVar(&o.barrierEtcdKey, "barrier-etcd-key", "", "meet the other workers under this etcd key (outside --prefix, unique to the run) of the target")
	fs.StringVar(&o.barrierConfigMap, "barrier-configmap", "", "meet the other workers in this ConfigMap, NAMESPACE/NAME, of the cluster the worker runs in (in-cluster config, or --barrier-kubeconfig)")
	fs.StringVar(&o.barrierKubeconfig, "barrier-kubeconfig", "", "kubeconfig of the cluster holding --barrier-configmap (default: the pod's in-cluster config)")
	fs.BoolVar(&o.logResult, "log-result", false, "print the result (JSON) as one line starting with \""+strings.TrimSpace(resultLinePrefix)+"\" on standard output, after everything else, so that it can be told apart in a pod's log (kubectl logs mixes in standard error); lwbench merge reads such logs")
	fs.BoolVar(&o.targetOwned, "target-owned", false, "the etcd was started by the coordinator (lwbench run --workers)")
	fs.BoolVar(&o.runOptions.apiserversOwned, "apiservers-owned", false, "the kube-apiservers --kubeconfig reaches were started by the coordinator (lwbench run --workers --kube-apiserver)")
	for _, name := range []string{"target-owned", "apiservers-owned"} {
		if err := fs.MarkHidden(name); err != nil {
			panic(err) // the flag was just defined
		}
	}
}

// Validate reads the shard from the flags or the environment, checks the
// barrier and the target (a worker drives etcd directly, --endpoints),
// then the run's flags with the shard and the barrier set.
func (o *workerOptions) Validate() error {
	// The target's and the releases' values first, as run checks them: a
	// bad value is named before what a worker adds.
	if err := o.target.Validate(); err != nil {
		return err
	}
	if o.kube.enabled() {
		if err := o.kube.Validate(); err != nil {
			return err
		}
	}
	var err error
	if o.index, err = flagOrEnv(o.flags, "index", o.index, envCompletionIndex); err != nil {
		return err
	}
	if o.shards, err = flagOrEnv(o.flags, "shards", o.shards, envShards); err != nil {
		return err
	}
	sh := shard.Shard{Index: o.index, Count: o.shards}
	if o.shards < 1 {
		return cli.FlagErrorf("--shards: give the number of shards (or set $%s)", envShards)
	}
	if err := sh.Validate(); err != nil {
		return cli.FlagErrorf("--index %d --shards %d: %v", o.index, o.shards, err)
	}
	switch {
	case o.barrierEtcdKey == "" && o.barrierConfigMap == "":
		return cli.FlagErrorf("lwbench worker needs a barrier where the workers meet: --barrier-etcd-key or --barrier-configmap")
	case o.barrierEtcdKey != "" && o.barrierConfigMap != "":
		return cli.FlagErrorf("--barrier-etcd-key and --barrier-configmap cannot be used together")
	case o.barrierKubeconfig != "" && o.barrierConfigMap == "":
		return cli.FlagErrorf("--barrier-kubeconfig needs --barrier-configmap")
	}
	if o.barrierConfigMap != "" {
		if _, _, err := barrier.ParseConfigMap(o.barrierConfigMap); err != nil {
			return cli.FlagErrorf("--barrier-configmap: %v", err)
		}
	}
	if !o.changed("endpoints") {
		return cli.FlagErrorf("lwbench worker needs --endpoints: the etcd every worker of the load drives (with --kubeconfig, the cluster's etcd)")
	}
	switch {
	case o.kube.enabled():
		return cli.FlagErrorf("lwbench worker --kube-apiserver: kube-apiservers of each worker's own are not divided into shards yet; the workers share one cluster's, reached with --kubeconfig (lwbench run --workers N --kube-apiserver starts them for its workers)")
	case o.cluster.enabled() && !o.cluster.modelled() && !o.apiserversOwned:
		return cli.FlagErrorf("lwbench worker --nodes: a real control plane's cluster load is divided only among the workers of lwbench run --workers N --nodes K, which starts it (or add --cluster-model)")
	case o.cluster.enabled() && o.shards > o.cluster.nodes:
		return cli.FlagErrorf("--shards %d with --nodes %d: each worker drives a block of the nodes and needs at least one", o.shards, o.cluster.nodes)
	case o.fault != "":
		return cli.FlagErrorf("--fault cannot be used with lwbench worker: faults need members lwbench started itself")
	case o.snapshotPath != "":
		return cli.FlagErrorf("--snapshot cannot be used with lwbench worker: save a snapshot of the target after the workers end")
	}
	switch {
	case o.logResult && o.changed("write-out") && o.out.format != output.FormatJSON:
		return cli.FlagErrorf("--log-result prints JSON: leave -w out")
	case !o.changed("write-out"), o.logResult:
		o.out.format = output.FormatJSON // a worker's result is for lwbench merge
	}
	if o.apiserversOwned && !o.kubeconfig.enabled() {
		return cli.FlagErrorf("--apiservers-owned needs --kubeconfig")
	}
	o.ownedTarget = o.targetOwned
	o.runID = o.barrierRunID()
	o.load.Shard = sh
	o.load.Barrier = pendingBarrier{} // replaced by the real one once connected
	return o.runOptions.Validate()
}

// barrierRunID returns the run ID of the workers' namespaces through the
// API (--kubeconfig: lwbench-<id>-ns-N, kubeload.Options.RunID), which
// every worker must plan alike without talking: 12 hex digits of the
// SHA-256 of the barrier's name (its etcd key or its ConfigMap's
// NAMESPACE/NAME), which is unique to the run. A barrier name used again
// gives the same namespaces, which the run refuses if they still exist
// (kubeload.ErrNamespaceExists).
func (o *workerOptions) barrierRunID() string {
	name := "etcd:" + o.barrierEtcdKey
	if o.barrierConfigMap != "" {
		name = "configmap:" + o.barrierConfigMap
	}
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:6])
}

// flagOrEnv returns the flag's value when given, else env's, parsed as a
// non-negative integer; 0 when neither is set.
func flagOrEnv(fs *pflag.FlagSet, name string, value int, env string) (int, error) {
	if fs != nil && fs.Changed(name) {
		if value < 0 {
			return 0, cli.FlagErrorf("--%s %d: want 0 or more", name, value)
		}
		return value, nil
	}
	s, ok := os.LookupEnv(env)
	if !ok {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, cli.FlagErrorf("--%s: $%s is %q: want a number, 0 or more", name, env, s)
	}
	return v, nil
}

// pendingBarrier stands for the barrier while the flags are checked:
// watchload.Options.Validate requires one for a divided load.
type pendingBarrier struct{}

func (pendingBarrier) Wait(context.Context, string) (time.Time, error) {
	return time.Time{}, errors.New("barrier not connected")
}
func (pendingBarrier) Abort(context.Context, string) error {
	return errors.New("barrier not connected")
}

// newWorkerCommand returns `lwbench worker`; runF replaces the run in
// flag tests.
func newWorkerCommand(runF func(*cobra.Command, *workerOptions) error) *cobra.Command {
	o := &workerOptions{}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run one shard of a load divided among workers (a Kubernetes Indexed Job's pod, or lwbench run --workers)",
		Long: `lwbench worker runs shard --index of --shards of the load that lwbench run's
flags describe: the seeding and writes of its block of namespaces, its block
of the informers (each with its ID in the whole load), and, on shard 0 alone,
the compactor, the held-back informers and the defragmentation. With --nodes
--cluster-model it drives its block of the cluster's nodes (their Leases,
heartbeats and DaemonSet pods) and of its namespaces (their Deployments'
seeding and churn), shard 0 alone what a cluster has once (leader-election
Leases, kube-apiserver's watches and periodic reads, the compactor); with
--nodes through the control plane of lwbench run --workers N --nodes K
(--kubeconfig, the coordinator's) it creates its block of the nodes, its
namespaces' objects, churns them and opens its block of the kubelet watches,
shard 0 also the DaemonSet and the nodes' health observation. Every worker
plans the whole load from the same flags, so the shards agree without talking;
they meet at a barrier (an etcd key, or a ConfigMap of the cluster they run
in) after seeding, after their informers synced (the writes then start
together), after the writes and before the cleanup. Each worker times the
delivery of its own writes' events (one clock) and counts the others'. Its
result (JSON by default) keeps its histograms, so that lwbench merge combines
the workers' results exactly.

With --kubeconfig each worker is a client-go process driving an existing
cluster's API: it creates its own namespaces (lwbench-<id>-ns-N, the id
derived from the barrier's name, so every worker plans the same), writes and
at the end deletes them; its informers watch every worker's objects.
--endpoints is then that cluster's etcd.`,
	}
	return newLoadCommand(cmd, o, &o.out, runF, runWorker)
}

// runWorker connects the barrier and runs the worker's shard
// (runRun).
func runWorker(ctx context.Context, o *workerOptions, out, errOut io.Writer) error {
	b, closeBarrier, err := o.connectBarrier(ctx)
	if err != nil {
		return err
	}
	defer closeBarrier()
	o.load.Barrier = b
	if !o.logResult {
		return runRun(ctx, &o.runOptions, out, errOut)
	}
	var doc bytes.Buffer
	err = runRun(ctx, &o.runOptions, &doc, errOut)
	if doc.Len() == 0 {
		return err
	}
	var line bytes.Buffer
	if cerr := json.Compact(&line, doc.Bytes()); cerr != nil {
		return errors.Join(err, fmt.Errorf("--log-result: %w", cerr))
	}
	if _, werr := fmt.Fprintf(out, "%s%s\n", resultLinePrefix, line.Bytes()); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// connectBarrier opens the barrier the flags name; close releases its
// connection.
func (o *workerOptions) connectBarrier(ctx context.Context) (_ watchload.Barrier, close func(), err error) {
	sh := o.load.Shard
	if o.barrierEtcdKey == "" {
		return o.connectConfigMapBarrier(ctx, sh)
	}
	c, err := o.target.dial(ctx, o.target.endpoints)
	if err != nil {
		return nil, func() {}, fmt.Errorf("--barrier-etcd-key: %w", err)
	}
	b, err := barrier.NewEtcd(c, o.barrierEtcdKey, sh)
	if err != nil {
		c.Close()
		return nil, func() {}, cli.FlagErrorf("--barrier-etcd-key: %v", err)
	}
	return b, func() { c.Close() }, nil
}

// connectConfigMapBarrier opens --barrier-configmap's barrier
// (dialConfigMapBarrier).
func (o *workerOptions) connectConfigMapBarrier(ctx context.Context, sh shard.Shard) (watchload.Barrier, func(), error) {
	b, err := dialConfigMapBarrier(o.barrierConfigMap, o.barrierKubeconfig, sh)
	if err != nil {
		return nil, func() {}, err
	}
	return b, func() {}, nil
}

// dialConfigMapBarrier opens the barrier in configMap (NAMESPACE/NAME) as
// shard sh, through the cluster kubeconfig names, or the pod's service
// account (in-cluster config) when kubeconfig is "": a worker's
// --barrier-configmap and --barrier-kubeconfig.
func dialConfigMapBarrier(configMap, kubeconfig string, sh shard.Shard) (*barrier.ConfigMap, error) {
	namespace, name, err := barrier.ParseConfigMap(configMap)
	if err != nil {
		return nil, cli.FlagErrorf("--barrier-configmap: %v", err)
	}
	var cfg *rest.Config
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("--barrier-configmap %s: the cluster's config (--barrier-kubeconfig, or in a pod its service account): %w", configMap, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--barrier-configmap %s: %w", configMap, err)
	}
	b, err := barrier.NewConfigMap(cs, namespace, name, sh)
	if err != nil {
		return nil, cli.FlagErrorf("--barrier-configmap: %v", err)
	}
	return b, nil
}
