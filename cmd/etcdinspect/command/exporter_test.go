package command_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/exporter"
)

// deployDir holds the alert rules and the dashboard.
var deployDir = filepath.Join("..", "..", "..", "deploy")

// TestExporterBadFlags: bad flags are one-line usage errors (exit 2)
// naming the flag, before any connection.
func TestExporterBadFlags(t *testing.T) {
	ep := "http://127.0.0.1:2379"
	tests := []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{"no endpoints", []string{"exporter"}, []string{"--endpoints is required"}},
		{"listen without port", []string{"exporter", "--endpoints", ep, "--listen", "localhost"}, []string{"--listen", "not host:port"}},
		{"listen port not a number", []string{"exporter", "--endpoints", ep, "--listen", "127.0.0.1:http"}, []string{"--listen", "port"}},
		{"listen port too large", []string{"exporter", "--endpoints", ep, "--listen", "127.0.0.1:65536"}, []string{"--listen", "port"}},
		{"interval zero", []string{"exporter", "--endpoints", ep, "--interval", "0"}, []string{"--interval must be positive"}},
		{"interval negative", []string{"exporter", "--endpoints", ep, "--interval", "-1m"}, []string{"--interval must be positive"}},
		{"count interval negative", []string{"exporter", "--endpoints", ep, "--count-interval", "-1s"}, []string{"--count-interval"}},
		{"top namespaces negative", []string{"exporter", "--endpoints", ep, "--top-namespaces", "-1"}, []string{"--top-namespaces"}},
		{"quota zero", []string{"exporter", "--endpoints", ep, "--quota", "0"}, []string{"--quota"}},
		{"an argument", []string{"exporter", "db", "--endpoints", ep}, []string{"unknown command \"db\""}},
		{"cert without key", []string{"exporter", "--endpoints", ep, "--cert", "c.pem"}, []string{"--cert and --key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := run(t, tc.args...)
			if code != cli.ExitUsage || out != "" || strings.Count(stderr, "\n") != 1 {
				t.Errorf("got exit %d, stdout %q, stderr %q; want %d, nothing, one line", code, out, stderr, cli.ExitUsage)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(stderr, w) {
					t.Errorf("got stderr %q, want it to name %q", stderr, w)
				}
			}
		})
	}
}

// TestExporterDeadEndpoint: a dead endpoint is one line naming the cause,
// exit 1, as for the other live commands, before anything is served.
func TestExporterDeadEndpoint(t *testing.T) {
	dead := freePort(t)
	out, stderr, code := run(t, "exporter", "--endpoints", "http://"+dead, "--listen", "127.0.0.1:0")
	if code != cli.ExitError || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "connection refused") ||
		strings.Contains(stderr, "serving") {
		t.Errorf("got exit %d, stdout %q, stderr %q; want %d, nothing, one line saying connection refused", code, out, stderr, cli.ExitError)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in
// different goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// runningExporter is an exporter run in-process by cli.RunContext, as
// main runs it.
type runningExporter struct {
	addr   string
	stderr *syncBuffer
	stop   func(os.Signal)
	code   chan int
}

var servingRE = regexp.MustCompile(`serving http://(\S+)/metrics`)

// startExporter runs `etcdinspect exporter args...` on a loopback port the
// kernel chooses and waits until it serves.
func startExporter(t *testing.T, args ...string) *runningExporter {
	t.Helper()
	ctx, interrupt, cancel := cli.WithInterrupt(t.Context())
	t.Cleanup(cancel)
	e := &runningExporter{stderr: &syncBuffer{}, stop: interrupt, code: make(chan int, 1)}
	root := command.NewRootCommand()
	root.SetOut(io.Discard)
	root.SetErr(e.stderr)
	go func() {
		e.code <- cli.RunContext(ctx, root, append([]string{"exporter", "--listen", "127.0.0.1:0"}, args...), e.stderr)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := servingRE.FindStringSubmatch(e.stderr.String()); m != nil {
			e.addr = m[1]
			t.Cleanup(func() { e.shutdown(t, syscall.SIGINT) })
			return e
		}
		select {
		case code := <-e.code:
			t.Fatalf("exporter exited %d before serving: %s", code, e.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	interrupt(syscall.SIGINT)
	t.Fatalf("exporter did not serve within 30 s: %s", e.stderr.String())
	return nil
}

// shutdown ends the exporter's context as sig does in main and returns
// its exit code; it fails the test when the exporter takes more than 2 s.
func (e *runningExporter) shutdown(t *testing.T, sig os.Signal) int {
	t.Helper()
	e.stop(sig)
	select {
	case code := <-e.code:
		e.code <- code // for a second shutdown (t.Cleanup)
		return code
	case <-time.After(2 * time.Second):
		t.Fatalf("exporter did not stop within 2 s of %v", sig)
	}
	return -1
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, string(b)
}

// waitFor polls cond every 100 ms until it holds or within expires.
func waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, within, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape parses the exporter's /metrics into name{labels} -> value, the
// labels sorted by name as Prometheus' text format writes them.
func scrape(t *testing.T, addr string) (map[string]float64, string) {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.Counter.GetValue()
			}
			out[name+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out, body
}

// sumOf sums the series of a metric whose labels contain every one of
// labels.
func sumOf(metrics map[string]float64, name string, labels ...string) float64 {
	var sum float64
	for k, v := range metrics {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(k, l)
		}
		if match {
			sum += v
		}
	}
	return sum
}

// lookTool finds a tool of Debian's prometheus package, installing the
// package with scripts/install-prometheus.sh (as root only) when it is
// missing; it skips the test, saying why, when it cannot be had.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	script := filepath.Join("..", "..", "..", "scripts", "install-prometheus.sh")
	out, err := exec.Command(script).CombinedOutput()
	p, lerr := exec.LookPath(name)
	if lerr != nil {
		t.Skipf("%s is not installed and %s could not install it (%v): %s", name, script, err, strings.TrimSpace(string(out)))
	}
	t.Logf("%s", out)
	return p
}

// freePort returns a loopback port the kernel just handed out and took
// back: for a process that takes its address as a flag.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startPrometheus runs a real Prometheus server that scrapes target every
// second and evaluates the repository's alert rules, with its own
// configuration and storage in the test's directory; it is ended by its
// PID when the test ends. It returns the server's address.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin := lookTool(t, "prometheus")
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join(deployDir, "prometheus", "etcdinspect-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: etcdinspect
    static_configs:
      - targets: [%q]
`, rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	pid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			syscall.Kill(pid, syscall.SIGKILL)
			<-waited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus (pid %d) log:\n%s", pid, b)
		}
	})
	waitFor(t, 30*time.Second, "prometheus ready", func() (bool, string) {
		select {
		case err := <-waited:
			waited <- err
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus exited: %v\n%s", err, b)
		default:
		}
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return addr
}

// promQuery asks Prometheus' HTTP API for an instant vector and returns
// its single sample's value, ok false while there is none.
func promQuery(t *testing.T, addr, query string) (float64, bool, string) {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/api/v1/query?query="+url.QueryEscape(query))
	if code != http.StatusOK {
		return 0, false, body
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("query %s: %v: %s", query, err, body)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" || len(r.Data.Result) != 1 {
		return 0, false, body
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("query %s: value %q: %v", query, s, err)
	}
	return v, true, body
}

// TestExporterWithPrometheus runs the exporter against an embedded member
// written with Kubernetes objects and a real Prometheus server (Debian's
// package) scraping it every second: what Prometheus stores equals the
// offline usage of a snapshot saved at the revision the exporter read,
// promtool accepts the exporter's /metrics, and SIGTERM stops it with
// exit 0.
func TestExporterWithPrometheus(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	writeKubernetesObjects(t, t.Context(), c)
	path := filepath.Join(t.TempDir(), "snapshot.db")
	cfg := clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if _, err := snapshot.SaveWithVersion(t.Context(), zap.NewNop(), cfg, path); err != nil {
		t.Fatalf("snapshot save: %v", err)
	}
	var off usageJSON
	runJSON(t, &off, "usage", path)
	var offStatus struct{ Revision, CompactRevision int64 }
	runJSON(t, &offStatus, "status", path)
	var offPods int64
	for _, r := range off.Rows {
		if r.Resource == "pods" {
			offPods += r.Objects
		}
	}

	e := startExporter(t, "--endpoints", strings.Join(srv.Endpoints, ","), "--interval", "1m", "--count-interval", "1s",
		"--values", "--top-namespaces", "1")
	waitFor(t, 30*time.Second, "/healthz after the first full scan", func() (bool, string) {
		code, body := httpGet(t, "http://"+e.addr+"/healthz")
		return code == http.StatusOK && strings.Contains(body, "full scan ended"), fmt.Sprintf("%d %s", code, body)
	})
	metrics, body := scrape(t, e.addr)
	if got := metrics[`etcdinspect_scan_revision{kind="full"}`]; got != float64(offStatus.Revision) {
		t.Fatalf("the exporter read at revision %g, want the snapshot's %d: the comparison needs one instant", got, offStatus.Revision)
	}
	cmd := exec.Command(lookTool(t, "promtool"), "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics: %v:\n%s", err, out)
	}

	prom := startPrometheus(t, e.addr)
	// Let count scans replace the full scan's objects: the figures
	// compared below are then theirs.
	waitFor(t, 60*time.Second, "Prometheus has 2 count scans", func() (bool, string) {
		v, ok, body := promQuery(t, prom, `etcdinspect_scans_total{job="etcdinspect",kind="count"} >= 2`)
		return ok && v >= 2, body
	})
	for _, tc := range []struct {
		query string
		want  float64
	}{
		{`sum(etcdinspect_objects{job="etcdinspect"})`, float64(off.Total.Objects)},
		{`sum(etcdinspect_objects{job="etcdinspect",resource="pods"})`, float64(offPods)},
		{`sum(etcdinspect_revisions{job="etcdinspect"})`, float64(off.Total.Revisions)},
		{`sum(etcdinspect_value_bytes{job="etcdinspect",state="live",method="exact"})`, float64(off.Total.LiveValueBytes)},
		{`etcdinspect_scan_revision{job="etcdinspect",kind="full"}`, float64(offStatus.Revision)},
		{`etcdinspect_compact_revision{job="etcdinspect"}`, float64(offStatus.CompactRevision)},
	} {
		var got float64
		waitFor(t, 60*time.Second, "Prometheus has "+tc.query, func() (bool, string) {
			v, ok, body := promQuery(t, prom, tc.query)
			got = v
			return ok, body
		})
		t.Logf("Prometheus: %s = %g (offline %g)", tc.query, got, tc.want)
		if got != tc.want {
			t.Errorf("Prometheus %s: got %g, want the offline %g", tc.query, got, tc.want)
		}
	}
	// The namespaces beyond the top one are summed as _other.
	if v, ok, body := promQuery(t, prom, `count(count by (namespace) (etcdinspect_objects{namespace!=""}))`); !ok || v != 2 {
		t.Errorf("got %g namespace label values (%s), want 2: the top namespace and _other", v, body)
	}
	// Every query of the dashboard answers, with data, on what
	// Prometheus stored (rates and trends need two samples); the alert
	// rules evaluate without error.
	waitFor(t, 30*time.Second, "Prometheus has 3 scrapes", func() (bool, string) {
		v, ok, body := promQuery(t, prom, `count_over_time(etcdinspect_current_revision{job="etcdinspect"}[1m])`)
		return ok && v >= 3, body
	})
	for _, q := range dashboardQueries(t) {
		q = strings.ReplaceAll(q, "$job", ".+")
		code, body := httpGet(t, "http://"+prom+"/api/v1/query?query="+url.QueryEscape(q))
		if code != http.StatusOK || !strings.Contains(body, `"status":"success"`) || strings.Contains(body, `"result":[]`) {
			t.Errorf("dashboard query %s: got %d %s, want a result", q, code, body)
		}
	}
	waitFor(t, 30*time.Second, "the alert rules evaluated", func() (bool, string) {
		_, body := httpGet(t, "http://"+prom+"/api/v1/rules")
		return strings.Count(body, `"health":"ok"`) == 2, body
	})
	if code := e.shutdown(t, syscall.SIGTERM); code != cli.ExitOK || !strings.Contains(e.stderr.String(), "stopped") {
		t.Errorf("after SIGTERM: got exit %d, stderr %q; want %d and stopped", code, e.stderr.String(), cli.ExitOK)
	}
}

// TestExporterEtcdStopped: when the member stops, scans fail, the metrics
// keep the last good values, the error counter grows, and /healthz turns
// 503 once the figures are older than 3 count intervals, naming the
// error; SIGINT stops the exporter with exit 130.
func TestExporterEtcdStopped(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	writeKubernetesObjects(t, t.Context(), c)
	e := startExporter(t, "--endpoints", strings.Join(srv.Endpoints, ","), "--interval", "2s", "--count-interval", "300ms", "--values")
	waitFor(t, 30*time.Second, "/healthz after the first full scan", func() (bool, string) {
		code, body := httpGet(t, "http://"+e.addr+"/healthz")
		return code == http.StatusOK && strings.Contains(body, "full scan ended"), fmt.Sprintf("%d %s", code, body)
	})
	good, _ := scrape(t, e.addr)
	objects, liveBytes := sumOf(good, "etcdinspect_objects"), sumOf(good, "etcdinspect_value_bytes", `state="live"`)
	if objects == 0 || liveBytes == 0 {
		t.Fatalf("got %g objects, %g live value bytes before the stop; want both", objects, liveBytes)
	}

	srv.Close()
	waitFor(t, 20*time.Second, "a failed scan counted", func() (bool, string) {
		m, _ := scrape(t, e.addr)
		n := sumOf(m, "etcdinspect_scan_errors_total")
		return n >= 1, fmt.Sprintf("%g errors", n)
	})
	bad, _ := scrape(t, e.addr)
	if got := sumOf(bad, "etcdinspect_objects"); got != objects {
		t.Errorf("after a failed scan: got %g objects, want the last good %g", got, objects)
	}
	if got := sumOf(bad, "etcdinspect_value_bytes", `state="live"`); got != liveBytes {
		t.Errorf("after a failed scan: got %g live value bytes, want the last good %g", got, liveBytes)
	}
	if got, want := sumOf(bad, "etcdinspect_last_successful_scan_timestamp_seconds", `kind="full"`),
		sumOf(good, "etcdinspect_last_successful_scan_timestamp_seconds", `kind="full"`); got != want {
		t.Errorf("after a failed scan: got the last full scan at %g, want the last good %g", got, want)
	}
	var body string
	waitFor(t, 20*time.Second, "/healthz 503", func() (bool, string) {
		var code int
		code, body = httpGet(t, "http://"+e.addr+"/healthz")
		return code == http.StatusServiceUnavailable, fmt.Sprintf("%d %s", code, body)
	})
	m, _ := scrape(t, e.addr)
	last := max(sumOf(m, "etcdinspect_last_successful_scan_timestamp_seconds", `kind="full"`),
		sumOf(m, "etcdinspect_last_successful_scan_timestamp_seconds", `kind="count"`))
	if age := float64(time.Now().UnixNano())/1e9 - last; age < 0.9 {
		t.Errorf("/healthz turned 503 %.3fs after the last successful scan, want only past 3 x --count-interval 300ms", age)
	}
	if !strings.Contains(body, "unhealthy") || !strings.Contains(body, "last error") {
		t.Errorf("got /healthz %q, want unhealthy with the last error", body)
	}
	if !strings.Contains(e.stderr.String(), "scan failed") {
		t.Errorf("got stderr %q, want a line per failed scan", e.stderr.String())
	}
	if code := e.shutdown(t, syscall.SIGINT); code != cli.ExitInterrupted {
		t.Errorf("after SIGINT: got exit %d, want %d", code, cli.ExitInterrupted)
	}
}

// TestExporterDeployFiles: promtool accepts the alert rules and their unit
// tests (each alert fires on a series crossing its threshold, not on one
// below), and every metric the rules and the dashboard query is one the
// exporter exports.
func TestExporterDeployFiles(t *testing.T) {
	rules := filepath.Join(deployDir, "prometheus", "etcdinspect-rules.yml")
	exprs := dashboardQueries(t)
	rb, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	exprs = append(exprs, string(rb))
	exported := exportedMetrics(t)
	nameRE := regexp.MustCompile(`etcdinspect_[a-z_]+`)
	for _, e := range exprs {
		for _, name := range nameRE.FindAllString(e, -1) {
			if !exported[name] {
				t.Errorf("%q queries %s, which the exporter does not export", e, name)
			}
		}
	}
	if len(exprs) < 10 {
		t.Errorf("got %d queries from the dashboard and the rules, want 10 or more: is the parser broken?", len(exprs))
	}

	promtool := lookTool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", filepath.Join(deployDir, "prometheus", "etcdinspect-rules.test.yml")}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboardQueries returns the PromQL of every panel of the Grafana
// dashboard.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	dashboard := filepath.Join(deployDir, "grafana", "etcdinspect-dashboard.json")
	b, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// exportedMetrics lists the metric names the exporter describes
// (prometheus.Collector's Describe; a Desc tells its name only in its
// String).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		exporter.New(nil, exporter.Options{Interval: time.Minute}).Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	nameRE := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := nameRE.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	if len(names) < 10 {
		t.Fatalf("found %d metric names in the exporter's descriptors, want 10 or more", len(names))
	}
	return names
}

// TestExporterClusterTLS runs the exporter against a 3-member cluster of
// real etcd 3.7.3 processes serving TLS with client certificates
// required, with etcdctl's --cacert, --cert and --key: every member is up
// with its db size and quota, and the objects equal `usage --endpoints`
// with the same flags.
func TestExporterClusterTLS(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	files, err := etcdproc.GenerateTLS(t.TempDir(), "root")
	if err != nil {
		t.Fatal(err)
	}
	files.ClientCertAuth = true
	cl, err := etcdproc.Start(t.Context(), etcdproc.Config{BinDir: bin, Members: 3, Dir: t.TempDir(), UnsafeNoFsync: true, TLS: &files})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	c, err := cl.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	writeKubernetesObjects(t, t.Context(), c)
	tlsFlags := []string{"--endpoints", strings.Join(cl.Endpoints(), ","), "--cacert", files.CA, "--cert", files.ClientCert, "--key", files.ClientKey}
	var on usageJSON
	runJSON(t, &on, append([]string{"usage"}, tlsFlags...)...)

	e := startExporter(t, append(tlsFlags, "--interval", "1m", "--count-interval", "1s")...)
	waitFor(t, 30*time.Second, "/healthz after the first full scan", func() (bool, string) {
		code, body := httpGet(t, "http://"+e.addr+"/healthz")
		return code == http.StatusOK && strings.Contains(body, "full scan ended"), fmt.Sprintf("%d %s", code, body)
	})
	m, _ := scrape(t, e.addr)
	if got := sumOf(m, "etcdinspect_objects"); got != float64(on.Total.Objects) {
		t.Errorf("got %g objects, want usage --endpoints' %d", got, on.Total.Objects)
	}
	for _, name := range []string{"etcdinspect_member_up", "etcdinspect_member_info"} {
		if got := sumOf(m, name); got != 3 {
			t.Errorf("got %s summing to %g, want 3 members", name, got)
		}
	}
	for k, v := range m {
		if (strings.HasPrefix(k, "etcdinspect_member_db_size_bytes{") || strings.HasPrefix(k, "etcdinspect_member_quota_bytes{")) && v <= 0 {
			t.Errorf("got %s = %g, want a size", k, v)
		}
	}
	if got := strings.Count(strings.Join(mapKeys(m), "\n"), "etcdinspect_member_db_size_bytes{"); got != 3 {
		t.Errorf("got %d members' db sizes, want 3", got)
	}
}

func mapKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestExporterWithAuth: on a member with authentication, a user with read
// access to the whole key space is enough for the exporter; a user with
// read access to compact_rev_key only gets it served, with every full
// scan failing for permission: /healthz 503 saying which access the role
// needs.
func TestExporterWithAuth(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	writeKubernetesObjects(t, ctx, c)
	addReadUsers(t, c)
	if _, err := c.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	ep := strings.Join(srv.Endpoints, ",")

	t.Run("reader", func(t *testing.T) {
		e := startExporter(t, "--endpoints", ep, "--user", "reader:pw", "--interval", "1m", "--count-interval", "1s")
		waitFor(t, 30*time.Second, "/healthz after the first full scan", func() (bool, string) {
			code, body := httpGet(t, "http://"+e.addr+"/healthz")
			return code == http.StatusOK && strings.Contains(body, "full scan ended"), fmt.Sprintf("%d %s", code, body)
		})
		if m, _ := scrape(t, e.addr); sumOf(m, "etcdinspect_objects") == 0 {
			t.Errorf("got no objects as reader")
		}
	})
	t.Run("prober", func(t *testing.T) {
		e := startExporter(t, "--endpoints", ep, "--user", "prober:pw", "--interval", "1m", "--count-interval", "1s")
		var body string
		waitFor(t, 30*time.Second, "/healthz 503", func() (bool, string) {
			var code int
			code, body = httpGet(t, "http://"+e.addr+"/healthz")
			return code == http.StatusServiceUnavailable, fmt.Sprintf("%d %s", code, body)
		})
		if !strings.Contains(body, "no successful full scan") || !strings.Contains(body, "needs read access to every key") {
			t.Errorf("got /healthz %q, want no successful full scan, naming the access the role needs", body)
		}
		if m, _ := scrape(t, e.addr); m[`etcdinspect_scan_errors_total{kind="full"}`] < 1 || sumOf(m, "etcdinspect_objects") != 0 {
			t.Errorf("got %g full scan errors and %g objects, want at least 1 error and no object",
				m[`etcdinspect_scan_errors_total{kind="full"}`], sumOf(m, "etcdinspect_objects"))
		}
	})
}

// TestExporterOldServer: on etcd 3.6, whose keys_only Ranges read every
// value from disk (etcd issue 20386), the exporter refuses to start
// without --allow-value-reads, saying why in one line, and with it serves
// the member's figures.
func TestExporterOldServer(t *testing.T) {
	cl, _ := startKubernetesCluster(t, etcdtest.OtherEtcdBinaries(t, "3.6.16"), 1)
	ep := strings.Join(cl.Endpoints(), ",")

	out, stderr, code := run(t, "exporter", "--endpoints", ep, "--listen", "127.0.0.1:0")
	if code != cli.ExitError || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "20386") ||
		!strings.Contains(stderr, "--allow-value-reads") {
		t.Errorf("without --allow-value-reads: got exit %d, stdout %q, stderr %q; want %d, one line naming etcd issue 20386 and the flag",
			code, out, stderr, cli.ExitError)
	}
	e := startExporter(t, "--endpoints", ep, "--allow-value-reads", "--interval", "1m", "--count-interval", "1s")
	waitFor(t, 30*time.Second, "/healthz after the first full scan", func() (bool, string) {
		code, body := httpGet(t, "http://"+e.addr+"/healthz")
		return code == http.StatusOK && strings.Contains(body, "full scan ended"), fmt.Sprintf("%d %s", code, body)
	})
	m, _ := scrape(t, e.addr)
	if sumOf(m, "etcdinspect_objects") == 0 || sumOf(m, "etcdinspect_member_info", `version="3.6.16"`) != 1 {
		t.Errorf("got %g objects, member info %v; want objects and one member of 3.6.16", sumOf(m, "etcdinspect_objects"), m)
	}
}

// TestExporterOutlivesAMember: on 3 members, the exporter's full scans
// go on while any one follower is down (each is killed in turn, then
// restarted): its client balances over every endpoint. Before, it read
// keys from the one follower chosen at start (as usage and keys do), and
// every scan failed once that member was gone.
func TestExporterOutlivesAMember(t *testing.T) {
	cl, _ := startKubernetesCluster(t, etcdtest.EtcdBinaries(t, "3.7.3"), 3)
	// A scan asks every member's Status, a dead one's until --dial-timeout.
	e := startExporter(t, "--endpoints", strings.Join(cl.Endpoints(), ","), "--interval", "3s", "--count-interval", "1s", "--dial-timeout", "1s")
	// fullScans counts the full scans that succeeded.
	fullScans := func() float64 {
		m, _ := scrape(t, e.addr)
		return sumOf(m, "etcdinspect_scans_total", `kind="full"`) - sumOf(m, "etcdinspect_scan_errors_total", `kind="full"`)
	}
	waitFor(t, 30*time.Second, "a first full scan", func() (bool, string) {
		n := fullScans()
		return n >= 1, fmt.Sprintf("%g full scans", n)
	})
	leader, err := cl.Leader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cl.Members {
		if m == leader {
			continue
		}
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		before := fullScans()
		waitFor(t, 40*time.Second, "two successful full scans with "+m.Name+" down", func() (bool, string) {
			n := fullScans()
			_, health := httpGet(t, "http://"+e.addr+"/healthz")
			return n >= before+2, fmt.Sprintf("%g full scans, %g before; /healthz: %s", n, before, health)
		})
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
		if err := cl.WaitReady(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
