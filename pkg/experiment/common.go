package experiment

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/internal/machine"
	"github.com/kubestore/etcdkit/internal/quantile"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TargetFactory returns the etcd for one timeline of an experiment, named
// name (e.g. "interval=5s"), and a function that releases it. Embedded
// members are new each call; an existing cluster is returned as it is.
type TargetFactory func(ctx context.Context, name string) (watchload.Target, func(), error)

// Common are the options every experiment takes.
type Common struct {
	// NewTarget provides the etcd; required.
	NewTarget TargetFactory
	// Prefix is the Kubernetes prefix (kube-apiserver's --etcd-prefix)
	// the experiment writes under; empty means /registry. Each case adds
	// a path element of its own below it.
	Prefix string
	// Quick selects the small sizes (lwbench --quick, the tests).
	Quick bool
	// Label names the result in comparisons.
	Label string
	// Probe shapes the probe that runs throughout; its Key defaults to
	// /lwbench-probe/<experiment>, its rate to 20 per second, its series
	// buckets to 250 ms. Epoch is set by the experiment.
	Probe compaction.ProbeOptions
	// SizeInterval is how often the db size is sampled; 0 means 500 ms.
	SizeInterval time.Duration
	// Stack, when set, runs the experiment's Kubernetes clients through
	// real kube-apiservers it starts in front of the member: pods are
	// seeded and written by client-go, and the informers are client-go's
	// (kubeload), instead of lwbench's etcd-direct model. Each experiment
	// says what else changes.
	Stack StackFactory
	// WatchList is client-go's WatchListClient gate of the informers
	// through kube-apiserver (nil: client-go's default, on since 1.35).
	// The model's informers in the experiments list in pages whatever it
	// is.
	WatchList *bool
	// NamespaceDeleteTimeout bounds the wait for a load's namespaces to be
	// gone on a cluster lwbench does not own (a Stack whose Shared is
	// set); 0 means kubeload.DefaultNamespaceDeleteTimeout.
	NamespaceDeleteTimeout time.Duration
	// Logf, if set, receives one line per phase.
	Logf func(format string, args ...any)
	// Shard is this process's part of an experiment divided among
	// workers (Divisible names the experiments that divide; DivideRange
	// says how); the zero value and shard.Whole run it whole. Shard 0
	// alone seeds, writes, compacts and releases; every shard runs its
	// block of the watchers.
	Shard shard.Shard
	// Barrier is where the workers of a divided experiment meet (the
	// points each experiment names); required when Shard.Count > 1.
	Barrier watchload.Barrier
	// RunID names what the workers of a divided experiment share besides
	// the barrier: through kube-apiserver (Stack) each load's namespaces,
	// lwbench-<RunID>-<load>-N (kubeload.LoadOptions.RunID), and the
	// catch-up's published plans. Every worker must give the same one,
	// unique to the run (lwbench derives it from the barrier's name);
	// required when Shard.Count > 1 with a Stack. At most 40 characters
	// of a-z, 0-9 and '-', so that namespace names stay DNS labels.
	RunID string

	experiment string // set by defaults
}

// Divisible lists the experiments that can be divided among worker
// processes (Common.Shard): the relist storm and the catch-up, whose
// watchers divide; the others measure one member's maintenance.
var Divisible = []string{NameRelistStorm, NameCatchup}

// divided reports whether c is one worker of a divided experiment.
func (c Common) divided() bool { return c.Shard.Count > 1 }

func (c Common) defaults(experiment string) Common {
	if c.Prefix == "" {
		c.Prefix = keyspace.DefaultPrefix
	}
	c.Prefix = strings.TrimRight(c.Prefix, "/")
	if c.Probe.Key == "" {
		c.Probe.Key = "/lwbench-probe/" + experiment
	}
	if c.Probe.SeriesInterval == 0 {
		c.Probe.SeriesInterval = 250 * time.Millisecond
	}
	if c.SizeInterval <= 0 {
		c.SizeInterval = 500 * time.Millisecond
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Shard.Count == 0 {
		c.Shard = shard.Whole
	}
	if c.divided() && c.Probe.Key == "/lwbench-probe/"+experiment {
		// Each worker probes a key of its own: its probe is its own
		// figure, next to shard 0's in the merged result.
		c.Probe.Key += fmt.Sprintf("/shard-%d", c.Shard.Index)
	}
	c.experiment = experiment
	return c
}

// validate reports the invalid common fields: prefix, probeRate and a
// missing target factory (newTarget).
func (c Common) validate() field.ErrorList {
	var errs field.ErrorList
	if c.NewTarget == nil {
		errs = append(errs, field.Required(field.NewPath("newTarget"), "an experiment needs a target factory"))
	}
	if !strings.HasPrefix(c.Prefix, "/") || strings.TrimRight(c.Prefix, "/") == "" {
		errs = append(errs, field.Invalid(field.NewPath("prefix"), c.Prefix, "must start with '/' and name a path"))
	}
	if c.RunID != "" && !validRunID(c.RunID) {
		errs = append(errs, field.Invalid(field.NewPath("runID"), c.RunID, "must be 1 to 40 characters of a-z, 0-9 and '-', starting and ending with a letter or digit"))
	}
	errs = append(errs, fieldcheck.OptionalRate(c.Probe.RatePerSecond, field.NewPath("probeRate"))...)
	if c.Probe.RatePerSecond < 0 {
		errs = append(errs, field.Invalid(field.NewPath("probeRate"), c.Probe.RatePerSecond, "must be greater than or equal to 0"))
	}
	if err := c.Shard.Validate(); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("shard"), c.Shard.String(), err.Error()))
	} else if c.divided() {
		switch {
		case !slices.Contains(Divisible, c.experiment):
			errs = append(errs, field.Forbidden(field.NewPath("shard"), c.experiment+" cannot be divided among workers (only "+strings.Join(Divisible, ", ")+")"))
		case c.Barrier == nil:
			errs = append(errs, field.Required(field.NewPath("barrier"), "a divided experiment needs a barrier where its workers meet"))
		case c.Stack != nil && c.RunID == "":
			errs = append(errs, field.Required(field.NewPath("runID"), "an experiment divided among workers through kube-apiserver needs a run ID every worker shares: it names the loads' namespaces"))
		}
	}
	return errs
}

// validRunID reports whether id can name namespaces as Common.RunID
// says.
func validRunID(id string) bool {
	if len(id) > 40 || id[0] == '-' || id[len(id)-1] == '-' {
		return false
	}
	for _, r := range id {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// newResult starts a Result.
func newResult(name string, c Common, epoch time.Time) *Result {
	return &Result{Kind: report.KindExperiment, SchemaVersion: SchemaVersion, Experiment: name, StartedAt: epoch.UTC(), Quick: c.Quick, Label: c.Label,
		Environment: detectEnvironment(), Cases: []CaseSummary{}, Timelines: []Timeline{}}
}

// finish stamps the duration.
func (r *Result) finish(epoch time.Time) { r.DurationMs = report.Ms(time.Since(epoch)) }

// detectEnvironment reads the machine's description.
func detectEnvironment() Environment {
	env := Environment{CPUModel: machine.CPUModel(), Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Kernel: machine.Kernel()}
	env.MemoryBytes, _ = machine.MemTotalBytes()
	return env
}

// session is one member under observation: the probe runs against it
// and its db size is sampled from open to close, and marks collect the
// compactions and defragmentations done to it. Its watchload.Session
// holds the maintenance connection the probe, the sampler and the
// experiment's reads, compactions and defragmentations use; each load on
// the member is a Child of it.
type session struct {
	name    string
	t       watchload.Target
	release func()
	ws      *watchload.Session
	admin   *clientv3.Client // ws's maintenance connection
	epoch   time.Time
	logf    func(string, ...any)
	version string

	shard   shard.Shard       // this worker's part (shard.Whole: undivided)
	barrier watchload.Barrier // where the workers meet; nil undivided
	runID   string            // Common.RunID

	stacks                 StackFactory // nil: the etcd-direct model
	watchList              *bool        // WatchListClient of client-go's informers
	namespaceDeleteTimeout time.Duration

	probe     *compaction.Probe
	stopProbe context.CancelFunc
	probeDone chan struct{}

	apiProbe       *compaction.Probe // through kube-apiserver; nil: none
	stopAPIProbe   context.CancelFunc
	apiProbeDone   chan struct{}
	apiProbeResult *compaction.ProbeResult // once endAPIProbe ran
	probeOptions   compaction.ProbeOptions

	stopSizes context.CancelFunc
	sizesDone chan struct{}

	mu    sync.Mutex
	marks []Mark
	sizes []SizeSample
	api   *report.APIServerTarget // the first stack started, nil: none
	// cleanups are the loads' namespace deletions on a cluster lwbench
	// does not own, in order.
	cleanups []report.Cleanup
}

// openSession gets a target, opens its maintenance connection, and
// starts the probe and the size sampler. The caller must close it.
func openSession(ctx context.Context, c Common, name string, epoch time.Time) (*session, error) {
	t, release, err := c.NewTarget(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(t.Endpoints) == 0 || t.Dial == nil {
		release()
		return nil, errors.New("target needs endpoints and a dialer")
	}
	s := &session{name: name, t: t, release: release, ws: watchload.NewSession(t, epoch, c.Logf), epoch: epoch, logf: c.Logf,
		stacks: c.Stack, watchList: c.WatchList, namespaceDeleteTimeout: c.NamespaceDeleteTimeout, shard: c.Shard, barrier: c.Barrier, runID: c.RunID}
	if s.admin, err = s.ws.DialAdmin(ctx); err == nil {
		s.version, err = s.ws.EtcdVersion(ctx)
	}
	if err != nil {
		s.ws.Close()
		release()
		return nil, err
	}
	po := c.Probe
	po.Epoch = epoch
	s.probeOptions = po
	s.probe = compaction.NewProbe(s.admin, po)
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopProbe, s.probeDone = stop, make(chan struct{})
	go func() {
		defer close(s.probeDone)
		s.probe.Run(pctx)
	}()
	sctx, stopSizes := context.WithCancel(context.WithoutCancel(ctx))
	s.stopSizes, s.sizesDone = stopSizes, make(chan struct{})
	go func() {
		defer close(s.sizesDone)
		s.sampleSizes(sctx, c.SizeInterval)
	}()
	return s, nil
}

// divided reports whether the session is one worker's of a divided
// experiment.
func (s *session) divided() bool { return s.shard.Count > 1 }

// lead reports whether the session's worker leads: shard 0, or the only
// one. It alone seeds, writes, compacts and releases.
func (s *session) lead() bool { return s.shard.Index == 0 }

// meet waits at the barrier point until every worker of a divided
// experiment has arrived (BarrierPoint names it); it returns at once
// undivided. Its error names the point.
func (s *session) meet(ctx context.Context, parts ...string) error {
	if !s.divided() {
		return nil
	}
	point := BarrierPoint(parts...)
	if _, err := s.barrier.Wait(ctx, point); err != nil {
		return fmt.Errorf("meet the other workers at %s: %w", point, err)
	}
	return nil
}

// target describes the member for the result.
func (s *session) target() report.Target {
	return report.Target{Embedded: s.t.Embedded, Endpoints: s.t.Endpoints, EtcdVersion: s.version}
}

func (s *session) since() time.Duration { return time.Since(s.epoch) }

func (s *session) offset(t time.Time) float64 { return report.Ms(t.Sub(s.epoch)) }

// apiServer notes the kube-apiservers of a stack the session started, the
// first for the result.
func (s *session) apiServer(a report.APIServerTarget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.api == nil {
		s.api = &a
	}
}

// cleanedUp records a load's namespace deletion.
func (s *session) cleanedUp(c report.Cleanup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, c)
}

// apiServerTarget returns the kube-apiservers the session's clients went
// through, nil for the etcd-direct model.
func (s *session) apiServerTarget() *report.APIServerTarget {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api
}

// mark records an event from start to end.
func (s *session) mark(kind, label string, start, end time.Time, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks = append(s.marks, Mark{Kind: kind, AtMs: s.offset(start), EndMs: s.offset(end), Label: label, Revision: rev})
}

// size returns the first member's size.
func (s *session) size(ctx context.Context) (compaction.Size, error) {
	return compaction.MemberSize(ctx, s.admin, s.t.Endpoints[0])
}

func (s *session) sampleSizes(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, every)
		size, err := s.size(sctx)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.sizes = append(s.sizes, SizeSample{AtMs: report.Ms(s.since()), Bytes: size.Bytes, InUseBytes: size.InUseBytes})
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick runs one compactor tick and marks it if it compacted.
func (s *session) tick(ctx context.Context, t compaction.Ticker) (compaction.TickResult, error) {
	start := time.Now()
	res, err := t.Tick(ctx)
	if res.Compacted != 0 {
		s.mark(MarkCompaction, fmt.Sprintf("compact %d", res.Compacted), start, time.Now(), res.Compacted)
	}
	return res, err
}

// revision returns the store's current revision.
func (s *session) revision(ctx context.Context) (int64, error) {
	resp, err := s.admin.Get(ctx, "/lwbench-experiment-revision", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read the current revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// startAPIProbe starts a twin of the session's probe through st's
// kube-apiservers (kubeload.APIProbe, the configmap lwbench-probe in
// namespace lwbench-probe) at the same rate and epoch, until endAPIProbe
// or close; its windows are apiWindow's.
func (s *session) startAPIProbe(ctx context.Context, st kubeload.Stack) error {
	kv, err := kubeload.NewAPIProbe(ctx, st.RESTConfig, "lwbench-probe", "lwbench-probe")
	if err != nil {
		return err
	}
	s.apiProbe = compaction.NewProbe(kv, s.probeOptions)
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopAPIProbe, s.apiProbeDone = stop, make(chan struct{})
	go func() {
		defer close(s.apiProbeDone)
		s.apiProbe.Run(pctx)
	}()
	return nil
}

// apiWindow is window's twin for the probe through kube-apiserver; nil
// without one.
func (s *session) apiWindow(from, to time.Time) *compaction.ProbeWindow {
	if s.apiProbe == nil {
		return nil
	}
	s.apiProbe.Settle(context.Background(), to.Sub(s.epoch))
	w := s.apiProbe.Window(from.Sub(s.epoch), to.Sub(s.epoch))
	return &w
}

// endAPIProbe stops the probe through kube-apiserver, if one runs, and
// keeps its result for the timeline; call it before the kube-apiservers
// stop. It may be called more than once.
func (s *session) endAPIProbe() {
	if s.apiProbe == nil || s.apiProbeResult != nil {
		return
	}
	s.stopAPIProbe()
	<-s.apiProbeDone
	r := s.apiProbe.Result()
	s.apiProbeResult = &r
}

// close stops the probes and the sampler, releases the target and returns
// the timeline.
func (s *session) close() Timeline {
	s.endAPIProbe()
	s.stopProbe()
	<-s.probeDone
	s.stopSizes()
	<-s.sizesDone
	s.ws.Close()
	s.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	marks := append([]Mark(nil), s.marks...)
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].AtMs < marks[j].AtMs })
	if marks == nil {
		marks = []Mark{}
	}
	sizes := append([]SizeSample(nil), s.sizes...)
	if sizes == nil {
		sizes = []SizeSample{}
	}
	return Timeline{Name: s.name, Probe: s.probe.Result(), APIProbe: s.apiProbeResult, Marks: marks, DBSize: sizes}
}

// window summarises the probe's operations due between two moments,
// once those held by a stall have ended.
func (s *session) window(from, to time.Time) compaction.ProbeWindow {
	s.probe.Settle(context.Background(), to.Sub(s.epoch))
	return s.probe.Window(from.Sub(s.epoch), to.Sub(s.epoch))
}

// percentile returns the nearest-rank q-quantile of xs (sorted here), 0
// for none.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return quantile.NearestRank(xs, q)
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

// onOneMember runs an experiment whose cases share one member: it opens
// the session (the timeline "all", whose target the result reports),
// runs body on it, closes it, and finishes res, whose epoch is epoch. It
// returns body's error, with no result, if body fails.
func onOneMember(ctx context.Context, c Common, res *Result, epoch time.Time, body func(s *session) error) (*Result, error) {
	s, err := openSession(ctx, c, "all", epoch)
	if err != nil {
		return nil, err
	}
	res.Target = s.target()
	err = body(s)
	res.APIServer = s.apiServerTarget()
	res.Timelines = append(res.Timelines, s.close())
	res.NamespaceCleanup = append(res.NamespaceCleanup, s.cleanups...)
	if err != nil {
		return nil, err
	}
	res.finish(epoch)
	return res, nil
}
