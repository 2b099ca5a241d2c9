package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/embedetcd"
	"github.com/kubestore/etcdkit/internal/etcdclient"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/machine"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/internal/release"
	"github.com/kubestore/etcdkit/internal/runtemp"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// targetOptions choose the etcd a command drives: an embedded member in
// a temporary (or given) directory, a cluster of real etcd processes that
// lwbench starts and stops (--cluster-size), or existing endpoints, which
// lwbench connects to with etcdctl's TLS, auth and keepalive flags.
type targetOptions struct {
	endpoints     []string
	dataDir       string
	unsafeNoFsync bool
	dialTimeout   time.Duration
	// conn holds etcdctl's TLS, authentication and keepalive flags; its
	// Endpoints and DialTimeout are filled from the fields above.
	conn etcdclient.Flags
	// clusterSize > 0 starts that many etcd processes of etcdVersion
	// (internal/etcdproc), in network namespaces with netns.
	clusterSize int
	etcdVersion string
	netns       bool
	// quotaBackendBytes is etcd's --quota-backend-bytes for the members
	// lwbench starts (0: etcd's 2 GiB); set by --db-size.
	quotaBackendBytes int64
	// reusePrefix accepts an --endpoints prefix that already holds keys.
	reusePrefix bool
	flags       *pflag.FlagSet
}

func (o *targetOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.endpoints, "endpoints", nil, "etcd client URLs to drive instead of an embedded member (comma-separated); lwbench never compacts, defragments or faults them unless told to")
	fs.StringVar(&o.dataDir, "data-dir", "", "keep the embedded member's (or --cluster-size members') data here (an empty or new directory); default: a temporary directory, removed afterwards")
	fs.BoolVar(&o.unsafeNoFsync, "unsafe-no-fsync", false, "run the embedded member (or --cluster-size members) without fsync (faster, write latencies unrealistic)")
	fs.DurationVar(&o.dialTimeout, "dial-timeout", 5*time.Second, "timeout to connect to --endpoints")
	o.conn.AddSecurityFlags(fs)
	o.conn.AddKeepAliveFlags(fs)
	fs.IntVar(&o.clusterSize, "cluster-size", 0, "start a cluster of this many real etcd processes on loopback (built from the module proxy into "+etcdproc.CacheDir()+") instead of the embedded member; 0: the embedded member")
	fs.StringVar(&o.etcdVersion, "etcd-version", "", "etcd release of --cluster-size members: "+release.Etcd.Help()+" (default "+version.Version+", the client's)")
	fs.BoolVar(&o.reusePrefix, "reuse-prefix", false, "with --endpoints: write under --prefix even if it already holds keys (they are never modified or deleted)")
	fs.BoolVar(&o.netns, "netns", false, "run --cluster-size members in network namespaces of their own, so that one can be cut off (needs root and iproute2)")
	o.flags = fs
}

// Validate checks the target flags. It creates nothing: the commands
// validate every flag before they open a target.
func (o *targetOptions) Validate() error {
	if o.flags != nil && o.flags.Changed("endpoints") {
		if len(o.endpoints) == 0 {
			return cli.FlagErrorf("--endpoints: Required value: give etcd client URLs, or leave --endpoints out for an embedded member")
		}
		for i, e := range o.endpoints {
			if strings.TrimSpace(e) == "" {
				return cli.FlagErrorf("--endpoints: Invalid value: %q: endpoint %d is empty", strings.Join(o.endpoints, ","), i+1)
			}
		}
	}
	o.conn.Endpoints, o.conn.DialTimeout = o.endpoints, o.dialTimeout
	if err := o.conn.Validate(); err != nil {
		return cli.FlagErrorf("%v", err)
	}
	if o.etcdVersion != "" || (o.flags != nil && o.flags.Changed("etcd-version")) {
		v, err := release.Etcd.Resolve(o.etcdVersion)
		if err != nil {
			return cli.FlagErrorf("--etcd-version: %v", err)
		}
		o.etcdVersion = v
	}
	switch {
	case o.dataDir != "" && len(o.endpoints) > 0:
		return cli.FlagErrorf("--data-dir and --endpoints cannot be used together")
	case o.clusterSize < 0:
		return cli.FlagErrorf("--cluster-size must not be negative")
	case o.clusterSize > 0 && len(o.endpoints) > 0:
		return cli.FlagErrorf("--cluster-size and --endpoints cannot be used together: lwbench starts the cluster itself with --cluster-size")
	case o.etcdVersion != "" && o.clusterSize == 0:
		return cli.FlagErrorf("--etcd-version needs --cluster-size")
	case o.netns && o.clusterSize == 0:
		return cli.FlagErrorf("--netns needs --cluster-size")
	case o.unsafeNoFsync && len(o.endpoints) > 0:
		return cli.FlagErrorf("--unsafe-no-fsync and --endpoints cannot be used together: lwbench does not configure --endpoints members")
	}
	if o.dataDir != "" {
		entries, err := os.ReadDir(o.dataDir)
		if err == nil && len(entries) > 0 {
			return cli.FlagErrorf("--data-dir %s is not empty; lwbench only writes to an empty or new directory", o.dataDir)
		}
	}
	return nil
}

// external reports whether the target is a cluster lwbench does not own.
func (o *targetOptions) external() bool { return len(o.endpoints) > 0 }

// clientConfig returns the client configuration for endpoints, with the
// TLS, credentials and keepalive of the flags.
func (o *targetOptions) clientConfig(endpoints []string) (clientv3.Config, error) {
	f := o.conn
	f.Endpoints, f.DialTimeout = endpoints, o.dialTimeout
	return f.Config()
}

// open starts the embedded member or the cluster if no endpoints were
// given and returns the target and a function that releases it: it stops
// the processes lwbench started and removes their temporary directory.
func (o *targetOptions) open(ctx context.Context, logf func(string, ...any)) (watchload.Target, func(), error) {
	endpoints := o.endpoints
	t := watchload.Target{Managed: len(endpoints) == 0}
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if t.Managed {
		dir := o.dataDir
		if dir == "" {
			removeStaleDirs(logf)
			tmp, err := runtemp.New("", runtemp.EtcdPrefix)
			if err != nil {
				return t, cleanup, err
			}
			cleanups = append(cleanups, func() { os.RemoveAll(tmp) })
			dir = tmp
		}
		if o.clusterSize == 0 {
			srv, err := embedetcd.Start(ctx, embedetcd.Config{Dir: dir, UnsafeNoFsync: o.unsafeNoFsync, QuotaBackendBytes: o.quotaBackendBytes})
			if err != nil {
				cleanup()
				return t, func() {}, err
			}
			cleanups = append(cleanups, srv.Close)
			endpoints = srv.Endpoints
			t.Embedded = true
			logf("started an embedded etcd member in %s at %s", dir, strings.Join(endpoints, ","))
		} else {
			c, err := o.startCluster(ctx, dir, logf)
			if err != nil {
				cleanup()
				return t, func() {}, err
			}
			cleanups = append(cleanups, func() {
				c.Stop()
				logf("stopped the %d etcd members", len(c.Members))
			})
			endpoints = c.Endpoints()
			for _, m := range c.Members {
				t.Members = append(t.Members, m)
			}
		}
	}
	if !t.Managed {
		// Fail fast, naming the cause, instead of a later "context deadline
		// exceeded" (or a hang) from the first request.
		cfg, err := o.clientConfig(endpoints)
		if err != nil {
			return t, cleanup, err
		}
		if err := etcdclient.Check(ctx, cfg); err != nil {
			return t, cleanup, fmt.Errorf("--endpoints: %w", err)
		}
	}
	t.Endpoints = endpoints
	t.Dial = func(ctx context.Context) (*clientv3.Client, error) { return o.dial(ctx, endpoints) }
	t.DialEndpoint = func(ctx context.Context, endpoint string) (*clientv3.Client, error) {
		return o.dial(ctx, []string{endpoint})
	}
	return t, cleanup, nil
}

// removeStaleDirs removes the temporary data directories of earlier
// lwbench runs that were killed before they could (runtemp.RemoveStale),
// and names those it cannot prove stale.
func removeStaleDirs(logf func(string, ...any)) {
	found, err := runtemp.RemoveStale("")
	if err != nil {
		logf("looking for data directories killed runs left: %v", err)
	}
	for _, s := range found {
		if s.Removed {
			logf("removed %s, the data directory of an lwbench run that was killed (pid %d)", s.Dir, s.PID)
			continue
		}
		logf("found %s, an lwbench data directory, not removed: %s; delete it if no lwbench runs", s.Dir, s.Why)
	}
}

func (o *targetOptions) dial(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	cfg, err := o.clientConfig(endpoints)
	if err != nil {
		return nil, err
	}
	cfg.Context = ctx
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", strings.Join(endpoints, ","), err)
	}
	return c, nil
}

// startCluster builds (once) and starts the --cluster-size members.
func (o *targetOptions) startCluster(ctx context.Context, dir string, logf func(string, ...any)) (*etcdproc.Cluster, error) {
	v := o.etcdVersion
	if v == "" {
		v = version.Version
	}
	logf("preparing etcd %s binaries (built from the module proxy the first time, 1-3 minutes)", v)
	bin, err := etcdproc.Binaries(ctx, v, etcdproc.LogWriter(logf))
	if err != nil {
		return nil, fmt.Errorf("--etcd-version %s: %w", v, err)
	}
	if o.netns {
		if err := etcdproc.CheckNetns(); err != nil {
			return nil, fmt.Errorf("--netns: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var extra []string
	if o.quotaBackendBytes > 0 {
		extra = []string{"--quota-backend-bytes=" + strconv.FormatInt(o.quotaBackendBytes, 10)}
	}
	c, err := etcdproc.Start(sctx, etcdproc.Config{BinDir: bin, Members: o.clusterSize, Dir: dir, UnsafeNoFsync: o.unsafeNoFsync, Netns: o.netns, ExtraArgs: extra})
	if err != nil {
		return nil, fmt.Errorf("start %d etcd %s members: %w", o.clusterSize, v, err)
	}
	var pids []string
	for _, m := range c.Members {
		pids = append(pids, fmt.Sprintf("%s pid %d", m.Name, m.PID()))
	}
	where := "loopback"
	if o.netns {
		where = "network namespaces"
	}
	logf("started %d etcd %s members on %s in %s (%s) at %s", len(c.Members), v, where, dir, strings.Join(pids, ", "), strings.Join(c.Endpoints(), ","))
	return c, nil
}

// openGuarded opens the target and guards prefix on it (guardPrefix). The
// function it returns, also on error, deletes what the run created under
// prefix and then releases the target; call it once the run is over.
func (o *targetOptions) openGuarded(ctx context.Context, prefix string, logf func(string, ...any)) (watchload.Target, func(), error) {
	t, release, err := o.open(ctx, logf)
	if err != nil {
		return t, release, err
	}
	cleanup, err := o.guardPrefix(ctx, t, prefix, logf)
	if err != nil {
		return t, release, err
	}
	return t, func() { cleanup(); release() }, nil
}

// guardPrefix protects an --endpoints cluster from a benchmark that writes
// raw keys under prefix: it refuses a prefix that already holds keys
// unless --reuse-prefix, and returns a function that deletes, at the end,
// the keys created under it since (watchload.DeleteCreatedSince, or
// DeleteAllUnder when it held none). A
// prefix not ending in "/" is guarded as prefix + "/". For a target
// lwbench started itself it does nothing.
func (o *targetOptions) guardPrefix(ctx context.Context, t watchload.Target, prefix string, logf func(string, ...any)) (func(), error) {
	if t.Managed {
		return func() {}, nil
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	c, err := t.Dial(ctx)
	if err != nil {
		return nil, err
	}
	n, rev, err := watchload.KeysUnder(ctx, c, prefix)
	if err != nil {
		c.Close()
		return nil, err
	}
	if n > 0 && !o.reusePrefix {
		c.Close()
		return nil, fmt.Errorf("--prefix: %w: %s holds %d keys (an earlier run's, or another client's); choose another prefix or pass --reuse-prefix to write beside them (lwbench never modifies or deletes them)",
			watchload.ErrPrefixNotEmpty, prefix, n)
	}
	return func() {
		defer c.Close()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		var res report.Cleanup
		if n == 0 {
			// Empty at rev: every key under it is the run's.
			res = watchload.DeleteAllUnder(cctx, c, prefix)
		} else {
			res = watchload.DeleteCreatedSince(cctx, c, prefix, rev)
		}
		logf("cleanup: deleted the %d keys lwbench created under %s; %d keys left there", res.KeysDeleted, prefix, res.KeysLeft)
		if res.Error != "" {
			logf("cleanup: %s", res.Error)
		}
	}, nil
}

// outputOptions are the result outputs every benchmark command has.
type outputOptions struct {
	format      output.Format
	formatValue *output.FormatValue
	intervalCSV string
	benchstat   string
}

func (o *outputOptions) AddFlags(fs *pflag.FlagSet, intervals bool) {
	o.formatValue = output.NewFormatValue(&o.format, output.FormatTable)
	fs.VarP(o.formatValue, "write-out", "w", "output format: "+o.formatValue.Names())
	if intervals {
		fs.StringVar(&o.intervalCSV, "interval-csv", "", "also write the per-second series as CSV to this file")
	}
	fs.StringVar(&o.benchstat, "benchstat", "", "also write benchstat-compatible lines to this file (\"-\": stderr)")
}

func (o *outputOptions) registerCompletion(cmd *cobra.Command) {
	cmd.RegisterFlagCompletionFunc("write-out", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return o.formatValue.Allowed(), cobra.ShellCompDirectiveNoFileComp
	})
}

// prepare checks, before the run, that --interval-csv and --benchstat can
// be written, creating their directories if missing.
func (o *outputOptions) prepare() error {
	if o.intervalCSV != "" {
		if err := output.PrepareFile(o.intervalCSV); err != nil {
			return cli.FlagErrorf("--interval-csv: %v", err)
		}
	}
	if o.benchstat != "" && o.benchstat != "-" {
		if err := output.PrepareFile(o.benchstat); err != nil {
			return cli.FlagErrorf("--benchstat: %v", err)
		}
	}
	return nil
}

// table returns the table for the format: summary for text and markdown,
// and for CSV the one-row table of figures, which a CSV reader can use.
func (o *outputOptions) table(summary, figures output.Table) output.Table {
	if o.format == output.FormatCSV {
		return figures
	}
	return summary
}

// write renders the result, then the side files.
func (o *outputOptions) write(out, errOut io.Writer, t output.Table, v any, intervals []report.Interval, lines []report.BenchstatLine) error {
	if err := output.Write(out, o.format, t, v); err != nil {
		return err
	}
	if o.intervalCSV != "" {
		f, err := os.Create(o.intervalCSV)
		if err != nil {
			return fmt.Errorf("--interval-csv %s: %w", o.intervalCSV, err)
		}
		err = output.Write(f, output.FormatCSV, makeIntervalTable(intervals), nil)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--interval-csv %s: %w", o.intervalCSV, err)
		}
	}
	if o.benchstat != "" {
		return writeBenchstat(o.benchstat, errOut, lines)
	}
	return nil
}

// writeBenchstat writes lines in benchstat's format (report.WriteBenchstat)
// to the file path, or to errOut for "-". Errors name --benchstat.
func writeBenchstat(path string, errOut io.Writer, lines []report.BenchstatLine) error {
	w := errOut
	var f *os.File
	if path != "-" {
		var err error
		if f, err = os.Create(path); err != nil {
			return fmt.Errorf("--benchstat %s: %w", path, err)
		}
		w = f
	}
	err := report.WriteBenchstat(w, machine.CPUModel(), lines)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("--benchstat %s: %w", path, err)
	}
	return nil
}

// console writes log lines and, on a terminal only, a live status line
// to stderr.
type console struct {
	w     io.Writer
	tty   bool
	start time.Time
	mu    sync.Mutex
	line  string
}

func newConsole(w io.Writer) *console {
	c := &console{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		c.tty = isatty.IsTerminal(f.Fd())
	}
	return c
}

// Logf prints one log line above the status line.
func (c *console) Logf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tty && c.line != "" {
		fmt.Fprint(c.w, "\r\033[K")
	}
	fmt.Fprintf(c.w, "[%6.1fs] %s\n", time.Since(c.start).Seconds(), fmt.Sprintf(format, args...))
	if c.tty && c.line != "" {
		fmt.Fprint(c.w, c.line)
	}
}

// Status replaces the status line; it does nothing off a terminal.
func (c *console) Status(line string) {
	if !c.tty {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.line = line
	fmt.Fprint(c.w, "\r\033[K"+line)
}

// Done clears the status line.
func (c *console) Done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tty && c.line != "" {
		fmt.Fprint(c.w, "\r\033[K")
		c.line = ""
	}
}
