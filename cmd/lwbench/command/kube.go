package command

import (
	"context"
	"crypto/tls"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/etcdclient"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/release"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// kubeOptions put real kube-apiservers in front of the etcd target
// (`lwbench run --kube-apiserver VERSION`): the load then goes through
// them, written by client-go clients and watched by client-go informers.
type kubeOptions struct {
	version         string
	servers         int
	watchCache      bool
	apiserverGates  string
	apiserverArgs   []string
	clientGates     string
	countEtcd       bool
	sharedConn      bool
	watchList       *bool           // from clientGates; nil: client-go's default
	serverGates     map[string]bool // from apiserverGates
	resolvedVersion string
	flags           *pflag.FlagSet
}

func (o *kubeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.version, "kube-apiserver", "", "run the load through real kube-apiservers of this Kubernetes release ("+release.Kubernetes.Help()+") in front of the etcd target, built from the Go module proxy into "+etcdproc.CacheDir()+" on first use (10-30 minutes on 2 cores), with real client-go writers and informers")
	fs.IntVar(&o.servers, "apiservers", 1, "with --kube-apiserver: kube-apiservers to start, all in front of the same etcd")
	fs.BoolVar(&o.watchCache, "watch-cache", false, "with --kube-apiserver: kube-apiserver's --watch-cache (off: every LIST and WATCH reaches etcd); default: what --profile models, off for informer, on for apiserver-cache")
	fs.StringVar(&o.apiserverGates, "apiserver-feature-gates", "", "kube-apiserver's --feature-gates (e.g. EtcdRangeStream=false,WatchList=false): passed as is to the real kube-apiservers (--kube-apiserver, conformance); the gates the etcd-direct model follows, "+kubeload.GateEtcdRangeStream+" and "+kubeload.GateWatchList+", also set the model's (without --kube-apiserver only these two are accepted; unset, the model follows the release conformance compares it with, else 1.37)")
	fs.StringArrayVar(&o.apiserverArgs, "apiserver-arg", nil, "with --kube-apiserver and in conformance: one more kube-apiserver command-line flag, passed as is after lwbench's own; repeatable (e.g. --apiserver-arg=--disable-admission-plugins=LimitRanger, which adds to lwbench's own ServiceAccount, or --apiserver-arg=--watch-cache-sizes=limitranges#0)")
	fs.BoolVar(&o.countEtcd, "count-etcd", true, "with --kube-apiserver: count every request the apiservers send etcd, by phase, shape and resource (and as rates by resource), through a counting gRPC proxy in front of each member")
	fs.StringVar(&o.clientGates, "client-feature-gates", "", "client-go feature gates of the informers: real client-go's with --kube-apiserver or --kubeconfig, the model's without (its informer profile); only WatchListClient=true|false is set (default: client-go's, on since 1.35)")
	fs.BoolVar(&o.sharedConn, "shared-connection", false, "with --kube-apiserver or --kubeconfig: put every client-go informer and writer on one HTTP/2 connection to kube-apiserver, as the clientsets of one controller process share one (default: a connection each, as separate controllers and kubelets have)")
	o.flags = fs
}

// connections is the informers' and writers' connection layout.
func (o *kubeOptions) connections() kubeload.ConnectionLayout {
	if o.sharedConn {
		return kubeload.ConnectionsShared
	}
	return kubeload.ConnectionsPerClient
}

// checkSharedConnection refuses --shared-connection when no client-go
// client runs: without --kube-apiserver and without --kubeconfig
// (kubeconfig), the etcd-direct model's connections are --conns and
// --streams.
func (o *kubeOptions) checkSharedConnection(kubeconfig bool) error {
	if o.flags != nil && o.flags.Changed("shared-connection") && !o.enabled() && !kubeconfig {
		return cli.FlagErrorf("--shared-connection needs --kube-apiserver or --kubeconfig: the etcd-direct model's connections are --conns and --streams")
	}
	return nil
}

// enabled reports whether the load goes through kube-apiserver: the flag
// was given, even empty (Validate refuses that).
func (o *kubeOptions) enabled() bool {
	return o.version != "" || (o.flags != nil && o.flags.Changed("kube-apiserver"))
}

// Validate checks the flags: all but --client-feature-gates and
// --apiserver-feature-gates need --kube-apiserver, whose version must be
// one lwbench can build (release.Kubernetes; an empty one is refused). Without --kube-apiserver, --apiserver-feature-gates
// may set only the gates the model follows (kubeload.ModelGate); with it,
// a gate the model follows must exist in the release (kube-apiserver would
// refuse to start), and any other is left to kube-apiserver.
func (o *kubeOptions) Validate() error {
	if err := o.parseClientGates(); err != nil {
		return err
	}
	if err := o.parseAPIServerGates(); err != nil {
		return err
	}
	if !o.enabled() {
		for _, name := range []string{"apiservers", "watch-cache", "count-etcd", "apiserver-arg"} {
			if o.flags != nil && o.flags.Changed(name) {
				return cli.FlagErrorf("--%s needs --kube-apiserver", name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(o.serverGates)) {
			if !kubeload.ModelGate(name) {
				return cli.FlagErrorf("--apiserver-feature-gates: Unsupported value: %q: the etcd-direct model follows %s and %s only; give other gates with --kube-apiserver",
					name, kubeload.GateEtcdRangeStream, kubeload.GateWatchList)
			}
		}
		return nil
	}
	v, err := release.Kubernetes.Resolve(o.version)
	if err != nil {
		return cli.FlagErrorf("--kube-apiserver: %v", err)
	}
	o.resolvedVersion = v
	for _, a := range o.apiserverArgs {
		if !strings.HasPrefix(a, "--") || len(a) == 2 {
			return cli.FlagErrorf("--apiserver-arg: Invalid value: %q: give one kube-apiserver flag, e.g. --apiserver-arg=--disable-admission-plugins=LimitRanger", a)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.serverGates)) {
		if _, ok := kubeload.GateDefault(v, name); kubeload.ModelGate(name) && !ok {
			return cli.FlagErrorf("--apiserver-feature-gates: Unsupported value: %q: kube-apiserver %s has no such gate", name, v)
		}
	}
	if o.flags != nil && !o.flags.Changed("watch-cache") {
		if p, _ := o.flags.GetString("profile"); p == string(watchload.ProfileAPIServerCache) {
			o.watchCache = true
		}
	}
	if o.flags != nil && o.flags.Changed("allow-compaction") && o.flags.Changed("endpoints") {
		return cli.FlagErrorf("--allow-compaction cannot be used with --kube-apiserver and --endpoints: kube-apiserver's compactor keeps its compact_rev_key outside --prefix")
	}
	if o.servers < 1 {
		return cli.FlagErrorf("--apiservers: Invalid value: %d: must be at least 1", o.servers)
	}
	return nil
}

// parseClientGates sets watchList from --client-feature-gates: the
// WatchListClient gate of the real informers (--kube-apiserver) and of the
// model's (watchload.Options.WatchList).
func (o *kubeOptions) parseClientGates() error {
	o.watchList = nil
	if o.clientGates == "" {
		return nil
	}
	for _, kv := range strings.Split(o.clientGates, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		b, err := strconv.ParseBool(val)
		if !ok || err != nil || name != "WatchListClient" {
			return cli.FlagErrorf("--client-feature-gates: Invalid value: %q: give WatchListClient=true or WatchListClient=false", kv)
		}
		o.watchList = &b
	}
	return nil
}

// parseAPIServerGates sets serverGates from --apiserver-feature-gates,
// parsed as kube-apiserver parses its --feature-gates
// (kubeload.ParseFeatureGates).
func (o *kubeOptions) parseAPIServerGates() error {
	gates, err := kubeload.ParseFeatureGates(o.apiserverGates)
	if err != nil {
		return cli.FlagErrorf("--apiserver-feature-gates: Invalid value: %q: %v", o.apiserverGates, err)
	}
	o.serverGates = gates
	return nil
}

// modelRangeStream returns the etcd-direct model's EtcdRangeStream gate
// (watchload.Options.RangeStream) for kube-apiserver of version: the one
// --apiserver-feature-gates sets, else the release's default, off in a
// release without the gate (1.35, 1.36); nil, the model's own default
// (1.37's), when version is "" and the flag does not set it.
func (o *kubeOptions) modelRangeStream(version string) *bool {
	if on, ok := o.serverGates[kubeload.GateEtcdRangeStream]; ok {
		return &on
	}
	if version == "" {
		return nil
	}
	on, _ := kubeload.GateDefault(version, kubeload.GateEtcdRangeStream)
	return &on
}

// modelWatchList returns the model informers' WatchList
// (watchload.Options.WatchList) for client-go's WatchListClient client
// (nil: client-go's default) in front of kube-apiserver of version ("":
// the model's own, 1.37): off when kube-apiserver's WatchList gate is off,
// as --apiserver-feature-gates or the release's default says, since
// kube-apiserver then refuses every watch-list and client-go lists
// (kubeload.GateWatchList); else client.
func (o *kubeOptions) modelWatchList(version string, client *bool) *bool {
	on, ok := o.serverGates[kubeload.GateWatchList]
	if !ok && version != "" {
		on, ok = kubeload.GateDefault(version, kubeload.GateWatchList)
	}
	if ok && !on {
		off := false
		return &off
	}
	return client
}

// clientWatchList names the informers' WatchListClient setting.
func (o *kubeOptions) clientWatchList() string {
	if o.watchList == nil {
		return "default"
	}
	return onOff(*o.watchList)
}

// binaries returns the directory of kube-apiserver of the chosen
// release, building it first (logged, locked, 10-30 minutes) if it is not
// cached; cancelling ctx stops the build or the wait for it.
func (o *kubeOptions) binaries(ctx context.Context, logf func(string, ...any)) (string, error) {
	if !apiserverproc.Cached(o.resolvedVersion) {
		logf("building kube-apiserver %s into %s: the first build takes 10-30 minutes on 2 cores", o.resolvedVersion, apiserverproc.BinDir(o.resolvedVersion))
	}
	return apiserverproc.Binaries(ctx, o.resolvedVersion, etcdproc.LogWriter(logf))
}

// routeClientGoLogs sends what client-go logs through klog (its
// reflectors' warnings, "Unexpected error when reading response body" when
// a hold breaks a watch off, ...) to logf as lines of their own, prefixed
// "client-go:", instead of klog's own lines on stderr among the console's.
// klog is one per process: the last call wins.
func routeClientGoLogs(logf func(string, ...any)) {
	klog.SetLogger(funcr.New(func(prefix, args string) {
		if prefix != "" {
			args = prefix + ": " + args
		}
		logf("client-go: %s", args)
	}, funcr.Options{}))
}

// stackConfig is the kube-apiservers these flags start (kubeload.StartStack)
// from the binaries in bin, with --etcd-prefix prefix, kube-apiserver's
// own compactor every interval (0: its 5m default; negative: off) and
// --event-ttl eventTTL, in front of members reached with tlsCfg (the
// counting proxies) or conn's files (kube-apiserver itself).
func (o *kubeOptions) stackConfig(bin, prefix string, interval, eventTTL time.Duration, tlsCfg *tls.Config, conn etcdclient.Flags) kubeload.StackConfig {
	return kubeload.StackConfig{BinDir: bin, Servers: o.servers, EtcdPrefix: prefix, EtcdCompactionInterval: interval, EventTTL: eventTTL,
		WatchCache: o.watchCache, FeatureGates: o.apiserverGates, Args: o.apiserverArgs, ClientWatchList: o.clientWatchList(), CountEtcd: o.countEtcd,
		EtcdTLS: tlsCfg, EtcdCAFile: conn.CACert, EtcdCertFile: conn.Cert, EtcdKeyFile: conn.Key, Connections: o.connections()}
}

// kubeClients prepares `lwbench run --kube-apiserver`: it opens the etcd
// target, starts the apiservers in front of it (startKubeStack) and sets
// the run's client set to client-go through them (kubeload.NewClients);
// release stops the apiservers, then closes the target.
func kubeClients(ctx context.Context, o *runOptions, con *console) (watchload.Target, func(), error) {
	st, release, err := startKubeStack(ctx, o, con)
	if err != nil {
		return st.Etcd, release, err
	}
	ko := kubeload.Options{WatchList: o.kube.watchList, RunID: o.runID}
	if o.cluster.enabled() {
		if ko.Cluster, err = o.cluster.clusterLoad(); err != nil {
			return st.Etcd, release, err
		}
	}
	o.load.Clients = kubeload.NewClients(st, ko)
	return st.Etcd, release, nil
}

// startKubeStack opens the etcd target of `lwbench run --kube-apiserver`
// (its prefix guarded: openGuarded) and starts the apiservers the flags
// ask for in front of it (building kube-apiserver if it is not cached;
// with --nodes the whole control plane, with --events-etcd a second etcd
// for events): for a run's own client set (kubeClients) or for the
// workers of `lwbench run --workers` (runWorkers). release stops the
// apiservers, then closes the target; call it also on error.
func startKubeStack(ctx context.Context, o *runOptions, con *console) (kubeload.Stack, func(), error) {
	k := &o.kube
	routeClientGoLogs(con.Logf)
	var bin string
	var cp *controlplane.Binaries
	var err error
	if o.cluster.enabled() {
		if !controlplane.Cached(k.resolvedVersion, controlplane.DefaultKWOKVersion) {
			con.Logf("building %s of Kubernetes %s and KWOK %s into %s: kube-apiserver's first build takes 10-30 minutes on 2 cores, the others a few minutes more",
				strings.Join(controlplane.Missing(k.resolvedVersion, controlplane.DefaultKWOKVersion), ", "), k.resolvedVersion, controlplane.DefaultKWOKVersion, etcdproc.CacheDir())
		}
		b, err := controlplane.ResolveBinaries(ctx, k.resolvedVersion, controlplane.DefaultKWOKVersion, etcdproc.LogWriter(con.Logf))
		if err != nil {
			return kubeload.Stack{}, func() {}, err
		}
		bin, cp = b.KubeAPIServer, &b
	} else if bin, err = k.binaries(ctx, con.Logf); err != nil {
		return kubeload.Stack{}, func() {}, err
	}
	// An --endpoints cluster's prefix must be empty, and what the
	// apiservers wrote under it is deleted after they have stopped.
	target, releaseTarget, err := o.target.openGuarded(ctx, o.load.Prefix, con.Logf)
	if err != nil {
		return kubeload.Stack{Etcd: target}, releaseTarget, err
	}
	ccfg, err := o.target.clientConfig(target.Endpoints)
	if err != nil {
		return kubeload.Stack{Etcd: target}, releaseTarget, err
	}
	interval := o.load.Defaults().CompactionInterval
	con.Logf("starting %d kube-apiserver %s in front of %s", k.servers, k.resolvedVersion, strings.Join(target.Endpoints, ","))
	scfg := k.stackConfig(bin, o.load.Prefix, interval, o.load.Defaults().EventTTL, ccfg.TLS, o.target.conn)
	scfg.ControlPlane, scfg.Logf = cp, con.Logf
	if cp != nil {
		con.Logf("starting kube-apiserver, kube-controller-manager, kube-scheduler %s and KWOK %s in front of %s", k.resolvedVersion, controlplane.DefaultKWOKVersion, strings.Join(target.Endpoints, ","))
	}
	closeEvents := func() {}
	if o.cluster.eventsEtcd {
		if scfg.EventsEtcd, closeEvents, err = startEventsEtcd(ctx, o.target.unsafeNoFsync, con.Logf); err != nil {
			return kubeload.Stack{Etcd: target}, releaseTarget, err
		}
	}
	st, stop, err := kubeload.StartStack(ctx, target, scfg)
	release := func() {
		stop()
		closeEvents()
		releaseTarget()
	}
	if err != nil {
		return kubeload.Stack{Etcd: target}, release, err
	}
	return st, release, nil
}
