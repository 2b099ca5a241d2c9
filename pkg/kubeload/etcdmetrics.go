package kubeload

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/kubestore/etcdkit/pkg/report"
)

// Metrics of etcd 3.7.3 a run reads from a member's /metrics (etcd
// serves them on its client URLs; a cluster's run reads the first
// member's, a divided load's coordinator every member's), with their
// source:
// go.etcd.io/etcd/server/v3/storage/mvcc/metrics.go (the db sizes,
// put/delete/range/txn totals, the watcher gauges),
// server/etcdserver/metrics.go (proposals committed),
// server/storage/backend/metrics.go (backend commit duration) and
// server/storage/wal/metrics.go (WAL fsync duration).
const (
	etcdDBSize        = "etcd_mvcc_db_total_size_in_bytes"
	etcdDBSizeInUse   = "etcd_mvcc_db_total_size_in_use_in_bytes"
	etcdPuts          = "etcd_mvcc_put_total"
	etcdDeletes       = "etcd_mvcc_delete_total"
	etcdRanges        = "etcd_mvcc_range_total"
	etcdTxns          = "etcd_mvcc_txn_total"
	etcdProposals     = "etcd_server_proposals_committed_total"
	etcdWatchers      = "etcd_debugging_mvcc_watcher_total"
	etcdSlowWatchers  = "etcd_debugging_mvcc_slow_watcher_total"
	etcdBackendCommit = "etcd_disk_backend_commit_duration_seconds"
	etcdWALFsync      = "etcd_disk_wal_fsync_duration_seconds"
	// etcdGRPCHandled is go-grpc-prometheus' count of RPCs the member
	// completed, by grpc_service, grpc_method, grpc_type and grpc_code
	// (github.com/grpc-ecosystem/go-grpc-prometheus server_metrics.go,
	// registered by server/embed/etcd.go); a stream (Watch,
	// LeaseKeepAlive) counts when it ends.
	etcdGRPCHandled = "grpc_server_handled_total"
)

// etcdSampleEvery is how often a cluster's run samples etcd's /metrics
// and the proxy's writes per resource.
const etcdSampleEvery = time.Second

// etcdMetricNames are the metrics etcdScrape keeps.
var etcdMetricNames = []string{etcdDBSize, etcdDBSizeInUse, etcdPuts, etcdDeletes, etcdRanges, etcdTxns, etcdProposals,
	etcdWatchers, etcdSlowWatchers, etcdBackendCommit, etcdWALFsync, etcdGRPCHandled}

// bucket is one cumulative histogram bucket: the observations at most
// upperBound seconds.
type bucket struct {
	upperBound float64
	count      float64
}

// etcdScrape is one scrape of a member's /metrics: each kept metric's
// value summed over its series, the histograms' buckets, and
// grpc_server_handled_total by RPC and code.
type etcdScrape struct {
	at      time.Time
	values  map[string]float64
	hists   map[string][]bucket // by upper bound, +Inf last
	handled map[rpcCode]float64
}

// rpcCode is one series of grpc_server_handled_total, its grpc_type
// summed over (a method has one type).
type rpcCode struct{ service, method, code string }

// keepEtcdMetric reports whether a line of etcd's /metrics is of
// etcdMetricNames (a histogram's _bucket, _sum and _count lines
// included); comments other than HELP and TYPE are not.
func keepEtcdMetric(line []byte) bool {
	name, sample, ok := metricLineName(line)
	if !ok {
		return false
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if n, ok := bytes.CutSuffix(name, []byte(suffix)); ok && sample && slices.Contains(etcdMetricNames, string(n)) {
			name = n
			break
		}
	}
	return slices.Contains(etcdMetricNames, string(name))
}

// parseEtcdMetrics reads the Prometheus text exposition format of an etcd
// member's /metrics (github.com/prometheus/common/expfmt) and keeps
// etcdMetricNames: counters and gauges summed over their series,
// histograms as their cumulative buckets summed bucket by bucket (the
// series of one histogram share their bounds), grpc_server_handled_total
// by grpc_service, grpc_method and grpc_code. Lines of other metrics are
// skipped before parsing. It fails on malformed text.
func parseEtcdMetrics(r io.Reader) (*etcdScrape, error) {
	families, err := parseKept(r, keepEtcdMetric)
	if err != nil {
		return nil, err
	}
	s := &etcdScrape{values: map[string]float64{}, hists: map[string][]bucket{}, handled: map[rpcCode]float64{}}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			if name == etcdGRPCHandled {
				var k rpcCode
				for _, lp := range m.GetLabel() {
					switch lp.GetName() {
					case "grpc_service":
						k.service = lp.GetValue()
					case "grpc_method":
						k.method = lp.GetValue()
					case "grpc_code":
						k.code = lp.GetValue()
					}
				}
				s.handled[k] += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
				continue
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				s.values[name] += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.values[name] += m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				s.values[name] += m.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				bs := s.hists[name]
				for i, b := range h.GetBucket() {
					if i < len(bs) {
						bs[i].count += float64(b.GetCumulativeCount())
					} else {
						bs = append(bs, bucket{upperBound: b.GetUpperBound(), count: float64(b.GetCumulativeCount())})
					}
				}
				// The +Inf bucket is implicit in the text format.
				if n := len(h.GetBucket()); len(bs) == n {
					bs = append(bs, bucket{upperBound: math.Inf(1)})
				}
				bs[len(bs)-1].count += float64(h.GetSampleCount())
				s.hists[name] = bs
			}
		}
	}
	return s, nil
}

// histogramQuantile returns the q-quantile of cumulative buckets bs, interpolated
// linearly within its bucket as Prometheus' histogram_quantile does (the
// last finite bound when it falls in +Inf); 0 without observations.
func histogramQuantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count <= 0 {
		return 0
	}
	rank := q * bs[len(bs)-1].count
	i := sort.Search(len(bs), func(i int) bool { return bs[i].count >= rank })
	if math.IsInf(bs[i].upperBound, 1) {
		if i == 0 {
			return 0
		}
		return bs[i-1].upperBound
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = bs[i-1].upperBound, bs[i-1].count
	}
	if bs[i].count == below {
		return bs[i].upperBound
	}
	return lower + (bs[i].upperBound-lower)*(rank-below)/(bs[i].count-below)
}

// scrapeEtcd GETs endpoint's /metrics with hc and parses it.
func scrapeEtcd(ctx context.Context, hc *http.Client, endpoint string) (*etcdScrape, error) {
	var s *etcdScrape
	err := getMetrics(ctx, hc, endpoint, func(r io.Reader) (err error) {
		s, err = parseEtcdMetrics(r)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.at = time.Now()
	return s, nil
}

// etcdPhaseAcc accumulates one phase of etcd's metrics.
type etcdPhaseAcc struct {
	report.EtcdMetricsPhase
	deltas  map[string]float64
	hists   map[string][]bucket
	handled map[rpcCode]float64
}

func newEtcdPhaseAcc(phase string) *etcdPhaseAcc {
	return &etcdPhaseAcc{EtcdMetricsPhase: report.EtcdMetricsPhase{Phase: phase}, deltas: map[string]float64{},
		hists: map[string][]bucket{}, handled: map[rpcCode]float64{}}
}

// addBuckets adds the bucket counts of bs to acc's histogram name; bounds
// that differ from those acc holds (another etcd release) are skipped.
func (acc *etcdPhaseAcc) addBuckets(name string, bs []bucket) {
	sum := acc.hists[name]
	if sum == nil {
		sum = make([]bucket, len(bs))
		for i := range bs {
			sum[i].upperBound = bs[i].upperBound
		}
		acc.hists[name] = sum
	}
	if len(sum) != len(bs) {
		return
	}
	for i := range bs {
		sum[i].count += bs[i].count
	}
}

// phase returns the figures acc accumulated: counters' increases, p99s
// from the histograms' bucket increases, and the handled RPCs sorted by
// service, method and code.
func (acc *etcdPhaseAcc) phase() report.EtcdMetricsPhase {
	p := acc.EtcdMetricsPhase
	p.Puts, p.Deletes, p.Ranges, p.Txns = int64(acc.deltas[etcdPuts]), int64(acc.deltas[etcdDeletes]), int64(acc.deltas[etcdRanges]), int64(acc.deltas[etcdTxns])
	p.ProposalsCommitted = int64(acc.deltas[etcdProposals])
	if bs := acc.hists[etcdBackendCommit]; len(bs) > 0 {
		p.BackendCommits, p.BackendCommitP99Ms = int64(bs[len(bs)-1].count), histogramQuantile(0.99, bs)*1000
	}
	if bs := acc.hists[etcdWALFsync]; len(bs) > 0 {
		p.WALFsyncs, p.WALFsyncP99Ms = int64(bs[len(bs)-1].count), histogramQuantile(0.99, bs)*1000
	}
	p.HandledRPCs = nil
	for k, n := range acc.handled {
		if n > 0 {
			p.HandledRPCs = append(p.HandledRPCs, report.EtcdHandledRPCs{Service: k.service, Method: k.method, Code: k.code, Count: int64(n)})
		}
	}
	slices.SortFunc(p.HandledRPCs, func(a, b report.EtcdHandledRPCs) int {
		return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.Method, b.Method), strings.Compare(a.Code, b.Code))
	})
	return p
}

// etcdSampler samples, every interval until stopped, the counting
// proxy's writes per resource (report.EtcdWriteSeries) and, when it has
// an endpoint, the member's /metrics (report.EtcdMetrics), each sample in
// the phase current then. Both run on one goroutine; a failed scrape is
// counted, and its increase goes to the next scrape's phase.
type etcdSampler struct {
	counter  EtcdCounter // nil: no write series
	phase    func() string
	epoch    time.Time
	interval time.Duration
	endpoint string
	hc       *http.Client   // nil: no /metrics
	status   etcdStatusFunc // with hc nil: the db sizes alone; nil: none
	// release frees what status holds; finish calls it, and whoever
	// halts the sampler without finish calls it after halt.
	release func()

	mu         sync.Mutex
	writes     report.EtcdWriteSeries
	index      map[string]int
	started    bool // the write baseline was taken
	lastWrites map[string]int64
	metrics    report.EtcdMetrics
	last       *etcdScrape
	phases     map[string]*etcdPhaseAcc
	order      []string

	cancel   context.CancelFunc // ends a scrape in flight
	now      chan chan struct{} // a sample taken now, closed once done
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// etcdStatusFunc reads one member's db size and size in use with the
// Maintenance API's Status (etcdserverpb.StatusResponse DbSize,
// DbSizeInUse), returned as a scrape holding etcdDBSize and
// etcdDBSizeInUse alone.
type etcdStatusFunc func(ctx context.Context) (*etcdScrape, error)

// startEtcdSampler starts sampling; endpoint "" samples the proxy alone.
// An https endpoint is reached with tlsCfg. With status set, the member's
// db sizes are read with it instead of its /metrics, and the result has
// no phases (report.EtcdMetrics.Source "status").
func startEtcdSampler(ctx context.Context, counter EtcdCounter, phase func() string, epoch time.Time, interval time.Duration,
	endpoint string, tlsCfg *tls.Config, status etcdStatusFunc) *etcdSampler {
	s := &etcdSampler{counter: counter, phase: phase, epoch: epoch, interval: interval, endpoint: endpoint, release: func() {},
		index: map[string]int{}, phases: map[string]*etcdPhaseAcc{},
		now: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	s.writes.IntervalMs = report.Ms(interval)
	s.metrics = report.EtcdMetrics{Endpoint: endpoint, IntervalMs: report.Ms(interval), Samples: []report.EtcdDBSample{}}
	switch {
	case endpoint != "" && status != nil:
		s.status, s.metrics.Source = status, report.EtcdMetricsFromStatus
	case endpoint != "":
		s.hc = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.sample(ctx) // the baseline
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample(ctx)
			case ack := <-s.now:
				s.sample(ctx)
				close(ack)
			}
		}
	}()
	return s
}

// sample takes one sample of each; a scrape that fails because ctx
// ended (halt) is not counted.
func (s *etcdSampler) sample(ctx context.Context) {
	var sc *etcdScrape
	var err error
	issued := report.Ms(time.Since(s.epoch))
	switch {
	case s.hc != nil:
		sc, err = scrapeEtcd(ctx, s.hc, s.endpoint)
	case s.status != nil:
		sc, err = s.status(ctx)
	}
	phase := s.phase()
	at := report.Ms(time.Since(s.epoch))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counter != nil {
		s.sampleWritesLocked(at, phase)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// halted: a scrape given up is no failure
	case err != nil:
		s.metrics.Errors++
		s.metrics.FailedAtMs = append(s.metrics.FailedAtMs, issued)
		if s.metrics.Error == "" {
			s.metrics.Error = err.Error()
		}
	case sc != nil:
		s.noteScrapeLocked(sc, at, phase)
	}
}

// sampleWritesLocked adds the writes since the last sample per resource.
func (s *etcdSampler) sampleWritesLocked(at float64, phase string) {
	totals := map[string]int64{}
	for _, r := range s.counter.Requests() {
		if report.EtcdVerb(r.Method, r.Kind) == report.EtcdWrite {
			totals[r.Resource] += r.Requests
		}
	}
	if !s.started {
		// The baseline: the writes before sampling began are no sample.
		s.started, s.lastWrites = true, totals
		s.writes.Samples = []report.EtcdWriteSample{}
		return
	}
	var w []int64
	for res, n := range totals {
		d := n - s.lastWrites[res]
		if d <= 0 {
			continue
		}
		i, ok := s.index[res]
		if !ok {
			i = len(s.writes.Resources)
			s.index[res] = i
			s.writes.Resources = append(s.writes.Resources, res)
		}
		if len(w) <= i {
			w = append(w, make([]int64, i+1-len(w))...)
		}
		w[i] = d
	}
	s.lastWrites = totals
	s.writes.Samples = append(s.writes.Samples, report.EtcdWriteSample{AtMs: at, Phase: phase, Writes: w})
}

// noteScrapeLocked records a scrape: the db sizes, and the increases
// since the last one in phase.
func (s *etcdSampler) noteScrapeLocked(sc *etcdScrape, at float64, phase string) {
	s.metrics.Samples = append(s.metrics.Samples, report.EtcdDBSample{AtMs: at, Phase: phase,
		DBSizeBytes: int64(sc.values[etcdDBSize]), DBSizeInUseBytes: int64(sc.values[etcdDBSizeInUse])})
	prev := s.last
	s.last = sc
	if prev == nil || s.status != nil {
		return
	}
	acc := s.phases[phase]
	if acc == nil {
		acc = newEtcdPhaseAcc(phase)
		s.phases[phase] = acc
		s.order = append(s.order, phase)
	}
	acc.DurationMs += report.Ms(sc.at.Sub(prev.at))
	for _, name := range []string{etcdPuts, etcdDeletes, etcdRanges, etcdTxns, etcdProposals} {
		acc.deltas[name] += max(sc.values[name]-prev.values[name], 0)
	}
	acc.Watchers = max(acc.Watchers, int64(sc.values[etcdWatchers]))
	acc.SlowWatchers = max(acc.SlowWatchers, int64(sc.values[etcdSlowWatchers]))
	acc.DBSizeBytes = max(acc.DBSizeBytes, int64(sc.values[etcdDBSize]))
	for name, cur := range sc.handled {
		acc.handled[name] += max(cur-prev.handled[name], 0)
	}
	for _, name := range []string{etcdBackendCommit, etcdWALFsync} {
		cur, old := sc.hists[name], prev.hists[name]
		if len(cur) != len(old) {
			continue // a member restarted with other bounds: not comparable
		}
		d := make([]bucket, len(cur))
		for i := range cur {
			d[i] = bucket{upperBound: cur[i].upperBound, count: max(cur[i].count-old[i].count, 0)}
		}
		acc.addBuckets(name, d)
	}
}

// finish stops sampling after one last sample (none once ctx has ended)
// and returns the series:
// the write series' resources sorted byte-wise, and nil metrics when no
// endpoint was read.
func (s *etcdSampler) finish(ctx context.Context) (*report.EtcdWriteSeries, *report.EtcdMetrics) {
	s.halt()
	if ctx.Err() == nil { // an interrupted run ends without waiting for one more scrape
		s.sample(ctx)
	}
	s.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	var writes *report.EtcdWriteSeries
	if s.counter != nil {
		w := s.writes
		sorted := slices.Clone(w.Resources)
		slices.Sort(sorted)
		for j := range w.Samples {
			old := w.Samples[j].Writes
			nw := make([]int64, len(sorted))
			for i, res := range sorted {
				if k := s.index[res]; k < len(old) {
					nw[i] = old[k]
				}
			}
			for len(nw) > 0 && nw[len(nw)-1] == 0 {
				nw = nw[:len(nw)-1]
			}
			w.Samples[j].Writes = nw
		}
		w.Resources = sorted
		if w.Resources == nil {
			w.Resources = []string{}
		}
		writes = &w
	}
	if s.hc == nil && s.status == nil {
		return writes, nil
	}
	m := s.metrics
	m.Phases = []report.EtcdMetricsPhase{}
	for _, name := range s.order {
		m.Phases = append(m.Phases, s.phases[name].phase())
	}
	return writes, &m
}

// halt stops sampling, ending a scrape in flight, and waits for the
// sampler's goroutine to end.
func (s *etcdSampler) halt() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.cancel()
	})
	<-s.done
}

// EtcdMetricsSampler reads the own /metrics of every member of an etcd
// cluster every interval and accumulates their counters per phase
// (report.EtcdMetrics: puts, deletes, ranges, txns, proposals committed,
// watchers, db size, backend commit and WAL fsync p99, RPCs handled by
// method and code), each scrape's increase counted in the phase current
// at the scrape. `lwbench run --workers` and `lwbench scrape` use it to
// set etcd's own figures beside the workers' merged client figures.
type EtcdMetricsSampler struct{ members []*etcdSampler }

// SampleEtcdMetrics starts sampling the /metrics of each of endpoints
// (the members' client URLs; an https one with tlsCfg) every interval, a
// first scrape at once; phase names the phase current at each scrape;
// offsets run from epoch. A scrape that fails is counted in the result,
// not returned. Without endpoints it samples nothing, and Finish returns
// nil.
func SampleEtcdMetrics(ctx context.Context, endpoints []string, tlsCfg *tls.Config, epoch time.Time, interval time.Duration, phase func() string) *EtcdMetricsSampler {
	m := &EtcdMetricsSampler{members: make([]*etcdSampler, len(endpoints))}
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() { m.members[i] = startEtcdSampler(ctx, nil, phase, epoch, interval, ep, tlsCfg, nil) })
	}
	wg.Wait()
	return m
}

// SampleNow takes a sample of every member at once, in the phase current
// now, and returns when they are done (at once for a member whose
// sampling has stopped): call it before the phase changes, so that the
// increase up to the change counts in the phase it ends.
func (m *EtcdMetricsSampler) SampleNow() {
	var wg sync.WaitGroup
	for _, s := range m.members {
		wg.Go(func() {
			ack := make(chan struct{})
			select {
			case s.now <- ack:
				<-ack
			case <-s.done:
			}
		})
	}
	wg.Wait()
}

// Finish stops sampling, takes a last scrape of every member unless ctx
// has ended, and returns what was read: with one member its figures; with
// several, report.EtcdMetrics' sums over them and each one's in Members.
// nil without endpoints.
func (m *EtcdMetricsSampler) Finish(ctx context.Context) *report.EtcdMetrics {
	ms := make([]*report.EtcdMetrics, len(m.members))
	var wg sync.WaitGroup
	for i, s := range m.members {
		wg.Go(func() { _, ms[i] = s.finish(ctx) })
	}
	wg.Wait()
	switch len(ms) {
	case 0:
		return nil
	case 1:
		return ms[0]
	}
	return sumEtcdMembers(m.members, ms)
}

// sumEtcdMembers returns the figures of several members, ms (of the
// finished samplers ss, in the same order), as report.EtcdMetrics
// documents them: the first member's endpoint and db samples, the
// phases (in the order first seen across members) summed over the
// members, their p99s from the members' histogram buckets summed bucket
// by bucket (never percentiles averaged), the failures of all, and each
// member's own figures.
func sumEtcdMembers(ss []*etcdSampler, ms []*report.EtcdMetrics) *report.EtcdMetrics {
	out := *ms[0]
	out.Errors, out.Error, out.FailedAtMs = 0, "", nil
	sums := map[string]*etcdPhaseAcc{}
	var order []string
	for i, mm := range ms {
		out.Members = append(out.Members, report.EtcdMemberMetrics{Endpoint: mm.Endpoint, Samples: mm.Samples, Phases: mm.Phases,
			Errors: mm.Errors, Error: mm.Error})
		out.Errors += mm.Errors
		if out.Error == "" {
			out.Error = mm.Error
		}
		out.FailedAtMs = append(out.FailedAtMs, mm.FailedAtMs...)
		s := ss[i]
		s.mu.Lock()
		for _, name := range s.order {
			acc := s.phases[name]
			sum := sums[name]
			if sum == nil {
				sum = newEtcdPhaseAcc(name)
				sums[name] = sum
				order = append(order, name)
			}
			sum.DurationMs = max(sum.DurationMs, acc.DurationMs)
			for k, v := range acc.deltas {
				sum.deltas[k] += v
			}
			for k, v := range acc.handled {
				sum.handled[k] += v
			}
			for k, bs := range acc.hists {
				sum.addBuckets(k, bs)
			}
			sum.Watchers += acc.Watchers
			sum.SlowWatchers += acc.SlowWatchers
			sum.DBSizeBytes += acc.DBSizeBytes
		}
		s.mu.Unlock()
	}
	slices.Sort(out.FailedAtMs)
	out.Phases = []report.EtcdMetricsPhase{}
	for _, name := range order {
		out.Phases = append(out.Phases, sums[name].phase())
	}
	return &out
}
