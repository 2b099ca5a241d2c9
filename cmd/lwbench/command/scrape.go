package command

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdclient"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// followFunc follows a divided load's barrier without taking part
// (barrier.FollowEtcd, barrier.FollowConfigMap), calling onMet at each
// point every worker reached, until ctx ends or a worker aborts.
type followFunc func(ctx context.Context, onMet func(point string, latest time.Time)) error

// phaseScrape reads the own /metrics of every etcd member every second
// and of kube-apiservers at each phase boundary over a divided load,
// each scrape's increase in the load's phase then, the phases followed on
// the load's barrier (phaseAfter): every server is scraped at each point
// every worker reached, so that what a phase did counts in it. It is
// what the coordinator of `lwbench run --workers` and `lwbench scrape`
// set beside the workers' merged client figures.
type phaseScrape struct {
	sampler  *kubeload.EtcdMetricsSampler
	meter    *kubeload.APIServerMeter // nil: no kube-apiserver read
	stop     context.CancelFunc
	followed chan struct{}
	done     chan struct{} // closed when every worker reached BarrierDone

	mu    sync.Mutex
	phase string
	err   error // the follower's: an abort, or the barrier unreadable
}

// phaseScrapeConfig is what a phaseScrape reads and follows.
type phaseScrapeConfig struct {
	follow followFunc
	// endpoints are the etcd members' client URLs whose /metrics to
	// read (https ones with tls); none: no etcd figures.
	endpoints []string
	tls       *tls.Config
	// apiservers are the kube-apiservers whose /metrics to read at each
	// phase boundary; none: no kube-apiserver figures.
	apiservers []kubeload.APIServer
	// onPhase, if set, is told each phase as it begins.
	onPhase func(string)
	logf    func(string, ...any)
}

// startPhaseScrape starts sampling and following the barrier as cfg
// says. The first phase is "start". It fails when an apiserver's
// RESTConfig gives no HTTP client.
func startPhaseScrape(ctx context.Context, cfg phaseScrapeConfig) (*phaseScrape, error) {
	p := &phaseScrape{phase: "start", followed: make(chan struct{}), done: make(chan struct{})}
	if len(cfg.apiservers) > 0 {
		m, err := kubeload.MeterAPIServers(ctx, cfg.apiservers, p.phase, cfg.logf)
		if err != nil {
			return nil, err
		}
		p.meter = m
	}
	p.sampler = kubeload.SampleEtcdMetrics(ctx, cfg.endpoints, cfg.tls, time.Now(), time.Second, func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.phase
	})
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = stop
	go func() {
		defer close(p.followed)
		err := cfg.follow(fctx, func(point string, _ time.Time) {
			next, ok := phaseAfter[point]
			// What the phase that ends did, read from every server at
			// once.
			var wg sync.WaitGroup
			wg.Go(p.sampler.SampleNow)
			if p.meter != nil && ok {
				// The run's ctx, not fctx: Finish ends the follower
				// once the workers are done, maybe during this scrape.
				wg.Go(func() { p.meter.SetPhase(ctx, next) })
			}
			wg.Wait()
			p.mu.Lock()
			if ok {
				p.phase = next
			}
			p.mu.Unlock()
			if ok && cfg.onPhase != nil {
				cfg.onPhase(next)
			}
			if point == watchload.BarrierDone {
				close(p.done)
			}
		})
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
	}()
	return p, nil
}

// Done is closed once every worker has its result (BarrierDone).
func (p *phaseScrape) Done() <-chan struct{} { return p.done }

// Followed is closed when the follower has ended: ctx's end, a worker's
// abort (Finish's error) or a barrier it cannot read.
func (p *phaseScrape) Followed() <-chan struct{} { return p.followed }

// Finish stops following and sampling, takes a last scrape unless ctx has
// ended, and returns the servers' figures per phase (etcd's nil without
// endpoints, the apiservers' empty without apiservers) and the
// follower's error.
func (p *phaseScrape) Finish(ctx context.Context) (report.ServerMetrics, error) {
	p.stop()
	<-p.followed
	var m report.ServerMetrics
	m.EtcdMetrics = p.sampler.Finish(ctx)
	if p.meter != nil {
		m.APIServers, m.APIServerMetrics = p.meter.Finish(ctx)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return m, p.err
}

// scrapeOptions are `lwbench scrape`'s: the members and the
// kube-apiserver to read, the load's barrier and its shard count.
type scrapeOptions struct {
	out               outputOptions
	conn              etcdclient.Flags
	kubeconfig        string
	apiserverMetrics  bool
	shards            int
	barrierEtcdKey    string
	barrierConfigMap  string
	barrierKubeconfig string
	logResult         bool
	flags             *pflag.FlagSet
}

func (o *scrapeOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, false)
	fs.StringSliceVar(&o.conn.Endpoints, "endpoints", nil, "the etcd members whose /metrics to read: every member's client URL (each read, and reported alone and summed)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "also read kube-apiserver's own /metrics per phase through this kubeconfig's server (one kube-apiserver, not a load balancer: its counters would mix servers); its user needs get on the non-resource URL /metrics; also the default --barrier-kubeconfig")
	fs.BoolVar(&o.apiserverMetrics, "apiserver-metrics", false, "read kube-apiserver's own /metrics per phase: through --kubeconfig, or in a pod its service account's in-cluster config")
	fs.DurationVar(&o.conn.DialTimeout, "dial-timeout", 5*time.Second, "timeout to connect to --endpoints (with --barrier-etcd-key)")
	o.conn.AddSecurityFlags(fs)
	fs.IntVar(&o.shards, "shards", 0, "shards (workers) of the load (default: $"+envShards+")")
	fs.StringVar(&o.barrierEtcdKey, "barrier-etcd-key", "", "the workers' barrier: this etcd key of --endpoints")
	fs.StringVar(&o.barrierConfigMap, "barrier-configmap", "", "the workers' barrier: this ConfigMap, NAMESPACE/NAME (in-cluster config, or --barrier-kubeconfig)")
	fs.StringVar(&o.barrierKubeconfig, "barrier-kubeconfig", "", "kubeconfig of the cluster holding --barrier-configmap (default: --kubeconfig, else the pod's in-cluster config)")
	fs.BoolVar(&o.logResult, "log-result", false, "print the figures (JSON) as one line starting with \""+scrapeLinePrefix+"\" after everything else, for a pod's log")
	o.flags = fs
}

// scrapeLinePrefix starts the one line of `lwbench scrape --log-result`'s
// log that holds its figures (report.EtcdMetrics, JSON).
const scrapeLinePrefix = "lwbench-etcd-metrics "

// apiserverMetricsWanted reports whether kube-apiserver's /metrics is read.
func (o *scrapeOptions) apiserverMetricsWanted() bool {
	return o.apiserverMetrics || o.kubeconfig != ""
}

func (o *scrapeOptions) Validate() error {
	var err error
	if o.shards, err = flagOrEnv(o.flags, "shards", o.shards, envShards); err != nil {
		return err
	}
	switch {
	case o.shards < 1:
		return cli.FlagErrorf("--shards: give the load's number of shards (or set $%s)", envShards)
	case len(o.conn.Endpoints) == 0 && !o.apiserverMetricsWanted():
		return cli.FlagErrorf("--endpoints: give the client URLs of the etcd members whose /metrics to read (or --kubeconfig or --apiserver-metrics: kube-apiserver's alone)")
	case len(o.conn.Endpoints) == 0 && o.barrierEtcdKey != "":
		return cli.FlagErrorf("--barrier-etcd-key needs --endpoints: the members holding the barrier")
	case (o.barrierEtcdKey == "") == (o.barrierConfigMap == ""):
		return cli.FlagErrorf("give one of --barrier-etcd-key and --barrier-configmap: the workers' barrier, whose points mark the load's phases")
	case o.barrierKubeconfig != "" && o.barrierConfigMap == "":
		return cli.FlagErrorf("--barrier-kubeconfig needs --barrier-configmap")
	case o.logResult && o.flags.Changed("write-out") && o.out.format != output.FormatJSON:
		return cli.FlagErrorf("--log-result prints JSON: leave -w out")
	}
	if o.barrierConfigMap != "" {
		if _, _, err := barrier.ParseConfigMap(o.barrierConfigMap); err != nil {
			return cli.FlagErrorf("--barrier-configmap: %v", err)
		}
	}
	if err := o.conn.Validate(); err != nil {
		return cli.FlagErrorf("%v", err)
	}
	return nil
}

// newScrapeCommand returns `lwbench scrape`; runF replaces the run in
// flag tests.
func newScrapeCommand(runF func(*cobra.Command, *scrapeOptions) error) *cobra.Command {
	o := &scrapeOptions{}
	cmd := &cobra.Command{
		Use:   "scrape",
		Short: "Read etcd's own /metrics per phase of a load divided among workers, following their barrier",
		Long: `lwbench scrape follows the barrier of a load's workers (lwbench worker)
without taking part and reads the own /metrics of every etcd member of
--endpoints every second and at each point every worker reached: etcd's puts,
deletes, ranges, txns, proposals, watchers, db size, backend commit and WAL
fsync p99 and the RPCs it handled by method and code
(grpc_server_handled_total), per phase of the load (seed, sync, steady,
drain), per member and summed. With --kubeconfig (or --apiserver-metrics in a
pod) it also reads kube-apiserver's own /metrics at each of those points: its
requests by verb, resource and code, the requests it sent etcd, the objects
it stores, its CPU and memory. They go beside the workers' merged client
figures (lwbench merge --etcd-metrics). It ends once every worker has its
result, at a worker's abort, or at SIGINT, and prints what it read. It holds
no load: run it as the one coordinator of a load on a cluster.`,
	}
	cmd.Args = cli.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.Validate(); err != nil {
			return err
		}
		if runF != nil {
			return runF(cmd, o)
		}
		return runScrape(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	o.AddFlags(cmd.Flags())
	o.out.registerCompletion(cmd)
	return cmd
}

// runScrape runs `lwbench scrape`.
func runScrape(ctx context.Context, o *scrapeOptions, out, errOut io.Writer) error {
	if err := o.out.prepare(); err != nil {
		return err
	}
	con := newConsole(errOut)
	defer con.Done()
	cfg, err := o.conn.Config()
	if err != nil {
		return cli.FlagErrorf("%v", err)
	}
	var apiservers []kubeload.APIServer
	if o.apiserverMetricsWanted() {
		rc, err := kubeRESTConfig(o.kubeconfig)
		if err != nil {
			return fmt.Errorf("kube-apiserver's /metrics: %w", err)
		}
		apiservers = []kubeload.APIServer{{Name: "apiserver", RESTConfig: rc}}
	}
	var follow followFunc
	if o.barrierEtcdKey != "" {
		cfg.Endpoints, cfg.Context = o.conn.Endpoints, ctx
		c, err := clientv3.New(cfg)
		if err != nil {
			return fmt.Errorf("--endpoints: connect to %s: %w", strings.Join(o.conn.Endpoints, ","), err)
		}
		defer c.Close()
		follow = func(ctx context.Context, onMet func(string, time.Time)) error {
			return barrier.FollowEtcd(ctx, c, o.barrierEtcdKey, o.shards, onMet)
		}
	} else {
		namespace, name, _ := barrier.ParseConfigMap(o.barrierConfigMap)
		path := o.barrierKubeconfig
		if path == "" {
			path = o.kubeconfig
		}
		rc, err := kubeRESTConfig(path)
		if err != nil {
			return fmt.Errorf("--barrier-configmap %s: the cluster's config (--barrier-kubeconfig, or in a pod its service account): %w", o.barrierConfigMap, err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return fmt.Errorf("--barrier-configmap %s: %w", o.barrierConfigMap, err)
		}
		follow = func(ctx context.Context, onMet func(string, time.Time)) error {
			return barrier.FollowConfigMap(ctx, cs, namespace, name, o.shards, onMet)
		}
	}
	var what []string
	if len(o.conn.Endpoints) > 0 {
		what = append(what, strings.Join(o.conn.Endpoints, ", "))
	}
	for _, a := range apiservers {
		what = append(what, "kube-apiserver "+a.RESTConfig.Host)
	}
	con.Logf("reading the /metrics of %s per phase of the load of %d workers", strings.Join(what, " and "), o.shards)
	p, err := startPhaseScrape(ctx, phaseScrapeConfig{follow: follow, endpoints: o.conn.Endpoints, tls: cfg.TLS, apiservers: apiservers, logf: con.Logf})
	if err != nil {
		return err
	}
	var interrupted error
	select {
	case <-p.Done():
	case <-p.Followed():
	case <-ctx.Done():
		interrupted = context.Cause(ctx)
	}
	m, ferr := p.Finish(ctx)
	con.Done()
	if m.EtcdMetrics == nil && len(m.APIServers) == 0 {
		return errors.Join(ferr, interrupted, errors.New("no figures"))
	}
	if err := writeServerMetrics(o, out, &m); err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("the workers' barrier: %w (the figures until then are printed)", ferr)
	}
	return interrupted
}

// kubeRESTConfig is the config of kubeconfig at path, or in a pod (path
// "") its service account's in-cluster config.
func kubeRESTConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return rest.InClusterConfig()
}

// writeServerMetrics prints m: its tables and notes, JSON, or the one
// log line.
func writeServerMetrics(o *scrapeOptions, out io.Writer, m *report.ServerMetrics) error {
	if o.logResult {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s%s\n", scrapeLinePrefix, b)
		return err
	}
	if o.out.format == output.FormatJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	}
	tables, notes := serverMetricsTables(m.EtcdMetrics, m.APIServers, m.APIServerMetrics)
	for i, t := range tables {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := output.Write(out, o.out.format, t, nil); err != nil {
			return err
		}
	}
	for _, n := range notes {
		for _, w := range wrapIndented(output.Escape(n), maxRunTableWidth) {
			if _, err := fmt.Fprintln(out, w); err != nil {
				return err
			}
		}
	}
	return nil
}

// readServerMetrics reads a file `lwbench scrape` wrote
// (report.ReadDocument) and decodes it (decodeServerMetrics); the error
// names path.
func readServerMetrics(path string) (*report.ServerMetrics, error) {
	b, err := report.ReadDocument(path)
	if err != nil {
		return nil, err
	}
	m, err := decodeServerMetrics(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// decodeServerMetrics decodes what `lwbench scrape` printed: its JSON, or
// a log holding its --log-result line (the last with scrapeLinePrefix);
// etcd's figures alone, as scrape wrote them before it read
// kube-apiserver's, decode as well.
func decodeServerMetrics(b []byte) (*report.ServerMetrics, error) {
	if doc, ok := loggedLine(b, scrapeLinePrefix); ok {
		b = doc
	}
	var m report.ServerMetrics
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not lwbench scrape's figures: %w", err)
	}
	if (m.EtcdMetrics == nil || m.Endpoint == "") && len(m.APIServers) == 0 {
		return nil, errors.New("not lwbench scrape's figures (no etcd endpoint, no kube-apiserver)")
	}
	if m.EtcdMetrics != nil && m.Endpoint == "" {
		m.EtcdMetrics = nil
	}
	return &m, nil
}
