package command

import (
	"context"
	"fmt"
	"github.com/dustin/go-humanize"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdproxy"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/clustermodel"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// newConformanceCommand returns `lwbench conformance`: the run's load
// through the etcd-direct model and through real kube-apiservers, what
// etcd was asked side by side. It takes run's load flags.
func newConformanceCommand() *cobra.Command {
	o := &runOptions{}
	var settings []string
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Hold the etcd-direct model against real kube-apiserver and client-go: etcd's requests by kind, side by side",
		Long: `conformance runs one load four times through real kube-apiservers (watch cache on and off, client-go's
WatchListClient on and off), each on a fresh embedded etcd, and as many times through lwbench's etcd-direct
model (profile informer for the watch cache off, apiserver-cache for on, with the setting's WatchListClient),
each on a fresh embedded etcd too. A
counting gRPC proxy in front of each etcd counts every request by method and shape. The table lays the
counts side by side, with their ratio, and says whether each row is within 10 %.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.kubeconfig.enabled() {
				return cli.FlagErrorf("conformance starts kube-apiservers of its own: --kubeconfig cannot be used")
			}
			if o.cluster.model {
				return cli.FlagErrorf("--cluster-model cannot be used with conformance: it runs the model and the control plane both")
			}
			if !o.kube.enabled() {
				o.kube.version = "1.37"
			}
			if err := o.Validate(); err != nil {
				return err
			}
			if o.target.external() || o.target.clusterSize > 0 {
				return cli.FlagErrorf("conformance runs on embedded members of its own: --endpoints and --cluster-size cannot be used")
			}
			if o.cluster.enabled() {
				if len(settings) > 0 {
					return cli.FlagErrorf("--settings cannot be used with --nodes: a cluster's kube-apiserver caches, and its informers use client-go's default")
				}
				return runClusterConformance(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			sel, err := kubeload.SelectSettings(settings)
			if err != nil {
				return cli.FlagErrorf("--settings: %v", err)
			}
			return runConformance(cmd.Context(), o, sel, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.Flags().StringSliceVar(&settings, "settings", nil, "run only these settings (comma-separated): cache-off/watchlist-on, cache-off/watchlist-off, cache-on/watchlist-on, cache-on/watchlist-off; default all four")
	o.out.registerCompletion(cmd)
	return cmd
}

// proxiedTarget opens a fresh embedded etcd and a counting proxy in front
// of it, and returns the target whose load goes through the proxy and
// whose harness (watchload.Harness: the maintenance connection, the
// history recorder) reaches the member directly, so that the proxy counts
// what models kube-apiserver's requests and nothing else.
func proxiedTarget(ctx context.Context, o *runOptions, logf func(string, ...any)) (watchload.Target, *etcdproxy.Proxy, func(), error) {
	t, release, err := o.target.open(ctx, logf)
	if err != nil {
		return t, nil, release, err
	}
	var prefixes []string // the model's keys, named by resource
	if o.load.Prefix != "" {
		prefixes = []string{o.load.Prefix}
	}
	p, err := etcdproxy.Start(ctx, etcdproxy.Config{Upstream: t.Endpoints[0], Prefixes: prefixes})
	if err != nil {
		return t, nil, release, err
	}
	url := p.URL()
	dial := func(ctx context.Context) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Context: ctx, Logger: zap.NewNop()})
	}
	pt := watchload.Target{Endpoints: []string{url}, Embedded: t.Embedded, Managed: true, Dial: dial,
		DialEndpoint: func(ctx context.Context, _ string) (*clientv3.Client, error) { return dial(ctx) },
		Harness:      &watchload.Harness{Endpoints: t.Endpoints, Dial: t.Dial, DialEndpoint: t.DialEndpoint}}
	return pt, p, func() { p.Close(); release() }, nil
}

func runConformance(ctx context.Context, o *runOptions, settings []kubeload.Setting, out, errOut io.Writer) error {
	con := newConsole(errOut)
	defer con.Done()
	o.load.Logf = con.Logf
	o.load.Defragment, o.load.Faults = false, nil
	k := &o.kube
	routeClientGoLogs(con.Logf)
	bin, err := k.binaries(ctx, con.Logf)
	if err != nil {
		return err
	}
	res := &report.Conformance{Kind: report.KindConformance, SchemaVersion: report.ConformanceSchemaVersion, StartedAt: time.Now().UTC(),
		FeatureGates: k.apiserverGates, APIServerArgs: k.apiserverArgs}
	// The model follows the release it is compared with, or the gates
	// given.
	rangeStream := k.modelRangeStream(k.resolvedVersion)
	for _, s := range settings {
		profile := watchload.ProfileInformer
		if s.WatchCache {
			profile = watchload.ProfileAPIServerCache
		}
		con.Logf("model, profile %s, %s, EtcdRangeStream %s (kube-apiserver %s)", profile, s.Name(), onOff(*rangeStream), k.resolvedVersion)
		// One run ID names both loads' namespaces: the objects' content
		// follows their namespace's name (keyspace.Generator).
		runID := fmt.Sprintf("%08x", rand.Uint32())
		model, err := conformanceModel(ctx, o, profile, k.modelWatchList(k.resolvedVersion, s.WatchList), rangeStream, runID, con.Logf)
		if err != nil {
			return fmt.Errorf("model, profile %s, %s: %w", profile, s.Name(), err)
		}
		con.Logf("real: kube-apiserver %s, %s", k.resolvedVersion, s.Name())
		kr, err := conformanceReal(ctx, o, bin, s, runID, con.Logf)
		if err != nil {
			return fmt.Errorf("kube-apiserver, %s: %w", s.Name(), err)
		}
		res.EtcdVersion, res.APIServerVersion, res.Scenario = kr.Target.EtcdVersion, kr.APIServer.Version, kr.Scenario
		res.Cases = append(res.Cases, report.ConformanceCase{Name: s.Name(), WatchCache: s.WatchCache, ClientWatchList: s.ClientWatchList(),
			ModelProfile: string(profile), ModelRangeStream: rangeStream, Rows: kubeload.Compare(model, kr.Etcd), Model: model, Real: kr.Etcd})
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	con.Done()
	return conformanceLayout(res).write(out, o.out.format, res)
}

// runClusterConformance runs `lwbench conformance --nodes N`: the
// cluster's load through the model of a cluster (pkg/clustermodel) and
// through the real control plane with KWOK (the path of lwbench run
// --nodes), each on a fresh embedded etcd behind a counting proxy, and
// compares etcd's requests by resource, method and kind
// (kubeload.CompareByResource). Neither side has kubelet watches, the
// informers are not held back, nothing is defragmented, and nothing
// scrapes kube-apiserver's metrics (each scrape is a Status at etcd).
func runClusterConformance(ctx context.Context, o *runOptions, out, errOut io.Writer) error {
	con := newConsole(errOut)
	defer con.Done()
	o.load.Logf = con.Logf
	o.load.Defragment, o.load.Faults, o.load.HoldBack = false, nil, 0
	k := &o.kube
	routeClientGoLogs(con.Logf)
	if !controlplane.Cached(k.resolvedVersion, controlplane.DefaultKWOKVersion) {
		con.Logf("building %s of Kubernetes %s and KWOK %s into %s", strings.Join(controlplane.Missing(k.resolvedVersion, controlplane.DefaultKWOKVersion), ", "),
			k.resolvedVersion, controlplane.DefaultKWOKVersion, etcdproc.CacheDir())
	}
	bin, err := controlplane.ResolveBinaries(ctx, k.resolvedVersion, controlplane.DefaultKWOKVersion, etcdproc.LogWriter(con.Logf))
	if err != nil {
		return err
	}
	res := &report.Conformance{Kind: report.KindConformance, SchemaVersion: report.ConformanceSchemaVersion, StartedAt: time.Now().UTC(),
		FeatureGates: k.apiserverGates, APIServerArgs: k.apiserverArgs}
	con.Logf("model of a cluster of %d nodes", o.cluster.nodes)
	model, err := conformanceClusterModel(ctx, o, con.Logf)
	if err != nil {
		return fmt.Errorf("model of the cluster: %w", err)
	}
	con.Logf("real: kube-apiserver, kube-controller-manager, kube-scheduler %s and KWOK %s, %d nodes", k.resolvedVersion, controlplane.DefaultKWOKVersion, o.cluster.nodes)
	kr, err := conformanceClusterReal(ctx, o, bin, con.Logf)
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	res.EtcdVersion, res.APIServerVersion, res.Scenario, res.Cluster = kr.Target.EtcdVersion, kr.APIServer.Version, kr.Scenario, kr.Cluster
	name := fmt.Sprintf("cluster of %d nodes", o.cluster.nodes)
	res.Cases = append(res.Cases, report.ConformanceCase{Name: name, WatchCache: true, ClientWatchList: "default", ModelProfile: "cluster",
		Rows: kubeload.CompareByResource(model, kr.Etcd), Model: model, Real: kr.Etcd})
	con.Done()
	return conformanceLayout(res).write(out, o.out.format, res)
}

// conformanceClusterModel runs the cluster's load through the model of a
// cluster on a fresh embedded etcd behind a counting proxy and returns
// what the proxy counted, by the run's phase.
func conformanceClusterModel(ctx context.Context, o *runOptions, logf func(string, ...any)) ([]report.EtcdRequests, error) {
	t, p, release, err := proxiedTarget(ctx, o, logf)
	defer release()
	if err != nil {
		return nil, err
	}
	p.SetPhase("before")
	counter := kubeload.CounterOf(p.Counter())
	mo, err := o.cluster.clusterModel(counter)
	if err != nil {
		return nil, err
	}
	lo := o.load
	lo.PhysicalCompaction = false
	lo.Clients = clustermodel.NewClients(mo)
	if _, err := watchload.Run(ctx, t, lo); err != nil {
		return nil, err
	}
	return counter.Requests(), nil
}

// conformanceClusterReal runs the cluster's load through the control
// plane (bin) with KWOK, on a fresh embedded etcd behind a counting
// proxy, without kubelet watches or metrics scrapes of kube-apiserver.
func conformanceClusterReal(ctx context.Context, o *runOptions, bin controlplane.Binaries, logf func(string, ...any)) (*report.RunResult, error) {
	t, release, err := o.target.open(ctx, logf)
	defer release()
	if err != nil {
		return nil, err
	}
	k := &o.kube
	st, stop, err := kubeload.StartStack(ctx, t, kubeload.StackConfig{BinDir: bin.KubeAPIServer, EtcdPrefix: o.load.Prefix,
		EtcdCompactionInterval: o.load.Defaults().CompactionInterval, EventTTL: o.load.Defaults().EventTTL, WatchCache: true,
		FeatureGates: k.apiserverGates, Args: k.apiserverArgs, ClientWatchList: k.clientWatchList(), CountEtcd: true,
		Connections: k.connections(), ControlPlane: &bin})
	defer stop()
	if err != nil {
		return nil, err
	}
	st.APIServers = nil // no /metrics scrape: each is a Status at etcd
	co, err := o.cluster.clusterLoad()
	if err != nil {
		return nil, err
	}
	co.KubeletWatches = 0
	lo := o.load
	lo.Clients = kubeload.NewClients(st, kubeload.Options{WatchList: k.watchList, Cluster: co})
	return watchload.Run(ctx, st.Etcd, lo)
}

// conformanceModel runs the load through the etcd-direct model with
// profile, the informers' WatchListClient gate watchList (nil: client-go's
// default) and kube-apiserver's EtcdRangeStream gate rangeStream (nil: the
// model's default, on), in the namespaces kubeload.NewClients names after runID
// (lwbench-<runID>-N), on a fresh embedded etcd behind a counting proxy,
// and returns what the proxy counted, by the run's phase (the same as the
// real stack's: one script), switched on the model's own goroutine before the phase's first request
// (Options.OnPhase). The model compacts as kube-apiserver does, without
// waiting for the deletion (k8s.io/apiserver/pkg/storage/etcd3/compact.go
// Compact: no WithCompactPhysical); `lwbench run` waits by default, for
// its sizes.
func conformanceModel(ctx context.Context, o *runOptions, profile watchload.Profile, watchList, rangeStream *bool, runID string, logf func(string, ...any)) ([]report.EtcdRequests, error) {
	t, p, release, err := proxiedTarget(ctx, o, logf)
	defer release()
	if err != nil {
		return nil, err
	}
	lo := o.load
	lo.Profile, lo.WatchList, lo.RangeStream = profile, watchList, rangeStream
	lo.NamespacePrefix = "lwbench-" + runID + "-"
	// The real load has no consistent readers besides its informers.
	lo.ConsistentListRate = -1
	lo.PhysicalCompaction = false
	p.SetPhase("before")
	lo.OnPhase = p.SetPhase
	if _, err := watchload.Run(ctx, t, lo); err != nil {
		return nil, err
	}
	return kubeload.CounterOf(p.Counter()).Requests(), nil
}

// conformanceReal runs the load through one kube-apiserver with setting s
// and --apiserver-feature-gates, in namespaces named after runID, on a
// fresh embedded etcd behind a counting proxy.
func conformanceReal(ctx context.Context, o *runOptions, bin string, s kubeload.Setting, runID string, logf func(string, ...any)) (*report.RunResult, error) {
	t, release, err := o.target.open(ctx, logf)
	defer release()
	if err != nil {
		return nil, err
	}
	interval := o.load.Defaults().CompactionInterval
	st, stop, err := kubeload.StartStack(ctx, t, kubeload.StackConfig{BinDir: bin, EtcdPrefix: o.load.Prefix,
		EtcdCompactionInterval: interval, EventTTL: o.load.Defaults().EventTTL, WatchCache: s.WatchCache,
		FeatureGates: o.kube.apiserverGates, Args: o.kube.apiserverArgs, ClientWatchList: s.ClientWatchList(), CountEtcd: true, Connections: o.kube.connections()})
	defer stop()
	if err != nil {
		return nil, err
	}
	// No /metrics scrape: each makes kube-apiserver ask etcd for its
	// Status (the apiserver_storage_size_bytes collector,
	// k8s.io/apiserver/pkg/storage/storagebackend/factory/etcd3.go
	// etcd3ProberMonitor.Monitor), a request of the harness's that the
	// proxy would count as kube-apiserver's; conformance reports none of
	// the metrics.
	st.APIServers = nil
	lo := o.load
	lo.Clients = kubeload.NewClients(st, kubeload.Options{WatchList: s.WatchList, RunID: runID})
	return watchload.Run(ctx, st.Etcd, lo)
}

// makeConformanceTable has one row per case, method and kind: the model's
// and the real stack's counts, their ratio, the Txns of each whose
// compares failed, whether within 10 % (judged on the counts; "plan" for
// the writes, which agree by construction: kubeload.PlanWrite), their
// bytes both ways, the bytes' ratio, and the note. A ratio is "-" when
// the real stack sent none.
func makeConformanceTable(r *report.Conformance) output.Table {
	t := output.Table{Header: []string{"case", "method", "kind", "model", "real", "ratio", "model failed compares", "real failed compares", "within 10%", "model bytes", "real bytes", "bytes ratio", "note"},
		Numeric: []bool{3: true, 4: true, 5: true, 6: true, 7: true, 9: true, 10: true, 11: true}}
	for _, c := range r.Cases {
		for _, row := range c.Rows {
			t.Rows = append(t.Rows, []string{conformanceCase(c), row.Method, conformanceKind(row),
				fmt.Sprint(row.Model), fmt.Sprint(row.Real), conformanceRatio(row.Ratio, row.Real),
				fmt.Sprint(row.ModelFailedCompares), fmt.Sprint(row.RealFailedCompares), conformanceWithin(row),
				fmt.Sprint(row.ModelBytes), fmt.Sprint(row.RealBytes), conformanceRatio(row.BytesRatio, row.RealBytes), row.Note})
		}
	}
	return t
}

// conformancePlanNote explains the judgement "plan" of the writes' rows.
const conformancePlanNote = "plan: the writes (Txn, the compactor's apart) agree by construction: the model and the real stack perform one write plan, " +
	"the same creates, updates and deletes of the same objects in the same order; their counts differ only by retries. " +
	"The model is judged on the reads (Range, RangeStream) and the watches (Watch). " +
	"failed m/r (failed compares): each side's Txns whose compares did not hold, a write from a stale object that kube-apiserver retries from the Else branch's read; they wrote nothing and made no watch event."

// conformanceWithin is a row's judgement: "plan" for the writes
// (kubeload.PlanWrite), else whether its counts are within 10 %.
func conformanceWithin(row report.ConformanceRow) string {
	if row.Resource == "" && kubeload.PlanWrite(row.Method, row.Kind) {
		return "plan"
	}
	return yesNo(row.Within10)
}

// conformanceVerdict says how many of a case's reads and watches
// (kubeload.Judged) are within 10 %.
func conformanceVerdict(c report.ConformanceCase) string {
	judged, within := 0, 0
	for _, row := range c.Rows {
		if row.Resource != "" || kubeload.Judged(row.Method) {
			judged++
			if row.Within10 {
				within++
			}
		}
	}
	return fmt.Sprintf("reads and watches within 10 %% in %d of %d rows", within, judged)
}

// conformanceLayout is the conformance table as a person reads it: in
// text, the cases numbered (#) with their names below the table, bytes in
// binary units, each note numbered ([n] beside the row's judgement, one
// number per distinct text) below it, and the bytes in a table of their
// own when counts and bytes together are wider than maxTableWidth; markdown
// and CSV keep makeConformanceTable's wide table.
func conformanceLayout(r *report.Conformance) layout {
	text := output.Table{Header: []string{"#", "method", "kind", "model", "real", "ratio", "failed m/r", "±10%", "model bytes", "real bytes", "bytes ratio"},
		Numeric: []bool{3: true, 4: true, 5: true, 6: true, 8: true, 9: true, 10: true}}
	var caseNotes, notes, verdicts []string
	noteNum := map[string]int{}
	for i, c := range r.Cases {
		caseNotes = append(caseNotes, fmt.Sprintf("case %d: %s: %s", i+1, conformanceCase(c), conformanceVerdict(c)))
		verdicts = append(verdicts, fmt.Sprintf("%s: %s", conformanceCase(c), conformanceVerdict(c)))
		for _, row := range c.Rows {
			within := conformanceWithin(row)
			if row.Note != "" {
				n, ok := noteNum[row.Note]
				if !ok {
					notes = append(notes, row.Note)
					n = len(notes)
					noteNum[row.Note] = n
					notes[n-1] = fmt.Sprintf("[%d] %s", n, row.Note)
				}
				within += fmt.Sprintf(" [%d]", n)
			}
			failed := ""
			if row.ModelFailedCompares > 0 || row.RealFailedCompares > 0 {
				failed = fmt.Sprintf("%d/%d", row.ModelFailedCompares, row.RealFailedCompares)
			}
			text.Rows = append(text.Rows, []string{fmt.Sprint(i + 1), row.Method, conformanceKind(row),
				fmt.Sprint(row.Model), fmt.Sprint(row.Real), conformanceRatio(row.Ratio, row.Real), failed, within,
				humanize.IBytes(uint64(max(row.ModelBytes, 0))), humanize.IBytes(uint64(max(row.RealBytes, 0))),
				conformanceRatio(row.BytesRatio, row.RealBytes)})
		}
	}
	// The verdicts are in the text's case lines, the markdown's notes.
	return layout{
		wide:      makeConformanceTable(r),
		text:      splitTable(text, 3, maxTableWidth, 8),
		notes:     append([]string{conformancePlanNote}, notes...),
		textNotes: caseNotes,
		wideNotes: verdicts,
	}
}

// conformanceKind is a row's kind, after its resource in a comparison by
// resource ("pods: if mod_revision=0 then put").
func conformanceKind(row report.ConformanceRow) string {
	if row.Resource != "" {
		return row.Resource + ": " + strings.TrimSpace(row.Kind)
	}
	return strings.TrimSpace(row.Kind)
}

// conformanceCase names a conformance case and the model profile it held
// against the real stack.
func conformanceCase(c report.ConformanceCase) string {
	return c.Name + " (model " + c.ModelProfile + ")"
}

// conformanceRatio formats a model/real ratio with two decimals, "-" when
// real is 0 (the ratio is then 0, not infinite).
func conformanceRatio(ratio float64, real int64) string {
	if real == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", ratio)
}

// yesNo is "yes" for true, "no" for false.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
