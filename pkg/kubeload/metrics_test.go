package kubeload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/pkg/report"
)

// metricsText is a small excerpt of kube-apiserver 1.37.2's /metrics in
// the shapes it serves: counters with more labels than kept, a gauge, a
// histogram with buckets, and metrics that are not read.
const metricsText = `# HELP apiserver_storage_list_total [ALPHA] Number of LIST requests served from storage
# TYPE apiserver_storage_list_total counter
apiserver_storage_list_total{group="",index="",resource="pods",storage="etcd"} 3
apiserver_storage_list_total{group="",index="metadata.name",resource="pods",storage="etcd"} 2
apiserver_storage_list_total{group="",index="",resource="configmaps",storage="watchcache"} 7
# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 4
# HELP etcd_request_duration_seconds [ALPHA] Etcd request latency in seconds for each operation and object type.
# TYPE etcd_request_duration_seconds histogram
etcd_request_duration_seconds_bucket{group="",operation="listStream",resource="pods",le="0.005"} 1
etcd_request_duration_seconds_bucket{group="",operation="listStream",resource="pods",le="+Inf"} 2
etcd_request_duration_seconds_sum{group="",operation="listStream",resource="pods"} 0.25
etcd_request_duration_seconds_count{group="",operation="listStream",resource="pods"} 2
# HELP apiserver_request_duration_seconds [STABLE] not read
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="LIST",le="+Inf"} 9
apiserver_request_duration_seconds_sum{verb="LIST"} 1
apiserver_request_duration_seconds_count{verb="LIST"} 9
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.5e+08
`

func TestParseMetrics(t *testing.T) {
	s, err := parseMetrics(strings.NewReader(metricsText))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		key       string
		want      float64
		wantGauge bool
	}{
		{"labels not kept are summed", seriesKey("apiserver_storage_list_total", []string{"group", "resource", "storage"}, []string{"", "pods", "etcd"}), 5, false},
		{"one series", "apiserver_storage_list_total\x00resource=configmaps\x00storage=watchcache", 7, false},
		{"gauge", "apiserver_longrunning_requests\x00verb=WATCH\x00resource=pods", 4, true},
		{"histogram count", "etcd_request_duration_seconds_count\x00operation=listStream\x00resource=pods", 2, false},
		{"histogram sum", "etcd_request_duration_seconds_sum\x00operation=listStream\x00resource=pods", 0.25, false},
		{"cpu", metricCPUSeconds, 12.5, false},
		{"rss", metricRSSBytes, 2.5e8, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := s.values[tt.key]
			if !ok || got != tt.want || s.gauges[tt.key] != tt.wantGauge {
				t.Errorf("got %v (present %v, gauge %v), want %v (gauge %v); series %v", got, ok, s.gauges[tt.key], tt.want, tt.wantGauge, s.values)
			}
		})
	}
	if len(s.values) != len(tests) {
		t.Errorf("got %d series, want %d (metrics not read are skipped): %v", len(s.values), len(tests), s.values)
	}
}

func TestParseMetricsMalformed(t *testing.T) {
	if _, err := parseMetrics(strings.NewReader("apiserver_storage_list_total{resource=\"pods\" 3\n")); err == nil {
		t.Error("got no error for a malformed line")
	}
}

// TestMeterPhases serves /metrics from a test server whose counters grow
// between scrapes and checks that each phase gets the increase since the
// scrape that began it, gauges their value at its end, and that a phase
// entered twice sums.
func TestMeterPhases(t *testing.T) {
	scrapes := []string{
		"process_cpu_seconds_total 10\nprocess_resident_memory_bytes 100\netcd_requests_total{operation=\"get\",resource=\"pods\"} 1\n",
		"process_cpu_seconds_total 11\nprocess_resident_memory_bytes 300\netcd_requests_total{operation=\"get\",resource=\"pods\"} 4\n",
		"process_cpu_seconds_total 13\nprocess_resident_memory_bytes 200\netcd_requests_total{operation=\"get\",resource=\"pods\"} 4\n",
		"process_cpu_seconds_total 14\nprocess_resident_memory_bytes 250\netcd_requests_total{operation=\"get\",resource=\"pods\"} 10\n",
	}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("# TYPE process_cpu_seconds_total counter\n# TYPE process_resident_memory_bytes gauge\n# TYPE etcd_requests_total counter\n" + scrapes[min(n, len(scrapes)-1)]))
		n++
	}))
	defer srv.Close()
	ctx := context.Background()
	m, err := startMeter(ctx, []APIServer{{Name: "apiserver0", RESTConfig: &rest.Config{Host: srv.URL}}}, "seed", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	m.setPhase(ctx, "steady")
	m.setPhase(ctx, "seed")
	usage, metrics := m.finish(ctx)
	if len(usage) != 1 {
		t.Fatalf("got %d usages, want 1", len(usage))
	}
	u := usage[0]
	if u.CPUSeconds != 4 || u.PeakResidentMemoryBytes != 300 || u.FinalResidentMemoryBytes != 250 {
		t.Errorf("got %+v, want 4 CPU seconds, peak 300 bytes, final 250", u)
	}
	wantPhases := []report.APIServerPhaseUsage{
		{Phase: "seed", CPUSeconds: 2, PeakResidentMemoryBytes: 300, ResidentMemoryBytes: 250},
		{Phase: "steady", CPUSeconds: 2, PeakResidentMemoryBytes: 200, ResidentMemoryBytes: 200},
	}
	if len(u.Phases) != len(wantPhases) {
		t.Fatalf("got phases %+v, want %+v", u.Phases, wantPhases)
	}
	for i, p := range u.Phases {
		p.DurationMs = 0
		if p != wantPhases[i] {
			t.Errorf("phase %d: got %+v, want %+v", i, p, wantPhases[i])
		}
	}
	want := []report.APIServerMetric{
		{Server: "apiserver0", Phase: "seed", Name: "etcd_requests_total", Labels: map[string]string{"operation": "get", "resource": "pods"}, Value: 9},
	}
	if len(metrics) != len(want) || metrics[0].Phase != want[0].Phase || metrics[0].Name != want[0].Name || metrics[0].Value != want[0].Value ||
		metrics[0].Labels["resource"] != "pods" || SeriesLabel(metrics[0]) != "get pods" {
		t.Errorf("got metrics %+v, want %+v (steady's increase of 0 left out)", metrics, want)
	}
}

// TestMeterComponentFromProc meters a process with no /metrics (a
// component: RESTConfig nil), this test's own, from /proc: the CPU it
// burns in a phase is attributed to that phase, and its resident set is
// seen.
func TestMeterComponentFromProc(t *testing.T) {
	m, err := startMeter(t.Context(), []APIServer{{Name: "self", PID: os.Getpid()}}, "idle", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	m.setPhase(t.Context(), "busy")
	// Spin until the process has used 0.3 s more of CPU (however
	// loaded the machine), at most 20 s.
	start, err := procSample(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		for range 1 << 20 {
			x++
		}
		if s, err := procSample(os.Getpid()); err == nil && s.values[metricCPUSeconds]-start.values[metricCPUSeconds] >= 0.3 {
			break
		}
	}
	usage, _ := m.finish(t.Context())
	if len(usage) != 1 {
		t.Fatalf("got %d usages, want 1", len(usage))
	}
	u := usage[0]
	var busy float64
	for _, p := range u.Phases {
		if p.Phase == "busy" {
			busy = p.CPUSeconds
		}
	}
	if busy < 0.29 || u.CPUSeconds < busy || u.PeakResidentMemoryBytes <= 0 || u.FinalResidentMemoryBytes <= 0 {
		t.Errorf("got %+v (busy phase %.3f CPU s, spun %d times), want about 0.3 CPU s in busy and a resident set", u, busy, x)
	}
}
