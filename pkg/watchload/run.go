package watchload

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
)

// Options shape one run. The zero value of a field means its default, set
// by Defaults.
type Options struct {
	// Prefix is the Kubernetes prefix objects are written under
	// (kube-apiserver's --etcd-prefix); pods go to <Prefix>/pods/<ns>/<name>.
	Prefix string
	// Objects pods are created before the load starts.
	Objects int
	// Namespaces the objects are spread across.
	Namespaces int
	// Watchers is the number of reflectors watching <Prefix>/pods/.
	Watchers int
	// WriteRate is the scheduled writes per second during Duration.
	WriteRate float64
	// Duration of the write phase.
	Duration time.Duration
	// Mix of creates, updates and deletes.
	Mix Mix
	// PageSize is the reflectors' LIST limit.
	PageSize int64
	// WriterConcurrency is the number of writer workers.
	WriterConcurrency int
	// CompactionInterval is the compactor's tick (kube-apiserver's
	// --etcd-compaction-interval); 0 means Duration/3, so that a run
	// compacts twice. Negative disables compaction.
	CompactionInterval time.Duration
	// PhysicalCompaction waits for each compaction to finish deleting.
	PhysicalCompaction bool
	// HoldBack is the number of watchers held back across a compaction to
	// force a relist.
	HoldBack int
	// Defragment the member once, right after the compaction that the
	// held-back watchers missed.
	Defragment bool
	// ProgressRequestPeriod is how often the run asks etcd for progress
	// notifications at the end, to confirm each watcher has seen the final
	// revision.
	ProgressRequestPeriod time.Duration
	// SyncTimeout bounds the wait for watchers to reach the final revision.
	SyncTimeout time.Duration
	// WriteTimeout bounds one write.
	WriteTimeout time.Duration
	// Seed makes objects and the op plan reproducible.
	Seed uint64
	// Logf, if set, receives one line per phase of the run.
	Logf func(format string, args ...any)
}

// Defaults returns o with zero fields set to their defaults.
func (o Options) Defaults() Options {
	if o.Prefix == "" {
		o.Prefix = keyspace.DefaultPrefix
	}
	if o.Objects == 0 {
		o.Objects = 1000
	}
	if o.Namespaces == 0 {
		o.Namespaces = 10
	}
	if o.Watchers == 0 {
		o.Watchers = 10
	}
	if o.WriteRate == 0 {
		o.WriteRate = 200
	}
	if o.Duration == 0 {
		o.Duration = 20 * time.Second
	}
	if o.Mix == (Mix{}) {
		o.Mix = DefaultMix
	}
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	if o.WriterConcurrency == 0 {
		o.WriterConcurrency = 16
	}
	if o.CompactionInterval == 0 {
		o.CompactionInterval = o.Duration / 3
	}
	if o.ProgressRequestPeriod == 0 {
		o.ProgressRequestPeriod = 100 * time.Millisecond
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = 30 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Second
	}
	return o
}

// Validate checks options after Defaults.
func (o Options) Validate() error {
	switch {
	case !strings.HasPrefix(o.Prefix, "/"):
		return fmt.Errorf("prefix %q must start with '/'", o.Prefix)
	case o.Objects < 0, o.Namespaces < 1, o.Watchers < 1, o.WriteRate <= 0, o.Duration <= 0, o.PageSize < 1, o.WriterConcurrency < 1:
		return errors.New("objects, namespaces, watchers, write rate, duration, page size and writer concurrency must be positive")
	case o.HoldBack < 0 || o.HoldBack > o.Watchers:
		return fmt.Errorf("cannot hold back %d of %d watchers", o.HoldBack, o.Watchers)
	}
	return o.Mix.Validate()
}

// Target is the etcd a run drives: one client for writers and maintenance,
// one shared by the watchers (its own gRPC connection, as an informer's
// apiserver connection is separate from a controller's writes), and the
// member endpoints to defragment and query.
type Target struct {
	Writer    *clientv3.Client
	Watch     *clientv3.Client
	Endpoints []string
	Embedded  bool
}

// Run seeds objects, starts the watchers, waits until they have listed,
// then writes on schedule for o.Duration while the compactor ticks on
// kube-apiserver's algorithm, holds o.HoldBack watchers back across a
// compaction so that they must relist, and defragments once. At the end it
// waits until every watcher confirms the final revision, compares every
// cache with etcd, and returns the measurements. Errors are returned only
// when the run could not be carried out (seeding failed, the target is
// unreachable); broken watch guarantees are results, in
// RunResult.Validation.
func Run(ctx context.Context, t Target, o Options) (*report.RunResult, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	codec, err := keyspace.NewCodec()
	if err != nil {
		return nil, err
	}
	res := &report.RunResult{
		SchemaVersion: report.RunSchemaVersion,
		StartedAt:     time.Now().UTC(),
		Target:        report.Target{Embedded: t.Embedded, Endpoints: t.Endpoints},
		Scenario: report.Scenario{
			Prefix: o.Prefix, Objects: o.Objects, Namespaces: o.Namespaces, Watchers: o.Watchers,
			WriteRatePerSecond: o.WriteRate, DurationMs: report.Ms(o.Duration), PageSize: o.PageSize,
			CompactionIntervalMs: report.Ms(o.CompactionInterval), CreatePercent: o.Mix.CreatePercent,
			UpdatePercent: o.Mix.UpdatePercent, DeletePercent: o.Mix.DeletePercent,
			WriterConcurrency: o.WriterConcurrency, HeldBackWatchers: o.HoldBack, Seed: o.Seed,
			Defragment: o.Defragment, PhysicalCompaction: o.PhysicalCompaction,
			ProgressRequestPeriod: report.Ms(o.ProgressRequestPeriod),
		},
	}
	if st, err := t.Writer.Status(ctx, t.Endpoints[0]); err == nil {
		res.Target.EtcdVersion = st.Version
	} else {
		return nil, fmt.Errorf("status of %s: %w", t.Endpoints[0], err)
	}

	start := time.Now()
	w := &writers{kv: t.Writer, prefix: o.Prefix, codec: codec, seed: o.Seed, workers: o.WriterConcurrency, start: start, timeout: o.WriteTimeout}
	logf("seeding %d pods under %s/pods/", o.Objects, o.Prefix)
	live, states, err := w.seedObjects(ctx, o.Objects, o.Namespaces, o.WriterConcurrency)
	if err != nil {
		return nil, fmt.Errorf("seed objects: %w", err)
	}

	// Watchers.
	watchPrefix := keyspace.Build(keyspace.Key{Prefix: o.Prefix, Resource: "pods", Name: "x"})
	watchPrefix = strings.TrimSuffix(watchPrefix, "x")
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	refls := make([]*Reflector, o.Watchers)
	var wwg sync.WaitGroup
	for i := range refls {
		refls[i] = NewReflector(i, t.Watch, watchPrefix, o.PageSize, start)
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			refls[i].Run(wctx)
		}()
	}
	logf("starting %d watchers (LIST pages of %d, WATCH with prevKV)", o.Watchers, o.PageSize)
	for _, r := range refls {
		select {
		case <-r.Synced():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}

	// Writers, on schedule from now.
	total := int64(o.WriteRate * o.Duration.Seconds())
	ops := plan(o.Seed, live, total, o.WriteRate, o.Mix, o.Namespaces)
	res.Writes.Planned = total
	writeStart := time.Now()
	offset := writeStart.Sub(start)
	for i := range ops {
		ops[i].scheduled += offset
	}
	logf("writing %d ops at %.0f/s for %v (create/update/delete %d/%d/%d)", total, o.WriteRate, o.Duration,
		o.Mix.CreatePercent, o.Mix.UpdatePercent, o.Mix.DeletePercent)
	writeCtx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	writersDone := make(chan struct{})
	go func() {
		defer close(writersDone)
		w.run(writeCtx, ops, states)
	}()

	// Compactor, defragmentation and the held-back watchers.
	maint := &maintenance{t: t, o: o, start: start, refls: refls, logf: logf, res: res}
	maintDone := make(chan struct{})
	go func() {
		defer close(maintDone)
		maint.run(ctx, writeStart.Add(o.Duration))
	}()

	select {
	case <-writersDone:
	case <-ctx.Done():
		stopWriters()
		<-writersDone
	}
	<-maintDone
	for _, r := range refls {
		r.Release()
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// Final state, then wait for every watcher to confirm it.
	final, err := t.Writer.Get(ctx, watchPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read final state: %w", err)
	}
	res.Final = report.FinalState{Revision: final.Header.Revision, CompactRevision: maint.compacted, Objects: int64(len(final.Kvs))}
	logf("writes done at revision %d; waiting for watchers to confirm it", final.Header.Revision)
	unsynced := waitSynced(ctx, t.Watch, refls, final.Header.Revision, o.ProgressRequestPeriod, o.SyncTimeout)
	stopWatchers()
	wwg.Wait()
	if size, err := compaction.MemberSize(ctx, t.Writer, t.Endpoints[0]); err == nil {
		res.DBSize.EndBytes, res.DBSize.EndInUseBytes = size.Bytes, size.InUseBytes
	}

	collect(res, w, refls, final, unsynced)
	return res, nil
}

// waitSynced requests progress notifications until every reflector has
// seen revision rev or the timeout passes, and returns how many did not.
func waitSynced(ctx context.Context, c *clientv3.Client, refls []*Reflector, rev int64, period, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		behind := 0
		for _, r := range refls {
			if r.LastRevision() < rev {
				behind++
			}
		}
		if behind == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return behind
		}
		// One request reaches every watch on the shared stream.
		c.RequestProgress(WatchContext(ctx))
		sleep(ctx, period)
	}
}

// maintenance runs the compactor on its interval, holds watchers back
// across a compaction and defragments once after it.
type maintenance struct {
	t     Target
	o     Options
	start time.Time
	refls []*Reflector
	logf  func(string, ...any)
	res   *report.RunResult

	compacted int64 // the last revision compacted to
}

func (m *maintenance) run(ctx context.Context, end time.Time) {
	if m.o.CompactionInterval < 0 {
		return
	}
	c := compaction.NewCompactor(m.t.Writer)
	c.Physical = m.o.PhysicalCompaction
	var held []*Reflector
	var heldRev int64
	holdAt := time.Now().Add(min(m.o.CompactionInterval/2, m.o.Duration/6))
	defragged := false
	next := time.Now()
	for {
		// Hold watchers back before the compaction they will miss.
		if held == nil && m.o.HoldBack > 0 && !time.Now().Before(holdAt) {
			held = m.refls[:m.o.HoldBack]
			for _, r := range held {
				heldRev = max(heldRev, r.Hold())
			}
			m.logf("holding %d watcher(s) back at revision %d", len(held), heldRev)
		}
		if !time.Now().Before(next) {
			// The size before the compaction that precedes the
			// defragmentation is the one the result reports.
			before, beforeErr := compaction.MemberSize(ctx, m.t.Writer, m.t.Endpoints[0])
			at := time.Since(m.start)
			tick, err := c.Tick(ctx)
			if tick.Compacted != 0 || err != nil {
				rec := report.Compaction{AtMs: report.Ms(at), Revision: tick.Compacted, DurationMs: report.Ms(tick.Duration)}
				if err != nil {
					rec.Error = err.Error()
				} else {
					m.compacted = tick.Compacted
					m.logf("compacted to revision %d in %v", tick.Compacted, tick.Duration.Round(time.Millisecond))
				}
				m.res.Compaction = append(m.res.Compaction, rec)
			}
			// Once a compaction has passed the held watchers, let them go,
			// and defragment.
			if tick.Compacted != 0 && (held == nil || tick.Compacted > heldRev) && !defragged {
				if beforeErr == nil {
					m.res.DBSize.BeforeCompactionBytes, m.res.DBSize.BeforeCompactionInUseBytes = before.Bytes, before.InUseBytes
				}
				if s, err := compaction.MemberSize(ctx, m.t.Writer, m.t.Endpoints[0]); err == nil {
					m.res.DBSize.AfterCompactionBytes, m.res.DBSize.AfterCompactionInUseBytes = s.Bytes, s.InUseBytes
				}
				if held != nil {
					for _, r := range held {
						r.Release()
					}
					m.logf("released the held watcher(s): revision %d is compacted", heldRev)
				}
				if m.o.Defragment {
					m.defrag(ctx)
				}
				defragged = true
			}
			next = next.Add(m.o.CompactionInterval)
		}
		wake := next
		if held == nil && m.o.HoldBack > 0 && holdAt.Before(wake) {
			wake = holdAt
		}
		if !wake.Before(end) {
			return
		}
		if !sleep(ctx, time.Until(wake)) {
			return
		}
	}
}

func (m *maintenance) defrag(ctx context.Context) {
	at := time.Since(m.start)
	d, err := compaction.Defragment(ctx, m.t.Writer, m.t.Endpoints[0])
	rec := &report.Defrag{AtMs: report.Ms(at), DurationMs: report.Ms(d.Duration)}
	if err != nil {
		rec.Error = err.Error()
	} else {
		m.res.DBSize.AfterDefragBytes, m.res.DBSize.AfterDefragInUseBytes = d.After.Bytes, d.After.InUseBytes
		m.logf("defragmented %s in %v: %d -> %d bytes", m.t.Endpoints[0], d.Duration.Round(time.Millisecond), d.Before.Bytes, d.After.Bytes)
	}
	m.res.Defrag = rec
}

// collect fills the result from the writers' record and the reflectors.
func collect(res *report.RunResult, w *writers, refls []*Reflector, final *clientv3.GetResponse, unsynced int) {
	w.mu.Lock()
	records := w.records
	w.mu.Unlock()
	sort.Slice(records, func(i, j int) bool { return records[i].scheduled < records[j].scheduled })

	writeLat := newHistogram()
	byRev := make(map[int64]*writeRecord, len(records))
	errSamples := map[string]bool{}
	for i := range records {
		rec := &records[i]
		writeLat.record(rec.done - rec.scheduled)
		if rec.conflict {
			res.Writes.Conflicts++
		}
		if rec.err != nil {
			res.Writes.Errors++
			if len(errSamples) < 5 {
				errSamples[rec.err.Error()] = true
			}
			continue
		}
		res.Writes.Completed++
		switch rec.op {
		case OpCreate:
			res.Writes.Creates++
		case OpUpdate:
			res.Writes.Updates++
		case OpDelete:
			res.Writes.Deletes++
		}
		byRev[rec.rev] = rec
	}
	for e := range errSamples {
		res.Writes.ErrorSamples = append(res.Writes.ErrorSamples, e)
	}
	sort.Strings(res.Writes.ErrorSamples)
	res.Writes.Latency = writeLat.summary()

	fromCommit, fromSend := newHistogram(), newHistogram()
	etcdState := make(map[string]int64, len(final.Kvs))
	for _, kv := range final.Kvs {
		etcdState[string(kv.Key)] = kv.ModRevision
	}
	v := &res.Validation
	v.UnsyncedWatchers = unsynced
	addViolation := func(x report.Violation) {
		if len(v.Violations) < 50 {
			v.Violations = append(v.Violations, x)
		}
	}
	for _, r := range refls {
		r.mu.Lock()
		ws := report.WatcherStats{ID: r.id, Lists: r.lists, LastRevision: r.lastRev, CacheObjects: len(r.cache), HeldBack: r.heldSince != 0}
		for _, s := range r.sessions {
			got := make(map[int64]bool, len(s.events))
			for _, ev := range s.events {
				got[ev.rev] = true
				ws.Events++
				wr, ok := byRev[ev.rev]
				if !ok {
					continue // a write whose response was lost, or not ours
				}
				fromSend.record(ev.at - wr.sent)
				d := ev.at - wr.done
				if d < 0 {
					res.Delivery.DeliveredBeforeResponse++
					d = 0
				}
				fromCommit.record(d)
			}
			// Reliable: every write inside [from, covered] must have arrived.
			for rev := s.from; rev <= s.covered; rev++ {
				if wr, ok := byRev[rev]; ok && !got[rev] {
					v.Lost++
					addViolation(report.Violation{Watcher: r.id, Kind: "lost", Revision: rev, Key: wr.key,
						Detail: fmt.Sprintf("watch from %d confirmed up to %d", s.from, s.covered)})
				}
			}
		}
		res.Delivery.Events += ws.Events
		v.OutOfOrder += r.viol.outOfOrder
		v.Duplicated += r.viol.duplicated
		v.PrevKVMismatches += r.viol.prevKV
		for _, x := range r.viol.samples {
			addViolation(report.Violation{Watcher: r.id, Kind: x.kind, Revision: x.rev, Key: x.key, Detail: x.detail})
		}
		for _, rl := range r.relists {
			res.Relists = append(res.Relists, report.Relist{
				Watcher: r.id, Reason: rl.reason, FromRevision: rl.from, CompactRevision: rl.compactRev,
				ListRevision: rl.listRev, AtMs: report.Ms(rl.at), DurationMs: report.Ms(rl.took),
				Objects: rl.objects, Bytes: rl.bytes, Pages: rl.pages,
			})
		}
		cache := r.cache
		r.mu.Unlock()
		// At the end, the cache must equal etcd's state.
		for key, rev := range etcdState {
			if got, ok := cache[key]; !ok || got != rev {
				v.CacheMismatches++
				addViolation(report.Violation{Watcher: r.id, Kind: "cache", Revision: rev, Key: key,
					Detail: fmt.Sprintf("cache holds mod_revision %d (present %v)", got, ok)})
			}
		}
		for key, rev := range cache {
			if _, ok := etcdState[key]; !ok {
				v.CacheMismatches++
				addViolation(report.Violation{Watcher: r.id, Kind: "cache", Revision: rev, Key: key, Detail: "deleted in etcd, still cached"})
			}
		}
		res.Watchers = append(res.Watchers, ws)
	}
	res.Delivery.FromCommit = fromCommit.summary()
	res.Delivery.FromSend = fromSend.summary()
	if res.Relists == nil {
		res.Relists = []report.Relist{}
	}
	if res.Compaction == nil {
		res.Compaction = []report.Compaction{}
	}
}
