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

// phaseScrape reads one etcd member's own /metrics every second over a
// divided load, each scrape's increase in the load's phase then, the
// phases followed on the load's barrier (phaseAfter): a scrape is taken at
// each point every worker reached, so that what a phase did counts in it.
// It is what the coordinator of `lwbench run --workers` and `lwbench
// scrape` set beside the workers' merged client figures.
type phaseScrape struct {
	sampler  *kubeload.EtcdMetricsSampler
	stop     context.CancelFunc
	followed chan struct{}
	done     chan struct{} // closed when every worker reached BarrierDone

	mu    sync.Mutex
	phase string
	err   error // the follower's: an abort, or the barrier unreadable
}

// startPhaseScrape starts sampling endpoint (TLS with tlsCfg) and following
// the barrier with follow; onPhase, if set, is told each phase as it
// begins. The first phase is "start".
func startPhaseScrape(ctx context.Context, follow followFunc, endpoint string, tlsCfg *tls.Config, onPhase func(string)) *phaseScrape {
	p := &phaseScrape{phase: "start", followed: make(chan struct{}), done: make(chan struct{})}
	p.sampler = kubeload.SampleEtcdMetrics(ctx, endpoint, tlsCfg, time.Now(), time.Second, func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.phase
	})
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = stop
	go func() {
		defer close(p.followed)
		err := follow(fctx, func(point string, _ time.Time) {
			p.sampler.SampleNow() // what the phase that ends did
			p.mu.Lock()
			next, ok := phaseAfter[point]
			if ok {
				p.phase = next
			}
			p.mu.Unlock()
			if ok && onPhase != nil {
				onPhase(next)
			}
			if point == watchload.BarrierDone {
				close(p.done)
			}
		})
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
	}()
	return p
}

// Done is closed once every worker has its result (BarrierDone).
func (p *phaseScrape) Done() <-chan struct{} { return p.done }

// Followed is closed when the follower has ended: ctx's end, a worker's
// abort (Finish's error) or a barrier it cannot read.
func (p *phaseScrape) Followed() <-chan struct{} { return p.followed }

// Finish stops following and sampling, takes a last scrape unless ctx has
// ended, and returns etcd's figures per phase and the follower's error.
func (p *phaseScrape) Finish(ctx context.Context) (*report.EtcdMetrics, error) {
	p.stop()
	<-p.followed
	m := p.sampler.Finish(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	return m, p.err
}

// scrapeOptions are `lwbench scrape`'s: the member to read, the load's
// barrier and its shard count.
type scrapeOptions struct {
	out               outputOptions
	conn              etcdclient.Flags
	shards            int
	barrierEtcdKey    string
	barrierConfigMap  string
	barrierKubeconfig string
	logResult         bool
	flags             *pflag.FlagSet
}

func (o *scrapeOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, false)
	fs.StringSliceVar(&o.conn.Endpoints, "endpoints", nil, "the etcd member whose /metrics to read: its client URL (the first, if several)")
	fs.DurationVar(&o.conn.DialTimeout, "dial-timeout", 5*time.Second, "timeout to connect to --endpoints (with --barrier-etcd-key)")
	o.conn.AddSecurityFlags(fs)
	fs.IntVar(&o.shards, "shards", 0, "shards (workers) of the load (default: $"+envShards+")")
	fs.StringVar(&o.barrierEtcdKey, "barrier-etcd-key", "", "the workers' barrier: this etcd key of --endpoints")
	fs.StringVar(&o.barrierConfigMap, "barrier-configmap", "", "the workers' barrier: this ConfigMap, NAMESPACE/NAME (in-cluster config, or --barrier-kubeconfig)")
	fs.StringVar(&o.barrierKubeconfig, "barrier-kubeconfig", "", "kubeconfig of the cluster holding --barrier-configmap (default: the pod's in-cluster config)")
	fs.BoolVar(&o.logResult, "log-result", false, "print the figures (JSON) as one line starting with \""+scrapeLinePrefix+"\" after everything else, for a pod's log")
	o.flags = fs
}

// scrapeLinePrefix starts the one line of `lwbench scrape --log-result`'s
// log that holds its figures (report.EtcdMetrics, JSON).
const scrapeLinePrefix = "lwbench-etcd-metrics "

func (o *scrapeOptions) Validate() error {
	var err error
	if o.shards, err = flagOrEnv(o.flags, "shards", o.shards, envShards); err != nil {
		return err
	}
	switch {
	case o.shards < 1:
		return cli.FlagErrorf("--shards: give the load's number of shards (or set $%s)", envShards)
	case len(o.conn.Endpoints) == 0:
		return cli.FlagErrorf("--endpoints: give the client URL of the etcd member whose /metrics to read")
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
without taking part and reads one etcd member's own /metrics every second and
at each point every worker reached: etcd's puts, deletes, ranges, txns,
proposals, watchers, backend commit and WAL fsync p99 and db size, per phase of
the load (seed, sync, steady, drain), to set beside the workers' merged client
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
		var rc *rest.Config
		if o.barrierKubeconfig != "" {
			rc, err = clientcmd.BuildConfigFromFlags("", o.barrierKubeconfig)
		} else {
			rc, err = rest.InClusterConfig()
		}
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
	con.Logf("reading %s/metrics per phase of the load of %d workers", o.conn.Endpoints[0], o.shards)
	p := startPhaseScrape(ctx, follow, o.conn.Endpoints[0], cfg.TLS, nil)
	var interrupted error
	select {
	case <-p.Done():
	case <-p.Followed():
	case <-ctx.Done():
		interrupted = context.Cause(ctx)
	}
	m, ferr := p.Finish(ctx)
	con.Done()
	if m == nil {
		return errors.Join(ferr, interrupted, errors.New("no figures"))
	}
	if err := writeEtcdMetrics(o, out, m); err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("the workers' barrier: %w (the figures until then are printed)", ferr)
	}
	return interrupted
}

// writeEtcdMetrics prints m: its table and note, JSON, or the one log
// line.
func writeEtcdMetrics(o *scrapeOptions, out io.Writer, m *report.EtcdMetrics) error {
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
	if err := output.Write(out, o.out.format, makeEtcdMetricsTable(m), nil); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out, etcdMetricsNote(m))
	return err
}

// readEtcdMetrics reads a file `lwbench scrape` wrote (report.ReadDocument)
// and decodes it (decodeEtcdMetrics); the error names path.
func readEtcdMetrics(path string) (*report.EtcdMetrics, error) {
	b, err := report.ReadDocument(path)
	if err != nil {
		return nil, err
	}
	m, err := decodeEtcdMetrics(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// decodeEtcdMetrics decodes what `lwbench scrape` printed: its JSON, or a
// log holding its --log-result line (the last with scrapeLinePrefix).
func decodeEtcdMetrics(b []byte) (*report.EtcdMetrics, error) {
	if doc, ok := loggedLine(b, scrapeLinePrefix); ok {
		b = doc
	}
	var m report.EtcdMetrics
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not lwbench scrape's figures: %w", err)
	}
	if m.Endpoint == "" {
		return nil, errors.New("not lwbench scrape's figures (no endpoint)")
	}
	return &m, nil
}
