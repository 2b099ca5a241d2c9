package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/embedetcd"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// externalDefaultPrefix keeps lwbench's keys away from a real cluster's
// /registry when --endpoints is given and --prefix is not.
const externalDefaultPrefix = "/lwbench"

type runOptions struct {
	format      output.Format
	formatValue *output.FormatValue

	endpoints     []string
	dataDir       string
	unsafeNoFsync bool
	snapshotPath  string
	dialTimeout   time.Duration

	load          watchload.Options
	createPercent int
	updatePercent int
	deletePercent int
	noDefrag      bool
	logical       bool
}

func (o *runOptions) AddFlags(fs *pflag.FlagSet) {
	o.formatValue = output.NewFormatValue(&o.format, output.FormatTable)
	fs.VarP(o.formatValue, "write-out", "w", "output format: "+o.formatValue.Names())
	fs.StringSliceVar(&o.endpoints, "endpoints", nil, "etcd client URLs to drive instead of an embedded member (comma-separated)")
	fs.StringVar(&o.dataDir, "data-dir", "", "keep the embedded member's data here (an empty or new directory); default: a temporary directory, removed afterwards")
	fs.BoolVar(&o.unsafeNoFsync, "unsafe-no-fsync", false, "run the embedded member without fsync (faster, write latencies unrealistic)")
	fs.StringVar(&o.snapshotPath, "snapshot", "", "save an etcd snapshot to this file at the end (for etcdinspect)")
	fs.DurationVar(&o.dialTimeout, "dial-timeout", 5*time.Second, "timeout to connect to --endpoints")

	d := watchload.Options{}.Defaults()
	fs.StringVar(&o.load.Prefix, "prefix", "", fmt.Sprintf("Kubernetes etcd prefix to write under (default %s embedded, %s with --endpoints)", keyspace.DefaultPrefix, externalDefaultPrefix))
	fs.IntVar(&o.load.Objects, "objects", d.Objects, "pods created before the load")
	fs.IntVar(&o.load.Namespaces, "namespaces", d.Namespaces, "namespaces the pods are spread across")
	fs.IntVar(&o.load.Watchers, "watchers", d.Watchers, "reflector-like clients watching the pods")
	fs.Float64Var(&o.load.WriteRate, "write-rate", d.WriteRate, "scheduled writes per second (open loop)")
	fs.DurationVar(&o.load.Duration, "duration", d.Duration, "length of the write phase")
	fs.Int64Var(&o.load.PageSize, "page-size", d.PageSize, "LIST page size (client-go's pager uses 500)")
	fs.IntVar(&o.load.WriterConcurrency, "writer-concurrency", d.WriterConcurrency, "concurrent writer workers")
	fs.DurationVar(&o.load.CompactionInterval, "compaction-interval", 0, "kube-apiserver compactor interval (--etcd-compaction-interval); default: a third of --duration; negative: never compact")
	fs.IntVar(&o.load.HoldBack, "hold-back", 1, "watchers held back across a compaction so that they must relist")
	fs.BoolVar(&o.noDefrag, "no-defrag", false, "do not defragment after the compaction")
	fs.BoolVar(&o.logical, "logical-compaction", false, "do not wait for compactions to finish deleting (kube-apiserver does not wait); db sizes after compaction are then approximate")
	fs.IntVar(&o.createPercent, "create-percent", d.Mix.CreatePercent, "share of writes that create a pod")
	fs.IntVar(&o.updatePercent, "update-percent", d.Mix.UpdatePercent, "share of writes that update a pod")
	fs.IntVar(&o.deletePercent, "delete-percent", d.Mix.DeletePercent, "share of writes that delete a pod")
	fs.Uint64Var(&o.load.Seed, "seed", 1, "seed of the objects and the write plan")
}

// Validate checks flags and fills the options derived from them.
func (o *runOptions) Validate() error {
	if o.dataDir != "" && len(o.endpoints) > 0 {
		return cli.FlagErrorf("--data-dir and --endpoints cannot be used together")
	}
	if o.dataDir != "" {
		entries, err := os.ReadDir(o.dataDir)
		if err == nil && len(entries) > 0 {
			return cli.FlagErrorf("--data-dir %s is not empty; lwbench only writes to an empty or new directory", o.dataDir)
		}
	}
	if o.load.Prefix == "" {
		o.load.Prefix = keyspace.DefaultPrefix
		if len(o.endpoints) > 0 {
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
	switch {
	case o.load.Objects < 0:
		return cli.FlagErrorf("--objects must not be negative")
	case o.load.Namespaces < 1:
		return cli.FlagErrorf("--namespaces must be at least 1")
	case o.load.Watchers < 1:
		return cli.FlagErrorf("--watchers must be at least 1")
	case o.load.WriteRate <= 0:
		return cli.FlagErrorf("--write-rate must be positive")
	case o.load.Duration <= 0:
		return cli.FlagErrorf("--duration must be positive")
	case o.load.PageSize < 1:
		return cli.FlagErrorf("--page-size must be at least 1")
	case o.load.WriterConcurrency < 1:
		return cli.FlagErrorf("--writer-concurrency must be at least 1")
	case o.load.HoldBack < 0 || o.load.HoldBack > o.load.Watchers:
		return cli.FlagErrorf("--hold-back must be between 0 and --watchers (%d)", o.load.Watchers)
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
	cmd.RegisterFlagCompletionFunc("write-out", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return o.formatValue.Allowed(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func runRun(ctx context.Context, o *runOptions, out, errOut io.Writer) error {
	began := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(errOut, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	o.load.Logf = logf

	endpoints := o.endpoints
	embedded := len(endpoints) == 0
	if embedded {
		dir := o.dataDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "lwbench-etcd-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		}
		srv, err := embedetcd.Start(ctx, embedetcd.Config{Dir: dir, UnsafeNoFsync: o.unsafeNoFsync})
		if err != nil {
			return err
		}
		defer srv.Close()
		endpoints = srv.Endpoints
		logf("started an embedded etcd member in %s at %s", dir, strings.Join(endpoints, ","))
	}
	newClient := func() (*clientv3.Client, error) {
		c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: o.dialTimeout, Logger: zap.NewNop()})
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", strings.Join(endpoints, ","), err)
		}
		return c, nil
	}
	writer, err := newClient()
	if err != nil {
		return err
	}
	defer writer.Close()
	watch, err := newClient()
	if err != nil {
		return err
	}
	defer watch.Close()

	res, err := watchload.Run(ctx, watchload.Target{Writer: writer, Watch: watch, Endpoints: endpoints, Embedded: embedded}, o.load)
	if err != nil {
		return err
	}
	if o.snapshotPath != "" {
		cfg := clientv3.Config{Endpoints: endpoints[:1], DialTimeout: o.dialTimeout, Logger: zap.NewNop()}
		if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), cfg, o.snapshotPath); err != nil {
			return fmt.Errorf("--snapshot %s: %w", o.snapshotPath, err)
		}
		logf("saved a snapshot to %s", o.snapshotPath)
	}
	if err := output.Write(out, o.format, report.MakeRunTable(res), res); err != nil {
		return err
	}
	if !res.Validation.OK() {
		return fmt.Errorf("watch guarantees violated: %d lost, %d duplicated, %d out of order, %d prevKV mismatches, %d cache mismatches, %d unsynced watchers",
			res.Validation.Lost, res.Validation.Duplicated, res.Validation.OutOfOrder, res.Validation.PrevKVMismatches,
			res.Validation.CacheMismatches, res.Validation.UnsyncedWatchers)
	}
	return nil
}
