package command

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

type watchOptions struct {
	out    outputOptions
	target targetOptions
	load   watchload.WatchOptions
	prevKV bool
	notify bool
	flags  *pflag.FlagSet
}

func (o *watchOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, true)
	o.target.AddFlags(fs)
	d := watchload.WatchOptions{}.Defaults()
	fs.StringVar(&o.load.Prefix, "prefix", "", "key prefix the watchers watch (default /lwbench/watch/ for raw values; for pods /registry embedded, /lwbench with --endpoints)")
	fs.IntVar(&o.load.Watchers, "watchers", d.Watchers, "watches of the prefix")
	fs.IntVar(&o.load.Streams, "streams", d.Streams, "watch streams the watchers are spread over (etcd benchmark's --streams)")
	fs.IntVar(&o.load.Connections, "conns", d.Connections, "connections the streams are spread over")
	fs.IntVar(&o.load.Keys, "keys", d.Keys, "keys the puts go to (etcd benchmark's --key-space-size); pods with --value-size 0")
	fs.IntVar(&o.load.ValueSize, "value-size", 0, "raw value size in bytes; 0: update Kubernetes pods with kube-apiserver's transactions")
	fs.Int64Var(&o.load.Puts, "writes", d.Puts, "puts to make (etcd benchmark's --put-total)")
	fs.Float64Var(&o.load.PutRate, "write-rate", d.PutRate, "scheduled puts per second (open loop)")
	fs.IntVar(&o.load.PutWorkers, "writer-concurrency", d.PutWorkers, "concurrent put workers")
	fs.IntVar(&o.load.PutConnections, "writer-conns", d.PutConnections, "connections the put workers use")
	deprecatedAlias(fs, "puts", "writes")
	deprecatedAlias(fs, "put-rate", "write-rate")
	deprecatedAlias(fs, "put-workers", "writer-concurrency")
	deprecatedAlias(fs, "put-conns", "writer-conns")
	fs.BoolVar(&o.prevKV, "prev-kv", true, "watch with prevKV, as Kubernetes does")
	fs.BoolVar(&o.notify, "progress-notify", true, "watch with progress notifications, as Kubernetes does")
	fs.Uint64Var(&o.load.Seed, "seed", 1, "seed of keys and objects")
	o.flags = fs
}

// Validate checks the flags; watchload.WatchOptions.Validate checks the
// load's, each error named by its flag (flagErrors).
func (o *watchOptions) Validate() error {
	if err := o.target.Validate(); err != nil {
		return err
	}
	o.load.NoPrevKV, o.load.NoProgressNotify = !o.prevKV, !o.notify
	if o.load.Prefix == "" && len(o.target.endpoints) > 0 {
		// Never write into a real cluster's /registry by default.
		o.load.Prefix = watchload.BenchPrefix(externalDefaultPrefix, "watch", o.load.ValueSize, externalDefaultPrefix)
	}
	return flagErrors(o.flags, o.load.Validate())
}

// newWatchCommand returns `lwbench watch`; runF replaces the run in flag
// tests.
func newWatchCommand(runF func(*cobra.Command, *watchOptions) error) *cobra.Command {
	o := &watchOptions{}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Measure watch fan-out: events per second and delivery latency from many watchers of one prefix",
		Long: `watch creates --watchers watches of one prefix over --streams streams and
--conns connections, then puts --writes values at --write-rate to --keys keys under
the prefix, so that every put reaches every watcher. It reports events per
second, delivery latency from each put's response and send, watch creation
time, and checks every watch against a recorded history.

To compare with etcd's benchmark watch, use the same --streams, watchers
(--watch-per-stream x --streams), --conns and --put-total, raw values, no prevKV
and no progress notifications, and the same key space on both sides (the
benchmark's default --key-space-size 1 puts every watcher on one key).`,
	}
	return newLoadCommand(cmd, o, &o.out, runF, runWatch)
}

func runWatch(ctx context.Context, o *watchOptions, out, errOut io.Writer) error {
	if err := o.out.prepare(); err != nil {
		return err
	}
	con := newConsole(errOut)
	defer con.Done()
	o.load.Logf = con.Logf
	o.load.OnStatus = func(p watchload.LoadStatus) {
		con.Status(fmt.Sprintf("%s %5.1fs  puts %d/%d (%d errors)  events %d  created %d/%d  violations %d",
			p.Phase, p.Elapsed.Seconds(), p.WritesDone, p.WritesPlanned, p.WriteErrors, p.Events, p.SyncedWatchers, p.Watchers, p.Violations))
	}
	target, done, err := o.target.openGuarded(ctx, o.load.Prefix, con.Logf)
	defer done()
	if err != nil {
		return err
	}
	res, err := watchload.Watch(ctx, target, o.load)
	con.Done()
	// An interrupted load still prints what it measured, then fails with
	// the interruption (exit code 130).
	interrupted := err
	if err != nil && (res == nil || !res.Interrupted) {
		return err
	}
	if err := o.out.write(out, errOut, o.out.table(makeWatchTable(res), makeWatchCSVTable(res)), res, res.Intervals, report.WatchBenchstat(res)); err != nil {
		return errors.Join(interrupted, err)
	}
	if interrupted != nil {
		return interrupted
	}
	if !res.Validation.OK() {
		return fmt.Errorf("%w: %s", watchload.ErrViolations, res.Validation.Summary())
	}
	return nil
}
