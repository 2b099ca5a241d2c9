package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// externalDefaultPrefix keeps lwbench's keys away from a real cluster's
// /registry when --endpoints is given and --prefix is not.
const externalDefaultPrefix = "/lwbench"

type runOptions struct {
	out          outputOptions
	target       targetOptions
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
}

func (o *runOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, true)
	o.target.AddFlags(fs)
	fs.StringVar(&o.snapshotPath, "snapshot", "", "save an etcd snapshot to this file at the end (for etcdinspect)")

	d := watchload.Options{}.Defaults()
	fs.StringVar(&o.profile, "profile", string(watchload.ProfileInformer), "client the watchers model: informer (client-go reflector, watch cache off) or apiserver-cache (kube-apiserver's watch cache)")
	fs.StringVar(&o.load.Prefix, "prefix", "", fmt.Sprintf("Kubernetes etcd prefix to write under (default %s embedded, %s with --endpoints)", keyspace.DefaultPrefix, externalDefaultPrefix))
	fs.IntVar(&o.load.Objects, "objects", d.Objects, "pods created before the load")
	fs.IntVar(&o.load.ConfigMaps, "configmaps", 0, "configmaps created before the load (default --objects/5; negative: none)")
	fs.IntVar(&o.load.Events, "events", 0, "events created before the load (default --objects/2; negative: none)")
	fs.IntVar(&o.load.Namespaces, "namespaces", d.Namespaces, "namespaces the objects are spread across")
	fs.IntVar(&o.load.Watchers, "watchers", d.Watchers, "watchers (informers, or watch caches with --profile apiserver-cache)")
	fs.StringSliceVar(&o.watchResources, "watch-resources", watchload.Resources, "resources the watchers watch, assigned round robin")
	fs.IntVar(&o.load.Connections, "conns", d.Connections, "connections (gRPC clients) the watchers use")
	fs.IntVar(&o.load.Streams, "streams", 0, "watch streams over those connections (default --conns)")
	fs.IntVar(&o.load.WriterConnections, "writer-conns", d.WriterConnections, "connections the writers use")
	fs.Float64Var(&o.load.WriteRate, "write-rate", d.WriteRate, "scheduled writes per second (open loop)")
	fs.DurationVar(&o.load.Duration, "duration", d.Duration, "length of the write phase")
	fs.StringVar(&o.resourceMix, "resource-mix", d.ResourceMix.String(), "share of writes per resource, in percent")
	fs.Int64Var(&o.load.PageSize, "page-size", 0, "LIST page size (default: the profile's, 500 informer, 10000 apiserver-cache)")
	fs.IntVar(&o.load.WriterConcurrency, "writer-concurrency", d.WriterConcurrency, "concurrent writer workers")
	fs.DurationVar(&o.load.CompactionInterval, "compaction-interval", 0, "kube-apiserver compactor interval (--etcd-compaction-interval); default: a third of --duration; negative: never compact")
	fs.IntVar(&o.load.HoldBack, "hold-back", 1, "watchers held back across a compaction so that they must relist")
	fs.BoolVar(&o.noDefrag, "no-defrag", false, "do not defragment after the compaction")
	fs.BoolVar(&o.logical, "logical-compaction", false, "do not wait for compactions to finish deleting (kube-apiserver does not wait); db sizes after compaction are then approximate")
	fs.IntVar(&o.createPercent, "create-percent", d.Mix.CreatePercent, "share of pod and configmap writes that create")
	fs.IntVar(&o.updatePercent, "update-percent", d.Mix.UpdatePercent, "share of pod and configmap writes that update")
	fs.IntVar(&o.deletePercent, "delete-percent", d.Mix.DeletePercent, "share of pod and configmap writes that delete")
	fs.DurationVar(&o.load.EventTTL, "event-ttl", d.EventTTL, "lease TTL of events (kube-apiserver's --event-ttl)")
	fs.Float64Var(&o.load.ConsistentListRate, "consistent-list-rate", d.ConsistentListRate, "consistent LISTs per second served by the watch caches (apiserver-cache)")
	fs.IntVar(&o.load.StartConcurrency, "start-concurrency", d.StartConcurrency, "watchers listing at once at the start; negative: all at once")
	fs.Uint64Var(&o.load.Seed, "seed", 1, "seed of the objects and the write plan")
}

// Validate checks flags and fills the options derived from them.
func (o *runOptions) Validate() error {
	if err := o.target.Validate(); err != nil {
		return err
	}
	p, err := watchload.ParseProfile(o.profile)
	if err != nil {
		return cli.FlagErrorf("--profile: %v", err)
	}
	o.load.Profile = p
	if o.load.Prefix == "" {
		o.load.Prefix = keyspace.DefaultPrefix
		if len(o.target.endpoints) > 0 {
			o.load.Prefix = externalDefaultPrefix
		}
	}
	if !strings.HasPrefix(o.load.Prefix, "/") || strings.TrimRight(o.load.Prefix, "/") == "" {
		return cli.FlagErrorf("--prefix %q must start with '/' and name a path", o.load.Prefix)
	}
	o.load.Prefix = strings.TrimRight(o.load.Prefix, "/")
	o.load.Mix = watchload.Mix{CreatePercent: o.createPercent, UpdatePercent: o.updatePercent, DeletePercent: o.deletePercent}
	if err := o.load.Mix.Validate(); err != nil {
		return cli.FlagErrorf("--create-percent, --update-percent, --delete-percent: %v", err)
	}
	if o.load.ResourceMix, err = watchload.ParseResourceMix(o.resourceMix); err != nil {
		return cli.FlagErrorf("--resource-mix: %v", err)
	}
	o.load.WatchResources = o.watchResources
	for _, r := range o.watchResources {
		if r != watchload.ResourcePods && r != watchload.ResourceConfigMaps && r != watchload.ResourceEvents {
			return cli.FlagErrorf("--watch-resources: %q is not pods, configmaps or events", r)
		}
	}
	switch {
	case o.load.Objects < 0:
		return cli.FlagErrorf("--objects must not be negative")
	case o.load.Namespaces < 1:
		return cli.FlagErrorf("--namespaces must be at least 1")
	case o.load.Watchers < 1:
		return cli.FlagErrorf("--watchers must be at least 1")
	case o.load.Connections < 1:
		return cli.FlagErrorf("--conns must be at least 1")
	case o.load.Streams < 0:
		return cli.FlagErrorf("--streams must not be negative")
	case o.load.WriterConnections < 1:
		return cli.FlagErrorf("--writer-conns must be at least 1")
	case o.load.WriteRate <= 0:
		return cli.FlagErrorf("--write-rate must be positive")
	case o.load.Duration <= 0:
		return cli.FlagErrorf("--duration must be positive")
	case o.load.PageSize < 0:
		return cli.FlagErrorf("--page-size must not be negative")
	case o.load.WriterConcurrency < 1:
		return cli.FlagErrorf("--writer-concurrency must be at least 1")
	case o.load.HoldBack < 0 || o.load.HoldBack > o.load.Watchers:
		return cli.FlagErrorf("--hold-back must be between 0 and --watchers (%d)", o.load.Watchers)
	case o.load.EventTTL < 0:
		return cli.FlagErrorf("--event-ttl must not be negative")
	case o.load.ConsistentListRate < 0:
		return cli.FlagErrorf("--consistent-list-rate must not be negative")
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
	return nil
}

// newRunCommand returns `lwbench run`; runF replaces the run in flag tests.
func newRunCommand(runF func(*cobra.Command, *runOptions) error) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the list/watch scenario: seed, watch, churn, compact, defragment, validate",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd, o)
			}
			return runRun(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	o.out.registerCompletion(cmd)
	return cmd
}

func runRun(ctx context.Context, o *runOptions, out, errOut io.Writer) error {
	con := newConsole(errOut)
	defer con.Done()
	o.load.Logf = con.Logf
	o.load.OnProgress = func(p watchload.Progress) {
		con.Progress(fmt.Sprintf("%s %5.1fs  writes %d/%d (%d errors)  events %d  relists %d  synced %d/%d  violations %d",
			p.Phase, p.Elapsed.Seconds(), p.WritesDone, p.WritesPlanned, p.WriteErrors, p.Events, p.Relists,
			p.SyncedWatchers, p.Watchers, p.Violations))
	}
	target, release, err := o.target.open(ctx, con.Logf)
	defer release()
	if err != nil {
		return err
	}
	res, err := watchload.Run(ctx, target, o.load)
	con.Done()
	if err != nil {
		return err
	}
	if o.snapshotPath != "" {
		cfg := clientv3.Config{Endpoints: target.Endpoints[:1], DialTimeout: o.target.dialTimeout, Logger: zap.NewNop()}
		if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), cfg, o.snapshotPath); err != nil {
			return fmt.Errorf("--snapshot %s: %w", o.snapshotPath, err)
		}
		con.Logf("saved a snapshot to %s", o.snapshotPath)
	}
	if err := o.out.write(out, errOut, report.MakeRunTable(res), res, res.Intervals, report.RunBenchstat(res)); err != nil {
		return err
	}
	if !res.Validation.OK() {
		return fmt.Errorf("%w: %s", watchload.ErrViolations, res.Validation.Summary())
	}
	return nil
}
