package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/embedetcd"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// targetOptions choose the etcd a command drives: an embedded member in
// a temporary (or given) directory, or existing endpoints.
type targetOptions struct {
	endpoints     []string
	dataDir       string
	unsafeNoFsync bool
	dialTimeout   time.Duration
}

func (o *targetOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.endpoints, "endpoints", nil, "etcd client URLs to drive instead of an embedded member (comma-separated)")
	fs.StringVar(&o.dataDir, "data-dir", "", "keep the embedded member's data here (an empty or new directory); default: a temporary directory, removed afterwards")
	fs.BoolVar(&o.unsafeNoFsync, "unsafe-no-fsync", false, "run the embedded member without fsync (faster, write latencies unrealistic)")
	fs.DurationVar(&o.dialTimeout, "dial-timeout", 5*time.Second, "timeout to connect to --endpoints")
}

func (o *targetOptions) Validate() error {
	if o.dataDir != "" && len(o.endpoints) > 0 {
		return cli.FlagErrorf("--data-dir and --endpoints cannot be used together")
	}
	if o.dataDir != "" {
		entries, err := os.ReadDir(o.dataDir)
		if err == nil && len(entries) > 0 {
			return cli.FlagErrorf("--data-dir %s is not empty; lwbench only writes to an empty or new directory", o.dataDir)
		}
	}
	return nil
}

// open starts the embedded member if no endpoints were given and returns
// the target and a function that releases it.
func (o *targetOptions) open(ctx context.Context, logf func(string, ...any)) (watchload.Target, func(), error) {
	endpoints := o.endpoints
	embedded := len(endpoints) == 0
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if embedded {
		dir := o.dataDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "lwbench-etcd-")
			if err != nil {
				return watchload.Target{}, cleanup, err
			}
			cleanups = append(cleanups, func() { os.RemoveAll(tmp) })
			dir = tmp
		}
		srv, err := embedetcd.Start(ctx, embedetcd.Config{Dir: dir, UnsafeNoFsync: o.unsafeNoFsync})
		if err != nil {
			cleanup()
			return watchload.Target{}, func() {}, err
		}
		cleanups = append(cleanups, srv.Close)
		endpoints = srv.Endpoints
		logf("started an embedded etcd member in %s at %s", dir, strings.Join(endpoints, ","))
	}
	dial := func(ctx context.Context) (*clientv3.Client, error) {
		c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: o.dialTimeout, Logger: zap.NewNop(), Context: ctx})
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", strings.Join(endpoints, ","), err)
		}
		return c, nil
	}
	return watchload.Target{Endpoints: endpoints, Embedded: embedded, Dial: dial}, cleanup, nil
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

// write renders the result, then the side files.
func (o *outputOptions) write(out, errOut io.Writer, t report.Table, v any, intervals []report.Interval, lines []report.BenchstatLine) error {
	if err := output.Write(out, o.format, t, v); err != nil {
		return err
	}
	if o.intervalCSV != "" {
		f, err := os.Create(o.intervalCSV)
		if err != nil {
			return fmt.Errorf("--interval-csv %s: %w", o.intervalCSV, err)
		}
		err = output.Write(f, output.FormatCSV, report.MakeIntervalTable(intervals), nil)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--interval-csv %s: %w", o.intervalCSV, err)
		}
	}
	if o.benchstat != "" {
		w := errOut
		var f *os.File
		if o.benchstat != "-" {
			var err error
			if f, err = os.Create(o.benchstat); err != nil {
				return fmt.Errorf("--benchstat %s: %w", o.benchstat, err)
			}
			w = f
		}
		err := report.WriteBenchstat(w, watchload.CPUModel(), lines)
		if f != nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("--benchstat %s: %w", o.benchstat, err)
		}
	}
	return nil
}

// console writes log lines and, on a terminal only, a live progress line
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

// Logf prints one log line above the progress line.
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

// Progress replaces the progress line; it does nothing off a terminal.
func (c *console) Progress(line string) {
	if !c.tty {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.line = line
	fmt.Fprint(c.w, "\r\033[K"+line)
}

// Done clears the progress line.
func (c *console) Done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tty && c.line != "" {
		fmt.Fprint(c.w, "\r\033[K")
		c.line = ""
	}
}
