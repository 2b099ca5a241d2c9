package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdclient"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// formatYAML is manifest's default -w: YAML documents, one per object,
// as kubectl apply -f reads them.
const formatYAML output.Format = "yaml"

// The paths and identity of a worker's pod.
const (
	// etcdTLSDir is where --etcd-tls-secret's files are mounted.
	etcdTLSDir = "/etc/lwbench/etcd-tls"
	// nonRootUID is the user of gcr.io/distroless/static:nonroot, the
	// Dockerfile's runtime image ("nonroot", 65532); the pod runs as it
	// and owns the mounted Secret's files through fsGroup.
	nonRootUID = 65532
)

// The memory a worker asks for, from the size of its shard:
//
//	request = base + informers × (perInformer + objects × perObject)
//	limit   = 2 × request, GOMEMLIMIT = 90 % of the limit
//
// where informers is the largest shard's block of --watchers
// (shard.Shard.Len) and objects the largest of the load's pod, configmap
// and event counts (the most one informer holds: every informer holds
// the whole load's objects of its resource, not only its shard's). The
// costs are measured on this repository's runs: perObject from
// results/harness-cost.md (BenchmarkInformerMemory: an lwbench informer,
// which keeps each object's name, namespace and resourceVersion only,
// holds 0.3 MB with 1,000 pods), perInformer from results/
// lwbench-vs-benchmark.md ("Scale": 1,000 informers over 300 pods peaked
// at 479 MiB RSS, 352 KiB an informer, less the objects' share); base is
// a round allowance for the Go runtime, the etcd clients, the writers'
// plan and the histograms. The limit doubles the request because Go's
// collector lets the heap grow to twice the live heap (GOGC=100), and
// GOMEMLIMIT makes it collect harder before the kernel's OOM killer
// would end the worker (go.dev/doc/gc-guide, "Memory limit").
const (
	workerBaseBytes        = 128 << 20
	workerPerInformerBytes = 256 << 10
	workerPerObjectBytes   = 320
)

// manifestNotLoadFlags are worker flags the load's flags (after --) must
// not give: the manifest sets them, or they write files in the pod that
// nobody collects.
var manifestNotLoadFlags = map[string]string{
	"index":              "the Job gives each pod its index ($JOB_COMPLETION_INDEX)",
	"shards":             "give it to lwbench manifest, before --",
	"barrier-etcd-key":   "the manifest's workers meet in its ConfigMap",
	"barrier-configmap":  "the manifest's workers meet in its ConfigMap",
	"barrier-kubeconfig": "the workers reach their cluster with the pod's service account",
	"target-owned":       "the workers' etcd is not started by lwbench",
	"apiservers-owned":   "the workers' kube-apiservers are not started by lwbench",
	"write-out":          "the workers print their result as one line of JSON for lwbench merge (--log-result)",
	"log-result":         "the manifest's workers print their result to their log already",
	"kubeconfig":         "give lwbench manifest --through-api: the workers then reach their cluster's API with the pod's ServiceAccount (--kubeconfig in-cluster) and the RBAC the manifest grants",
	"context":            "the workers reach their cluster with the pod's ServiceAccount (--through-api)",
	"interval-csv":       "it writes a file in the pod",
	"benchstat":          "it writes a file in the pod",
}

// manifestOptions are `lwbench manifest`'s flags and the load's flags,
// given after --.
type manifestOptions struct {
	name        string
	namespace   string
	image       string
	shards      int
	tlsSecret   string
	memory      string
	format      output.Format
	formatValue *output.FormatValue
	// load are the worker flags after --.
	load []string
	// scrape adds the Job of lwbench scrape, the load's one coordinator:
	// etcd's own /metrics per phase, beside the workers' figures.
	scrape bool
	// throughAPI makes the workers drive the load through their
	// cluster's API (lwbench worker --kubeconfig in-cluster), with the
	// ClusterRole of loadRules.
	throughAPI bool
	// experiment, when set, makes the workers run that divisible
	// experiment's shards (lwbench EXPERIMENT --shards N
	// --barrier-configmap ...) instead of a load's (lwbench worker); the
	// flags after -- are then the experiment's.
	experiment string

	// Filled by Validate.
	memoryRequest resource.Quantity
	informers     int // the largest shard's informers
	objects       int // the most objects one informer holds
	// scrapeArgs are the scrape container's arguments (with scrape).
	scrapeArgs []string
	flags      *pflag.FlagSet
}

func (o *manifestOptions) AddFlags(fs *pflag.FlagSet) {
	o.flags = fs
	o.formatValue = output.NewFormatValue(&o.format, formatYAML, formatYAML, output.FormatJSON)
	fs.StringVar(&o.name, "name", "lwbench", "name of the Job, its ServiceAccount, Role and RoleBinding; the barrier ConfigMap is NAME-barrier (a DNS-1123 label)")
	fs.StringVar(&o.namespace, "namespace", "default", "namespace of every object (it must exist)")
	fs.StringVar(&o.image, "image", "lwbench:dev", "the lwbench image the workers run (docker build -t lwbench:dev . at the repository's root)")
	fs.IntVar(&o.shards, "shards", 1, "workers the load is divided into: the Job's parallelism and completions, one pod per shard")
	fs.StringVar(&o.tlsSecret, "etcd-tls-secret", "", "Secret (in --namespace) holding ca.crt, tls.crt and tls.key to reach etcd with: mounted at "+etcdTLSDir+" and passed as --cacert, --cert and --key")
	fs.StringVar(&o.memory, "memory", "", "memory request of each worker (a Kubernetes quantity such as 2Gi; the limit is twice it); default: derived from the shard's informers and objects")
	fs.BoolVar(&o.scrape, "scrape", true, "also a Job NAME-scrape of one lwbench scrape pod, which holds no load: it follows the barrier and reads every --endpoints member's and kube-apiserver's /metrics per phase of the load, printed to its log for lwbench merge --etcd-metrics; with its ServiceAccount NAME-scrape, RoleBinding NAME-scrape (the barrier's Role) and a ClusterRole and ClusterRoleBinding lwbench:NAMESPACE:NAME-scrape (get of the non-resource URL /metrics)")
	fs.BoolVar(&o.throughAPI, "through-api", false, "the workers drive the load through the cluster's own API, as client-go processes (lwbench worker --kubeconfig "+inClusterKubeconfig+": the pod's ServiceAccount), not etcd directly; --endpoints (after --) is still the cluster's etcd, read to validate the events. Adds a ClusterRole and ClusterRoleBinding lwbench:NAMESPACE:NAME granting what the load does: namespaces get, create, delete; pods, configmaps and events in every namespace (RBAC cannot confine them to namespaces the load has not created yet)")
	fs.StringVar(&o.experiment, "experiment", "", "run this experiment's workers instead of a load's: "+strings.Join(experiment.Divisible, " or ")+" (lwbench EXPERIMENT --shards N --barrier-configmap ... --log-result, the flags after -- the experiment's; no --scrape)")
	fs.VarP(o.formatValue, "write-out", "w", "output format: "+o.formatValue.Names()+" (json: one v1 List)")
}

// experimentNotLoadFlags are an experiment's flags the manifest's
// experiment workers must not be given besides manifestNotLoadFlags.
var experimentNotLoadFlags = map[string]string{
	"workers":            "the Job's pods are the workers: give --shards to lwbench manifest",
	"out":                "it writes files in the pod",
	"kube-apiserver":     "the workers share one cluster's API: give lwbench manifest --through-api",
	"cluster-size":       "the workers drive the etcd of --endpoints",
	"data-dir":           "the workers drive the etcd of --endpoints",
	"apiservers-owned":   "the workers' kube-apiservers are not started by lwbench",
	"barrier-configmap":  "the manifest's workers meet in its ConfigMap",
	"barrier-kubeconfig": "the workers reach their cluster with the pod's service account",
}

// Validate checks manifest's flags, then the load's flags as every
// worker will check them (lwbench worker's Validate, for the first and
// the last shard), and derives the shard's size.
func (o *manifestOptions) Validate() error {
	switch {
	case o.shards < 1:
		return cli.FlagErrorf("--shards %d: want at least 1", o.shards)
	case strings.TrimSpace(o.image) == "" || strings.ContainsAny(o.image, " \t\n"):
		return cli.FlagErrorf("--image %q: give the lwbench image the workers run", o.image)
	}
	// The Job's name is also its pods' job-name label value: a DNS-1123
	// label (63 characters at most).
	if errs := validation.IsDNS1123Label(o.name); len(errs) > 0 {
		return cli.FlagErrorf("--name %q: %s", o.name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(o.barrierName()); len(errs) > 0 {
		return cli.FlagErrorf("--name %q: barrier ConfigMap %s: %s", o.name, o.barrierName(), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(o.namespace); len(errs) > 0 {
		return cli.FlagErrorf("--namespace %q: %s", o.namespace, strings.Join(errs, "; "))
	}
	if o.tlsSecret != "" {
		if errs := validation.IsDNS1123Subdomain(o.tlsSecret); len(errs) > 0 {
			return cli.FlagErrorf("--etcd-tls-secret %q: %s", o.tlsSecret, strings.Join(errs, "; "))
		}
	}
	if o.experiment != "" {
		return o.validateExperiment()
	}
	if err := o.checkLoadFlags(); err != nil {
		return err
	}
	var load *workerOptions
	for _, i := range []int{o.shards - 1, 0} {
		w, err := o.validateWorker(i)
		if err != nil {
			return cli.FlagErrorf("the load's flags (after --): %v", err)
		}
		load = w
	}
	if o.scrape {
		o.scrapeArgs = o.makeScrapeArgs(&load.target.conn, strings.Join(load.target.endpoints, ","))
	}
	l := load.load.Defaults()
	o.informers = shard.Shard{Index: 0, Count: o.shards}.Len(l.Watchers)
	o.objects = max(l.Objects, l.ConfigMaps, l.Events)
	return o.setMemory()
}

// checkLoadFlags parses the load's flags as lwbench worker's and refuses
// arguments and the flags the manifest sets itself.
func (o *manifestOptions) checkLoadFlags() error {
	fs := newWorkerCommand(nil).Flags()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(o.load); err != nil {
		return cli.FlagErrorf("the load's flags (after --): %v", err)
	}
	if fs.NArg() > 0 {
		return cli.FlagErrorf("the load's flags (after --): unexpected argument %q", fs.Arg(0))
	}
	var err error
	fs.Visit(func(f *pflag.Flag) {
		if why, ok := manifestNotLoadFlags[f.Name]; ok && err == nil {
			err = cli.FlagErrorf("--%s cannot be among the load's flags (after --): %s", f.Name, why)
		}
		if o.tlsSecret != "" && (f.Name == "cacert" || f.Name == "cert" || f.Name == "key") && err == nil {
			err = cli.FlagErrorf("--etcd-tls-secret and --%s (after --) cannot be used together: the Secret's files are passed as --cacert, --cert and --key", f.Name)
		}
	})
	return err
}

// validateExperiment is Validate's part for --experiment: a divisible
// experiment, no --scrape (its phases are a load's), the experiment's
// flags (after --) parsed and checked as every worker will check them
// (for the first and the last shard), and the memory derived from the
// largest shard's watchers and the most objects one of them holds (the
// experiment's defaults applied).
func (o *manifestOptions) validateExperiment() error {
	if !slices.Contains(experiment.Divisible, o.experiment) {
		return cli.FlagErrorf("--experiment %q: want %s, the experiments that divide among workers", o.experiment, strings.Join(experiment.Divisible, " or "))
	}
	if o.flags.Changed("scrape") && o.scrape {
		return cli.FlagErrorf("--experiment and --scrape cannot be used together: lwbench scrape follows a load's phases, not an experiment's")
	}
	o.scrape = false
	e, _ := lookupExperiment(o.experiment)
	fs := e.command(nil).Flags()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(o.load); err != nil {
		return cli.FlagErrorf("the experiment's flags (after --): %v", err)
	}
	if fs.NArg() > 0 {
		return cli.FlagErrorf("the experiment's flags (after --): unexpected argument %q", fs.Arg(0))
	}
	var err error
	fs.Visit(func(f *pflag.Flag) {
		why, ok := manifestNotLoadFlags[f.Name]
		if w, eok := experimentNotLoadFlags[f.Name]; eok {
			why, ok = w, true
		}
		if ok && err == nil {
			err = cli.FlagErrorf("--%s cannot be among the experiment's flags (after --): %s", f.Name, why)
		}
		if o.tlsSecret != "" && (f.Name == "cacert" || f.Name == "cert" || f.Name == "key") && err == nil {
			err = cli.FlagErrorf("--etcd-tls-secret and --%s (after --) cannot be used together: the Secret's files are passed as --cacert, --cert and --key", f.Name)
		}
	})
	if err != nil {
		return err
	}
	var eo *experimentOptions
	for _, i := range []int{o.shards - 1, 0} {
		var got *experimentOptions
		cmd := e.command(func(_ *cobra.Command, x *experimentOptions) error { got = x; return nil })
		root := &cobra.Command{Use: "lwbench"}
		cli.PrepareRoot(root)
		root.AddCommand(cmd)
		args := o.workerArgs()
		root.SetArgs(append([]string{args[0], "--index", strconv.Itoa(i)}, args[1:]...))
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		if err := root.Execute(); err != nil {
			return cli.FlagErrorf("the experiment's flags (after --): %v", err)
		}
		if got == nil {
			return cli.FlagErrorf("the experiment's flags (after --): lwbench %s did not accept them", o.experiment)
		}
		eo = got
	}
	watchers, objects := experimentShardSize(o.experiment, eo.flags, eo.quick, o.shards)
	o.informers = shard.Shard{Index: 0, Count: o.shards}.Len(watchers)
	o.objects = objects
	return o.setMemory()
}

// experimentShardSize returns the watchers of a divisible experiment
// divided into shards and the most objects one of them holds, as fs (the
// experiment's parsed flags) and the experiment's defaults
// (experiment.RelistStormOptions, CatchupOptions Defaults) give them.
func experimentShardSize(name string, fs *pflag.FlagSet, quick bool, shards int) (watchers, objects int) {
	w, _ := fs.GetInt("watchers")
	c := experiment.Common{Quick: quick}
	if name == experiment.NameRelistStorm {
		objs, _ := fs.GetIntSlice("objects")
		d := experiment.RelistStormOptions{Common: c, Objects: objs, Watchers: w}.Defaults()
		return d.Watchers, slices.Max(d.Objects)
	}
	if !fs.Changed("watchers") {
		w = shards // catchup: one watcher per worker
	}
	n, _ := fs.GetInt("objects")
	d := experiment.CatchupOptions{Common: c, Objects: n, Watchers: w}.Defaults()
	return d.Watchers, d.Objects
}

// validateWorker checks the worker arguments of shard index as lwbench
// worker does, without running it, and returns its options.
func (o *manifestOptions) validateWorker(index int) (*workerOptions, error) {
	var got *workerOptions
	root := &cobra.Command{Use: "lwbench"}
	cli.PrepareRoot(root)
	root.AddCommand(newWorkerCommand(func(_ *cobra.Command, w *workerOptions) error { got = w; return nil }))
	args := o.workerArgs()
	root.SetArgs(append([]string{args[0], "--index", strconv.Itoa(index)}, args[1:]...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	if err := root.Execute(); err != nil {
		return nil, err
	}
	if got == nil {
		return nil, errors.New("lwbench worker did not accept the arguments")
	}
	return got, nil
}

// loadRoleName is the name of --through-api's ClusterRole and
// ClusterRoleBinding: cluster-scoped, so the namespace is in it.
func (o *manifestOptions) loadRoleName() string { return "lwbench:" + o.namespace + ":" + o.name }

// loadRules are what a worker's load through the API does (pkg/kubeload,
// on a shared cluster: kubeload.NewClients with kubeload.ExistingStack),
// verb by verb:
//
//	namespaces  get     namespace default (checkSameCluster), its own
//	                    before it starts (refuseExisting) and while they go
//	            create  its namespaces lwbench-<id>-ns-N (APIWorkload)
//	            delete  them at the end (deleteNamespaces)
//	pods        create, get (a conflict's retry), delete: the writers;
//	            list, watch: the informers, in every namespace;
//	            list, deletecollection: the cleanup (by label)
//	pods/status update: a created pod's status (APIWorkload.writePod)
//	configmaps  create, get (a conflict's retry), update, delete: the
//	            writers; list, watch: the informers; list,
//	            deletecollection: the cleanup
//	events      create, patch: the writers; list, watch: the informers;
//	            list, deletecollection: the cleanup
//
// The informers list and watch in every namespace, and the namespaces do
// not exist when the role is bound, so a ClusterRole: RBAC cannot confine
// a rule to namespaces by name pattern.
func loadRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete", "deletecollection"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete", "deletecollection"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch", "create", "patch", "deletecollection"}},
	}
}

// experimentLoadRules are what a divisible experiment's workers do
// through the API (pkg/experiment's loads through kubeload.Load on a
// shared cluster): loadRules' verbs, which its seeding, writers,
// informers and cleanup share with a run's, and the catch-up's updates,
// which patch pods' status (kubeload.Load.UpdatePods): pods/status patch.
func experimentLoadRules() []rbacv1.PolicyRule {
	rules := loadRules()
	for i := range rules {
		if slices.Equal(rules[i].Resources, []string{"pods/status"}) {
			rules[i].Verbs = append(rules[i].Verbs, "patch")
		}
	}
	return rules
}

// barrierName is the barrier ConfigMap's name.
func (o *manifestOptions) barrierName() string { return o.name + "-barrier" }

// workerArgs are the worker container's arguments: the shard count, the
// barrier, JSON output, the load's flags, and the TLS files of
// --etcd-tls-secret.
func (o *manifestOptions) workerArgs() []string {
	sub := "worker"
	if o.experiment != "" {
		sub = o.experiment
	}
	args := []string{sub, "--shards", strconv.Itoa(o.shards), "--barrier-configmap", o.namespace + "/" + o.barrierName(), "--log-result"}
	if o.throughAPI {
		args = append(args, "--kubeconfig", inClusterKubeconfig)
	}
	args = append(args, o.load...)
	if o.tlsSecret != "" {
		args = append(args, "--cacert", etcdTLSDir+"/ca.crt", "--cert", etcdTLSDir+"/tls.crt", "--key", etcdTLSDir+"/tls.key")
	}
	return args
}

// makeScrapeArgs are the scrape container's arguments: the shard count,
// the barrier, the log line, the members' endpoints, kube-apiserver's
// /metrics through the pod's ServiceAccount, and the load's TLS and
// credentials (those of --etcd-tls-secret when given).
func (o *manifestOptions) makeScrapeArgs(conn *etcdclient.Flags, endpoints string) []string {
	args := []string{"scrape", "--shards", strconv.Itoa(o.shards), "--barrier-configmap", o.namespace + "/" + o.barrierName(), "--log-result",
		"--endpoints", endpoints, "--apiserver-metrics"}
	c := *conn
	if o.tlsSecret != "" {
		c.CACert, c.Cert, c.Key = etcdTLSDir+"/ca.crt", etcdTLSDir+"/tls.crt", etcdTLSDir+"/tls.key"
	}
	for _, f := range []struct{ name, value string }{{"cacert", c.CACert}, {"cert", c.Cert}, {"key", c.Key}, {"user", c.User}, {"password", c.Password}} {
		if f.value != "" {
			args = append(args, "--"+f.name, f.value)
		}
	}
	if c.InsecureSkipTLSVerify {
		args = append(args, "--insecure-skip-tls-verify")
	}
	return args
}

// workerMemory returns the memory request of a worker whose shard holds
// informers informers of at most objects objects each (see
// workerBaseBytes), rounded up to a MiB.
func workerMemory(informers, objects int) resource.Quantity {
	b := float64(workerBaseBytes) + float64(informers)*(workerPerInformerBytes+float64(objects)*workerPerObjectBytes)
	mib := int64(math.Ceil(b / (1 << 20)))
	return *resource.NewQuantity(mib<<20, resource.BinarySI)
}

// newManifestCommand returns `lwbench manifest`; runF replaces the
// printing in flag tests.
func newManifestCommand(runF func(*cobra.Command, *manifestOptions) error) *cobra.Command {
	o := &manifestOptions{}
	cmd := &cobra.Command{
		Use:   "manifest [flags] -- LOAD-FLAGS...",
		Short: "Print the Kubernetes objects that run a load as an Indexed Job of lwbench workers",
		Long: `lwbench manifest prints the objects that run a load on a Kubernetes cluster,
divided among --shards lwbench workers, for kubectl apply -f -:

  ServiceAccount NAME, Role NAME and RoleBinding NAME: what the workers'
    ConfigMap barrier needs (get, list, watch, update and patch of the
    barrier's ConfigMap alone, and create of configmaps, which RBAC cannot
    confine to a name), nothing else;
  ConfigMap NAME-barrier: where the workers meet (create it anew for every
    run: arrivals left in it count);
  Job NAME: completionMode Indexed, parallelism = completions = --shards,
    backoffLimit 0, restartPolicy Never; each pod runs
    lwbench worker --shards N --barrier-configmap NAMESPACE/NAME-barrier -w json LOAD-FLAGS...
    and prints its result as JSON on stdout, in its log, for lwbench merge.
    Requests: 1 CPU (no CPU limit: throttling would add to the latencies the
    worker measures) and memory derived from the shard's informers and
    objects (see --memory).

The load's flags, after --, are lwbench worker's (lwbench run's): the workers
drive etcd directly, so they need --endpoints, reachable from the pods. They
are checked here as every worker will check them.

With --through-api the workers drive the load through the cluster's API
instead (lwbench worker --kubeconfig in-cluster, as the pod's ServiceAccount):
each creates, writes and at the end deletes namespaces of its own
(lwbench-<id>-ns-N), and its informers list and watch in every namespace.
The manifest then adds ClusterRole and ClusterRoleBinding
lwbench:NAMESPACE:NAME with exactly the verbs that load uses: namespaces get,
create and delete; pods get, list, watch, create, delete and
deletecollection, pods/status update; configmaps get, list, watch, create,
update, delete and deletecollection; events list, watch, create, patch and
deletecollection. --endpoints is then the cluster's etcd, which the workers
read to validate what their informers saw.

With --experiment relist-storm or catchup the Job's pods run that
experiment's shards instead (lwbench EXPERIMENT --shards N
--barrier-configmap NAMESPACE/NAME-barrier --log-result EXPERIMENT-FLAGS...),
the flags after -- being the experiment's (--endpoints of the etcd it
compacts, with --allow-maintenance); --through-api's ClusterRole then also
grants pods/status patch (the catch-up's updates). lwbench gather merges
their results as experiment results.`,
		Example: `  lwbench manifest --shards 4 --name load1 -- --endpoints https://etcd:2379 --watchers 1000 --objects 30000 | kubectl apply -f -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash != 0 && len(args) > 0 {
				return cli.FlagErrorf("unexpected argument %q: give the load's flags after --", args[0])
			}
			o.load = args
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd, o)
			}
			return writeManifest(cmd.OutOrStdout(), o.format, makeManifest(o))
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.RegisterFlagCompletionFunc("write-out", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return o.formatValue.Allowed(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// makeManifest returns the objects of o's load, in the order kubectl
// should create them: ServiceAccount, Role, RoleBinding, (--through-api)
// ClusterRole and ClusterRoleBinding, the barrier ConfigMap, the Job; with
// o.scrape then the scrape pod's ServiceAccount, RoleBinding, ClusterRole
// and ClusterRoleBinding (cluster-scoped: no namespace), and its Job.
func makeManifest(o *manifestOptions) []runtime.Object {
	labels := func(component string) map[string]string {
		return map[string]string{
			"app.kubernetes.io/name":      "lwbench",
			"app.kubernetes.io/instance":  o.name,
			"app.kubernetes.io/component": component,
		}
	}
	meta := func(name, component string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: o.namespace, Labels: labels(component)}
	}
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta(o.name, "worker"),
	}
	// The barrier (pkg/barrier ConfigMap) gets, updates and creates its
	// ConfigMap and lists and watches it with fieldSelector
	// metadata.name, which RBAC authorizes against resourceNames
	// (k8s.io/apiserver pkg/endpoints/request/requestinfo.go takes a
	// list's or watch's name from that selector). A create cannot be
	// confined to a name (the name is in the body, not the URL):
	// kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources.
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta(o.name, "worker"),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{o.barrierName()},
				Verbs: []string{"get", "list", "watch", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta(o.name, "worker"),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: o.name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: o.name, Namespace: o.namespace}},
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(o.barrierName(), "barrier"),
	}
	limit := o.memoryRequest.DeepCopy()
	limit.Add(o.memoryRequest)
	container := corev1.Container{
		Name:  "worker",
		Image: o.image,
		Args:  o.workerArgs(),
		Env: []corev1.EnvVar{
			{Name: envShards, Value: strconv.Itoa(o.shards)},
			{Name: "GOMEMLIMIT", Value: strconv.FormatInt(limit.Value()>>20*9/10, 10) + "MiB"},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: o.memoryRequest},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: limit},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	pod := corev1.PodSpec{
		ServiceAccountName: o.name,
		RestartPolicy:      corev1.RestartPolicyNever,
		Containers:         []corev1.Container{container},
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To[int64](nonRootUID),
			RunAsGroup:     ptr.To[int64](nonRootUID),
			FSGroup:        ptr.To[int64](nonRootUID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		// Spread the workers over nodes: the point of dividing a load.
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": o.name, "app.kubernetes.io/component": "worker"}},
					TopologyKey:   corev1.LabelHostname,
				},
			}},
		}},
	}
	if o.tlsSecret != "" {
		pod.Volumes = []corev1.Volume{{Name: "etcd-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  o.tlsSecret,
			Items:       []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}, {Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}},
			DefaultMode: ptr.To[int32](0o440),
		}}}}
		pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "etcd-tls", MountPath: etcdTLSDir, ReadOnly: true}}
	}
	n := int32(o.shards)
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(o.name, "worker"),
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To(n),
			Parallelism:    ptr.To(n),
			// One failed worker fails the load: its shard's figures
			// are missing, and it aborted the barrier.
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels("worker")},
				Spec:       pod,
			},
		},
	}
	objs := []runtime.Object{sa, role, binding}
	if o.throughAPI {
		cmeta := metav1.ObjectMeta{Name: o.loadRoleName(), Labels: labels("worker")}
		rules := loadRules()
		if o.experiment != "" {
			rules = experimentLoadRules()
		}
		objs = append(objs, &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: cmeta,
			Rules:      rules,
		}, &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: cmeta,
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: o.loadRoleName()},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: o.name, Namespace: o.namespace}},
		})
	}
	objs = append(objs, cm, job)
	if o.scrape {
		// One pod that holds no load, as a ServiceAccount of its own: it
		// reads the barrier (the workers' Role, bound to it too), etcd's
		// /metrics, and kube-apiserver's, a non-resource URL that only a
		// ClusterRole can grant (kubernetes.io/docs/reference/access-authn-authz/rbac/#role-and-clusterrole).
		scrapeName := o.name + "-scrape"
		clusterName := o.loadRoleName() + "-scrape" // cluster-scoped: one per namespace's load
		scrapeSA := &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(scrapeName, "scrape"),
		}
		subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scrapeName, Namespace: o.namespace}}
		scrapeBinding := &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: meta(scrapeName, "scrape"),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: o.name},
			Subjects:   subject,
		}
		metricsRole := &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: clusterName, Labels: labels("scrape")},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		}
		metricsBinding := &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: clusterName, Labels: labels("scrape")},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterName},
			Subjects:   subject,
		}
		objs = append(objs, scrapeSA, scrapeBinding, metricsRole, metricsBinding)
		sp := *pod.DeepCopy()
		sp.Affinity = nil
		sp.ServiceAccountName = scrapeName
		sc := &sp.Containers[0]
		sc.Name, sc.Args, sc.Env = "scrape", o.scrapeArgs, []corev1.EnvVar{{Name: envShards, Value: strconv.Itoa(o.shards)}}
		sc.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}
		objs = append(objs, &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: meta(o.name+"-scrape", "scrape"),
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels("scrape")},
					Spec:       sp,
				},
			},
		})
	}
	return objs
}

// writeManifest writes objs to w: YAML documents separated by "---", or
// (FormatJSON) one indented v1 List. Fields left at their zero value
// that the types print anyway (creationTimestamp: null, status: {}) are
// dropped (dropUnset).
func writeManifest(w io.Writer, f output.Format, objs []runtime.Object) error {
	items := make([]map[string]any, len(objs))
	for i, obj := range objs {
		raw, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encode %T: %w", obj, err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("encode %T: %w", obj, err)
		}
		dropUnset(m)
		items[i] = m
	}
	if f == output.FormatJSON {
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	var buf bytes.Buffer
	for i, m := range items {
		y, err := yaml.Marshal(m)
		if err != nil {
			return fmt.Errorf("encode %s as YAML: %w", m["kind"], err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(y)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// dropUnset removes, recursively, null values (the typed objects'
// creationTimestamp: null) and an empty top-level status (status: {}).
// Empty objects elsewhere stay: some mean something (emptyDir: {}).
func dropUnset(m map[string]any) {
	if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
		delete(m, "status")
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if e == nil {
					delete(v, k)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(m)
}

// setMemory sets each worker's memory request: --memory when given (a
// positive Kubernetes quantity, else a usage error), or workerMemory of the
// shard's informers and objects.
func (o *manifestOptions) setMemory() error {
	if o.memory == "" {
		o.memoryRequest = workerMemory(o.informers, o.objects)
		return nil
	}
	q, err := resource.ParseQuantity(o.memory)
	if err != nil || q.Sign() <= 0 {
		return cli.FlagErrorf("--memory %q: want a positive quantity such as 2Gi", o.memory)
	}
	o.memoryRequest = q
	return nil
}
