package command

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/inputfile"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// kubeconfigOptions drive an existing cluster's kube-apiservers instead of
// starting them (`lwbench run --kubeconfig PATH [--context NAME]`): the
// writers and informers talk to the server the kubeconfig names, nothing
// is started, and the cluster is treated as one lwbench does not own
// (kubeload.Stack.Shared): namespaces of the run's own, refused if one
// exists, deleted at the end; no compaction or defragmentation by lwbench.
type kubeconfigOptions struct {
	path          string
	context       string
	deleteTimeout time.Duration
	flags         *pflag.FlagSet
}

func (o *kubeconfigOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.path, "kubeconfig", "", "run the load through the kube-apiservers of an existing cluster this kubeconfig names, starting nothing (\""+inClusterKubeconfig+"\": the cluster the process runs in, as a pod, with its service account: client-go's in-cluster config); needs --endpoints (and the etcd TLS flags) of the cluster's etcd and --prefix, its --etcd-prefix (default "+keyspace.DefaultPrefix+"), to validate against etcd's history. The run writes only in namespaces of its own (lwbench-<random>-ns-N, refused if one exists), never compacts or defragments, and deletes exactly those namespaces at the end, also on failure or interruption; --compaction-interval, if given, is the cluster's --etcd-compaction-interval and bounds how long --hold-back informers wait for a compaction (default: until the writes end)")
	fs.StringVar(&o.context, "context", "", "with --kubeconfig: the kubeconfig context to use (default: its current-context)")
	fs.DurationVar(&o.deleteTimeout, "namespace-delete-timeout", kubeload.DefaultNamespaceDeleteTimeout, "with --kubeconfig: how long to wait at the end for the run's namespaces to be gone (the cluster's namespace controller finalizes them)")
	o.flags = fs
}

// enabled reports whether the load goes to an existing cluster.
func (o *kubeconfigOptions) enabled() bool { return o.path != "" }

// changed reports whether a flag was given on the command line.
func (o *kubeconfigOptions) changed(name string) bool { return o.flags != nil && o.flags.Changed(name) }

// kubeconfigConflicts are the flags --kubeconfig refuses, each with why.
var kubeconfigConflicts = []struct{ flag, why string }{
	{"kube-apiserver", "lwbench starts kube-apiservers with --kube-apiserver, and uses the cluster's with --kubeconfig"},
	{"apiservers", "the cluster's kube-apiservers are its operator's"},
	{"watch-cache", "the cluster's kube-apiservers are configured by its operator"},
	{"apiserver-feature-gates", "the cluster's kube-apiservers are configured by its operator"},
	{"apiserver-arg", "the cluster's kube-apiservers are configured by its operator"},
	{"count-etcd", "no counting proxy can be put between a cluster's kube-apiservers and its etcd"},
	{"allow-compaction", "lwbench never compacts a cluster it does not own; the cluster's kube-apiservers compact it"},
	{"allow-defrag", "lwbench never defragments a cluster it does not own"},
	{"reuse-prefix", "the run writes through the API, in namespaces of its own, never raw keys"},
}

// Validate checks the flags of a run on an existing cluster and fills
// the load options that follow from it (the prefix's default, no
// defragmentation); it runs before the other validations of `lwbench run`.
func (o *kubeconfigOptions) Validate(r *runOptions) error {
	if err := o.check(r.target.external()); err != nil || !o.enabled() {
		return err
	}
	if r.load.Prefix == "" {
		r.load.Prefix = keyspace.DefaultPrefix
	}
	return nil
}

// check is what every command taking --kubeconfig checks: its companion
// flags need it, the flags of kubeconfigConflicts conflict with it, and it
// needs --endpoints (external) of the cluster's etcd.
func (o *kubeconfigOptions) check(external bool) error {
	if !o.enabled() {
		for _, name := range []string{"context", "namespace-delete-timeout"} {
			if o.changed(name) {
				return cli.FlagErrorf("--%s needs --kubeconfig", name)
			}
		}
		return nil
	}
	if o.path == inClusterKubeconfig && o.changed("context") {
		return cli.FlagErrorf("--kubeconfig %s and --context cannot be used together: the in-cluster config has no contexts", inClusterKubeconfig)
	}
	for _, c := range kubeconfigConflicts {
		if o.changed(c.flag) {
			return cli.FlagErrorf("--kubeconfig and --%s cannot be used together: %s", c.flag, c.why)
		}
	}
	if !external {
		return cli.FlagErrorf("--kubeconfig needs --endpoints of the cluster's etcd (and --prefix, its --etcd-prefix): the informers' events are validated against etcd's history")
	}
	if o.deleteTimeout <= 0 {
		return cli.FlagErrorf("--namespace-delete-timeout: Invalid value: %v: must be positive", o.deleteTimeout)
	}
	return nil
}

// sharedStackFactory returns the stack factory of an experiment on the
// cluster the kubeconfig names (kubeload.Stack.Shared): the same Stack
// for every load, whatever the load's prefix (the cluster's --etcd-prefix
// is prefix), after checking once that target is the cluster's etcd
// (checkSameCluster); it stops nothing.
func (o *kubeconfigOptions) sharedStackFactory(prefix, watchList string, conns kubeload.ConnectionLayout, logf func(string, ...any)) experiment.StackFactory {
	checked := false
	return func(ctx context.Context, t watchload.Target, _ string, _ time.Duration) (kubeload.Stack, func(), error) {
		cfg, err := o.restConfig()
		if err != nil {
			return kubeload.Stack{}, func() {}, err
		}
		st, err := kubeload.ExistingStack(t, cfg, prefix, watchList, conns)
		if err != nil {
			return kubeload.Stack{}, func() {}, err
		}
		if !checked {
			if err := checkSameCluster(ctx, cfg, t, prefix); err != nil {
				return kubeload.Stack{}, func() {}, err
			}
			checked = true
			logf("through the cluster at %s (etcd %s under %s), in namespaces of the experiment's own, deleted at the end", cfg.Host, t.Endpoints, prefix)
		}
		return st, func() {}, nil
	}
}

// maxKubeconfigBytes bounds the kubeconfig --kubeconfig names and each
// file it names (certificate-authority, client-certificate, client-key,
// tokenFile): 16 MiB, far above any real one. /dev/zero, a FIFO or a
// directory is refused before it is read (internal/inputfile).
const maxKubeconfigBytes = 16 << 20

// inClusterKubeconfig is the --kubeconfig value that names the cluster a
// pod runs in: its service account's token and CA and the
// KUBERNETES_SERVICE_HOST/PORT the kubelet sets (client-go
// rest.InClusterConfig), as lwbench manifest --through-api's workers run.
const inClusterKubeconfig = "in-cluster"

// restConfig loads the kubeconfig and returns the config of its context
// (--context, else its current-context). Every file is read through
// internal/inputfile, never by client-go: the kubeconfig itself (only the
// --kubeconfig path: clientcmd's loading rules with an explicit path read
// neither $KUBECONFIG nor ~/.kube/config) and the certificate-authority,
// client-certificate and client-key files it names (relative to its
// directory, as clientcmd resolves them), whose contents take the place of
// the paths. A tokenFile is checked the same way and left to client-go,
// which reads it again as it rotates.
//
// --kubeconfig in-cluster (inClusterKubeconfig) is the pod's own cluster
// (rest.InClusterConfig); check refuses --context with it.
func (o *kubeconfigOptions) restConfig() (*rest.Config, error) {
	if o.path == inClusterKubeconfig {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", inClusterKubeconfig, err)
		}
		return cfg, nil
	}
	b, err := inputfile.Read(o.path, maxKubeconfigBytes)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	kc, err := clientcmd.Load(b)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", o.path, err)
	}
	if err := inlineFiles(kc, o.path); err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", o.path, err)
	}
	cc := clientcmd.NewNonInteractiveClientConfig(*kc, o.context, &clientcmd.ConfigOverrides{CurrentContext: o.context}, nil)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", o.path, err)
	}
	return cfg, nil
}

// inlineFiles resolves the files kc names relative to path's directory
// (clientcmd.ResolveLocalPaths, as clientcmd's loader does), reads each
// certificate and key with inputfile.Read (maxKubeconfigBytes) into the
// matching *Data field and clears the path, and checks each tokenFile with
// inputfile.Open. The error names the file and what it is.
func inlineFiles(kc *clientcmdapi.Config, path string) error {
	for _, c := range kc.Clusters {
		c.LocationOfOrigin = path
	}
	for _, a := range kc.AuthInfos {
		a.LocationOfOrigin = path
	}
	if err := clientcmd.ResolveLocalPaths(kc); err != nil {
		return err
	}
	read := func(file *string, data *[]byte) error {
		if *file == "" {
			return nil
		}
		b, err := inputfile.Read(*file, maxKubeconfigBytes)
		if err != nil {
			return err
		}
		*file, *data = "", b
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(kc.Clusters)) {
		c := kc.Clusters[name]
		if err := read(&c.CertificateAuthority, &c.CertificateAuthorityData); err != nil {
			return fmt.Errorf("cluster %q certificate-authority: %w", name, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(kc.AuthInfos)) {
		a := kc.AuthInfos[name]
		if err := read(&a.ClientCertificate, &a.ClientCertificateData); err != nil {
			return fmt.Errorf("user %q client-certificate: %w", name, err)
		}
		if err := read(&a.ClientKey, &a.ClientKeyData); err != nil {
			return fmt.Errorf("user %q client-key: %w", name, err)
		}
		if a.TokenFile != "" {
			f, err := inputfile.Open(a.TokenFile, maxKubeconfigBytes)
			if err != nil {
				return fmt.Errorf("user %q tokenFile: %w", name, err)
			}
			f.Close()
		}
	}
	return nil
}

// checkSameCluster makes sure the etcd at --endpoints under prefix is the
// one behind the cluster cfg reaches: namespace default's resourceVersion
// through the API must be the mod_revision of its key in etcd (read after
// it; a write in between makes it retry).
func checkSameCluster(ctx context.Context, cfg *rest.Config, target watchload.Target, prefix string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c, err := target.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	key := keyspace.Build(keyspace.Key{Prefix: prefix, Resource: "namespaces", Name: "default"})
	var apiRV string
	var etcdRev int64
	for range 3 {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("--kubeconfig: read namespace default: %w", err)
		}
		resp, err := c.Get(ctx, key, clientv3.WithKeysOnly())
		if err != nil {
			return fmt.Errorf("--endpoints: read %s: %w", key, err)
		}
		if len(resp.Kvs) == 0 {
			return fmt.Errorf("--prefix %s: etcd at --endpoints holds no %s; give the cluster's --etcd-prefix", prefix, key)
		}
		apiRV, etcdRev = ns.ResourceVersion, resp.Kvs[0].ModRevision
		if apiRV == fmt.Sprint(etcdRev) {
			return nil
		}
	}
	return fmt.Errorf("--endpoints: namespace default has resourceVersion %s through the API but mod_revision %d in etcd: --endpoints and --prefix are not this cluster's etcd", apiRV, etcdRev)
}

// kubeconfigClients prepares `lwbench run --kubeconfig`: it opens the
// cluster's etcd (read only: its keys are never deleted, as openGuarded's
// cleanup would), checks that it is the cluster's and sets the run's
// client set to client-go through the shared cluster
// (kubeload.NewClients), or, for a worker of `lwbench run --workers
// --kube-apiserver` (apiserversOwned), through the coordinator's as a
// cluster of lwbench's own; release closes the target. A cleanup that did
// not leave the cluster as it found it is the command's error
// (writeRunResult).
func kubeconfigClients(ctx context.Context, o *runOptions, con *console) (watchload.Target, func(), error) {
	routeClientGoLogs(con.Logf)
	kc := &o.kubeconfig
	cfg, err := kc.restConfig()
	if err != nil {
		return watchload.Target{}, func() {}, err
	}
	target, release, err := o.target.open(ctx, con.Logf)
	if err != nil {
		return target, release, err
	}
	st, err := kubeload.ExistingStack(target, cfg, o.load.Prefix, o.kube.clientWatchList(), o.kube.connections())
	if err != nil {
		return target, release, err
	}
	if err := checkSameCluster(ctx, cfg, target, o.load.Prefix); err != nil {
		return target, release, err
	}
	if o.changed("compaction-interval") && o.load.CompactionInterval > 0 {
		st.APIServer.EtcdCompactionIntervalMs = report.Ms(o.load.CompactionInterval)
	}
	if o.apiserversOwned {
		// A worker of lwbench run --workers --kube-apiserver: the
		// coordinator started the cluster for this load alone and
		// throws it away after (no namespace controller runs to
		// finalize a deletion), as run --kube-apiserver does its own.
		st.Shared = false
		con.Logf("running through the kube-apiservers the coordinator started at %s (etcd %s under %s)", cfg.Host, target.Endpoints, o.load.Prefix)
	} else {
		con.Logf("running through the cluster at %s (etcd %s under %s); lwbench starts, compacts and defragments nothing there", cfg.Host, target.Endpoints, o.load.Prefix)
	}
	ko := kubeload.Options{WatchList: o.kube.watchList, NamespaceDeleteTimeout: kc.deleteTimeout, RunID: o.runID}
	if o.cluster.enabled() {
		// A worker's part of the cluster's load the coordinator's
		// control plane runs (lwbench run --workers N --nodes K).
		if ko.Cluster, err = o.cluster.clusterLoad(); err != nil {
			return target, release, err
		}
	}
	o.load.Clients = kubeload.NewClients(st, ko)
	return st.Etcd, release, nil
}
