package command

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/buildinfo"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/exporter"
	"github.com/kubestore/etcdkit/pkg/live"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// exporterShutdownTimeout bounds the HTTP server's shutdown: the process
// ends within 2 s of SIGINT or SIGTERM.
const exporterShutdownTimeout = 1500 * time.Millisecond

type exporterOptions struct {
	live              liveOptions
	listen            string
	interval          time.Duration
	countInterval     time.Duration
	topNamespaces     int
	quota             int64
	values            bool
	allowValueReads   bool
	maxKeysPerRequest int64
}

func (o *exporterOptions) AddFlags(fs *pflag.FlagSet) {
	o.live.AddFlags(fs)
	fs.Lookup("endpoints").Usage = "scan the running cluster at these etcd client URLs (comma-separated; required); read-only requests only"
	fs.StringVar(&o.listen, "listen", "127.0.0.1:9379", "serve /metrics and /healthz on this host:port")
	fs.DurationVar(&o.interval, "interval", 5*time.Minute, "period of the full scans (keys_only Ranges of every key), and the bound of each")
	fs.DurationVar(&o.countInterval, "count-interval", 30*time.Second,
		"period of the count scans between full scans (count_only Ranges per resource and top namespace), and the bound of each; 0 disables them")
	fs.IntVar(&o.topNamespaces, "top-namespaces", 20, "export the N namespaces with the most bytes (objects without --values) by name, the rest as namespace=\"_other\" (0: all)")
	fs.Var(newByteSize(&o.quota, snapshot.DefaultQuotaBytes), "quota",
		"the members' --quota-backend-bytes (bytes, or with a unit: 8GiB) when they do not report it (before etcd 3.6); given, it overrides theirs")
	fs.BoolVar(&o.values, "values", false, "full scans read the values too (a full Range of values) for etcdinspect_value_bytes")
	fs.BoolVar(&o.allowValueReads, "allow-value-reads", false,
		"scan etcd before 3.7, whose keys_only Ranges read every value from disk (etcd issue 20386)")
	fs.Int64Var(&o.maxKeysPerRequest, "max-keys-per-request", live.DefaultMaxKeysPerRequest, "keys per Range page of a full scan")
}

func (o *exporterOptions) Validate() error {
	if !o.live.enabled() {
		return cli.FlagErrorf("--endpoints is required: the exporter reads a running cluster")
	}
	// Any host, or none (every interface), as net.Listen takes it.
	_, port, err := net.SplitHostPort(o.listen)
	if err != nil {
		return cli.FlagErrorf("--listen %q is not host:port: %v", o.listen, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && port != "0") {
		return cli.FlagErrorf("--listen %q: port %q is not a number from 0 to 65535", o.listen, port)
	}
	switch {
	case o.interval <= 0:
		return cli.FlagErrorf("--interval must be positive")
	case o.countInterval < 0:
		return cli.FlagErrorf("--count-interval must not be negative (0 disables count scans)")
	case o.topNamespaces < 0:
		return cli.FlagErrorf("--top-namespaces must not be negative (0: every namespace)")
	case o.quota <= 0:
		return cli.FlagErrorf("--quota must be positive")
	case o.maxKeysPerRequest <= 0:
		return cli.FlagErrorf("--max-keys-per-request must be positive")
	}
	return o.live.Validate()
}

func newExporterCommand(g *globalOptions) *cobra.Command {
	o := &exporterOptions{}
	cmd := &cobra.Command{
		Use:   "exporter --endpoints URLS [--listen HOST:PORT]",
		Short: "Serve what fills a live cluster as Prometheus metrics, from periodic read-only scans",
		Long: `exporter scans a running cluster periodically with the live mode's read-only
requests and serves the last successful scan's figures at /metrics
(Prometheus' text format) and its freshness at /healthz:

  - every --interval a full scan: every member's Status and the compact
    revision, and every key with keys_only Ranges at one revision and at
    the compact revision (objects and revisions kept per group, resource
    and namespace); with --values the values too (live value bytes, exact,
    and history value bytes, estimated);
  - every --count-interval between them a count scan: Status, and one
    count_only Range per resource and per top namespace of it.

Until a full scan succeeds, it is retried every --count-interval. A
failed scan keeps the last figures, counts the error
(etcdinspect_scan_errors_total) and leaves their time in
etcdinspect_last_successful_scan_timestamp_seconds; /healthz answers 503
once they are older than 3 intervals. Each scan's cost (requests, keys and
bytes read) is exported too. Only read requests are sent: never a Put,
Compact, Defragment, lease or HashKV. SIGTERM stops it cleanly (exit 0),
SIGINT too (exit 130).`,
		Args:        cli.NoArgs,
		Annotations: map[string]string{cli.AnnotationTerminateExitsOK: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return runExporter(cmd, g, o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runExporter serves until the command's context ends (SIGINT, SIGTERM),
// then shuts the HTTP server down and waits for the scan under way to
// stop.
func runExporter(cmd *cobra.Command, g *globalOptions, o *exporterOptions) error {
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	// One client of every endpoint, whose balancer moves on when a member
	// goes away: the exporter outlives members (usage and keys read one
	// member, connectForKeys).
	c, done, err := o.live.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, versions, err := o.live.checkForKeys(ctx, c, o.allowValueReads)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	version := "(unknown)"
	if info, ok := buildinfo.Read(); ok {
		version = info.Version
	}
	var logMu sync.Mutex
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(stderr, "etcdinspect exporter: "+format+"\n", args...)
	}
	exp := exporter.New(c, exporter.Options{Parser: g.parser(), Endpoints: o.live.conn.Endpoints, StatusTimeout: o.live.conn.DialTimeout,
		Values: o.values, AllowValueReads: o.allowValueReads, Versions: versions, MaxKeysPerRequest: o.maxKeysPerRequest,
		Interval: o.interval, CountInterval: o.countInterval, TopNamespaces: o.topNamespaces,
		QuotaBytes: o.quota, QuotaOverride: cmd.Flags().Changed("quota"), Version: version,
		OnScan: func(kind string, took time.Duration, err error) {
			if err != nil {
				logf("%s scan failed after %s (the metrics keep the last good values): %v", kind, took.Round(time.Millisecond), err)
			}
		}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(exp, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		ok, reason := exp.Health()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: %s\n", reason)
			return
		}
		fmt.Fprintf(w, "ok: %s\n", reason)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	runCtx, stopRun := context.WithCancel(ctx)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		exp.Run(runCtx)
	}()
	logf("serving http://%s/metrics and /healthz; full scans every %s, count scans every %s", l.Addr(), o.interval, o.countInterval)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exporterShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	stopRun()
	<-scanned
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", l.Addr(), serveErr)
	}
	logf("stopped")
	return nil
}
