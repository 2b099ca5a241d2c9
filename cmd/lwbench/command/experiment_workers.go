package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
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
	barrierEtcdKey string // where a worker meets the others
	// barrier is a worker's, once connected (runExperimentWorker).
	barrier watchload.Barrier
}

// addFlags registers --workers and the hidden flags of a worker.
func (d *experimentDivision) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&d.workers, "workers", 0, fmt.Sprintf("divide the experiment's watchers among this many worker processes (1 to %d) of this executable, on the member it starts (or --endpoints); shard 0 seeds, writes and compacts; the results are merged exactly", maxWorkers))
	fs.IntVar(&d.index, "index", 0, "this worker's shard, 0-based (set by --workers)")
	fs.IntVar(&d.shards, "shards", 0, "shards the experiment is divided into (set by --workers)")
	fs.StringVar(&d.barrierEtcdKey, "barrier-etcd-key", "", "meet the other workers under this etcd key of --endpoints (set by --workers)")
	for _, name := range []string{"index", "shards", "barrier-etcd-key"} {
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
// flags checked): --workers on a divisible experiment of lwbench's model,
// a worker's shard, barrier and --endpoints.
func (o *experimentOptions) validateDivision(name string) error {
	d := &o.division
	if d.workers == 0 && !d.worker() {
		return nil
	}
	if !slices.Contains(experiment.Divisible, name) {
		return cli.FlagErrorf("--workers: %s cannot be divided among workers (only %s)", name, strings.Join(experiment.Divisible, ", "))
	}
	switch {
	case d.kubeFlags(o):
		return cli.FlagErrorf("--workers cannot be used with --kube-apiserver or --kubeconfig yet: each worker would need kube-apiservers of its own")
	case d.workers != 0 && d.worker():
		return cli.FlagErrorf("--workers cannot be used with --shards: the coordinator starts the workers")
	case d.workers < 0 || d.workers > maxWorkers:
		return cli.FlagErrorf("--workers %d: want 1 to %d", d.workers, maxWorkers)
	case d.workers > 0 && o.target.clusterSize > 0:
		return cli.FlagErrorf("--workers cannot be used with --cluster-size yet: the experiment drives one member")
	}
	if !d.worker() {
		return nil
	}
	if err := d.shard().Validate(); err != nil {
		return cli.FlagErrorf("--index %d --shards %d: %v", d.index, d.shards, err)
	}
	switch {
	case d.barrierEtcdKey == "":
		return cli.FlagErrorf("--shards needs --barrier-etcd-key: where the workers meet")
	case !o.target.external():
		return cli.FlagErrorf("--shards needs --endpoints: the etcd every worker drives")
	case o.flags.Changed("write-out") && o.format != output.FormatJSON:
		return cli.FlagErrorf("--shards: a worker writes its result as JSON, for its coordinator: leave -w out")
	}
	o.format = output.FormatJSON
	return nil
}

// kubeFlags reports whether the clients would go through kube-apiserver.
func (d *experimentDivision) kubeFlags(o *experimentOptions) bool {
	return o.kube.enabled() || o.kubeconfig.enabled()
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
// comma-separated value).
func experimentWorkerArgs(fs *pflag.FlagSet, name string, i, n int, key string, endpoints []string, prefix string) []string {
	args := []string{name, "--index", strconv.Itoa(i), "--shards", strconv.Itoa(n), "--barrier-etcd-key", key, "-w", "json",
		"--endpoints", strings.Join(endpoints, ","), "--allow-maintenance", "--prefix", prefix}
	fs.Visit(func(f *pflag.Flag) {
		if experimentNotPassed[f.Name] {
			return
		}
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		args = append(args, "--"+f.Name+"="+v)
	})
	return args
}

// runExperimentWorkers runs `lwbench EXPERIMENT --workers N`: it opens the
// target (the embedded member by default, or --endpoints), starts N
// worker processes of this executable on it (startWorkerProcs), one shard
// each, meeting at a barrier under a fresh etcd key, waits for them and
// returns their results merged (experiment.Merge). The coordinator holds
// no load. An interrupt is passed on to the workers.
func runExperimentWorkers(ctx context.Context, o *experimentOptions, name string, con *console) (*experiment.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--workers: find lwbench's executable: %w", err)
	}
	target, release, err := o.target.open(ctx, con.Logf)
	defer release()
	if err != nil {
		return nil, err
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
	prefix := o.prefix
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	n := o.division.workers
	con.Logf("%s: dividing the watchers among %d worker processes (barrier %s on %s)", name, n, key, strings.Join(target.Endpoints, ","))
	procs, stop, err := startWorkerProcs(ctx, exe, dir, n, func(i int) []string {
		return experimentWorkerArgs(o.flags, name, i, n, key, target.Endpoints, prefix)
	}, admin, key, con)
	if err != nil {
		return nil, err
	}
	defer stop()
	results, failures := waitWorkerProcs(procs, readExperimentResult)
	if len(failures) > 0 {
		return nil, errors.Join(failures...)
	}
	merged, err := experiment.Merge(results)
	if err != nil {
		return nil, fmt.Errorf("merge the workers' results: %w", err)
	}
	// The workers reached the coordinator's member as --endpoints.
	merged.Target.Embedded = target.Embedded
	for _, w := range merged.Warnings {
		con.Logf("warning: %s", w)
	}
	return merged, nil
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
// it connects the barrier on --endpoints, samples its own process
// (watchload.StartSelfSampler) while run runs the experiment with the
// shard and the barrier, and returns the result with its Shard and Self.
// A failure is posted on the barrier (Abort), so the other workers stop
// waiting.
func runExperimentWorker(ctx context.Context, o *experimentOptions, run func(context.Context) (*experiment.Result, error)) (*experiment.Result, error) {
	sh := o.division.shard()
	c, err := o.target.dial(ctx, o.target.endpoints)
	if err != nil {
		return nil, fmt.Errorf("--barrier-etcd-key: %w", err)
	}
	defer c.Close()
	b, err := barrier.NewEtcd(c, o.division.barrierEtcdKey, sh)
	if err != nil {
		return nil, cli.FlagErrorf("--barrier-etcd-key: %v", err)
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
