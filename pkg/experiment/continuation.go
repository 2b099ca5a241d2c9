package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
)

// The fallbacks of a paginated LIST whose continuation page was
// compacted.
const (
	// FallbackRestart lists again from the first page, at the latest
	// revision, up to ContinuationOptions.MaxAttempts times.
	FallbackRestart = "restart"
	// FallbackFullList lists once more without a limit at the requested
	// resourceVersion (here the latest), as client-go's pager does
	// (tools/pager/pager.go, FullListIfExpired, on by default).
	FallbackFullList = "full-list"
)

// ContinuationOptions shape the continuation-expiry experiment. Zero
// fields take the defaults of Common.Quick (quick / full).
type ContinuationOptions struct {
	Common
	// Objects is the number of pods listed (1000 / 10000).
	Objects int
	// PageSizes are the LIST limits (100, 250 / 500, 1000).
	PageSizes []int64
	// Lists is the number of lists per case (4 / 20).
	Lists int
	// PageDelay is the client's work between two pages (10 ms / 5 ms), as
	// a consumer decoding and handling each page.
	PageDelay time.Duration
	// WriteRate is the pod updates per second meanwhile (200).
	WriteRate float64
	// RetainLists are the compactor settings compared, as the history
	// each compaction keeps in lists' worth of revisions: with R the
	// median revisions the store moved during one list of the control,
	// the every-N-revisions compactor (compaction.RevisionCompactor,
	// ticking every 10 ms) keeps factor*R revisions and compacts every
	// factor*R/2 (2, 1, 0.5). A list that outlasts the history kept has a
	// continuation page compacted under it.
	RetainLists []float64
	// CompactEvery and Retain, if CompactEvery is set, replace
	// RetainLists with one explicit setting, in revisions.
	CompactEvery, Retain int64
	// MaxAttempts bounds the restarts of one list (10).
	MaxAttempts int
	// Namespaces and Seed as for the relist storm (10, 1).
	Namespaces int
	Seed       uint64 // seed of the objects and writes (1)
}

// Defaults fills zero fields.
func (o ContinuationOptions) Defaults() ContinuationOptions {
	o.Common = o.Common.defaults(NameContinuation)
	if o.Objects == 0 {
		o.Objects = pick(o.Quick, 1000, 10000)
	}
	if len(o.PageSizes) == 0 {
		o.PageSizes = pick(o.Quick, []int64{100, 250}, []int64{500, 1000})
	}
	if o.Lists == 0 {
		o.Lists = pick(o.Quick, 4, 20)
	}
	if o.PageDelay == 0 {
		o.PageDelay = pick(o.Quick, 10*time.Millisecond, 5*time.Millisecond)
	}
	if o.WriteRate == 0 {
		o.WriteRate = 200
	}
	if len(o.RetainLists) == 0 {
		o.RetainLists = []float64{2, 1, 0.5}
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 10
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
// (prefix, probeRate and the experiment's own, e.g. retainLists[0]), as an error
// wrapping a field.ErrorList. Call it after Defaults.
func (o ContinuationOptions) Validate() error {
	errs := o.Common.validate()
	for i, p := range o.PageSizes {
		if p < 1 {
			errs = append(errs, field.Invalid(field.NewPath("pageSizes").Index(i), p, "must be greater than 0: a continuation needs pages"))
		}
	}
	errs = append(errs, fieldcheck.Positive(o.Objects, field.NewPath("objects"))...)
	errs = append(errs, fieldcheck.Positive(o.Lists, field.NewPath("lists"))...)
	errs = append(errs, fieldcheck.Rate(o.WriteRate, field.NewPath("writeRate"))...)
	errs = append(errs, fieldcheck.Positive(o.MaxAttempts, field.NewPath("maxAttempts"))...)
	errs = append(errs, fieldcheck.NonNegativeDuration(o.PageDelay, field.NewPath("pageDelay"))...)
	errs = append(errs, fieldcheck.NonNegative(o.CompactEvery, field.NewPath("compactEvery"))...)
	errs = append(errs, fieldcheck.NonNegative(o.Retain, field.NewPath("retain"))...)
	for i, f := range o.RetainLists {
		if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
			errs = append(errs, field.Invalid(field.NewPath("retainLists").Index(i), f, "must be finite and positive (lists' worth of history)"))
		}
	}
	return errs.ToAggregate()
}

// ContinuationResult is the continuation experiment's own result.
type ContinuationResult struct {
	Scenario ContinuationScenario `json:"scenario"` // the options
	// Cases are per page size: the control (no compaction), then each
	// fallback under compaction.
	Cases []ContinuationCase `json:"cases"`
}

// ContinuationScenario echoes the options.
type ContinuationScenario struct {
	Objects            int       `json:"objects"`            // pods listed
	PageSizes          []int64   `json:"pageSizes"`          // LIST limits
	RetainLists        []float64 `json:"retainLists"`        // history kept, in lists' worth of revisions
	Lists              int       `json:"lists"`              // lists per case
	PageDelayMs        float64   `json:"pageDelayMs"`        // client work between pages
	WriteRatePerSecond float64   `json:"writeRatePerSecond"` // pod updates per second
	MaxAttempts        int       `json:"maxAttempts"`        // restarts allowed per list
	Seed               uint64    `json:"seed"`               // seed of objects and writes
}

// ContinuationCase is one page size and fallback.
type ContinuationCase struct {
	PageSize int64 `json:"pageSize"` // LIST limit
	// Fallback is "restart" or "full-list"; Compacting is false for the
	// control, in which no compactor runs.
	Fallback   string `json:"fallback"`
	Compacting bool   `json:"compacting"` // false for the control
	// RetainLists is the history kept in lists' worth of revisions (0 in
	// the control and with an explicit setting); CompactEvery and Retain
	// the compactor's, in revisions (0 in the control).
	RetainLists  float64 `json:"retainLists"`
	CompactEvery int64   `json:"compactEvery"` // compacts every this many revisions (0: control)
	Retain       int64   `json:"retain"`       // revisions each compaction keeps
	Compactions  int     `json:"compactions"`  // compactions during the case
	Lists        int     `json:"lists"`        // lists run
	// Expired counts lists that met ErrCompacted on a continuation page
	// at least once; Restarts every such page (each wasted the pages
	// before it); Fallbacks the unpaginated lists made after one; Failed
	// the lists that gave up after MaxAttempts.
	Expired   int `json:"expired"`
	Restarts  int `json:"restarts"`  // continuation pages answered ErrCompacted
	Fallbacks int `json:"fallbacks"` // unpaginated lists made after one
	Failed    int `json:"failed"`    // lists that gave up after MaxAttempts
	// Requests and Bytes are per list, medians: range requests made and
	// key and value bytes read, wasted pages included. WastedPages sums
	// the pages read by attempts that were then abandoned.
	RequestsP50 float64 `json:"requestsP50"`
	BytesP50    float64 `json:"bytesP50"`    // key and value bytes read per list, median
	WastedPages int64   `json:"wastedPages"` // pages read by abandoned attempts
	// RevisionsP50 is the median number of revisions the store moved
	// during one list, retries included.
	RevisionsP50 float64 `json:"revisionsP50"`
	// DurationP50Ms, DurationMinMs and DurationMaxMs are the lists' total
	// time.
	DurationP50Ms float64 `json:"durationP50Ms"`
	DurationMinMs float64 `json:"durationMinMs"` // fastest list, ms
	DurationMaxMs float64 `json:"durationMaxMs"` // slowest list, ms
	// Probe covers the case.
	Probe  compaction.ProbeWindow `json:"probe"`
	Writes report.WriteStats      `json:"writes"` // pod updates during the case
}

// Continuation runs the continuation-expiry experiment: it seeds the pods,
// then per page size runs Lists paginated lists (each page pinned to the
// first page's revision and continued from the last key + "\x00", as
// kube-apiserver's etcd3 store reads a paginated LIST) while pods are
// updated: first with no compaction (the control, which also measures
// how many revisions pass during a list), then with an every-N-revisions
// compactor keeping each of RetainLists lists' worth of history, for
// each fallback. A list whose continuation page is compacted restarts or
// falls back to one unpaginated list.
func Continuation(ctx context.Context, o ContinuationOptions) (*Result, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	epoch := time.Now()
	res := newResult(NameContinuation, o.Common, epoch)
	cr := &ContinuationResult{Scenario: ContinuationScenario{Objects: o.Objects, PageSizes: o.PageSizes, RetainLists: o.RetainLists, Lists: o.Lists,
		PageDelayMs: report.Ms(o.PageDelay), WriteRatePerSecond: o.WriteRate, MaxAttempts: o.MaxAttempts, Seed: o.Seed}}
	res.Continuation = cr
	return onOneMember(ctx, o.Common, res, epoch, func(s *session) error {
		o.Logf("continuation: seeding %d pods", o.Objects)
		l, err := newLoad(ctx, s, o.Prefix+"/continuation", o.Objects, o.Namespaces, o.Seed)
		if err != nil {
			return err
		}
		defer l.close()
		for _, ps := range o.PageSizes {
			control, err := continuationCase(ctx, s, l, o, ps, FallbackRestart, 0, 0)
			if err != nil {
				return err
			}
			type setting struct {
				factor        float64
				every, retain int64
			}
			var settings []setting
			if o.CompactEvery > 0 {
				settings = append(settings, setting{0, o.CompactEvery, max(o.Retain, o.CompactEvery)})
			} else {
				for _, f := range o.RetainLists {
					retain := max(int64(f*control.RevisionsP50), 2)
					settings = append(settings, setting{f, max(retain/2, 1), retain})
				}
			}
			cases := []ContinuationCase{control}
			for _, st := range settings {
				for _, fb := range []string{FallbackRestart, FallbackFullList} {
					c, err := continuationCase(ctx, s, l, o, ps, fb, st.every, st.retain)
					if err != nil {
						return err
					}
					c.RetainLists = st.factor
					cases = append(cases, c)
				}
			}
			for _, c := range cases {
				cr.Cases = append(cr.Cases, c)
				res.Cases = append(res.Cases, c.summary())
				o.Logf("continuation: page size %d, %s: %d of %d lists expired, %d restarts, %d fallbacks, %d failed, p50 %.0f ms",
					c.PageSize, c.name(), c.Expired, c.Lists, c.Restarts, c.Fallbacks, c.Failed, c.DurationP50Ms)
			}
		}
		return nil
	})
}

func (c ContinuationCase) name() string {
	switch {
	case !c.Compacting:
		return "control"
	case c.RetainLists > 0:
		return fmt.Sprintf("%s, history %g lists", c.Fallback, c.RetainLists)
	}
	return c.Fallback
}

func continuationCase(ctx context.Context, s *session, l *load, o ContinuationOptions, pageSize int64, fallback string, every, retain int64) (ContinuationCase, error) {
	cc := ContinuationCase{PageSize: pageSize, Fallback: fallback, Compacting: every > 0, CompactEvery: every, Retain: retain, Lists: o.Lists}
	start := time.Now()
	run, err := l.startCase(ctx, watcherOptions{conns: 1, syncTimeout: time.Minute}, int64(o.WriteRate*600)+1)
	if err != nil {
		return cc, err
	}
	defer run.Close()
	if err := startWrites(ctx, run, o.WriteRate, int64(o.WriteRate*600)); err != nil {
		return cc, err
	}
	// The compactor ticks every 10 ms for the whole case.
	cctx, stopCompactor := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	var compactErr error
	if every > 0 {
		rc := compaction.NewRevisionCompactor(s.admin, every)
		rc.Retain = retain
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-cctx.Done():
					return
				case <-t.C:
				}
				tick, err := s.tick(cctx, rc)
				if tick.Compacted != 0 {
					cc.Compactions++
				}
				if err != nil && cctx.Err() == nil && !errors.Is(err, rpctypes.ErrCompacted) {
					compactErr = err
					return
				}
			}
		}()
	}
	var durations, requests, bytes, revisions []float64
	for range o.Lists {
		before, err := s.revision(ctx)
		if err != nil {
			stopCompactor()
			cwg.Wait()
			return cc, err
		}
		lo, err := listWithFallback(ctx, l.clients.pages(), pageSize, o.PageDelay, fallback, o.MaxAttempts)
		if err != nil {
			stopCompactor()
			cwg.Wait()
			return cc, err
		}
		after, err := s.revision(ctx)
		if err != nil {
			stopCompactor()
			cwg.Wait()
			return cc, err
		}
		revisions = append(revisions, float64(after-before))
		if lo.restarts > 0 {
			cc.Expired++
		}
		cc.Restarts += lo.restarts
		cc.WastedPages += lo.wastedPages
		if lo.fallback {
			cc.Fallbacks++
		}
		if !lo.ok {
			cc.Failed++
		}
		durations = append(durations, report.Ms(lo.duration))
		requests = append(requests, float64(lo.requests))
		bytes = append(bytes, float64(lo.bytes))
	}
	stopCompactor()
	cwg.Wait()
	if compactErr != nil {
		return cc, compactErr
	}
	cc.Writes = run.StopWrites()
	end := time.Now()
	label := fmt.Sprintf("page size %d: %s", pageSize, cc.name())
	s.mark(MarkPhase, label, start, end, 0)
	cc.Probe = s.window(start, end)
	cc.DurationMaxMs = maxOf(durations)
	cc.DurationMinMs = minOf(durations)
	cc.DurationP50Ms = percentile(durations, 0.5)
	cc.RequestsP50 = percentile(requests, 0.5)
	cc.BytesP50 = percentile(bytes, 0.5)
	cc.RevisionsP50 = percentile(revisions, 0.5)
	return cc, nil
}

// listOutcome is one LIST with its retries.
type listOutcome struct {
	ok          bool
	restarts    int   // continuation pages that met ErrCompacted
	fallback    bool  // an unpaginated list was made
	requests    int   // range requests
	bytes       int64 // key and value bytes read, wasted pages included
	wastedPages int64 // pages of abandoned attempts
	objects     int64 // objects of the successful attempt
	duration    time.Duration
}

// pageReader reads one page of a load's pods, as a paginated LIST does.
type pageReader interface {
	// readPage reads at most limit pods (0: all) after token: "" is the
	// first page, at the latest revision; a page's next token continues
	// the list at its revision ("" after the last page). expired is true
	// when token's revision has been compacted: the list must start
	// again.
	readPage(ctx context.Context, token string, limit int64) (listPage, error)
}

// listPage is one page a pageReader read.
type listPage struct {
	objects, bytes int64
	next           string // the next page's token; "" at the end
	expired        bool
}

// etcdPages reads pages of the keys under prefix from etcd directly, as
// kube-apiserver's etcd3 store does: the first page at the latest
// revision, the others pinned to it, each from the last key + "\x00"
// (k8s.io/apiserver/pkg/storage/etcd3/store.go GetList); a token is
// "<revision>:<key>". Its bytes are keys and values.
type etcdPages struct {
	kv     clientv3.KV
	prefix string
}

func (e etcdPages) readPage(ctx context.Context, token string, limit int64) (listPage, error) {
	var p listPage
	key, rev := e.prefix, int64(0)
	if token != "" {
		r, k, _ := strings.Cut(token, ":")
		rev, _ = strconv.ParseInt(r, 10, 64)
		key = k
	}
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(e.prefix)), clientv3.WithLimit(limit)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := e.kv.Get(ctx, key, opts...)
	if err != nil {
		if rev > 0 && (errors.Is(err, rpctypes.ErrCompacted) || errors.Is(err, rpctypes.ErrGRPCCompacted)) {
			p.expired = true
			return p, nil
		}
		return p, fmt.Errorf("list %s: %w", e.prefix, err)
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	for _, kv := range resp.Kvs {
		p.bytes += int64(len(kv.Key) + len(kv.Value))
		p.objects++
	}
	if resp.More && len(resp.Kvs) > 0 {
		p.next = fmt.Sprintf("%d:%s\x00", rev, resp.Kvs[len(resp.Kvs)-1].Key)
	}
	return p, nil
}

// apiPages reads pages of a load's pods through kube-apiserver
// (kubeload.Load.ListPage): limit and continue tokens as client-go's
// pager sends them; its bytes are the responses'.
type apiPages struct{ l *kubeload.Load }

func (a apiPages) readPage(ctx context.Context, token string, limit int64) (listPage, error) {
	objects, bytes, next, expired, err := a.l.ListPage(ctx, token, limit)
	return listPage{objects: objects, bytes: bytes, next: next, expired: expired}, err
}

// listWithFallback lists every pod of r in pages of limit, the pages
// continuing the first page's revision, sleeping delay after each page.
// When a continuation page has been compacted it restarts (up to
// maxAttempts lists in all) or, with FallbackFullList, lists once without
// a limit at the latest revision. Other errors end it.
func listWithFallback(ctx context.Context, r pageReader, limit int64, delay time.Duration, fallback string, maxAttempts int) (listOutcome, error) {
	var lo listOutcome
	start := time.Now()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		token := ""
		var pages, objects int64
		expired := false
		for {
			p, err := r.readPage(ctx, token, limit)
			lo.requests++
			lo.bytes += p.bytes
			if err != nil {
				return lo, err
			}
			if p.expired {
				expired = true
				break
			}
			pages++
			objects += p.objects
			if p.next == "" {
				break
			}
			token = p.next
			if !clockwait.SleepReal(ctx, delay) {
				return lo, ctx.Err()
			}
		}
		if !expired {
			lo.ok, lo.objects = true, objects
			break
		}
		lo.restarts++
		lo.wastedPages += pages
		if fallback == FallbackFullList {
			p, err := r.readPage(ctx, "", 0)
			lo.requests++
			lo.fallback = true
			lo.bytes += p.bytes
			if err != nil {
				return lo, fmt.Errorf("unpaginated list: %w", err)
			}
			lo.ok, lo.objects = true, p.objects
			break
		}
	}
	lo.duration = time.Since(start)
	return lo, nil
}

func (c ContinuationCase) summary() CaseSummary {
	return CaseSummary{Experiment: NameContinuation, Case: fmt.Sprintf("pageSize=%d %s", c.PageSize, c.name()),
		ResyncP50Ms: c.DurationP50Ms, ResyncMaxMs: c.DurationMaxMs, ListRestarts: int64(c.Restarts), Compactions: c.Compactions,
		WritesPerSecond: c.Writes.ThroughputPerSecond, WriteP99Ms: c.Writes.Latency.P99Ms, Probe: c.Probe}
}
