package experiment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/internal/parallel"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// Catchup rates of etcd's watchable store (server/storage/mvcc/
// watchable_store.go): an unsynced watcher gets at most
// CatchupMaxRevisionsPerResponse revisions per response, and the unsynced
// watchers are served every CatchupSyncPeriod, so a single lagging
// watcher catches up at most about 10,000 revisions per second.
const (
	CatchupMaxRevisionsPerResponse = 1000                   // watchBatchMaxRevs
	CatchupSyncPeriod              = 100 * time.Millisecond // watchResyncPeriod
)

// CatchupOptions shape the catch-up experiment. Zero fields take the
// defaults of Common.Quick (quick / full).
type CatchupOptions struct {
	Common
	// Behind are the revisions the watcher falls behind, ascending (1000,
	// 5000 / 1000, 10000, 50000).
	Behind []int64
	// Objects is the pods the updates go to and a relist reads (200 /
	// 1000).
	Objects int
	// PageSize is the relist's page size (500); the relist is also timed
	// unpaginated.
	PageSize int64
	// Concurrency is the parallel updates that put the watcher behind
	// (32).
	Concurrency int
	// Watchers are the watchers that resume together from the same
	// revision, each on a connection of its own (1); divided
	// (Common.Shard), each worker resumes its block of them
	// (WatcherBlock), so there must be at least as many as workers.
	Watchers int
	// Namespaces and Seed as for the relist storm (10, 1).
	Namespaces int
	Seed       uint64 // seed of the objects (1)
}

// Defaults fills zero fields.
func (o CatchupOptions) Defaults() CatchupOptions {
	o.Common = o.Common.defaults(NameCatchup)
	if len(o.Behind) == 0 {
		o.Behind = pick(o.Quick, []int64{1000, 5000}, []int64{1000, 10000, 50000})
	}
	if o.Objects == 0 {
		o.Objects = pick(o.Quick, 200, 1000)
	}
	if o.PageSize == 0 {
		o.PageSize = watchload.DefaultPageSize
	}
	if o.Concurrency == 0 {
		o.Concurrency = 32
	}
	if o.Watchers == 0 {
		o.Watchers = 1
	}
	if o.Namespaces == 0 {
		o.Namespaces = 10
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// Validate reports every invalid field of o, with its field path
// (prefix, probeRate and the experiment's own, e.g. behind[1]), as an error
// wrapping a field.ErrorList. Call it after Defaults.
func (o CatchupOptions) Validate() error {
	errs := o.Common.validate()
	errs = append(errs, fieldcheck.Ascending(o.Behind, true, field.NewPath("behind"))...)
	errs = append(errs, fieldcheck.Positive(o.Objects, field.NewPath("objects"))...)
	errs = append(errs, fieldcheck.Positive(o.PageSize, field.NewPath("pageSize"))...)
	errs = append(errs, fieldcheck.Positive(o.Concurrency, field.NewPath("concurrency"))...)
	errs = append(errs, fieldcheck.Positive(o.Watchers, field.NewPath("watchers"))...)
	if o.Shard.Count > 1 && o.Watchers < o.Shard.Count {
		errs = append(errs, field.Invalid(field.NewPath("watchers"), o.Watchers, fmt.Sprintf("fewer than the %d workers it is divided among: a worker would resume no watcher", o.Shard.Count)))
	}
	return errs.ToAggregate()
}

// CatchupResult is the catch-up experiment's own result.
type CatchupResult struct {
	Scenario CatchupScenario `json:"scenario"` // the options
	Cases    []CatchupCase   `json:"cases"`    // one per distance, in order
}

// CatchupScenario echoes the options.
type CatchupScenario struct {
	Behind   []int64 `json:"behind"`   // revisions behind
	Objects  int     `json:"objects"`  // pods updated and relisted
	PageSize int64   `json:"pageSize"` // the relist's page size
	// Watchers resume together per distance (1 in results written
	// before they could be more).
	Watchers int `json:"watchers,omitempty"`
	// MaxRevisionsPerSecond is etcd's bound for one unsynced watcher:
	// 1,000 revisions per response, one round every 100 ms.
	MaxRevisionsPerSecond float64 `json:"maxRevisionsPerSecond"`
	Seed                  uint64  `json:"seed"` // seed of the objects
}

// CatchupCase is one distance.
type CatchupCase struct {
	// Behind is the updates written while the watcher was away.
	Behind int64 `json:"behind"`
	// Revisions are the experiment's own writes among the store
	// revisions FromRevision to ToRevision: the updates and the probe's
	// writes of its key in between (catchupRevisions), the revisions a
	// watcher of the whole store covers that the experiment made. Other
	// clients' writes in between are not counted: a cluster's
	// (kube-apiserver's leases), and, divided among workers, the other
	// workers' probes and the barrier's, so that a divided run reports
	// what one process would. Before SchemaVersion 3 it was every store
	// revision in between.
	Revisions int64 `json:"revisions"`
	// FromRevision is where the watch resumed; ToRevision the last update.
	FromRevision int64 `json:"fromRevision"`
	ToRevision   int64 `json:"toRevision"` // the last update's revision
	// Watchers is how many resumed (in a worker's result, its block).
	Watchers int `json:"watchers,omitempty"`
	// CatchupMs is from the Watch call to the last update's event, of
	// the slowest watcher; WatcherCatchupMs each watcher's, in the order
	// of their numbers. Events and Responses what arrived, EventBytes
	// their keys, values and prevKVs, over every watcher;
	// RevisionsPerSecond the store revisions covered per second by the
	// slowest.
	// Through kube-apiserver the watch is client-go's: Responses counts
	// its bookmarks, EventBytes is its response bytes.
	CatchupMs          float64   `json:"catchupMs"`
	WatcherCatchupMs   []float64 `json:"watcherCatchupMs,omitempty"` // each watcher's catch-up, ms
	Events             int64     `json:"events"`                     // events received
	Responses          int64     `json:"responses"`                  // watch responses received
	EventBytes         int64     `json:"eventBytes"`                 // keys, values and prevKVs of the events
	RevisionsPerSecond float64   `json:"revisionsPerSecond"`         // Revisions over the catch-up time
	// Expired is true when kube-apiserver answered the watch 410: the
	// revision is older than its watch cache holds, and the watcher must
	// relist instead (through kube-apiserver with its watch cache on).
	Expired bool `json:"expired,omitempty"`
	// Missing and Unexpected compare each watcher's events with the
	// updates' revisions, summed over the watchers: both must be 0 (no
	// event lost, none invented).
	Missing    int64 `json:"missing"`
	Unexpected int64 `json:"unexpected"` // events not caused by an update, or repeated
	// RelistMs and RelistBytes: a paginated LIST of the objects at the
	// latest revision (what a watcher whose revision was compacted must
	// do instead); RelistUnpaginatedMs the same in one request. Divided,
	// shard 0 alone lists (0 in the other workers' results). Through
	// kube-apiserver they are LISTs of the API (resourceVersion "",
	// limit and continue), their bytes the response bytes.
	RelistMs            float64 `json:"relistMs"`
	RelistPages         int     `json:"relistPages"`         // range requests of the relist
	RelistObjects       int64   `json:"relistObjects"`       // objects it read
	RelistBytes         int64   `json:"relistBytes"`         // key and value bytes it read
	RelistUnpaginatedMs float64 `json:"relistUnpaginatedMs"` // the same list in one request, ms
	// Probe covers the catch-up.
	Probe compaction.ProbeWindow `json:"probe"`
}

// Catchup seeds the pods, then per distance notes the revision, updates
// the pods Behind times in all (nothing is compacted), and resumes a watch
// (with prevKV, as kube-apiserver watches) from the noted revision + 1
// until the last update's event: the catch-up of a watcher that was away
// but whose revision is still there. It then times the alternative, a
// relist of the same pods. Every update's event must arrive exactly once,
// at each of the Watchers. Divided among workers (Common.Shard, Barrier),
// shard 0 alone writes the updates and relists, and every worker resumes
// its block of the watchers from the same revision (divide.go); Merge
// combines their results.
func Catchup(ctx context.Context, o CatchupOptions) (*Result, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	epoch := time.Now()
	res := newResult(NameCatchup, o.Common, epoch)
	cr := &CatchupResult{Scenario: CatchupScenario{Behind: o.Behind, Objects: o.Objects, PageSize: o.PageSize, Watchers: o.Watchers,
		MaxRevisionsPerSecond: CatchupMaxRevisionsPerResponse / CatchupSyncPeriod.Seconds(), Seed: o.Seed}}
	res.Catchup = cr
	return onOneMember(ctx, o.Common, res, epoch, func(s *session) error {
		l, err := newLoad(ctx, s, o.Prefix+"/catchup", o.Objects, o.Namespaces, o.Seed)
		if err != nil {
			return err
		}
		defer l.close()
		for _, b := range o.Behind {
			c, err := catchupCase(ctx, s, l, o, b)
			if err != nil {
				return err
			}
			cr.Cases = append(cr.Cases, c)
			res.Cases = append(res.Cases, c.summary())
			o.Logf("catchup: %d behind: caught up in %.0f ms (%.0f revisions/s, %d responses), relist %.0f ms (%d bytes)",
				c.Behind, c.CatchupMs, c.RevisionsPerSecond, c.Responses, c.RelistMs, c.RelistBytes)
		}
		return l.end(ctx)
	})
}

// catchupCase updates the pods behind times while no watcher watches,
// then watches them from the revision before (the clients' watch: etcd's
// directly for the model, with prevKV; client-go's WATCH through
// kube-apiserver, which reads etcd's history or its watch cache, which may
// no longer hold it: 410), then lists them, paginated and not, the
// alternative to catching up.
func catchupCase(ctx context.Context, s *session, l *load, o CatchupOptions, behind int64) (CatchupCase, error) {
	c := CatchupCase{Behind: behind}
	point := fmt.Sprintf("behind-%d", behind)
	var plan CatchupPlan
	if s.lead() {
		from, err := s.revision(ctx)
		if err != nil {
			return c, err
		}
		start := time.Now()
		revs, err := l.clients.updatePods(ctx, int(behind), o.Concurrency)
		if err != nil {
			return c, err
		}
		s.mark(MarkPhase, fmt.Sprintf("%d updates while the watcher is away", behind), start, time.Now(), 0)
		plan = NewCatchupPlan(from, revs)
		if plan.OwnWrites, err = catchupRevisions(ctx, s, plan); err != nil {
			return c, err
		}
		if s.divided() {
			if err := publishCatchupPlan(ctx, l, behind, plan); err != nil {
				return c, err
			}
		}
	}
	if err := s.meet(ctx, point, "written"); err != nil {
		return c, err
	}
	if !s.lead() {
		var err error
		if plan, err = readCatchupPlan(ctx, l, behind); err != nil {
			return c, err
		}
	}
	revs := plan.Revisions()
	from := plan.From
	c.FromRevision = from + 1
	c.ToRevision = revs[len(revs)-1]
	c.Revisions = plan.OwnWrites

	// Catch up: this worker's block of the watchers, together.
	first, last := WatcherBlock(o.Shard, o.Watchers)
	c.Watchers = last - first
	watches := make([]catchupWatch, c.Watchers)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	wstart := time.Now()
	err := parallel.Each(wctx, c.Watchers, c.Watchers, func(ctx context.Context, _, i int) error {
		w, err := l.clients.watchFrom(ctx, from, c.ToRevision)
		watches[i] = w
		return err
	})
	cancel()
	if err != nil {
		return c, err
	}
	var slowest time.Duration
	for _, w := range watches {
		slowest = max(slowest, w.duration)
		c.WatcherCatchupMs = append(c.WatcherCatchupMs, report.Ms(w.duration))
		c.Expired = c.Expired || w.expired
		c.Events += int64(len(w.revisions))
		c.Responses += w.responses
		c.EventBytes += w.bytes
		if !w.expired {
			missing, unexpected := compareRevisions(revs, w.revisions)
			c.Missing += missing
			c.Unexpected += unexpected
		}
	}
	wend := wstart.Add(slowest)
	c.CatchupMs = report.Ms(slowest)
	if !c.Expired {
		c.RevisionsPerSecond = float64(c.Revisions) / slowest.Seconds()
		s.mark(MarkPhase, fmt.Sprintf("catch up %d revisions", c.Revisions), wstart, wend, 0)
	} else {
		s.mark(MarkPhase, fmt.Sprintf("watch from %d: 410", from), wstart, wend, 0)
	}
	c.Probe = s.window(wstart, wend)
	if err := s.meet(ctx, point, "caught-up"); err != nil {
		return c, err
	}
	if !s.lead() {
		return c, nil
	}
	if s.divided() {
		if err := deleteCatchupPlan(ctx, l, behind); err != nil {
			return c, err
		}
	}

	// The alternative: relist.
	rstart := time.Now()
	lr, err := l.clients.list(ctx, o.PageSize)
	if err != nil {
		return c, err
	}
	c.RelistMs, c.RelistPages, c.RelistObjects, c.RelistBytes = report.Ms(lr.duration), lr.pages, lr.objects, lr.bytes
	s.mark(MarkPhase, "relist", rstart, time.Now(), 0)
	ur, err := l.clients.list(ctx, 0)
	if err != nil {
		return c, err
	}
	c.RelistUnpaginatedMs = report.Ms(ur.duration)
	return c, nil
}

// catchupRevisions returns the experiment's own writes in the store
// revisions plan.From+1 to the plan's last update (CatchupCase.Revisions):
// the updates, and the writes of the session's probe in between, counted
// exactly as the difference of its key's version (etcd's count of puts
// to a key since its creation; the probe never deletes its key) at the
// two revisions, read from etcd's history, which the catch-up does not
// compact. On a cluster whose own compactor has already compacted
// plan.From, it returns the store revisions in between, every write
// counted, and logs so.
//
// For example, undivided: from 1000, 300 updates at 1001-1306 among
// which the probe wrote 6 times: 306, the store's span. Divided among two
// workers, shard 1's probe also wrote 6 times and the barrier once in
// the span, which is then 1313: still 306, as one process reports.
func catchupRevisions(ctx context.Context, s *session, plan CatchupPlan) (int64, error) {
	revs := plan.Revisions()
	to := revs[len(revs)-1]
	version := func(rev int64) (int64, error) {
		resp, err := s.admin.Get(ctx, s.probeOptions.Key, clientv3.WithRev(rev))
		if err != nil {
			return 0, err
		}
		if len(resp.Kvs) == 0 {
			return 0, nil
		}
		return resp.Kvs[0].Version, nil
	}
	before, err := version(plan.From)
	var after int64
	if err == nil {
		after, err = version(to)
	}
	if errors.Is(err, rpctypes.ErrCompacted) {
		s.logf("catchup: revision %d is compacted (the cluster's compactor): revisions counts every write to %d", plan.From, to)
		return to - plan.From, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the probe's writes between revisions %d and %d: %w", plan.From, to, err)
	}
	return int64(len(revs)) + after - before, nil
}

// compareRevisions counts the wanted revisions missing from got and the
// ones in got that are not wanted (or repeated); want is sorted.
func compareRevisions(want, got []int64) (missing, unexpected int64) {
	seen := make(map[int64]int, len(got))
	for _, r := range got {
		seen[r]++
	}
	for _, r := range want {
		if seen[r] == 0 {
			missing++
		} else {
			seen[r]--
		}
	}
	for _, n := range seen {
		unexpected += int64(n)
	}
	return missing, unexpected
}

func (c CatchupCase) summary() CaseSummary {
	return CaseSummary{Experiment: NameCatchup, Case: fmt.Sprintf("behind=%d", c.Behind), ResyncP50Ms: c.CatchupMs,
		ResyncMaxMs: c.CatchupMs, RelistObjects: c.RelistObjects, RelistBytes: c.RelistBytes, Probe: c.Probe,
		LostEvents: c.Missing, OtherViolations: c.Unexpected}
}
