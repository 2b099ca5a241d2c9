package command

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/internal/runtemp"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// experimentDivision are the flags of an experiment that divides among
// worker processes (experiment.Divisible): --workers N on the
// coordinator, which starts N processes of its own executable running
// the same subcommand with the hidden --index, --shards and
// --barrier-etcd-key, the workers.
type experimentDivision struct {
	workers        int    // the coordinator's --workers; 0: not a coordinator
	index, shards  int    // a worker's shard; shards 0: not a worker
	barrierEtcdKey string // where a worker meets the others: an etcd key of --endpoints,
	// or a ConfigMap, NAMESPACE/NAME, of the cluster barrierKubeconfig
	// (or the pod's service account) reaches: a Kubernetes Job's workers
	// (lwbench manifest --experiment).
	barrierConfigMap, barrierKubeconfig string
	// logResult prints a worker's result as one line of its log
	// (resultLinePrefix and the JSON), for lwbench gather and merge.
	logResult bool
	// apiserversOwned: the kube-apiservers a worker's --kubeconfig
	// reaches were started by its coordinator (--workers N
	// --kube-apiserver) for this experiment alone, not a cluster lwbench
	// does not own.
	apiserversOwned bool
	// barrier is a worker's, once connected (runExperimentWorker).
	barrier watchload.Barrier
}

// addFlags registers --workers and the hidden flags of a worker.
func (d *experimentDivision) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&d.workers, "workers", 0, fmt.Sprintf("divide the experiment's watchers among this many worker processes (1 to %d) of this executable, on the member it starts (or --cluster-size, --endpoints); with --kube-apiserver the workers share the kube-apiservers it starts, with --kubeconfig that cluster's; shard 0 seeds, writes and compacts; the results are merged exactly", maxWorkers))
	fs.IntVar(&d.index, "index", 0, "this worker's shard, 0-based (set by --workers)")
	fs.IntVar(&d.shards, "shards", 0, "shards the experiment is divided into (set by --workers)")
	fs.StringVar(&d.barrierEtcdKey, "barrier-etcd-key", "", "meet the other workers under this etcd key of --endpoints (set by --workers)")
	fs.BoolVar(&d.apiserversOwned, "apiservers-owned", false, "the kube-apiservers --kubeconfig reaches were started by the coordinator (set by --workers with --kube-apiserver)")
	fs.StringVar(&d.barrierConfigMap, "barrier-configmap", "", "meet the other workers in this ConfigMap, NAMESPACE/NAME, of the cluster the worker runs in (in-cluster config, or --barrier-kubeconfig); --index defaults to $"+envCompletionIndex+" (set by lwbench manifest --experiment)")
	fs.StringVar(&d.barrierKubeconfig, "barrier-kubeconfig", "", "kubeconfig of the cluster holding --barrier-configmap (default: the pod's in-cluster config)")
	fs.BoolVar(&d.logResult, "log-result", false, "a worker prints its result (JSON) as one line starting with \""+strings.TrimSpace(resultLinePrefix)+"\" on standard output, for lwbench gather and merge (set by lwbench manifest --experiment)")
	for _, name := range []string{"index", "shards", "barrier-etcd-key", "apiservers-owned", "barrier-configmap", "barrier-kubeconfig", "log-result"} {
		if err := fs.MarkHidden(name); err != nil {
			panic(err) // the flag was just defined
		}
	}
}

// worker reports whether the process is a worker of a divided
// experiment.
func (d *experimentDivision) worker() bool { return d.shards > 0 }

// count returns the number of shards the experiment is divided into: the
// coordinator's --workers or a worker's --shards; 0 undivided.
func (d *experimentDivision) count() int { return max(d.workers, d.shards) }

// shard returns the shard the options plan with: a worker's own; for
// the coordinator the last (the smallest block, so that validation sees
// the tightest); shard.Whole undivided.
func (d *experimentDivision) shard() shard.Shard {
	switch {
	case d.worker():
		return shard.Shard{Index: d.index, Count: d.shards}
	case d.workers > 0:
		return shard.Shard{Index: d.workers - 1, Count: d.workers}
	}
	return shard.Whole
}

// validate checks the division's flags of experiment name (o's other
// flags checked): --workers on a divisible experiment, a worker's shard,
// barrier and --endpoints, and through kube-apiserver the coordinator's
// (--kube-apiserver, which it starts for its workers, or --kubeconfig,
// which they share).
func (o *experimentOptions) validateDivision(name string) error {
	d := &o.division
	if d.apiserversOwned && (!d.worker() || !o.kubeconfig.enabled()) {
		return cli.FlagErrorf("--apiservers-owned needs --shards and --kubeconfig: it is set by --workers with --kube-apiserver")
	}
	if d.barrierConfigMap != "" && !o.flags.Changed("index") {
		// A Job's pod: its index is the Job's completion index.
		var err error
		if d.index, err = flagOrEnv(o.flags, "index", d.index, envCompletionIndex); err != nil {
			return err
		}
	}
	if d.workers == 0 && !d.worker() {
		if d.barrierEtcdKey != "" || d.barrierConfigMap != "" || d.logResult {
			return cli.FlagErrorf("--barrier-etcd-key, --barrier-configmap and --log-result need --shards: they are a worker's")
		}
		return nil
	}
	if !slices.Contains(experiment.Divisible, name) {
		return cli.FlagErrorf("--workers: %s cannot be divided among workers (only %s)", name, strings.Join(experiment.Divisible, ", "))
	}
	switch {
	case d.workers != 0 && d.worker():
		return cli.FlagErrorf("--workers cannot be used with --shards: the coordinator starts the workers")
	case d.workers != 0 && (d.barrierEtcdKey != "" || d.barrierConfigMap != "" || d.barrierKubeconfig != "" || d.logResult):
		return cli.FlagErrorf("--workers cannot be used with --barrier-etcd-key, --barrier-configmap, --barrier-kubeconfig or --log-result: the coordinator gives its workers theirs")
	case d.workers < 0 || d.workers > maxWorkers:
		return cli.FlagErrorf("--workers %d: want 1 to %d", d.workers, maxWorkers)
	case d.worker() && o.kube.enabled():
		return cli.FlagErrorf("--shards cannot be used with --kube-apiserver: the workers share the kube-apiservers their coordinator starts, reached with --kubeconfig")
	}
	if !d.worker() {
		return nil
	}
	if err := d.shard().Validate(); err != nil {
		return cli.FlagErrorf("--index %d --shards %d: %v", d.index, d.shards, err)
	}
	switch {
	case d.barrierEtcdKey == "" && d.barrierConfigMap == "":
		return cli.FlagErrorf("--shards needs --barrier-etcd-key or --barrier-configmap: where the workers meet")
	case d.barrierEtcdKey != "" && d.barrierConfigMap != "":
		return cli.FlagErrorf("--barrier-etcd-key and --barrier-configmap cannot be used together")
	case d.barrierKubeconfig != "" && d.barrierConfigMap == "":
		return cli.FlagErrorf("--barrier-kubeconfig needs --barrier-configmap")
	case !o.target.external():
		return cli.FlagErrorf("--shards needs --endpoints: the etcd every worker drives")
	case o.flags.Changed("write-out") && o.format != output.FormatJSON:
		return cli.FlagErrorf("--shards: a worker writes its result as JSON, for its coordinator: leave -w out")
	case d.logResult && (o.outDir != "" || o.benchstat != ""):
		return cli.FlagErrorf("--log-result: a Job's worker writes no files (--out, --benchstat) that nobody collects")
	}
	if d.barrierConfigMap != "" {
		if _, _, err := barrier.ParseConfigMap(d.barrierConfigMap); err != nil {
			return cli.FlagErrorf("--barrier-configmap: %v", err)
		}
	}
	o.format = output.FormatJSON
	return nil
}

// runID returns the run ID every worker of a divided experiment derives
// alike from its barrier's name, unique to the run (experiment.Common.RunID):
// 12 hex digits of the SHA-256 of "experiment:" and the barrier's etcd
// key, or of "experiment:configmap:" and its ConfigMap's NAMESPACE/NAME;
// "" undivided. A Job's barrier ConfigMap used again gives the same ID,
// whose namespaces the experiment refuses if they still exist.
func (d *experimentDivision) runID() string {
	if !d.worker() {
		return ""
	}
	name := d.barrierEtcdKey
	if d.barrierConfigMap != "" {
		name = "configmap:" + d.barrierConfigMap
	}
	sum := sha256.Sum256([]byte("experiment:" + name))
	return hex.EncodeToString(sum[:6])
}

// experimentNotPassed are an experiment's flags its coordinator keeps:
// its output and the member it starts (the workers get --endpoints).
var experimentNotPassed = map[string]bool{
	"workers": true, "write-out": true, "out": true, "benchstat": true, "prefix": true, "endpoints": true, "allow-maintenance": true,
	"data-dir": true, "unsafe-no-fsync": true, "cluster-size": true, "etcd-version": true, "netns": true,
}

// experimentWorkerArgs returns the arguments of worker i of n of the
// experiment name: the subcommand, the shard, the barrier, the target,
// the prefix and every other flag the user gave (a slice flag as one
// comma-separated value). With kubeconfig (the coordinator started
// kube-apiservers, --kube-apiserver) the workers reach those with
// --kubeconfig as kube-apiservers of the coordinator's
// (--apiservers-owned), and the flags that shape them
// (coordinatorKubeFlags) stay the coordinator's.
func experimentWorkerArgs(fs *pflag.FlagSet, name string, i, n int, key string, endpoints []string, prefix, kubeconfig string) []string {
	args := []string{name, "--index", strconv.Itoa(i), "--shards", strconv.Itoa(n), "--barrier-etcd-key", key, "-w", "json",
		"--endpoints", strings.Join(endpoints, ","), "--allow-maintenance", "--prefix", prefix}
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig, "--apiservers-owned")
	}
	return append(args, passedFlags(fs, func(name string) bool {
		return experimentNotPassed[name] || (kubeconfig != "" && coordinatorKubeFlags[name])
	})...)
}

// runExperimentWorkers runs `lwbench EXPERIMENT --workers N`: it opens the
// target (the embedded member by default, a --cluster-size cluster, or
// --endpoints), starts N worker processes of this executable on it
// (startWorkerProcs), one shard each, meeting at a barrier under a fresh
// etcd key, waits for them and returns their results merged
// (experiment.Merge). The coordinator holds no load. An interrupt is
// passed on to the workers.
//
// With --kube-apiserver it also starts the kube-apiservers in front of
// the target (startExperimentStack) and writes a kubeconfig reaching them
// for the workers, each then a client-go process (--kubeconfig
// --apiservers-owned) whose loads share them under --prefix, in
// namespaces of each load's own; the merged result names those
// kube-apiservers. With --kubeconfig the workers drive that cluster.
func runExperimentWorkers(ctx context.Context, o *experimentOptions, name string, con *console) (*experiment.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--workers: find lwbench's executable: %w", err)
	}
	prefix := o.prefix
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	target, release, err := o.target.open(ctx, con.Logf)
	defer func() { release() }()
	if err != nil {
		return nil, err
	}
	var stack *kubeload.Stack // the kube-apiservers started for the workers; nil: none
	if o.kube.enabled() {
		st, stop, err := startExperimentStack(ctx, o, target, prefix, con)
		releaseTarget := release
		release = func() {
			stop()
			releaseTarget()
		}
		if err != nil {
			return nil, err
		}
		stack = &st
	}
	admin, err := o.target.dial(ctx, target.Endpoints)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	key := newBarrierKey()
	defer deleteBarrierKey(ctx, admin, key, con)
	dir, err := runtemp.New("", runtemp.WorkersPrefix)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	kubeconfig := ""
	if stack != nil {
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := writeKubeconfig(kubeconfig, stack.RESTConfig); err != nil {
			return nil, fmt.Errorf("the workers' kubeconfig: %w", err)
		}
	}
	n := o.division.workers
	con.Logf("%s: dividing the watchers among %d worker processes (barrier %s on %s)", name, n, key, strings.Join(target.Endpoints, ","))
	var counter kubeload.EtcdCounter // the counting proxy's; nil: none
	if stack != nil && stack.Counter != nil {
		counter = stack.Counter
		counter.Reset()
	}
	procs, stop, err := startWorkerProcs(ctx, exe, dir, n, func(i int) []string {
		return experimentWorkerArgs(o.flags, name, i, n, key, target.Endpoints, prefix, kubeconfig)
	}, admin, key, con)
	if err != nil {
		return nil, err
	}
	defer stop()
	// What the kube-apiservers ask etcd, by the barrier point every
	// worker reached last (experiment.DividedEtcdRanges).
	followed := make(chan error, 1)
	fctx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	if counter != nil {
		go func() {
			followed <- barrier.FollowEtcd(fctx, admin, key, n, func(point string, _ time.Time) { counter.SetPhase(point) })
		}()
	} else {
		followed <- nil
	}
	results, failures := waitWorkerProcs(procs, readExperimentResult)
	stopFollowing()
	if ferr := <-followed; ferr != nil && !errors.Is(ferr, barrier.ErrAborted) {
		con.Logf("follow the workers' barrier: %v", ferr)
	}
	if len(failures) > 0 {
		return nil, errors.Join(failures...)
	}
	if stack != nil {
		for _, r := range results {
			if a := r.APIServer; a == nil || a.URL != stack.RESTConfig.Host {
				return nil, fmt.Errorf("worker %s went through %+v, not the kube-apiserver the coordinator started at %s", r.Shard, a, stack.RESTConfig.Host)
			}
		}
	}
	merged, err := experiment.Merge(results)
	if err != nil {
		return nil, fmt.Errorf("merge the workers' results: %w", err)
	}
	// The workers reached the coordinator's member as --endpoints, and
	// its kube-apiservers as a cluster of --kubeconfig.
	merged.Target.Embedded = target.Embedded
	if stack != nil {
		api := stack.APIServer
		if merged.APIServer != nil {
			api.ClientWatchList = merged.APIServer.ClientWatchList
		}
		merged.APIServer = &api
	}
	if counter != nil {
		experiment.DividedEtcdRanges(merged, counter)
	}
	for _, w := range merged.Warnings {
		con.Logf("warning: %s", w)
	}
	return merged, nil
}

// startExperimentStack starts the kube-apiservers of --kube-apiserver and
// its flags in front of target for the workers of a divided experiment
// (kubeload.StartStack, building kube-apiserver first if it is not
// cached): --etcd-prefix prefix, every load of the experiment under it;
// kube-apiserver's own compactor off, as the divisible experiments run
// theirs (the relist storm compacts with kube-apiserver's algorithm
// itself, the catch-up never); with --count-etcd (the default) a counting
// proxy in front of each member, whose phases the coordinator names after
// the barrier's points. stop stops them; call it also on error.
func startExperimentStack(ctx context.Context, o *experimentOptions, target watchload.Target, prefix string, con *console) (kubeload.Stack, func(), error) {
	routeClientGoLogs(con.Logf)
	bin, err := o.kube.binaries(ctx, con.Logf)
	if err != nil {
		return kubeload.Stack{}, func() {}, err
	}
	ccfg, err := o.target.clientConfig(target.Endpoints)
	if err != nil {
		return kubeload.Stack{}, func() {}, err
	}
	cfg := o.kube.stackConfig(bin, prefix, -1, 0, ccfg.TLS, o.target.conn)
	cfg.Logf = con.Logf
	con.Logf("starting %d kube-apiserver %s in front of %s (--etcd-prefix %s) for the workers", max(o.kube.servers, 1), o.kube.resolvedVersion, strings.Join(target.Endpoints, ","), prefix)
	return kubeload.StartStack(ctx, target, cfg)
}

// readExperimentResult reads a worker's experiment result file with
// report.ReadDocument (a regular file of at most report.MaxDocumentBytes)
// and decodes it (experiment.Decode); an empty file, a worker that failed
// before it had a result, is "no result".
func readExperimentResult(path string) (*experiment.Result, error) {
	b, err := report.ReadDocument(path)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("no result")
	}
	return experiment.Decode(b)
}

// runExperimentWorker runs one worker's shard of a divided experiment:
// it connects the barrier (--barrier-etcd-key on --endpoints, or
// --barrier-configmap), samples its own process
// (watchload.StartSelfSampler) while run runs the experiment with the
// shard and the barrier, and returns the result with its Shard and Self.
// A failure is posted on the barrier (Abort), so the other workers stop
// waiting.
func runExperimentWorker(ctx context.Context, o *experimentOptions, run func(context.Context) (*experiment.Result, error)) (*experiment.Result, error) {
	sh := o.division.shard()
	var b watchload.Barrier
	if cm := o.division.barrierConfigMap; cm != "" {
		cb, err := dialConfigMapBarrier(cm, o.division.barrierKubeconfig, sh)
		if err != nil {
			return nil, err
		}
		b = cb
	} else {
		c, err := o.target.dial(ctx, o.target.endpoints)
		if err != nil {
			return nil, fmt.Errorf("--barrier-etcd-key: %w", err)
		}
		defer c.Close()
		eb, err := barrier.NewEtcd(c, o.division.barrierEtcdKey, sh)
		if err != nil {
			return nil, cli.FlagErrorf("--barrier-etcd-key: %v", err)
		}
		b = eb
	}
	o.division.barrier = b
	self := watchload.StartSelfSampler(ctx, false, o.target.endpoints[0])
	res, err := run(ctx)
	stats := self.Finish(context.WithoutCancel(ctx))
	if err != nil {
		if !errors.Is(err, barrier.ErrAborted) {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if aerr := b.Abort(actx, firstLine(err.Error())); aerr != nil {
				err = errors.Join(err, fmt.Errorf("tell the other workers: %w", aerr))
			}
		}
		return nil, err
	}
	res.Shard, res.Self = &sh, &stats
	return res, nil
}

// firstLine returns s up to its first newline: a barrier's abort reason
// is one line.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
