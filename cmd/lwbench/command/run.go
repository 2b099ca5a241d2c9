package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/clustermodel"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// externalDefaultPrefix keeps lwbench's keys away from a real cluster's
// /registry when --endpoints is given and --prefix is not.
const externalDefaultPrefix = "/lwbench"

type runOptions struct {
	out          outputOptions
	target       targetOptions
	kube         kubeOptions
	cluster      clusterOptions
	kubeconfig   kubeconfigOptions
	snapshotPath string

	load           watchload.Options
	profile        string
	createPercent  int
	updatePercent  int
	deletePercent  int
	resourceMix    string
	watchResources []string
	noDefrag       bool
	logical        bool

	// Safety against a cluster lwbench does not own (--endpoints):
	// --allow-maintenance allows both; the deprecated --allow-compaction
	// and --allow-defrag one each.
	allowMaintenance bool
	allowCompaction  bool
	allowDefrag      bool

	// Faults, in a cluster lwbench starts itself.
	fault         string
	faultAt       time.Duration
	faultDuration time.Duration

	// ownedTarget treats --endpoints as a member lwbench started (set by
	// lwbench worker --target-owned): no cleanup, maintenance allowed.
	ownedTarget bool
	// workers > 0 divides the load among that many worker processes
	// (runWorkers).
	workers int
	// isWorker leaves --workers out: lwbench worker's options.
	isWorker bool
	// apiserversOwned treats the kube-apiservers --kubeconfig reaches as
	// started for this load alone by the coordinator (set by lwbench
	// worker --apiservers-owned): a run through them as through those
	// lwbench run --kube-apiserver starts (kubeconfigClients).
	apiserversOwned bool
	// runID names a run's namespaces through the API (kubeload.Options.RunID);
	// "" is a random one. The workers of a divided load share it (lwbench
	// worker derives it from their barrier).
	runID string

	flags *pflag.FlagSet
}

func (o *runOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, true)
	o.target.AddFlags(fs)
	o.kube.AddFlags(fs)
	o.cluster.AddFlags(fs)
	o.kubeconfig.AddFlags(fs)
	fs.StringVar(&o.snapshotPath, "snapshot", "", "save an etcd snapshot to this file at the end (for etcdinspect)")

	d := watchload.Options{}.Defaults()
	fs.StringVar(&o.profile, "profile", string(watchload.ProfileInformer), "client the watchers model: informer (client-go reflector, watch cache off) or apiserver-cache (client-go informers served by kube-apiserver's watch caches, one per cached resource; events are not cached)")
	fs.StringVar(&o.load.Prefix, "prefix", "", fmt.Sprintf("Kubernetes etcd prefix to write under (default %s embedded, %s with --endpoints)", keyspace.DefaultPrefix, externalDefaultPrefix))
	fs.IntVar(&o.load.Objects, "objects", d.Objects, "pods created before the load")
	fs.IntVar(&o.load.ConfigMaps, "configmaps", 0, "configmaps created before the load (default --objects/5; negative: none)")
	fs.IntVar(&o.load.Events, "events", 0, "events created before the load (default --objects/2; negative: none)")
	fs.IntVar(&o.load.Namespaces, "namespaces", d.Namespaces, "namespaces the objects are spread across")
	fs.IntVar(&o.load.Watchers, "watchers", d.Watchers, "watchers: client informers (with --profile apiserver-cache served by one watch cache per resource, which alone watch etcd)")
	fs.StringSliceVar(&o.watchResources, "watch-resources", watchload.Resources, "resources the watchers watch, assigned round robin")
	fs.IntVar(&o.load.Connections, "conns", d.Connections, "connections (gRPC clients) the watchers use")
	fs.IntVar(&o.load.Streams, "streams", 0, "watch streams over those connections (default --conns)")
	fs.IntVar(&o.load.WriterConnections, "writer-conns", d.WriterConnections, "connections the writers use")
	fs.Float64Var(&o.load.WriteRate, "write-rate", d.WriteRate, "scheduled writes per second (open loop)")
	fs.DurationVar(&o.load.Duration, "duration", d.Duration, "length of the write phase")
	fs.StringVar(&o.resourceMix, "resource-mix", d.ResourceMix.String(), "share of writes per resource, in percent")
	fs.Int64Var(&o.load.PageSize, "page-size", 0, "LIST page size (default: the profile's, 500 informer, 10000 apiserver-cache, where it is the watch caches' and the informers keep 500)")
	fs.IntVar(&o.load.WriterConcurrency, "writer-concurrency", d.WriterConcurrency, "concurrent writer workers")
	fs.DurationVar(&o.load.CompactionInterval, "compaction-interval", 0, "kube-apiserver compactor interval (--etcd-compaction-interval); default: a third of --duration; negative: never compact")
	fs.IntVar(&o.load.HoldBack, "hold-back", 1, "watchers held back across a compaction: their next watch meets 410 and they relist when it reaches etcd (watch cache off); kube-apiserver's watch cache resumes them from its history if it still holds their revision (about the last 75 s)")
	fs.BoolVar(&o.noDefrag, "no-defrag", false, "do not defragment after the compaction")
	fs.BoolVar(&o.logical, "logical-compaction", false, "do not wait for compactions to finish deleting (kube-apiserver does not wait); db sizes after compaction are then approximate")
	fs.IntVar(&o.createPercent, "create-percent", d.Mix.CreatePercent, "share of pod and configmap writes that create")
	fs.IntVar(&o.updatePercent, "update-percent", d.Mix.UpdatePercent, "share of pod and configmap writes that update")
	fs.IntVar(&o.deletePercent, "delete-percent", d.Mix.DeletePercent, "share of pod and configmap writes that delete")
	fs.DurationVar(&o.load.EventTTL, "event-ttl", d.EventTTL, "lease TTL of events (kube-apiserver's --event-ttl)")
	fs.Float64Var(&o.load.ConsistentListRate, "consistent-list-rate", d.ConsistentListRate, "consistent LISTs per second served by the watch caches (apiserver-cache), besides the informers' own")
	fs.IntVar(&o.load.StartConcurrency, "start-concurrency", d.StartConcurrency, "watchers listing at once at the start; negative: all at once")
	fs.DurationVar(&o.load.SyncTimeout, "sync-timeout", 0, "longest wait for the watchers to list (or receive their initial events) at the start, and to reach the final revision at the end (default 60s)")
	fs.Uint64Var(&o.load.Seed, "seed", 1, "seed of the objects and the write plan")

	fs.BoolVar(&o.allowMaintenance, "allow-maintenance", false, "with --endpoints: run the compactor, which compacts the whole cluster (its compact_rev_key is kept under --prefix), and defragment every member once, one at a time, the leader last (each blocks its member); --no-defrag or --compaction-interval -1 leaves one out")
	fs.BoolVar(&o.allowCompaction, "allow-compaction", false, "with --endpoints: run the compactor (--allow-maintenance --no-defrag)")
	fs.BoolVar(&o.allowDefrag, "allow-defrag", false, "with --endpoints: defragment every member (--allow-maintenance --compaction-interval -1)")
	for _, d := range []struct{ name, instead string }{
		{"allow-compaction", "use --allow-maintenance, with --no-defrag to compact alone"},
		{"allow-defrag", "use --allow-maintenance, with --compaction-interval -1 to defragment alone"},
	} {
		if err := fs.MarkDeprecated(d.name, d.instead); err != nil {
			panic(err) // the flag was just defined
		}
	}
	fs.BoolVar(&o.load.PinConnections, "pin-connections", false, "dial connection i of the watchers and of the writers to member i mod N only, to report latency per member (such connections do not fail over)")
	fs.StringVar(&o.fault, "fault", "", "fault to inject into a --cluster-size cluster: "+faultNames())
	fs.DurationVar(&o.faultAt, "fault-at", 0, "when the fault begins, from the start of the writes (default: half of --duration)")
	fs.DurationVar(&o.faultDuration, "fault-duration", 5*time.Second, "how long the member stays killed, paused or cut off before it is restarted, resumed or healed")
	fs.DurationVar(&o.load.RecoveryTimeout, "recovery-timeout", d.RecoveryTimeout, "longest wait for writes and every watcher to recover after the fault is undone")
	if !o.isWorker {
		fs.IntVar(&o.workers, "workers", 0, "divide the load among this many lwbench worker processes on this machine (one shard each: their namespaces' writes, their block of the informers; shard 0 compacts and defragments), meeting at an etcd barrier, and merge their results exactly; 0: one process")
	}
	o.flags = fs
}

func faultNames() string {
	var names []string
	for _, k := range watchload.FaultKinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// Validate checks flags and fills the options derived from them. The
// load's own fields are checked by watchload.Options.Validate, each error
// named by its flag (flagErrors): the flags hold the defaults, so an
// explicit 0 that watchload's Defaults would replace is reported.
func (o *runOptions) Validate() error {
	if err := o.target.Validate(); err != nil {
		return err
	}
	if o.allowMaintenance {
		switch {
		case o.kubeconfig.enabled():
			return cli.FlagErrorf("--allow-maintenance cannot be used with --kubeconfig: lwbench never compacts or defragments a cluster it does not own; its kube-apiservers compact it")
		case o.kube.enabled() && o.target.external():
			return cli.FlagErrorf("--allow-maintenance cannot be used with --kube-apiserver and --endpoints: kube-apiserver's compactor keeps its compact_rev_key outside --prefix")
		}
		o.allowCompaction, o.allowDefrag = true, true
	}
	if err := o.kubeconfig.Validate(o); err != nil {
		return err
	}
	// The timing first: --restart-at's default is a third of --duration.
	o.cluster.defaultTiming(&o.load, o.changed)
	if err := o.cluster.Validate(&o.kube, o.kubeconfig.enabled(), o.kubeconfig.enabled() && o.apiserversOwned, &o.load, &o.target); err != nil {
		return err
	}
	if err := o.kube.Validate(); err != nil {
		return err
	}
	if err := o.kube.checkSharedConnection(o.kubeconfig.enabled()); err != nil {
		return err
	}
	o.load.Profile = watchload.Profile(o.profile)
	o.load.WatchList = o.kube.watchList
	if !o.kube.enabled() {
		// The model alone: kube-apiserver's gates are the model's.
		o.load.RangeStream = o.kube.modelRangeStream("")
		o.load.WatchList = o.kube.modelWatchList("", o.kube.watchList)
	}
	if o.load.Prefix == "" {
		o.load.Prefix = keyspace.DefaultPrefix
		if len(o.target.endpoints) > 0 {
			o.load.Prefix = externalDefaultPrefix
		}
	}
	if strings.TrimRight(o.load.Prefix, "/") != "" {
		o.load.Prefix = strings.TrimRight(o.load.Prefix, "/")
	}
	o.load.Mix = watchload.Mix{CreatePercent: o.createPercent, UpdatePercent: o.updatePercent, DeletePercent: o.deletePercent}
	var err error
	if o.load.ResourceMix, err = watchload.ParseResourceMix(o.resourceMix); err != nil {
		var agg utilerrors.Aggregate
		if errors.As(err, &agg) {
			return flagErrors(o.flags, err)
		}
		return cli.FlagErrorf("--resource-mix: %v", err)
	}
	o.load.WatchResources = o.watchResources
	if o.cluster.eventsEtcd {
		// The run's history is the main etcd's; events are elsewhere.
		if o.changed("watch-resources") && slices.Contains(o.watchResources, watchload.ResourceEvents) {
			return cli.FlagErrorf("--watch-resources events cannot be used with --events-etcd: informers are checked against the main etcd's history, and events are then stored in the other")
		}
		o.load.WatchResources = slices.DeleteFunc(slices.Clone(o.watchResources), func(r string) bool { return r == watchload.ResourceEvents })
	}
	if err := o.load.Validate(); err != nil {
		return flagErrors(o.flags, err)
	}
	if o.load.ConsistentListRate == 0 {
		o.load.ConsistentListRate = -1 // explicit 0: none
	}
	if o.snapshotPath != "" {
		if fi, err := os.Stat(o.snapshotPath); err == nil && fi.IsDir() {
			return cli.FlagErrorf("--snapshot %s is a directory", o.snapshotPath)
		}
		if _, err := os.Stat(filepath.Dir(o.snapshotPath)); err != nil {
			return cli.FlagErrorf("--snapshot %s: directory %s does not exist", o.snapshotPath, filepath.Dir(o.snapshotPath))
		}
	}
	o.load.Defragment = !o.noDefrag
	o.load.PhysicalCompaction = !o.logical
	o.load.ReusePrefix = o.target.reusePrefix
	if err := o.validateExternal(); err != nil {
		return err
	}
	if err := o.validateFault(); err != nil {
		return err
	}
	return o.validateWorkers()
}

// changed reports whether a flag was given on the command line.
func (o *runOptions) changed(name string) bool {
	return o.flags != nil && o.flags.Changed(name)
}

// validateExternal applies the rules for a cluster lwbench does not own:
// no compaction or defragmentation unless allowed, the compactor's key
// under the prefix, and a cleanup of what the run wrote.
func (o *runOptions) validateExternal() error {
	if !o.target.external() || o.ownedTarget {
		return nil
	}
	if o.kubeconfig.enabled() {
		// The cluster compacts itself; lwbench never defragments it.
		o.load.Defragment = false
		return nil
	}
	if !o.allowCompaction {
		if o.changed("compaction-interval") && o.load.CompactionInterval >= 0 {
			return cli.FlagErrorf("--compaction-interval compacts the whole --endpoints cluster: add --allow-maintenance")
		}
		if o.changed("hold-back") && o.load.HoldBack > 0 {
			return cli.FlagErrorf("--hold-back needs compactions: add --allow-maintenance")
		}
		o.load.CompactionInterval, o.load.HoldBack = -1, 0
	}
	if !o.allowDefrag {
		o.load.Defragment = false
	}
	o.load.NamespaceCompactRevKey = true
	o.load.Cleanup = true
	return nil
}

// validateFault checks --fault and its timing.
func (o *runOptions) validateFault() error {
	if o.fault == "" {
		if o.changed("fault-at") || o.changed("fault-duration") {
			return cli.FlagErrorf("--fault-at and --fault-duration need --fault")
		}
		return nil
	}
	k, err := watchload.ParseFaultKind(o.fault)
	if err != nil {
		return cli.FlagErrorf("--fault: %v", err)
	}
	switch {
	case o.target.clusterSize == 0:
		return cli.FlagErrorf("--fault needs a cluster lwbench starts itself (--cluster-size N): it never kills, pauses or cuts off members of an --endpoints cluster, and the embedded member runs in its own process")
	case !k.Leader() && o.target.clusterSize < 2:
		return cli.FlagErrorf("--fault %s needs --cluster-size 2 or more", k)
	}
	at := o.faultAt
	if !o.changed("fault-at") {
		at = o.load.Duration / 2
	}
	if k.Partition() {
		o.target.netns = true // partitions cut a member's link in its network namespace
	}
	o.load.Faults = []watchload.Fault{{Kind: k, At: at, Duration: o.faultDuration}}
	return flagErrors(o.flags, o.load.Validate())
}

// newRunCommand returns `lwbench run`; runF replaces the run in flag tests.
func newRunCommand(runF func(*cobra.Command, *runOptions) error) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the list/watch scenario: seed, watch, churn, compact, defragment, validate",
	}
	return newLoadCommand(cmd, o, &o.out, runF, runRun)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// runRun runs `lwbench run`: one script (watchload.Run) for every target
// and client set: the etcd-direct model by default, client-go through
// kube-apiservers lwbench starts (--kube-apiserver: kubeClients) or
// through an existing cluster (--kubeconfig: kubeconfigClients).
func runRun(ctx context.Context, o *runOptions, out, errOut io.Writer) error {
	if o.kube.enabled() || o.kubeconfig.enabled() {
		collectAsClientGo()
	}
	if o.workers > 0 {
		return runWorkers(ctx, o, out, errOut)
	}
	if err := o.out.prepare(); err != nil {
		return err
	}
	con := newConsole(errOut)
	defer con.Done()
	o.load.Logf = con.Logf
	o.load.Abandon = cli.SecondInterrupt(ctx)
	var (
		target      watchload.Target
		release     func()
		err         error
		snapshotErr error // a failed --snapshot: the result is printed all the same, then the command fails with it
	)
	switch {
	case o.kube.enabled():
		target, release, err = kubeClients(ctx, o, con)
	case o.kubeconfig.enabled():
		target, release, err = kubeconfigClients(ctx, o, con)
	case o.cluster.modelled():
		target, release, err = clusterModelClients(ctx, o, con)
	default:
		target, release, err = modelClients(ctx, o, con, &snapshotErr)
	}
	defer release()
	if err != nil {
		return err
	}
	res, err := watchload.Run(ctx, target, o.load)
	con.Done()
	if o.cluster.modelled() && res != nil && target.Harness != nil {
		// The model reached etcd through its counting proxy; the result
		// names the etcd (which a divided load's workers share).
		res.Target.Endpoints = target.Harness.Endpoints
	}
	if errors.Is(err, watchload.ErrPrefixNotEmpty) {
		return fmt.Errorf("--prefix %s: %w; pass --reuse-prefix to write beside those keys (lwbench never modifies or deletes them)", o.load.Prefix, err)
	}
	return writeRunResult(&o.out, out, errOut, res, err, snapshotErr)
}

// modelClients opens the target of a run of the etcd-direct model, with
// a status line on the console and, with --snapshot, a snapshot saved
// before the cleanup (a failure goes to *snapshotErr); release closes the
// target.
func modelClients(ctx context.Context, o *runOptions, con *console, snapshotErr *error) (watchload.Target, func(), error) {
	o.load.OnStatus = func(p watchload.LoadStatus) {
		con.Status(fmt.Sprintf("%s %5.1fs  writes %d/%d (%d errors)  events %d  relists %d  synced %d/%d  violations %d",
			p.Phase, p.Elapsed.Seconds(), p.WritesDone, p.WritesPlanned, p.WriteErrors, p.Events, p.Relists,
			p.SyncedWatchers, p.Watchers, p.Violations))
	}
	target, release, err := o.target.open(ctx, con.Logf)
	if err != nil {
		return target, release, err
	}
	if o.target.external() && (o.load.CompactionInterval < 0 || !o.load.Defragment) {
		con.Logf("compaction %s, defragmentation %s: --endpoints is a cluster lwbench does not own (--allow-maintenance); it deletes what it wrote at the end",
			onOff(o.load.CompactionInterval >= 0), onOff(o.load.Defragment))
	}
	if o.snapshotPath != "" {
		// Before the cleanup of an --endpoints cluster, so that the
		// snapshot holds the run's objects.
		o.load.BeforeCleanup = func(ctx context.Context) error {
			cfg, err := o.target.clientConfig(target.Endpoints[:1])
			if err == nil {
				_, err = snapshot.SaveWithVersion(ctx, zap.NewNop(), cfg, o.snapshotPath)
			}
			if err != nil {
				*snapshotErr = fmt.Errorf("--snapshot %s: %w", o.snapshotPath, err)
				return nil // the cleanup still runs; the error ends the command
			}
			con.Logf("saved a snapshot to %s", o.snapshotPath)
			return nil
		}
	}
	return target, release, nil
}

// clusterModelClients opens the target of `lwbench run --nodes N
// --cluster-model` behind a counting proxy (proxiedTarget: the result's
// etcd rows by resource) and sets the run's client set to the model of
// the cluster; release closes both.
func clusterModelClients(ctx context.Context, o *runOptions, con *console) (watchload.Target, func(), error) {
	t, p, release, err := proxiedTarget(ctx, o, con.Logf)
	if err != nil {
		return t, release, err
	}
	p.SetPhase("before")
	mo, err := o.cluster.clusterModel(kubeload.CounterOf(p.Counter()))
	if err != nil {
		return t, release, err
	}
	o.load.Clients = clustermodel.NewClients(mo)
	return t, release, nil
}

// writeRunResult prints a run's result (res, err: watchload.Run's) and returns the command's error: err, unless it only
// reports an interruption after which res was printed (then err, exit
// 130, after the figures); snapshotErr (a failed --snapshot); a cleanup
// that did not leave a cluster lwbench does not own as it found it; the
// broken guarantees.
func writeRunResult(o *outputOptions, out, errOut io.Writer, res *report.RunResult, err, snapshotErr error) error {
	if err != nil && (res == nil || !res.Interrupted) {
		return err
	}
	interrupted := err
	summary, notes := makeRunTable(res)
	if err := o.write(out, errOut, o.table(summary, makeRunCSVTable(res)), res, res.Intervals, report.RunBenchstat(res)); err != nil {
		return errors.Join(interrupted, err)
	}
	if f := o.format; len(res.Workers) > 0 && (f == output.FormatTable || f == output.FormatMarkdown) {
		// A divided load's workers, each with its own figures.
		fmt.Fprintln(out)
		if err := output.Write(out, f, makeWorkerTable(res.Workers), nil); err != nil {
			return errors.Join(interrupted, err)
		}
	}
	if err := writeRunTail(out, errOut, o.format, res, notes); err != nil {
		return errors.Join(interrupted, err)
	}
	if interrupted != nil {
		return errors.Join(interrupted, snapshotErr)
	}
	var cleanup, violations error
	if c := res.Cleanup; c != nil && c.Error != "" {
		cleanup = fmt.Errorf("cleanup: %s", c.Error)
	}
	if !res.Validation.OK() {
		violations = fmt.Errorf("%w: %s", watchload.ErrViolations, res.Validation.Summary())
	}
	return errors.Join(snapshotErr, cleanup, violations)
}

// clientGoGCPercent is the garbage collector's target of a run of client-go
// informers: Go's default (GOGC 100), which the Kubernetes processes that
// run informers (kube-controller-manager, kube-scheduler, kubelet) run
// with.
const clientGoGCPercent = 100

// collectAsClientGo collects garbage as a process of client-go informers
// does (clientGoGCPercent), unless GOGC is set. lwbench's own default,
// GOGC 400 (main.go), suits the etcd-direct model, whose live heap is
// small; informers hold every object decoded, and at 400 the heap may grow
// to five times what they hold, where a client-go process of the same
// informers grows to twice (issue 21: 90 informers over 3,000 pods held
// 8.9 GB).
func collectAsClientGo() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(clientGoGCPercent)
	}
}
