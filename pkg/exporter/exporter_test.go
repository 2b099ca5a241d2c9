package exporter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/live"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// TestAggregateTopNamespaces: namespaces beyond the top N by bytes (by
// objects without values) are summed as _other, every figure's total is
// kept, cluster-scoped rows and rows of no object keep their labels, and
// the count scans plan a Range per resource and per top namespace of it.
func TestAggregateTopNamespaces(t *testing.T) {
	row := func(resource, ns string, objects, revisions, valueBytes int64) snapshot.UsageRow {
		return snapshot.UsageRow{Class: keyspace.ClassObject, Prefix: "/registry", Resource: resource, Path: resource, Namespace: ns,
			Objects: objects, Revisions: revisions, LiveValueBytes: valueBytes}
	}
	rows := []snapshot.UsageRow{
		row("pods", "big", 1, 1, 9000),
		row("pods", "many", 50, 50, 500),
		row("pods", "small", 2, 4, 200),
		row("configmaps", "small", 1, 1, 100),
		row("configmaps", "tiny", 1, 3, 10),
		row("namespaces", "", 4, 4, 40),
		{Class: keyspace.ClassCompactRevKey, Objects: 1, Revisions: 1, LiveValueBytes: 3},
	}
	tests := []struct {
		name    string
		values  bool
		n       int
		wantTop []string
		want    map[Series]int64 // objects
	}{
		{"by bytes, top 2", true, 2, []string{"big", "many"}, map[Series]int64{
			{"", "pods", "big"}: 1, {"", "pods", "many"}: 50, {"", "pods", "_other"}: 2, {"", "configmaps", "_other"}: 2,
			{"", "namespaces", ""}: 4, {"", "_compact-rev-key", ""}: 1}},
		{"by objects, top 1", false, 1, []string{"many"}, map[Series]int64{
			{"", "pods", "many"}: 50, {"", "pods", "_other"}: 3, {"", "configmaps", "_other"}: 2,
			{"", "namespaces", ""}: 4, {"", "_compact-rev-key", ""}: 1}},
		{"no cap", true, 0, []string{"big", "many", "small", "tiny"}, map[Series]int64{
			{"", "pods", "big"}: 1, {"", "pods", "many"}: 50, {"", "pods", "small"}: 2, {"", "configmaps", "small"}: 1,
			{"", "configmaps", "tiny"}: 1, {"", "namespaces", ""}: 4, {"", "_compact-rev-key", ""}: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &live.Usage{Usage: snapshot.Usage{Rows: rows}, Values: tt.values}
			res := aggregate(u, tt.n)
			if fmt.Sprint(res.Top) != fmt.Sprint(tt.wantTop) {
				t.Errorf("got top %v, want %v", res.Top, tt.wantTop)
			}
			got := map[Series]int64{}
			var revisions, live int64
			var history float64
			for s, f := range res.Series {
				got[s] = f.Objects
				revisions += f.Revisions
				live += f.LiveValueBytes
				history += f.HistoryValueBytes
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got objects %v, want %v", got, tt.want)
			}
			if revisions != 64 {
				t.Errorf("got %d revisions in all, want the rows' 64", revisions)
			}
			// pods/small: 2 revisions beyond 2 objects of 100 bytes each
			// on average; configmaps/tiny: 2 beyond 1 of 10 bytes.
			if wantLive, wantHistory := int64(9853), 220.0; tt.values && (live != wantLive || history != wantHistory) {
				t.Errorf("got live %d, history %g value bytes; want %d, %g", live, history, wantLive, wantHistory)
			}
		})
	}
	res := aggregate(&live.Usage{Usage: snapshot.Usage{Rows: rows}, Values: true}, 2)
	var plan []string
	for _, tg := range res.targets {
		plan = append(plan, fmt.Sprintf("%s%v", tg.key, tg.namespaces))
	}
	if got, want := strings.Join(plan, " "), "/registry/configmaps/[] /registry/namespaces/[] /registry/pods/[big many]"; got != want {
		t.Errorf("got count plan %q, want %q", got, want)
	}
}

// flakyClient fails every request while fail is set, as a stopped
// member does.
type flakyClient struct {
	live.Client
	fail atomic.Bool
}

var errDown = errors.New("member down")

func (c *flakyClient) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if c.fail.Load() {
		return nil, errDown
	}
	return c.Client.Get(ctx, key, opts...)
}

func (c *flakyClient) Status(ctx context.Context, ep string) (*clientv3.StatusResponse, error) {
	if c.fail.Load() {
		return nil, errDown
	}
	return c.Client.Status(ctx, ep)
}

func (c *flakyClient) MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	if c.fail.Load() {
		return nil, errDown
	}
	return c.Client.MemberList(ctx, opts...)
}

// clock is a fake clock a test advances.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// gather collects e's metrics as name{labels} -> value.
func gather(t *testing.T, e *Exporter) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = value(mf.GetType(), m)
		}
	}
	return out
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	if t == dto.MetricType_COUNTER {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func put(t *testing.T, c *clientv3.Client, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := c.Put(t.Context(), k, "value of "+k); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFailedScanKeepsValues: a scan that fails (every request refused)
// leaves every figure of the last good scan, counts the error, keeps the
// last success's time, and Health turns false once that is older than
// StaleIntervals intervals, naming the error; a scan that succeeds again
// makes it healthy.
func TestFailedScanKeepsValues(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	put(t, c, "/registry/pods/a/p1", "/registry/pods/a/p2", "/registry/pods/b/p1", "/registry/namespaces/a")
	fc := &flakyClient{Client: c}
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	e := New(fc, Options{Endpoints: srv.Endpoints, Interval: time.Minute, CountInterval: 10 * time.Second, Values: true, Now: clk.Now})
	if ok, reason := e.Health(); !ok {
		t.Errorf("before the first scan: got unhealthy (%s), want healthy while it runs", reason)
	}
	if err := e.Scan(t.Context(), KindFull); err != nil {
		t.Fatalf("full scan: %v", err)
	}
	good := gather(t, e)
	for k, want := range map[string]float64{
		`etcdinspect_objects{group="",namespace="a",resource="pods"}`:                                       2,
		`etcdinspect_objects{group="",namespace="",resource="namespaces"}`:                                  1,
		`etcdinspect_scan_errors_total{kind="full"}`:                                                        0,
		`etcdinspect_value_bytes{group="",method="exact",namespace="b",resource="pods",state="live"}`:       float64(len("value of /registry/pods/b/p1")),
		`etcdinspect_last_successful_scan_timestamp_seconds{kind="full"}`:                                   1_800_000_000,
		`etcdinspect_value_bytes{group="",method="estimate",namespace="b",resource="pods",state="history"}`: 0,
	} {
		if got, ok := good[k]; !ok || got != want {
			t.Errorf("after a good scan: got %s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if good[`etcdinspect_scan_requests{kind="full",request="range"}`] == 0 || good[`etcdinspect_scan_read_keys{kind="full"}`] < 4 {
		t.Errorf("got no cost of the full scan: %v", good)
	}

	fc.fail.Store(true)
	clk.Add(30 * time.Second)
	for _, kind := range []string{KindFull, KindCount} {
		if err := e.Scan(t.Context(), kind); !errors.Is(err, errDown) {
			t.Fatalf("%s scan with the member down: got %v, want %v", kind, err, errDown)
		}
	}
	bad := gather(t, e)
	for k, v := range good {
		if strings.HasPrefix(k, "etcdinspect_objects") || strings.HasPrefix(k, "etcdinspect_value_bytes") ||
			strings.HasPrefix(k, "etcdinspect_revisions") || strings.HasPrefix(k, "etcdinspect_member_db") ||
			strings.HasPrefix(k, "etcdinspect_last_successful") {
			if bad[k] != v {
				t.Errorf("after a failed scan: got %s = %v, want the last good %v", k, bad[k], v)
			}
		}
	}
	for _, kind := range []string{KindFull, KindCount} {
		if got := bad[`etcdinspect_scan_errors_total{kind="`+kind+`"}`]; got != 1 {
			t.Errorf("got %g %s scan errors, want 1", got, kind)
		}
	}
	if ok, reason := e.Health(); !ok {
		t.Errorf("30 s after the last good scan: got unhealthy (%s), want healthy within 3 x --count-interval", reason)
	}
	clk.Add(time.Second)
	ok, reason := e.Health()
	if ok || !strings.Contains(reason, "--count-interval") || !strings.Contains(reason, errDown.Error()) {
		t.Errorf("31 s after the last good scan: got healthy %v (%s), want unhealthy naming --count-interval and the error", ok, reason)
	}

	fc.fail.Store(false)
	if err := e.Scan(t.Context(), KindCount); err != nil {
		t.Fatalf("count scan: %v", err)
	}
	if ok, reason := e.Health(); !ok {
		t.Errorf("after a good count scan: got unhealthy (%s), want healthy", reason)
	}
	clk.Add(3*time.Minute + time.Second)
	if ok, reason := e.Health(); ok || !strings.Contains(reason, "--interval") {
		t.Errorf("3 min after the last full scan: got healthy %v (%s), want unhealthy naming --interval", ok, reason)
	}
}

// TestFirstScanFails: before any full scan succeeded, Health is false
// once one failed, and a count scan refuses to run.
func TestFirstScanFails(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	fc := &flakyClient{Client: etcdtest.NewClient(t, srv)}
	fc.fail.Store(true)
	e := New(fc, Options{Endpoints: srv.Endpoints, Interval: time.Minute, CountInterval: time.Second})
	if err := e.Scan(t.Context(), KindFull); err == nil {
		t.Fatal("got no error from a full scan of a member down")
	}
	if ok, reason := e.Health(); ok || !strings.Contains(reason, "no successful full scan") {
		t.Errorf("got healthy %v (%s), want unhealthy: no successful full scan", ok, reason)
	}
	fc.fail.Store(false)
	if err := e.Scan(t.Context(), KindCount); !errors.Is(err, ErrNoFullScan) {
		t.Errorf("count scan before a full one: got %v, want %v", err, ErrNoFullScan)
	}
}

// TestCountScan: a count scan updates the objects of the resources and
// top namespaces the full scan found, with the rest of a resource in
// _other, and leaves revisions and bytes to the next full scan.
func TestCountScan(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	put(t, c, "/registry/pods/a/p1", "/registry/pods/a/p2", "/registry/pods/a/p3", "/registry/pods/b/p1", "/registry/pods/c/p1",
		"/registry/namespaces/a")
	e := New(c, Options{Endpoints: srv.Endpoints, Interval: time.Minute, CountInterval: time.Second, TopNamespaces: 1})
	if err := e.Scan(t.Context(), KindFull); err != nil {
		t.Fatal(err)
	}
	before := gather(t, e)
	put(t, c, "/registry/pods/a/p4", "/registry/pods/d/p1", "/registry/pods/a/p1", "/registry/namespaces/b")
	if _, err := c.Delete(t.Context(), "/registry/pods/b/p1"); err != nil {
		t.Fatal(err)
	}
	if err := e.Scan(t.Context(), KindCount); err != nil {
		t.Fatal(err)
	}
	after := gather(t, e)
	for _, tt := range []struct {
		series        string
		before, after float64
		sameRevisions bool
	}{
		{`{group="",namespace="a",resource="pods"}`, 3, 4, true},
		{`{group="",namespace="_other",resource="pods"}`, 2, 2, true},
		{`{group="",namespace="",resource="namespaces"}`, 1, 2, true},
	} {
		if b, a := before["etcdinspect_objects"+tt.series], after["etcdinspect_objects"+tt.series]; b != tt.before || a != tt.after {
			t.Errorf("objects%s: got %g before and %g after the count scan, want %g and %g", tt.series, b, a, tt.before, tt.after)
		}
		if b, a := before["etcdinspect_revisions"+tt.series], after["etcdinspect_revisions"+tt.series]; b != a {
			t.Errorf("revisions%s: got %g after the count scan, want the full scan's %g", tt.series, a, b)
		}
	}
	ranges := after[`etcdinspect_scan_requests{kind="count",request="range"}`]
	// Two resources, one top namespace of pods, and ReadStatus' probes.
	if ranges < 3 || after[`etcdinspect_scan_read_keys{kind="count"}`] != 0 {
		t.Errorf("count scan: got %g Ranges, %g keys read; want at least 3 count_only Ranges reading no key",
			ranges, after[`etcdinspect_scan_read_keys{kind="count"}`])
	}
}

// TestMetricsLint: the exported metrics pass client_golang's promlint
// (promtool check metrics' rules): names, units, _total on counters only.
func TestMetricsLint(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	put(t, c, "/registry/pods/a/p1")
	e := New(c, Options{Endpoints: srv.Endpoints, Interval: time.Minute, CountInterval: time.Second, Values: true})
	for _, kind := range []string{KindFull, KindCount} {
		if err := e.Scan(t.Context(), kind); err != nil {
			t.Fatal(err)
		}
	}
	problems, err := testutil.CollectAndLint(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestScanCost: the cost a scan exports is what it asked: a full scan's
// Ranges are those of live.ReadStatus and live.ReadUsage (pages of 1000
// keys at the current and the compact revision), its keys read every key
// at both; a count scan's Ranges those of ReadStatus plus one per
// resource and per top namespace, reading no key.
func TestScanCost(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	var ops []clientv3.Op
	for i := range 2500 {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/registry/pods/ns%d/p%d", i%7, i), "v"))
		if len(ops) == 100 {
			if _, err := c.Txn(t.Context()).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
			ops = nil
		}
	}
	put(t, c, "/registry/pods/ns0/p0", "/registry/pods/ns1/p1")
	resp, err := c.Put(t.Context(), "compact_rev_key", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(t.Context(), resp.Header.Revision-1); err != nil {
		t.Fatal(err)
	}
	// The Ranges of ReadStatus alone, at the same revision.
	cc := &costClient{c: c}
	if _, err := live.ReadStatus(t.Context(), cc, srv.Endpoints, 0); err != nil {
		t.Fatal(err)
	}
	statusRanges := cc.take().Requests[RequestRange]

	e := New(c, Options{Endpoints: srv.Endpoints, Interval: time.Minute, CountInterval: time.Second, TopNamespaces: 3})
	for _, kind := range []string{KindFull, KindCount} {
		if err := e.Scan(t.Context(), kind); err != nil {
			t.Fatal(err)
		}
	}
	m := gather(t, e)
	// 2501 keys now (pods and compact_rev_key), 2500 at the compact
	// revision (before compact_rev_key): 3 pages each; the compact
	// revision bisected twice.
	for _, tt := range []struct {
		metric string
		want   float64
	}{
		{`etcdinspect_scan_requests{kind="full",request="range"}`, float64(statusRanges + 3 + (statusRanges - 1) + 3)},
		{`etcdinspect_scan_read_keys{kind="full"}`, 2501 + 2500},
		{`etcdinspect_scan_requests{kind="full",request="status"}`, 1},
		{`etcdinspect_scan_requests{kind="count",request="range"}`, float64(statusRanges + 1 + 3)},
		{`etcdinspect_scan_read_keys{kind="count"}`, 0},
		{`etcdinspect_requests_total{kind="count",request="range"}`, float64(statusRanges + 1 + 3)},
	} {
		if got := m[tt.metric]; got != tt.want {
			t.Errorf("%s: got %g, want %g (ReadStatus alone: %d Ranges)", tt.metric, got, tt.want, statusRanges)
		}
	}
	if m[`etcdinspect_scan_read_bytes{kind="full"}`] < 2*2501*float64(len("/registry/pods/ns0/p0")) {
		t.Errorf("got %g bytes read by the full scan, want at least its keys' bytes", m[`etcdinspect_scan_read_bytes{kind="full"}`])
	}
}

// TestRunSchedule drives Run with a fake clock: a full scan at once, then
// count scans every CountInterval and a full scan every Interval from the
// start of the last; while no full scan has succeeded, the full scan is
// retried every CountInterval and no count scan runs.
func TestRunSchedule(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	fc := &flakyClient{Client: etcdtest.NewClient(t, srv)}
	put(t, fc.Client.(*clientv3.Client), "/registry/pods/a/p1")
	fc.fail.Store(true) // the first full scan fails
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	start := clk.Now()
	type wait struct {
		d    time.Duration
		fire chan time.Time
	}
	waits := make(chan wait)
	type scan struct {
		kind string
		at   time.Duration
		ok   bool
	}
	scans := make(chan scan, 100)
	ctx, cancel := context.WithCancel(t.Context())
	e := New(fc, Options{Endpoints: srv.Endpoints, StatusTimeout: time.Second, Interval: time.Second, CountInterval: 300 * time.Millisecond,
		Now: clk.Now,
		After: func(d time.Duration) <-chan time.Time {
			w := wait{d, make(chan time.Time, 1)}
			select {
			case waits <- w:
			case <-ctx.Done():
			}
			return w.fire
		},
		OnScan: func(kind string, _ time.Duration, err error) {
			scans <- scan{kind, clk.Now().Sub(start), err == nil}
			if err != nil {
				fc.fail.Store(false) // the next scans succeed
			}
		}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
	var got []string
	for range 9 {
		s := <-scans
		got = append(got, fmt.Sprintf("%s@%s", s.kind, s.at))
		w := <-waits
		clk.Add(w.d)
		w.fire <- clk.Now()
	}
	cancel()
	<-done
	want := "full@0s full@300ms count@600ms count@900ms count@1.2s full@1.3s count@1.6s count@1.9s count@2.2s"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("got scans %s, want %s", g, want)
	}
}
