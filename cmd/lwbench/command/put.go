package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

type putOptions struct {
	out    outputOptions
	target targetOptions
	load   watchload.PutOptions
	flags  *pflag.FlagSet
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
	fs.Int64Var(&o.load.Total, "writes", d.Total, "writes to schedule (etcd benchmark's --total)")
	fs.Float64Var(&o.load.Rate, "write-rate", d.Rate, "scheduled writes per second (open loop); above etcd's capacity it measures the ceiling")
	fs.IntVar(&o.load.Workers, "writer-concurrency", d.Workers, "concurrent writer workers (etcd benchmark's --clients)")
	fs.IntVar(&o.load.Connections, "writer-conns", d.Connections, "connections the writers use (etcd benchmark's --conns)")
	deprecatedAlias(fs, "total", "writes")
	deprecatedAlias(fs, "rate", "write-rate")
	deprecatedAlias(fs, "clients", "writer-concurrency")
	deprecatedAlias(fs, "conns", "writer-conns")
	fs.DurationVar(&o.load.Timeout, "timeout", d.Timeout, "timeout of one op; a timed-out op counts as an error and in the latency")
	fs.Uint64Var(&o.load.Seed, "seed", 1, "seed of keys and objects")
	o.flags = fs
}

// Validate checks the flags; watchload.PutOptions.Validate checks the
// load's, each error named by its flag (flagErrors).
func (o *putOptions) Validate() error {
	if err := o.target.Validate(); err != nil {
		return err
	}
	if o.load.Prefix == "" && len(o.target.endpoints) > 0 {
		// Never write into a real cluster's /registry by default.
		o.load.Prefix = watchload.BenchPrefix(externalDefaultPrefix, "put", o.load.ValueSize, externalDefaultPrefix)
	}
	return flagErrors(o.flags, o.load.Validate())
}

// newPutCommand returns `lwbench put`; runF replaces the run in flag
// tests.
func newPutCommand(runF func(*cobra.Command, *putOptions) error) *cobra.Command {
	o := &putOptions{}
	cmd := &cobra.Command{
		Use:   "put",
		Short: "Measure an open-loop write load alone: throughput and latency from schedule",
		Long: `put schedules --writes writes at --write-rate per second and hands each to
one of --writer-concurrency workers over --writer-conns connections at its due
time. Latency runs from
the due time, so queueing behind a slow member is counted; errors and timeouts
are reported beside the latency and counted in it.

With --value-size N it sends plain Puts of N bytes to --keys keys, as etcd's
benchmark put does; with --value-size 0 it runs lwbench's Kubernetes workload.
A --write-rate above what etcd sustains measures the throughput ceiling.`,
	}
	return newLoadCommand(cmd, o, &o.out, runF, runPut)
}

func runPut(ctx context.Context, o *putOptions, out, errOut io.Writer) error {
	if err := o.out.prepare(); err != nil {
		return err
	}
	collectForPut()
	con := newConsole(errOut)
	defer con.Done()
	o.load.Logf = con.Logf
	o.load.OnStatus = func(p watchload.LoadStatus) {
		con.Status(fmt.Sprintf("%s %5.1fs  ops %d/%d (%d errors)", p.Phase, p.Elapsed.Seconds(), p.WritesDone, p.WritesPlanned, p.WriteErrors))
	}
	target, done, err := o.target.openGuarded(ctx, o.load.Prefix, con.Logf)
	defer done()
	if err != nil {
		return err
	}
	res, err := watchload.Put(ctx, target, o.load)
	con.Done()
	// An interrupted load still prints what it measured, then fails with
	// the interruption (exit code 130).
	interrupted := err
	if err != nil && (res == nil || !res.Interrupted) {
		return err
	}
	return errors.Join(interrupted, o.out.write(out, errOut, o.out.table(makePutTable(res), makePutCSVTable(res)), res, res.Intervals, report.PutBenchstat(res)))
}

// putGCPercent is the garbage collector's target of lwbench put unless
// GOGC is set. A put's live heap is small (about 8 MiB) and every write
// allocates about 7 KiB (gRPC's request and response), so the collector's
// CPU and the heap both follow the percent: at lwbench's default, GOGC 400
// (main.go), the heap grows to five times the live heap; at Go's default
// of 100, which etcd's benchmark runs with, the collector costs about
// what the benchmark's does (76 MiB of RSS at 4 KiB values, 64 clients,
// where the benchmark holds 31); at 200 about half of it, for 10 MiB
// more.
const putGCPercent = 200

// collectForPut sets the collector's target for a put (putGCPercent),
// unless GOGC is set.
func collectForPut() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(putGCPercent)
	}
}
