package kubeload

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/runtemp"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// StackConfig describes the kube-apiservers StartStack runs in front of
// an etcd target.
type StackConfig struct {
	// BinDir holds the kube-apiserver binary (apiserverproc.Binaries);
	// required.
	BinDir string
	// Servers is how many kube-apiservers to start, all in front of the
	// same etcd; 0 means 1.
	Servers int
	// EtcdPrefix is their --etcd-prefix; "" means /registry.
	EtcdPrefix string
	// EtcdCompactionInterval is kube-apiserver's own compactor
	// (--etcd-compaction-interval); 0 keeps kube-apiserver's 5m, a
	// negative value turns it off (passes 0): an experiment that compacts
	// etcd itself, with kube-apiserver's algorithm, at moments of its
	// choosing.
	EtcdCompactionInterval time.Duration
	// EventTTL is --event-ttl; 0 keeps kube-apiserver's 1h.
	EventTTL time.Duration
	// WatchCache is --watch-cache.
	WatchCache bool
	// FeatureGates is passed as --feature-gates as is ("" none).
	FeatureGates string
	// Args are further kube-apiserver flags, appended to the command
	// line as they are (apiserverproc.Config.ExtraArgs), e.g.
	// --disable-admission-plugins=LimitRanger (which adds to lwbench's
	// own ServiceAccount: the flag is a list).
	Args []string
	// ClientWatchList names the informers' WatchListClient gate for the
	// result ("on", "off", "default").
	ClientWatchList string
	// CountEtcd puts a counting gRPC proxy (internal/etcdproxy) in front
	// of every member; the apiservers talk plain gRPC to the proxies on
	// loopback, the proxies dial the members with EtcdTLS. Stack.Counter
	// then counts what the apiservers send etcd.
	CountEtcd bool
	// EtcdTLS is how the proxies dial the members (nil: plain).
	EtcdTLS *tls.Config
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are how kube-apiserver
	// dials the members itself when CountEtcd is false (--etcd-cafile,
	// --etcd-certfile, --etcd-keyfile; "" plain).
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// Connections is the layout of the informers' and writers'
	// connections ("": ConnectionsPerClient).
	Connections ConnectionLayout
	// ControlPlane, if set, starts a whole control plane instead of the
	// kube-apiservers alone (controlplane.Start): kube-controller-manager,
	// kube-scheduler and KWOK from these binaries (BinDir is then
	// ControlPlane.KubeAPIServer), the ServiceAccount admission plugin on,
	// for a cluster's load (ClusterOptions).
	ControlPlane *controlplane.Binaries
	// EventsEtcd, if set, are the client URLs (plain http) of a second
	// etcd that stores events, as kops runs etcd-events beside etcd-main:
	// kube-apiserver's --etcd-servers-overrides=/events#URL;URL... With
	// CountEtcd a counting proxy sits in front of each of them too,
	// counting into the same Counter (its rows say resource "events").
	EventsEtcd []string
	// Logf reports what the control plane's supervisor does (a component
	// that exited and is started again); nil discards it.
	Logf func(string, ...any)
}

// StartStack starts cfg.Servers kube-apiservers (apiserverproc.Start, in
// a temporary directory of their own) in front of t's members, through a
// counting proxy per member when cfg.CountEtcd, and returns the Stack a
// load runs through and a function that stops the apiservers, closes the
// proxies and removes the directory, in that order; call it once, also
// when StartStack failed (it is then a no-op). Stack.APIServer echoes
// cfg, with the Version kube-apiserver's /version reports.
func StartStack(ctx context.Context, t watchload.Target, cfg StackConfig) (Stack, func(), error) {
	eventsEtcd := cfg.EventsEtcd
	installGates() // before the first client reads client-go's gates
	var undo []func()
	stop := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	servers := max(cfg.Servers, 1)
	acfg := apiserverproc.Config{BinDir: cfg.BinDir, Servers: servers, EtcdServers: t.Endpoints,
		EtcdCAFile: cfg.EtcdCAFile, EtcdCertFile: cfg.EtcdCertFile, EtcdKeyFile: cfg.EtcdKeyFile,
		EtcdPrefix: cfg.EtcdPrefix, EtcdCompactionInterval: cfg.EtcdCompactionInterval, EventTTL: cfg.EventTTL,
		DisableWatchCache: !cfg.WatchCache, FeatureGates: cfg.FeatureGates, ExtraArgs: cfg.Args}
	var counter EtcdCounter
	if cfg.CountEtcd {
		shared := etcdproxy.NewCounter()
		var urls []string
		for _, ep := range t.Endpoints {
			p, err := etcdproxy.Start(ctx, etcdproxy.Config{Upstream: ep, TLS: cfg.EtcdTLS, Counter: shared, Prefixes: prefixes(cfg.EtcdPrefix)})
			if err != nil {
				stop()
				return Stack{}, func() {}, fmt.Errorf("counting proxy in front of %s: %w", ep, err)
			}
			undo = append(undo, p.Close)
			urls = append(urls, p.URL())
		}
		acfg.EtcdServers, acfg.EtcdCAFile, acfg.EtcdCertFile, acfg.EtcdKeyFile = urls, "", "", ""
		counter = CounterOf(shared)
		events := cfg.EventsEtcd
		cfg.EventsEtcd = nil // the proxies' URLs, for kube-apiserver
		for _, ep := range events {
			p, err := etcdproxy.Start(ctx, etcdproxy.Config{Upstream: ep, Counter: shared, Prefixes: prefixes(cfg.EtcdPrefix)})
			if err != nil {
				stop()
				return Stack{}, func() {}, fmt.Errorf("counting proxy in front of the events etcd %s: %w", ep, err)
			}
			undo = append(undo, p.Close)
			cfg.EventsEtcd = append(cfg.EventsEtcd, p.URL())
		}
	}
	if len(cfg.EventsEtcd) > 0 {
		// kube-apiserver: group/resource#servers, servers ;-separated
		// (staging/src/k8s.io/apiserver/pkg/server/options/etcd.go
		// --etcd-servers-overrides); events are in the core group.
		acfg.ExtraArgs = append(slices.Clone(acfg.ExtraArgs), "--etcd-servers-overrides=/events#"+strings.Join(cfg.EventsEtcd, ";"))
	}
	dir, err := runtemp.New("", runtemp.APIServerPrefix)
	if err != nil {
		stop()
		return Stack{}, func() {}, err
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	acfg.Dir = dir
	var cluster *apiserverproc.Cluster
	var processes []*apiserverproc.Process
	var controlPlane *controlplane.ControlPlane
	if cfg.ControlPlane != nil {
		acfg.BinDir = cfg.ControlPlane.KubeAPIServer
		cp, err := controlplane.Start(ctx, controlplane.Config{Binaries: *cfg.ControlPlane, Dir: dir, APIServer: acfg, Logf: cfg.Logf})
		if err != nil {
			stop()
			return Stack{}, func() {}, err
		}
		undo = append(undo, cp.Stop)
		cluster, processes, controlPlane = cp.APIServers, []*apiserverproc.Process{cp.ControllerManager, cp.Scheduler, cp.KWOK}, cp
	} else {
		c, err := apiserverproc.Start(ctx, acfg)
		if err != nil {
			stop()
			return Stack{}, func() {}, err
		}
		undo = append(undo, c.Stop)
		cluster = c
	}

	api := report.APIServerTarget{Servers: servers, Managed: true, WatchCache: cfg.WatchCache,
		FeatureGates: cfg.FeatureGates, Args: cfg.Args, ClientWatchList: cfg.ClientWatchList}
	if cfg.EtcdCompactionInterval > 0 {
		api.EtcdCompactionIntervalMs = report.Ms(cfg.EtcdCompactionInterval)
	}
	if v, err := serverVersion(cluster.RESTConfig()); err == nil {
		api.Version = v
	}
	conns, err := NewConnections(cluster.RESTConfig(), cfg.Connections)
	if err != nil {
		stop()
		return Stack{}, func() {}, err
	}
	api.Connections = string(conns.Layout())
	st := Stack{Etcd: t, RESTConfig: cluster.RESTConfig(), Connections: conns, EtcdPrefix: cfg.EtcdPrefix, APIServer: api, Counter: counter,
		EtcdTLS: cfg.EtcdTLS, APIServers: APIServersOf(cluster), Components: componentsOf(processes), ControlPlane: controlPlane,
		EventsEtcd: eventsEtcd}
	return st, stop, nil
}

// ExistingStack is the Stack of a cluster lwbench does not own
// (`--kubeconfig`): its kube-apiservers, reached with cfg by informers and
// writers in connection layout conns, in front of the etcd t (the
// cluster's own, read only by the harness) under prefix, its
// --etcd-prefix; Shared is set, and APIServer names the server cfg
// reaches, with the Version its /version reports ("" if it cannot be
// read) and the informers' WatchListClient setting clientWatchList. It
// fails if cfg cannot make a transport (NewConnections).
func ExistingStack(t watchload.Target, cfg *rest.Config, prefix, clientWatchList string, conns ConnectionLayout) (Stack, error) {
	installGates() // before the first client reads client-go's gates
	c, err := NewConnections(cfg, conns)
	if err != nil {
		return Stack{}, err
	}
	api := report.APIServerTarget{Managed: false, URL: cfg.Host, ClientWatchList: clientWatchList, Connections: string(c.Layout())}
	if v, err := serverVersion(cfg); err == nil {
		api.Version = v
	}
	return Stack{Etcd: t, RESTConfig: cfg, Connections: c, EtcdPrefix: prefix, APIServer: api, Shared: true}, nil
}

// prefixes returns the counting proxy's Config.Prefixes for
// --etcd-prefix prefix: nil (keyspace.KnownPrefixes, /registry among
// them) for "".
func prefixes(prefix string) []string {
	if prefix == "" {
		return nil
	}
	return []string{prefix}
}
