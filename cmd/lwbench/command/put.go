package command

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

type putOptions struct {
	out    outputOptions
	target targetOptions
	load   watchload.PutOptions
}

func (o *putOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, true)
	o.target.AddFlags(fs)
	d := watchload.PutOptions{}.Defaults()
	fs.StringVar(&o.load.Prefix, "prefix", "", "key prefix (default /lwbench/put/ for raw values; for Kubernetes objects /registry embedded, /lwbench with --endpoints)")
	fs.IntVar(&o.load.Keys, "keys", d.Keys, "raw key space (etcd benchmark's --key-space-size), or pods seeded with --value-size 0")
	fs.IntVar(&o.load.KeySize, "key-size", 0, "pad raw keys to at least this many bytes")
	fs.IntVar(&o.load.ValueSize, "value-size", 0, "raw value size in bytes, plain Puts; 0: the Kubernetes workload (pods, configmaps, events, kube-apiserver transactions)")
	fs.BoolVar(&o.load.Sequential, "sequential-keys", false, "pick raw keys in turn instead of at random")
	fs.Int64Var(&o.load.Total, "total", d.Total, "ops to schedule")
	fs.Float64Var(&o.load.Rate, "rate", d.Rate, "scheduled ops per second (open loop); above etcd's capacity it measures the ceiling")
	fs.IntVar(&o.load.Workers, "clients", d.Workers, "concurrent workers (etcd benchmark's --clients)")
	fs.IntVar(&o.load.Connections, "conns", d.Connections, "connections the workers use (etcd benchmark's --conns)")
	fs.DurationVar(&o.load.Timeout, "timeout", d.Timeout, "timeout of one op; a timed-out op counts as an error and in the latency")
	fs.Uint64Var(&o.load.Seed, "seed", 1, "seed of keys and objects")
}

func (o *putOptions) Validate() error {
	if err := o.target.Validate(); err != nil {
		return err
	}
	if o.load.Prefix == "" && len(o.target.endpoints) > 0 {
		// Never write into a real cluster's /registry by default.
		o.load.Prefix = externalDefaultPrefix + "/put/"
		if o.load.ValueSize == 0 {
			o.load.Prefix = externalDefaultPrefix
		}
	}
	switch {
	case o.load.Keys < 1:
		return cli.FlagErrorf("--keys must be at least 1")
	case o.load.KeySize < 0 || o.load.ValueSize < 0:
		return cli.FlagErrorf("--key-size and --value-size must not be negative")
	case o.load.Total < 1:
		return cli.FlagErrorf("--total must be at least 1")
	case o.load.Rate <= 0:
		return cli.FlagErrorf("--rate must be positive")
	case o.load.Workers < 1:
		return cli.FlagErrorf("--clients must be at least 1")
	case o.load.Connections < 1 || o.load.Connections > o.load.Workers:
		return cli.FlagErrorf("--conns must be between 1 and --clients (%d)", o.load.Workers)
	case o.load.Timeout <= 0:
		return cli.FlagErrorf("--timeout must be positive")
	}
	return nil
}

// newPutCommand returns `lwbench put`; runF replaces the run in flag
// tests.
func newPutCommand(runF func(*cobra.Command, *putOptions) error) *cobra.Command {
	o := &putOptions{}
	cmd := &cobra.Command{
		Use:   "put",
		Short: "Measure an open-loop write load alone: throughput and latency from schedule",
		Long: `put schedules --total writes at --rate per second and hands each to one of
--clients workers over --conns connections at its due time. Latency runs from
the due time, so queueing behind a slow member is counted; errors and timeouts
are reported beside the latency and counted in it.

With --value-size N it sends plain Puts of N bytes to --keys keys, as etcd's
benchmark put does; with --value-size 0 it runs lwbench's Kubernetes workload.
A --rate above what etcd sustains measures the throughput ceiling.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd, o)
			}
			return runPut(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	o.out.registerCompletion(cmd)
	return cmd
}

func runPut(ctx context.Context, o *putOptions, out, errOut io.Writer) error {
	if err := o.out.prepare(); err != nil {
		return err
	}
	con := newConsole(errOut)
	defer con.Done()
	o.load.Logf = con.Logf
	o.load.OnProgress = func(p watchload.Progress) {
		con.Progress(fmt.Sprintf("%s %5.1fs  ops %d/%d (%d errors)", p.Phase, p.Elapsed.Seconds(), p.WritesDone, p.WritesPlanned, p.WriteErrors))
	}
	target, done, err := o.target.openGuarded(ctx, o.load.Prefix, con.Logf)
	defer done()
	if err != nil {
		return err
	}
	res, err := watchload.Put(ctx, target, o.load)
	con.Done()
	if err != nil {
		return err
	}
	return o.out.write(out, errOut, o.out.table(makePutTable(res), makePutCSVTable(res)), res, res.Intervals, report.PutBenchstat(res))
}
