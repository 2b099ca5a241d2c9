package kubeload

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/pkg/report"
)

// APIServer is one kube-apiserver of a Stack whose own metrics and process
// a run samples.
type APIServer struct {
	// Name names it in the result (apiserver0, ...).
	Name string
	// RESTConfig reaches this server alone, as a user allowed to GET
	// /metrics (the admin token of internal/apiserverproc is).
	RESTConfig *rest.Config
	// PID is its process on this machine, whose resident set a run samples
	// in /proc every 250 ms; 0 when unknown (the figures then come from
	// /metrics alone, at phase boundaries).
	PID int
	// Process, if set, is the process lwbench started: after a restart
	// (Stack.Restart) the run samples its new PID.
	Process *apiserverproc.Process
}

// pid returns the process to sample in /proc: Process's current one if
// set (0 while it is stopped), else PID.
func (s APIServer) pid() int {
	if s.Process != nil {
		return s.Process.PID()
	}
	return s.PID
}

// componentsOf returns the control plane's other processes (the
// controller-manager, the scheduler, KWOK) as Stack.Components: metered
// from /proc alone (RESTConfig nil).
func componentsOf(ps []*apiserverproc.Process) []APIServer {
	out := make([]APIServer, len(ps))
	for i, p := range ps {
		out[i] = APIServer{Name: p.Name, PID: p.PID(), Process: p}
	}
	return out
}

// procSample reads the CPU and resident set of process pid from /proc
// (prometheus/procfs), as the metrics process_cpu_seconds_total and
// process_resident_memory_bytes a Go component's /metrics would give.
func procSample(pid int) (*metricSample, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil, err
	}
	st, err := p.Stat()
	if err != nil {
		return nil, err
	}
	return &metricSample{at: time.Now(), values: map[string]float64{metricCPUSeconds: st.CPUTime(), metricRSSBytes: float64(st.ResidentMemory())},
		gauges: map[string]bool{metricRSSBytes: true}}, nil
}

// APIServersOf returns the servers of c, started by
// internal/apiserverproc, for Stack.APIServers: each with its own
// RESTConfig (the admin token) and PID.
func APIServersOf(c *apiserverproc.Cluster) []APIServer {
	out := make([]APIServer, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = APIServer{Name: s.Name, RESTConfig: s.RESTConfig(), PID: s.PID(), Process: s.Process()}
	}
	return out
}

// metricSpec is one metric a run reads from kube-apiserver's /metrics and
// the labels it keeps; the series of other labels are summed.
type metricSpec struct {
	name   string
	labels []string
}

// Metric names of kube-apiserver 1.37's own CPU and memory
// (k8s.io/component-base/metrics/prometheus: the process collector).
const (
	metricCPUSeconds = "process_cpu_seconds_total"
	metricRSSBytes   = "process_resident_memory_bytes"
)

// apiserverMetrics are the metrics of kube-apiserver 1.37.2 that bear on
// list and watch, with their upstream source:
//
//   - requests by verb, resource and code, and long-running requests
//     (watches) by resource: k8s.io/apiserver/pkg/endpoints/metrics/metrics.go
//     (apiserver_request_total, apiserver_longrunning_requests, a gauge;
//     apiserver_watch_events_total, events sent to watchers);
//   - LISTs served from storage, by resource and storage "etcd" or
//     "watchcache": k8s.io/apiserver/pkg/storage/metrics/metrics.go
//     (apiserver_storage_list_*; the watch cache's own
//     apiserver_cache_list_*, ALPHA and deprecated in 1.37.0, are hidden
//     in 1.37 (k8s.io/component-base/metrics/registry.go shouldHide: an
//     ALPHA metric is hidden from the minor it was deprecated in) and
//     read where present, 1.35 and 1.36);
//   - the watch cache: k8s.io/apiserver/pkg/storage/cacher/metrics/metrics.go
//     (apiserver_watch_cache_events_received_total, _events_dispatched_total,
//     _initializations_total, _consistent_read_total);
//   - etcd as kube-apiserver sees it: k8s.io/apiserver/pkg/storage/etcd3/metrics/metrics.go
//     (etcd_requests_total and etcd_request_errors_total by operation
//     (listStream, list, get, create, update, delete,
//     getCurrentResourceVersion, ...) and resource;
//     etcd_request_duration_seconds, read as _count and _sum;
//     apiserver_storage_events_received_total, events from etcd watches);
//   - API Priority and Fairness: k8s.io/apiserver/pkg/util/flowcontrol/metrics/metrics.go
//     (apiserver_flowcontrol_rejected_requests_total);
//   - objects stored per resource, a gauge refreshed periodically, not
//     at each write ("at the time of last check"; -1 when the count
//     failed): k8s.io/apiserver/pkg/storage/etcd3/metrics/metrics.go
//     (apiserver_resource_objects by group and resource since 1.34;
//     apiserver_storage_objects, deprecated in 1.34.0 and hidden in 1.37,
//     read where present).
//
// apiserver_registered_watchers no longer exists in 1.37; watches are
// apiserver_longrunning_requests{verb="WATCH"}. A CounterVec without
// series is absent from /metrics: no APF rejection, no rejection series.
var apiserverMetrics = []metricSpec{
	{"apiserver_request_total", []string{"verb", "group", "resource", "code"}},
	{"apiserver_longrunning_requests", []string{"verb", "group", "resource"}},
	{"apiserver_watch_events_total", []string{"group", "resource"}},
	{"apiserver_storage_list_total", []string{"group", "resource", "storage"}},
	{"apiserver_storage_list_fetched_objects_total", []string{"group", "resource", "storage"}},
	{"apiserver_storage_list_evaluated_objects_total", []string{"group", "resource", "storage"}},
	{"apiserver_storage_list_returned_objects_total", []string{"group", "resource", "storage"}},
	{"apiserver_cache_list_total", []string{"group", "resource"}},
	{"apiserver_cache_list_fetched_objects_total", []string{"group", "resource"}},
	{"apiserver_cache_list_returned_objects_total", []string{"group", "resource"}},
	{"apiserver_watch_cache_events_received_total", []string{"group", "resource"}},
	{"apiserver_watch_cache_events_dispatched_total", []string{"group", "resource"}},
	{"apiserver_watch_cache_initializations_total", []string{"group", "resource"}},
	{"apiserver_watch_cache_consistent_read_total", []string{"group", "resource", "fallback", "success"}},
	{"apiserver_storage_events_received_total", []string{"group", "resource"}},
	{"etcd_requests_total", []string{"operation", "group", "resource"}},
	{"etcd_request_errors_total", []string{"operation", "group", "resource"}},
	{"etcd_request_duration_seconds", []string{"operation", "group", "resource"}},
	{"apiserver_flowcontrol_rejected_requests_total", []string{"priority_level", "flow_schema", "reason"}},
	{"apiserver_resource_objects", []string{"group", "resource"}},
	{"apiserver_storage_objects", []string{"resource"}},
	{metricCPUSeconds, nil},
	{metricRSSBytes, nil},
}

// metricSample is one scrape of one server's metrics: series values by
// key (name, then each kept label as name=value, "\x00"-separated).
type metricSample struct {
	at     time.Time
	values map[string]float64
	gauges map[string]bool
}

// seriesKey is the key of name's series with the kept labels values (in
// spec order, empty ones left out).
func seriesKey(name string, labels []string, values []string) string {
	var b strings.Builder
	b.WriteString(name)
	for i, l := range labels {
		if values[i] == "" {
			continue
		}
		b.WriteByte(0)
		b.WriteString(l)
		b.WriteByte('=')
		b.WriteString(values[i])
	}
	return b.String()
}

// splitSeriesKey returns the name and labels of a seriesKey.
func splitSeriesKey(k string) (string, map[string]string) {
	parts := strings.Split(k, "\x00")
	if len(parts) == 1 {
		return parts[0], nil
	}
	labels := make(map[string]string, len(parts)-1)
	for _, p := range parts[1:] {
		n, v, _ := strings.Cut(p, "=")
		labels[n] = v
	}
	return parts[0], labels
}

// metricLineName returns the metric a line of the text exposition format
// names, in a sample (sample true: its name up to the labels or value,
// which for a histogram carries a _bucket, _sum or _count suffix) or in a
// HELP or TYPE comment; ok is false for other comments and empty lines.
func metricLineName(line []byte) (name []byte, sample, ok bool) {
	switch {
	case bytes.HasPrefix(line, []byte("# HELP ")), bytes.HasPrefix(line, []byte("# TYPE ")):
		name, _, _ = bytes.Cut(line[len("# HELP "):], []byte(" "))
		return name, false, true
	case len(line) == 0 || line[0] == '#':
		return nil, false, false
	}
	if i := bytes.IndexAny(line, "{ "); i >= 0 {
		return line[:i], true, true
	}
	return line, true, true
}

// wantedMetric reports whether a line of the text exposition format names
// (in a sample, or in a HELP or TYPE comment) a metric of
// apiserverMetrics; a histogram's buckets are not wanted.
func wantedMetric(line []byte, specs map[string]metricSpec) bool {
	name, sample, ok := metricLineName(line)
	if !ok {
		return false
	}
	if n, ok := bytes.CutSuffix(name, []byte("_sum")); ok && sample {
		name = n
	} else if n, ok := bytes.CutSuffix(name, []byte("_count")); ok && sample {
		name = n
	}
	_, ok = specs[string(name)]
	return ok
}

// parseKept parses the lines of the Prometheus text format in r that keep
// accepts (github.com/prometheus/common/expfmt), skipping the others
// before parsing so that a large scrape costs little; lines are at most
// 4 MiB. It fails on a longer line or malformed text.
func parseKept(r io.Reader, keep func(line []byte) bool) (map[string]*dto.MetricFamily, error) {
	var kept bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		if line := sc.Bytes(); keep(line) {
			kept.Write(line)
			kept.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(&kept)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return families, nil
}

// parseMetrics reads the Prometheus text exposition format (version
// 0.0.4, what kube-apiserver's /metrics serves) and returns the series of
// apiserverMetrics, their labels reduced to those kept and summed over the
// others. Lines of other metrics are skipped before parsing
// (github.com/prometheus/common/expfmt), so that a 2 MB scrape costs
// little. A histogram gives <name>_count and <name>_sum. It fails on
// malformed text.
func parseMetrics(r io.Reader) (*metricSample, error) {
	specs := make(map[string]metricSpec, len(apiserverMetrics))
	for _, s := range apiserverMetrics {
		specs[s.name] = s
	}
	families, err := parseKept(r, func(line []byte) bool { return wantedMetric(line, specs) })
	if err != nil {
		return nil, err
	}
	s := &metricSample{values: map[string]float64{}, gauges: map[string]bool{}}
	for name, f := range families {
		spec := specs[name]
		for _, m := range f.GetMetric() {
			vals := make([]string, len(spec.labels))
			for _, lp := range m.GetLabel() {
				if i := slices.Index(spec.labels, lp.GetName()); i >= 0 {
					vals[i] = lp.GetValue()
				}
			}
			add := func(name string, v float64, gauge bool) {
				k := seriesKey(name, spec.labels, vals)
				s.values[k] += v
				if gauge {
					s.gauges[k] = true
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue(), false)
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue(), true)
			case dto.MetricType_HISTOGRAM:
				add(name+"_count", float64(m.GetHistogram().GetSampleCount()), false)
				add(name+"_sum", m.GetHistogram().GetSampleSum(), false)
			case dto.MetricType_UNTYPED:
				add(name, m.GetUntyped().GetValue(), false)
			}
		}
	}
	return s, nil
}

// scrapeTimeout bounds one GET /metrics.
const scrapeTimeout = 10 * time.Second

// scrape GETs one server's /metrics and parses it.
func scrape(ctx context.Context, hc *http.Client, host string) (*metricSample, error) {
	var s *metricSample
	err := getMetrics(ctx, hc, host, func(r io.Reader) (err error) {
		s, err = parseMetrics(r)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.at = time.Now()
	return s, nil
}

// getMetrics GETs host's /metrics with hc, at most scrapeTimeout, in the
// Prometheus text format, and hands the body to parse; its error names
// the URL.
func getMetrics(ctx context.Context, hc *http.Client, host string, parse func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(host, "/")+"/metrics", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s/metrics: %w", host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/metrics: %s", host, resp.Status)
	}
	if err := parse(resp.Body); err != nil {
		return fmt.Errorf("%s/metrics: %w", host, err)
	}
	return nil
}

// procRSSBytes returns the resident set of process pid from
// /proc/PID/statm (its second field, in pages); 0 and an error where
// there is no /proc.
func procRSSBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/statm: %q", pid, b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/statm: %w", pid, err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// rssPeriod is how often a meter samples a local server's resident set.
const rssPeriod = 250 * time.Millisecond

// meter scrapes every server's /metrics at each phase boundary and
// attributes the increase of each counter since the previous scrape to
// the phase that just ended (a phase entered again sums); it samples the
// resident set of local servers every rssPeriod. A scrape takes tens of
// milliseconds, during which requests still count in the phase that
// ended. A failed scrape is logged; what it would have measured goes to
// the phase of the next one that succeeds.
type meter struct {
	servers []APIServer
	clients []*http.Client
	logf    func(string, ...any)

	scrapeMu sync.Mutex // serializes scrapes and phase changes
	last     []*metricSample

	mu         sync.Mutex // guards what follows; the RSS sampler takes it
	phase      string
	phaseStart time.Time
	order      []string
	usage      []map[string]*report.APIServerPhaseUsage
	values     []map[string]map[string]float64 // server, phase, series key
	gauges     map[string]bool
	peak       []int64

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// startMeter scrapes every server once (the baseline), starts the RSS
// sampler, and counts into phase from now on. It fails when a server has
// no usable RESTConfig.
func startMeter(ctx context.Context, servers []APIServer, phase string, logf func(string, ...any)) (*meter, error) {
	m := &meter{servers: servers, logf: logf, last: make([]*metricSample, len(servers)),
		phase: phase, phaseStart: time.Now(), order: []string{phase}, usage: make([]map[string]*report.APIServerPhaseUsage, len(servers)),
		values: make([]map[string]map[string]float64, len(servers)), gauges: map[string]bool{}, peak: make([]int64, len(servers)),
		stop: make(chan struct{}), done: make(chan struct{})}
	for i, s := range servers {
		var hc *http.Client
		if s.RESTConfig != nil {
			var err error
			if hc, err = rest.HTTPClientFor(s.RESTConfig); err != nil {
				return nil, fmt.Errorf("client of %s: %w", s.Name, err)
			}
		}
		m.clients = append(m.clients, hc)
		m.usage[i] = map[string]*report.APIServerPhaseUsage{}
		m.values[i] = map[string]map[string]float64{}
	}
	m.scrapeAll(ctx)
	go m.sampleRSS()
	return m, nil
}

// sampleRSS samples every local server's resident set until stop.
func (m *meter) sampleRSS() {
	defer close(m.done)
	t := time.NewTicker(rssPeriod)
	defer t.Stop()
	for {
		for i, s := range m.servers {
			pid := s.pid()
			if pid == 0 {
				continue
			}
			if rss, err := procRSSBytes(pid); err == nil {
				m.notePeak(i, rss)
			}
		}
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

// notePeak records a resident set of server i in the current phase.
func (m *meter) notePeak(i int, rss int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.phaseUsageLocked(i, m.phase)
	u.PeakResidentMemoryBytes = max(u.PeakResidentMemoryBytes, rss)
	m.peak[i] = max(m.peak[i], rss)
}

func (m *meter) phaseUsageLocked(i int, phase string) *report.APIServerPhaseUsage {
	u := m.usage[i][phase]
	if u == nil {
		u = &report.APIServerPhaseUsage{Phase: phase}
		m.usage[i][phase] = u
	}
	return u
}

// scrapeAll scrapes every server (concurrently) and attributes what
// changed since the previous scrape to the current phase.
func (m *meter) scrapeAll(ctx context.Context) {
	samples := make([]*metricSample, len(m.servers))
	errs := make([]error, len(m.servers))
	var wg sync.WaitGroup
	for i, s := range m.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.RESTConfig == nil {
				pid := s.pid()
				if pid == 0 {
					return // stopped (a restart, an exit the supervisor will undo)
				}
				samples[i], errs[i] = procSample(pid)
				return
			}
			samples[i], errs[i] = scrape(ctx, m.clients[i], s.RESTConfig.Host)
		}()
	}
	wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, s := range samples {
		if errs[i] != nil {
			m.logf("%s metrics: %v", m.servers[i].Name, errs[i])
			continue
		}
		if s == nil {
			continue // not running at this moment
		}
		if prev := m.last[i]; prev != nil {
			m.addLocked(i, prev, s)
		}
		m.last[i] = s
	}
}

// addLocked adds to the current phase of server i what changed from
// prev to cur: counters' increases (a counter that went down was reset by
// a restart: its whole value), gauges' values at cur.
func (m *meter) addLocked(i int, prev, cur *metricSample) {
	vals := m.values[i][m.phase]
	if vals == nil {
		vals = map[string]float64{}
		m.values[i][m.phase] = vals
	}
	for k, v := range cur.values {
		if cur.gauges[k] {
			vals[k] = v
			m.gauges[k] = true
			continue
		}
		d := v - prev.values[k]
		if d < 0 {
			d = v
		}
		vals[k] += d
	}
	u := m.phaseUsageLocked(i, m.phase)
	u.DurationMs += report.Ms(cur.at.Sub(prev.at))
	u.CPUSeconds = vals[metricCPUSeconds]
	rss := int64(cur.values[metricRSSBytes])
	u.ResidentMemoryBytes = rss
	u.PeakResidentMemoryBytes = max(u.PeakResidentMemoryBytes, rss)
	m.peak[i] = max(m.peak[i], rss)
}

// setPhase scrapes every server, attributing what changed to the phase
// that ends, and counts into phase from now on.
func (m *meter) setPhase(ctx context.Context, phase string) {
	m.scrapeMu.Lock()
	defer m.scrapeMu.Unlock()
	m.scrapeAll(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.phase = phase
	if !slices.Contains(m.order, phase) {
		m.order = append(m.order, phase)
	}
}

// halt stops the RSS sampler and waits for it; safe to call twice.
func (m *meter) halt() {
	m.stopOnce.Do(func() { close(m.stop) })
	<-m.done
}

// finish scrapes every server a last time, stops the RSS sampler and
// returns each server's usage and its metrics per phase, sorted as
// report.RunResult's apiServerMetrics documents. Series that were 0 in a phase (no
// increase, a gauge at 0) are left out.
func (m *meter) finish(ctx context.Context) ([]report.APIServerUsage, []report.APIServerMetric) {
	m.scrapeMu.Lock()
	defer m.scrapeMu.Unlock()
	m.scrapeAll(ctx)
	m.halt()
	m.mu.Lock()
	defer m.mu.Unlock()
	var usage []report.APIServerUsage
	var metrics []report.APIServerMetric
	for i, s := range m.servers {
		u := report.APIServerUsage{Server: s.Name, PID: s.PID, PeakResidentMemoryBytes: m.peak[i]}
		if m.last[i] != nil {
			u.FinalResidentMemoryBytes = int64(m.last[i].values[metricRSSBytes])
		}
		for _, vals := range m.values[i] {
			u.CPUSeconds += vals[metricCPUSeconds] // the phases' sum: right across a restart
		}
		for _, p := range m.order {
			if pu := m.usage[i][p]; pu != nil {
				u.Phases = append(u.Phases, *pu)
			}
			vals := m.values[i][p]
			for _, k := range slices.Sorted(maps.Keys(vals)) {
				name, labels := splitSeriesKey(k)
				if name == metricCPUSeconds || name == metricRSSBytes || vals[k] == 0 {
					continue
				}
				metrics = append(metrics, report.APIServerMetric{Server: s.Name, Phase: p, Name: name, Labels: labels, Value: vals[k], Gauge: m.gauges[k]})
			}
		}
		usage = append(usage, u)
	}
	return usage, metrics
}

// SeriesLabel names a series of m's metric by its kept label values, in
// the order apiserverMetrics keeps them, space separated, empty values
// left out: "LIST pods 200" for apiserver_request_total, "pods etcd" for
// apiserver_storage_list_total; "" for a series without labels.
func SeriesLabel(m report.APIServerMetric) string {
	name := strings.TrimSuffix(strings.TrimSuffix(m.Name, "_count"), "_sum")
	var labels []string
	for _, s := range apiserverMetrics {
		if s.name == name || s.name == m.Name {
			labels = s.labels
			break
		}
	}
	var parts []string
	for _, l := range labels {
		if v := m.Labels[l]; v != "" {
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, " ")
}

// APIServerMeter reads the own /metrics of kube-apiservers at each phase
// boundary a caller sets (SetPhase) and attributes every counter's
// increase to the phase that ends, a gauge its value at the phase's end;
// it samples the resident set of those running on this machine every
// 250 ms. `lwbench run --workers --kube-apiserver` and `lwbench scrape
// --kubeconfig` set its figures (report.RunResult.APIServers and
// APIServerMetrics) beside the workers' client figures.
type APIServerMeter struct{ m *meter }

// MeterAPIServers scrapes every server once (the baseline) and counts
// into phase from then on; a server without a RESTConfig is metered from
// /proc alone (its PID). logf is told of each failed scrape, whose
// increase then goes to the next phase scraped. It fails when a server's
// RESTConfig gives no HTTP client.
func MeterAPIServers(ctx context.Context, servers []APIServer, phase string, logf func(string, ...any)) (*APIServerMeter, error) {
	m, err := startMeter(ctx, servers, phase, logf)
	if err != nil {
		return nil, err
	}
	return &APIServerMeter{m: m}, nil
}

// SetPhase scrapes every server, attributing what changed since the last
// scrape to the phase that ends, and counts into phase from now on (a
// phase entered again sums).
func (a *APIServerMeter) SetPhase(ctx context.Context, phase string) { a.m.setPhase(ctx, phase) }

// Finish scrapes every server a last time, stops sampling and returns
// each server's CPU and memory (by phase) and its metrics per phase, in
// the servers' order, then the phases' (as report.RunResult documents
// APIServerMetrics); series that were 0 in a phase are left out.
func (a *APIServerMeter) Finish(ctx context.Context) ([]report.APIServerUsage, []report.APIServerMetric) {
	return a.m.finish(ctx)
}
