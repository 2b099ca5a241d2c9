package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/machine"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/internal/release"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/plot"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// experimentOptions are the flags every experiment subcommand shares.
type experimentOptions struct {
	target           targetOptions
	format           output.Format
	formatValue      *output.FormatValue
	outDir           string
	benchstat        string
	quick            bool
	label            string
	prefix           string
	probeRate        float64
	allowMaintenance bool
	kube             kubeOptions
	kubeconfig       kubeconfigOptions
	// division is --workers and a worker's flags, registered on the
	// experiments that divide (experiment.Divisible).
	division experimentDivision
	flags    *pflag.FlagSet
}

func (o *experimentOptions) AddFlags(fs *pflag.FlagSet) {
	o.formatValue = output.NewFormatValue(&o.format, output.FormatTable)
	fs.VarP(o.formatValue, "write-out", "w", "output format: "+o.formatValue.Names())
	o.target.AddFlags(fs)
	fs.StringVar(&o.outDir, "out", "", "also write NAME.json, NAME.md (markdown table) and NAME-*.png (plots) into this directory, NAME being --label or the experiment")
	fs.StringVar(&o.benchstat, "benchstat", "", "also write a benchstat-compatible line per case to this file (\"-\": stderr)")
	fs.BoolVar(&o.quick, "quick", false, "small sizes: the whole experiment in seconds (what the tests and run-suite.sh --quick use)")
	fs.StringVar(&o.label, "label", "", "name of this result in comparisons and file names (default: the experiment)")
	fs.StringVar(&o.prefix, "prefix", "", fmt.Sprintf("Kubernetes etcd prefix to write under (default %s embedded, %s/<experiment>-<time> with --endpoints)", keyspace.DefaultPrefix, externalDefaultPrefix))
	fs.Float64Var(&o.probeRate, "probe-rate", 0, "probe operations per second, reads and writes alternating (default 20; defrag-stall 50)")
	fs.BoolVar(&o.allowMaintenance, "allow-maintenance", false, "with --endpoints: allow the experiment to compact (losing every key's history) and defragment that cluster")
	o.kube.AddFlags(fs)
	fs.Lookup("kube-apiserver").Usage = "run the experiment's Kubernetes clients through real kube-apiservers of this Kubernetes release (" + release.Kubernetes.Help() + ") in front of the member: client-go writers and informers instead of lwbench's model; built from the Go module proxy into " + etcdproc.CacheDir() + " on first use (10-30 minutes on 2 cores)"
	fs.Lookup("watch-cache").Usage = "with --kube-apiserver: kube-apiserver's --watch-cache (default off: every LIST and WATCH reaches etcd, as the model's informers do)"
	fs.Lookup("apiserver-feature-gates").Usage = "with --kube-apiserver: kube-apiserver's --feature-gates, passed as is (e.g. WatchList=false)"
	o.kubeconfig.AddFlags(fs)
	fs.Lookup("kubeconfig").Usage = "run the experiment's Kubernetes clients through the kube-apiservers of an existing cluster this kubeconfig names, starting nothing (relist-storm, continuation, catchup); needs --endpoints of the cluster's etcd with --allow-maintenance (the experiments compact it) and --prefix, its --etcd-prefix (default " + keyspace.DefaultPrefix + "). Each load writes only in namespaces of its own (lwbench-<random>-ns-N, refused if one exists) and deletes exactly those at its end, also on failure"
	o.flags = fs
}

func (o *experimentOptions) Validate(name string) error {
	if err := o.target.Validate(); err != nil {
		return err
	}
	// The experiments' model takes no kube-apiserver gate (run's does).
	if o.kube.version == "" && o.flags != nil && o.flags.Changed("apiserver-feature-gates") {
		return cli.FlagErrorf("--apiserver-feature-gates needs --kube-apiserver: the experiments' model follows kube-apiserver 1.37's defaults")
	}
	if err := o.kube.Validate(); err != nil {
		return err
	}
	if err := o.kube.checkSharedConnection(o.kubeconfig.enabled()); err != nil {
		return err
	}
	if err := o.kubeconfig.check(o.target.external()); err != nil {
		return err
	}
	if !o.kube.enabled() && !o.kubeconfig.enabled() && o.flags != nil && o.flags.Changed("client-feature-gates") {
		return cli.FlagErrorf("--client-feature-gates needs --kube-apiserver or --kubeconfig: the experiments' modelled informers list in pages")
	}
	if o.kubeconfig.enabled() && o.prefix == "" {
		o.prefix = keyspace.DefaultPrefix // the cluster's --etcd-prefix
	}
	if len(o.target.endpoints) > 0 && !o.allowMaintenance {
		return cli.FlagErrorf("--endpoints: %s compacts the cluster (every key's history below the compacted revision is lost) and may defragment it; pass --allow-maintenance to do so", name)
	}
	if o.label != "" && strings.ContainsAny(o.label, `/\`) {
		return cli.FlagErrorf("--label %q must not contain a path separator", o.label)
	}
	if o.prefix == "" && len(o.target.endpoints) > 0 {
		o.prefix = fmt.Sprintf("%s/%s-%d", externalDefaultPrefix, name, time.Now().Unix())
	}
	return nil
}

// common returns the options every experiment takes, with a target
// factory that starts an embedded member per timeline (in a subdirectory
// of --data-dir, if given) or returns --endpoints.
func (o *experimentOptions) common(logf func(string, ...any)) experiment.Common {
	c := experiment.Common{Prefix: o.prefix, Quick: o.quick, Label: o.label, Logf: logf, Shard: o.division.shard(), Barrier: o.division.barrier,
		RunID: o.division.runID()}
	if c.Shard.Count > 1 && c.RunID == "" {
		c.RunID = "pending" // the coordinator's plan: its workers derive theirs
	}
	if c.Shard.Count > 1 && c.Barrier == nil {
		c.Barrier = pendingBarrier{} // the flags are checked before a worker connects
	}
	c.Probe.RatePerSecond = o.probeRate
	c.NewTarget = func(ctx context.Context, name string) (watchload.Target, func(), error) {
		t := o.target
		if t.dataDir != "" {
			t.dataDir = filepath.Join(o.target.dataDir, fileName(name))
		}
		return t.open(ctx, logf)
	}
	switch {
	case o.kube.enabled():
		c.Stack, c.WatchList = o.stackFactory(logf), o.kube.watchList
	case o.kubeconfig.enabled():
		if logf == nil {
			logf = func(string, ...any) {}
		}
		routeClientGoLogs(logf)
		c.Stack, c.WatchList = o.kubeconfig.sharedStackFactory(o.prefix, o.kube.clientWatchList(), o.kube.connections(), logf), o.kube.watchList
		c.NamespaceDeleteTimeout = o.kubeconfig.deleteTimeout
		if o.division.apiserversOwned {
			// A worker of --workers --kube-apiserver: the coordinator
			// started the kube-apiservers for this experiment alone and
			// stops them after (no namespace controller runs there to
			// finalize a namespace's deletion), as the undivided
			// experiment does its own.
			shared := c.Stack
			c.Stack = func(ctx context.Context, t watchload.Target, prefix string, interval time.Duration) (kubeload.Stack, func(), error) {
				st, stop, err := shared(ctx, t, prefix, interval)
				st.Shared = false
				st.APIServer.Managed = true
				return st, stop, err
			}
		}
	}
	return c
}

// refuseKubeconfig is the usage error of an experiment that cannot run on
// a cluster lwbench does not own, saying why.
func (o *experimentOptions) refuseKubeconfig(why string) error {
	if !o.kubeconfig.enabled() {
		return nil
	}
	return cli.FlagErrorf("--kubeconfig: %s; run it through kube-apiservers of lwbench's own (--kube-apiserver)", why)
}

// stackFactory starts the kube-apiservers of --kube-apiserver and its
// flags in front of a timeline's member (kubeload.StartStack), building
// kube-apiserver first if it is not cached, once per experiment.
func (o *experimentOptions) stackFactory(logf func(string, ...any)) experiment.StackFactory {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	routeClientGoLogs(logf)
	var bin string
	return func(ctx context.Context, t watchload.Target, prefix string, compactionInterval time.Duration) (kubeload.Stack, func(), error) {
		if bin == "" {
			b, err := o.kube.binaries(ctx, logf)
			if err != nil {
				return kubeload.Stack{}, func() {}, err
			}
			bin = b
		}
		ccfg, err := o.target.clientConfig(t.Endpoints)
		if err != nil {
			return kubeload.Stack{}, func() {}, err
		}
		logf("starting %d kube-apiserver %s in front of %s (--etcd-prefix %s)", max(o.kube.servers, 1), o.kube.resolvedVersion, strings.Join(t.Endpoints, ","), prefix)
		return kubeload.StartStack(ctx, t, o.kube.stackConfig(bin, prefix, compactionInterval, 0, ccfg.TLS, o.target.conn))
	}
}

// fileName makes a timeline's name usable as a directory name.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ' ' || r == '=' {
			return '-'
		}
		return r
	}, s)
}

func (o *experimentOptions) registerCompletion(cmd *cobra.Command) {
	cmd.RegisterFlagCompletionFunc("write-out", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return o.formatValue.Allowed(), cobra.ShellCompDirectiveNoFileComp
	})
}

// write renders the result to out, its benchstat lines with --benchstat
// (to errOut for "-") and, with --out, the files.
func (o *experimentOptions) write(out, errOut io.Writer, res *experiment.Result) error {
	if err := experimentLayout(res).write(out, o.format, res); err != nil {
		return err
	}
	if o.benchstat != "" {
		if err := writeBenchstat(o.benchstat, errOut, experiment.Benchstat(res)); err != nil {
			return err
		}
	}
	if o.outDir == "" {
		return nil
	}
	return writeResultFiles(o.outDir, res)
}

// writeResultFiles writes NAME.json, NAME.md and the plots of one result.
func writeResultFiles(dir string, res *experiment.Result) error {
	base := filepath.Join(dir, res.Name())
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	var md strings.Builder
	env := res.Environment
	through := ""
	if a := res.APIServer; a != nil {
		through = fmt.Sprintf(" through kube-apiserver %s (watch cache %s, client-go WatchListClient %s)", a.Version, onOff(a.WatchCache), a.ClientWatchList)
	}
	fmt.Fprintf(&md, "etcd %s (%s)%s, %s; %s, %d cores, %.1f GiB, %s; %s; %s; %.0f s\n\n", res.Target.EtcdVersion, targetKind(res.Target.Embedded),
		through, res.Experiment, env.CPUModel, env.Cores, float64(env.MemoryBytes)/(1<<30), env.Kernel, env.GoVersion,
		res.StartedAt.Format(time.RFC3339), res.DurationMs/1000)
	if err := experimentLayout(res).write(&md, output.FormatMarkdown, nil); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	figs, err := plot.Figures([]*experiment.Result{res}, experimentFigures)
	if err != nil {
		return err
	}
	for i, f := range figs {
		if !strings.HasPrefix(f.Name, res.Name()+"-") {
			figs[i].Name = res.Name() + "-" + f.Name // db-size, relist-cost: one per result here
		}
	}
	return writeFigures(dir, figs)
}

func targetKind(embedded bool) string {
	if embedded {
		return "embedded member"
	}
	return "external cluster"
}

// writeFigures writes each figure as DIR/NAME.png.
func writeFigures(dir string, figs []plot.Figure) error {
	for _, f := range figs {
		path := filepath.Join(dir, f.Name+".png")
		w, err := os.Create(path)
		if err != nil {
			return err
		}
		err = f.WritePNG(w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// experimentEntry is everything lwbench says and does for one experiment:
// its subcommand's help, its own flags, how it runs, its table and its
// figures. The CaseSummary columns its cases measure are its
// experiment.Spec; how each figure is drawn is pkg/plot's.
type experimentEntry struct {
	name  string // the experiment, as experiment.Names spells it: the subcommand
	short string // the subcommand's one-line help
	long  string // the subcommand's help: what it does, and its defaults
	// bind registers the experiment's own flags on fs, bound to fresh
	// options, and returns how to check and run the experiment with them.
	bind func(fs *pflag.FlagSet) experimentRun
	// table lays a result of the experiment out, one row per case; false
	// when the result lacks the experiment's own part.
	table func(*experiment.Result) (output.Table, bool)
	// keys is the number of the table's leading columns that name a case,
	// repeated in each part of a table split to fit maxTableWidth.
	keys int
	// groups are the indices of the table's columns that start a group
	// kept in one part when it is split (splitTable); none: split anywhere.
	groups []int
	// notes explain the table's columns below it; nil for none.
	notes func(*experiment.Result) []string
	// figures are drawn for its results besides each timeline's probe
	// latency (plot.Figures).
	figures []plot.ExperimentFigure
}

// experimentRun is one experiment bound to its flags: validate reads and
// checks them after the shared ones, run performs the experiment.
type experimentRun struct {
	validate func(o *experimentOptions) error
	run      func(ctx context.Context, o *experimentOptions, logf func(string, ...any)) (*experiment.Result, error)
}

// lookupExperiment returns the entry of the experiment name.
func lookupExperiment(name string) (experimentEntry, bool) {
	i := slices.IndexFunc(experiments, func(e experimentEntry) bool { return e.name == name })
	if i < 0 {
		return experimentEntry{}, false
	}
	return experiments[i], true
}

// experimentFigures returns the figures of the experiment name's results
// besides their latency: its entry's, none for a run's result.
func experimentFigures(name string) []plot.ExperimentFigure {
	e, _ := lookupExperiment(name)
	return e.figures
}

// newExperimentCommands returns a subcommand per experiment, in the order
// of experiments.
func newExperimentCommands() []*cobra.Command {
	var cmds []*cobra.Command
	for _, e := range experiments {
		cmds = append(cmds, e.command(nil))
	}
	return cmds
}

// command builds the experiment's subcommand.
func (e experimentEntry) command(runF func(*cobra.Command, *experimentOptions) error) *cobra.Command {
	o := &experimentOptions{}
	var x experimentRun
	cmd := &cobra.Command{
		Use:   e.name,
		Short: e.short,
		Long:  e.long,
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(e.name); err != nil {
				return err
			}
			if err := o.validateDivision(e.name); err != nil {
				return err
			}
			if err := x.validate(o); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd, o)
			}
			// The kubeconfig and the files it names are read (and
			// refused) before anything is created or connected to.
			if o.kubeconfig.enabled() {
				if _, err := o.kubeconfig.restConfig(); err != nil {
					return err
				}
			}
			if o.outDir != "" {
				if err := output.PrepareDir(o.outDir); err != nil {
					return cli.FlagErrorf("--out: %v", err)
				}
			}
			if o.benchstat != "" && o.benchstat != "-" {
				if err := output.PrepareFile(o.benchstat); err != nil {
					return cli.FlagErrorf("--benchstat: %v", err)
				}
			}
			limitMemory()
			con := newConsole(cmd.ErrOrStderr())
			defer con.Done()
			var res *experiment.Result
			var err error
			switch ctx := cmd.Context(); {
			case o.division.workers > 0:
				res, err = runExperimentWorkers(ctx, o, e.name, con)
			case o.division.worker():
				res, err = runExperimentWorker(ctx, o, func(ctx context.Context) (*experiment.Result, error) { return x.run(ctx, o, con.Logf) })
			default:
				res, err = x.run(ctx, o, con.Logf)
			}
			if err != nil {
				return err
			}
			if o.division.logResult {
				// A Job's worker: its result as one line of its log,
				// for lwbench gather and merge.
				b, err := json.Marshal(res)
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), "%s%s\n", resultLinePrefix, b); err != nil {
					return err
				}
				return violations(res)
			}
			if err := o.write(cmd.OutOrStdout(), cmd.ErrOrStderr(), res); err != nil {
				return err
			}
			return violations(res)
		},
	}
	o.AddFlags(cmd.Flags())
	if slices.Contains(experiment.Divisible, e.name) {
		o.division.addFlags(cmd.Flags())
	}
	x = e.bind(cmd.Flags())
	o.registerCompletion(cmd)
	return cmd
}

// violations returns an error wrapping watchload.ErrViolations when a case
// lost an event or broke another watch guarantee, as `lwbench run` does:
// the result has been written, and the exit code says it is not clean.
func violations(res *experiment.Result) error {
	var lost, other int64
	for _, c := range res.Cases {
		lost += c.LostEvents
		other += c.OtherViolations
	}
	if lost+other == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d lost events, %d other violations (see the result's validation)", watchload.ErrViolations, lost, other)
}

// limitMemory sets a soft memory limit of a quarter of the machine's RAM
// (at least 1 GiB) unless GOMEMLIMIT is set. lwbench collects garbage
// late (GOGC 400, main.go); the experiments' concurrent LISTs of tens of
// thousands of objects, served by an embedded member in the same process,
// would otherwise let the heap grow to many times what is live.
func limitMemory() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if mem, ok := machine.MemTotalBytes(); ok {
		debug.SetMemoryLimit(max(mem/4, 1<<30))
	}
}

// parsePageSizes reads page sizes; "none" is 0 (unpaginated) when allowed.
func parsePageSizes(flag string, values []string, allowNone bool) ([]int64, error) {
	var out []int64
	for _, s := range values {
		if s == "none" && allowNone {
			out = append(out, 0)
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 1 {
			if allowNone {
				return nil, cli.FlagErrorf("%s: %q is not a positive number or none", flag, s)
			}
			return nil, cli.FlagErrorf("%s: %q is not a positive number", flag, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseSize reads a decimal size such as 100MB, 1GB or 5000000.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	u := strings.ToUpper(s)
	for _, x := range []struct {
		suffix string
		mult   int64
	}{{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}} {
		if strings.HasSuffix(u, x.suffix) {
			u, mult = strings.TrimSuffix(u, x.suffix), x.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(u), 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a size like 100MB or 1GB", s)
	}
	return int64(v * float64(mult)), nil
}

func toInt64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// experiments are lwbench's experiment subcommands, in the order the
// suite runs them (experiment.Names): each entry is everything lwbench says
// and does for one experiment, its figures included, so adding one is
// adding an entry here (besides the experiment itself and its Spec in
// pkg/experiment, and a new kind of figure, if any, in pkg/plot).
var experiments = []experimentEntry{
	{
		name:  experiment.NameRelistStorm,
		short: "Informers held back past a compaction all relist at once: relists, resync time, bytes, probe latency",
		long: `relist-storm seeds pods at each --objects count and, for each --page-sizes,
starts --watchers client-go informers, holds them all back, compacts past
their revision with kube-apiserver's compactor and releases them: each watch
fails with "required revision has been compacted" and the informer relists as
client-go does (backoff, LIST at its revision, 410, LIST at the latest). A
control case per count holds them back as long without compacting. It reports
relists, LIST requests, objects and bytes, time to resync per informer, and a
fixed-rate probe's latency meanwhile; every watch is validated.
With --workers N the informers are divided among N worker processes (each its
block, on connections of its own); the first seeds, writes, compacts and
releases, all meet at a barrier before the hold, at the release and once
resynced, and the results are merged exactly; with --kube-apiserver they
share the kube-apiservers the coordinator starts, with --kubeconfig that
cluster's.
Defaults: --objects 1000,10000,50000 (--quick 100,1000), --watchers 10 (3).`,
		bind: func(fs *pflag.FlagSet) experimentRun {
			var eo experiment.RelistStormOptions
			var pageSizes []string
			fs.IntSliceVar(&eo.Objects, "objects", nil, "pod counts, ascending (default 1000,10000,50000; --quick 100,1000)")
			fs.StringSliceVar(&pageSizes, "page-sizes", []string{"500", "10000", "none"}, "informers' LIST page sizes (none: unpaginated)")
			fs.IntVar(&eo.Watchers, "watchers", 0, "informers per case (default 10; --quick 3)")
			fs.IntVar(&eo.Connections, "conns", 0, "connections the informers use (default 2; --quick 1)")
			fs.Float64Var(&eo.WriteRate, "write-rate", 0, "pod updates per second during each case (default 50)")
			fs.DurationVar(&eo.Hold, "hold", 0, "how long the informers are held back (default 2s; --quick 1s)")
			fs.BoolVar(&eo.NoControl, "no-control", false, "skip the control case without compaction")
			return experimentRun{
				validate: func(o *experimentOptions) error {
					var err error
					if eo.PageSizes, err = parsePageSizes("--page-sizes", pageSizes, true); err != nil {
						return err
					}
					if o.kube.enabled() && o.flags.Changed("page-sizes") && (o.kube.watchList == nil || *o.kube.watchList) {
						return cli.FlagErrorf("--page-sizes: client-go's informers load their state with a WATCHLIST (WatchListClient, on by default): give --client-feature-gates WatchListClient=false for LISTs in pages")
					}
					eo.Common = o.common(nil)
					return flagErrors(o.flags, eo.Defaults().Validate())
				},
				run: func(ctx context.Context, o *experimentOptions, logf func(string, ...any)) (*experiment.Result, error) {
					eo.Common = o.common(logf)
					return experiment.RelistStorm(ctx, eo)
				},
			}
		},
		table:   relistStormTable,
		keys:    3,
		groups:  []int{3, 9, 13, 17}, // counts, times, probe and lost events, etcd behind kube-apiserver
		notes:   relistStormNotes,
		figures: []plot.ExperimentFigure{plot.RelistCostFigure},
	},
	{
		name:  experiment.NameContinuation,
		short: "Paginated LISTs while compaction runs: expired continuations, restart against client-go's full-list fallback",
		long: `continuation seeds --objects pods and, per --page-sizes, runs --lists paginated
LISTs (pages pinned to the first page's revision, as kube-apiserver reads a
paginated list from etcd) while pods are updated: first without compaction
(the control, which also counts the revisions written during one list), then
with a compactor every N revisions keeping each of --retain-lists lists' worth
of history, for each fallback: restart the paginated list, or one unpaginated
list as client-go's pager does (FullListIfExpired). A list that outlasts the
history kept has a continuation page compacted under it.
Defaults: --objects 10000 (--quick 1000), --page-sizes 500,1000 (100,250).`,
		bind: func(fs *pflag.FlagSet) experimentRun {
			var eo experiment.ContinuationOptions
			var pageSizes []string
			fs.IntVar(&eo.Objects, "objects", 0, "pods listed (default 10000; --quick 1000)")
			fs.StringSliceVar(&pageSizes, "page-sizes", nil, "LIST page sizes (default 500,1000; --quick 100,250)")
			fs.IntVar(&eo.Lists, "lists", 0, "lists per case (default 20; --quick 4)")
			fs.DurationVar(&eo.PageDelay, "page-delay", 0, "client work between pages (default 5ms; --quick 10ms)")
			fs.Float64Var(&eo.WriteRate, "write-rate", 0, "pod updates per second (default 200)")
			fs.Float64SliceVar(&eo.RetainLists, "retain-lists", nil, "history the compactor keeps, in lists' worth of the control's revisions; it compacts every half of it (default 2,1,0.5)")
			fs.Int64Var(&eo.CompactEvery, "compact-every", 0, "instead of --retain-lists: compact every N revisions")
			fs.Int64Var(&eo.Retain, "retain", 0, "with --compact-every: revisions each compaction keeps (default: --compact-every)")
			fs.IntVar(&eo.MaxAttempts, "max-attempts", 0, "lists a restarting client makes before giving up (default 10)")
			return experimentRun{
				validate: func(o *experimentOptions) error {
					var err error
					if eo.PageSizes, err = parsePageSizes("--page-sizes", pageSizes, false); err != nil {
						return err
					}
					eo.Common = o.common(nil)
					return flagErrors(o.flags, eo.Defaults().Validate())
				},
				run: func(ctx context.Context, o *experimentOptions, logf func(string, ...any)) (*experiment.Result, error) {
					eo.Common = o.common(logf)
					return experiment.Continuation(ctx, eo)
				},
			}
		},
		table:   continuationTable,
		keys:    2,
		figures: []plot.ExperimentFigure{plot.ContinuationFigure},
	},
	{
		name:  experiment.NameCompactionSweep,
		short: "The same Kubernetes load under each --etcd-compaction-interval: db size over time, relists, write cost",
		long: `compaction-sweep runs the same load once per --intervals, each on a fresh
member: pods seeded, informers watching them, pods written at --write-rate for
--duration, --flaky informers losing their watch for --disconnect every
--disconnect-every, and kube-apiserver's compactor at the interval (never:
no compaction). It reports db size over time, compactions, relists (only
when a compaction passed a disconnected informer), write throughput and
latency, and the probe.
Defaults: --intervals never,2s,5s,15s,30s (--quick never,1s,4s), --duration 60s (6s).`,
		bind: func(fs *pflag.FlagSet) experimentRun {
			var eo experiment.CompactionSweepOptions
			var intervals []string
			fs.StringSliceVar(&intervals, "intervals", nil, "compaction intervals, or never (default never,2s,5s,15s,30s; --quick never,1s,4s)")
			fs.DurationVar(&eo.Duration, "duration", 0, "write phase per interval (default 60s; --quick 6s)")
			fs.IntVar(&eo.Objects, "objects", 0, "pods seeded (default 2000; --quick 300)")
			fs.IntVar(&eo.Watchers, "watchers", 0, "informers (default 10; --quick 3)")
			fs.IntVar(&eo.Flaky, "flaky", 0, "informers that lose their watch periodically (default 3; --quick 1)")
			fs.DurationVar(&eo.Disconnect, "disconnect", 0, "how long each loses it (default 6s; --quick 2s)")
			fs.DurationVar(&eo.DisconnectEvery, "disconnect-every", 0, "how often (default 12s; --quick 3s)")
			fs.Float64Var(&eo.WriteRate, "write-rate", 0, "pod writes per second (default 500; --quick 200)")
			fs.BoolVar(&eo.Physical, "physical", false, "wait for each compaction to finish deleting (kube-apiserver does not)")
			return experimentRun{
				validate: func(o *experimentOptions) error {
					if err := o.refuseKubeconfig("compaction-sweep sets kube-apiserver's --etcd-compaction-interval, which on an existing cluster is its operator's"); err != nil {
						return err
					}
					eo.Intervals = nil
					for _, s := range intervals {
						if s == "never" {
							eo.Intervals = append(eo.Intervals, -1)
							continue
						}
						d, err := time.ParseDuration(s)
						if err != nil || d <= 0 {
							return cli.FlagErrorf("--intervals: %q is not a positive duration or never", s)
						}
						eo.Intervals = append(eo.Intervals, d)
					}
					eo.Common = o.common(nil)
					return flagErrors(o.flags, eo.Defaults().Validate())
				},
				run: func(ctx context.Context, o *experimentOptions, logf func(string, ...any)) (*experiment.Result, error) {
					eo.Common = o.common(logf)
					return experiment.CompactionSweep(ctx, eo)
				},
			}
		},
		table:   sweepTable,
		keys:    1,
		figures: []plot.ExperimentFigure{plot.SweepDBSizeFigure},
	},
	{
		name:  experiment.NameDefragStall,
		short: "Defragmentation at each db size: how long the member stops, the probe's stall and errors, sizes before and after",
		long: `defrag-stall grows one member to each of --sizes (new keys written twice, so
half the file is history), compacts it, and defragments it while a probe reads
and writes at a fixed rate: defragmentation time, the probe's latency, longest
stall, errors and timeouts, db size and size in use before and after. Then
(unless --no-overlap) it rewrites those keys and starts a defragmentation
--overlap-delay after requesting a compaction, while etcd is still deleting.
Defaults: --sizes 100MB,500MB,1GB (--quick 8MB,24MB).`,
		bind: func(fs *pflag.FlagSet) experimentRun {
			var eo experiment.DefragStallOptions
			var sizes []string
			fs.StringSliceVar(&sizes, "sizes", nil, "db sizes to grow to, ascending (default 100MB,500MB,1GB; --quick 8MB,24MB)")
			fs.IntVar(&eo.ValueSize, "value-size", 0, "bytes per value (default 4096; --quick 512)")
			fs.BoolVar(&eo.NoOverlap, "no-overlap", false, "skip the defragmentations that overlap a compaction")
			fs.DurationVar(&eo.OverlapDelay, "overlap-delay", 0, "start of the overlapping defragmentation after the compaction request (default 20ms)")
			fs.IntVar(&eo.Concurrency, "writer-concurrency", 0, "parallel puts growing the member (default 32)")
			deprecatedAlias(fs, "concurrency", "writer-concurrency")
			return experimentRun{
				validate: func(o *experimentOptions) error {
					if err := o.refuseKubeconfig("defrag-stall grows the cluster's etcd by hundreds of megabytes of keys it does not delete"); err != nil {
						return err
					}
					eo.Sizes = nil
					for _, s := range sizes {
						v, err := parseSize(s)
						if err != nil {
							return cli.FlagErrorf("--sizes: %v", err)
						}
						eo.Sizes = append(eo.Sizes, v)
					}
					eo.Common = o.common(nil)
					return flagErrors(o.flags, eo.Defaults().Validate())
				},
				run: func(ctx context.Context, o *experimentOptions, logf func(string, ...any)) (*experiment.Result, error) {
					eo.Common = o.common(logf)
					return experiment.DefragStall(ctx, eo)
				},
			}
		},
		table:   defragTable,
		keys:    2,
		figures: []plot.ExperimentFigure{plot.DefragFigure, plot.DBSizeFigure},
	},
	{
		name:  experiment.NameCatchup,
		short: "A watcher resuming from an old, uncompacted revision far behind, against a relist",
		long: `catchup seeds --objects pods and, for each --behind, updates them that many times
while a watcher is away, then resumes its watch from the old revision (nothing
compacted) until it is current: etcd sends a lagging watcher at most 1,000
revisions per response, one round every 100 ms. It then times a relist of the
same pods, paginated and not, and checks that every update arrived once.
--watchers resume together. With --workers N they are divided among N worker
processes (--watchers defaults to N): the first writes the updates and
relists, every worker resumes its block from the same revision, and the
results are merged exactly; with --kube-apiserver they share the
kube-apiservers the coordinator starts, with --kubeconfig that cluster's.
revisions counts the experiment's own writes in the span caught up over
(the updates and the probe's), as one process counts them.
Defaults: --behind 1000,10000,50000 (--quick 1000,5000), --watchers 1.`,
		bind: func(fs *pflag.FlagSet) experimentRun {
			var eo experiment.CatchupOptions
			var behind []int
			fs.IntSliceVar(&behind, "behind", nil, "updates the watcher misses, ascending (default 1000,10000,50000; --quick 1000,5000)")
			fs.IntVar(&eo.Objects, "objects", 0, "pods updated and relisted (default 1000; --quick 200)")
			fs.Int64Var(&eo.PageSize, "page-size", 0, "the relist's page size (default 500)")
			fs.IntVar(&eo.Concurrency, "writer-concurrency", 0, "parallel updates (default 32)")
			deprecatedAlias(fs, "concurrency", "writer-concurrency")
			fs.IntVar(&eo.Watchers, "watchers", 0, "watchers resuming together from the same revision, each on a connection of its own (default 1; with --workers N, N)")
			return experimentRun{
				validate: func(o *experimentOptions) error {
					if n := o.division.count(); n > 1 && !o.flags.Changed("watchers") {
						eo.Watchers = n
					}
					eo.Behind = toInt64s(behind)
					if len(behind) == 0 {
						eo.Behind = nil
					}
					eo.Common = o.common(nil)
					return flagErrors(o.flags, eo.Defaults().Validate())
				},
				run: func(ctx context.Context, o *experimentOptions, logf func(string, ...any)) (*experiment.Result, error) {
					eo.Common = o.common(logf)
					return experiment.Catchup(ctx, eo)
				},
			}
		},
		table:   catchupTable,
		keys:    1,
		figures: []plot.ExperimentFigure{plot.CatchupFigure},
	},
}
