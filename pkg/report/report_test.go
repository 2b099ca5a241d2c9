package report

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestValidationOK(t *testing.T) {
	tests := []struct {
		name        string
		v           Validation
		wantOK      bool
		wantSummary string
	}{
		{name: "clean", v: Validation{HistoryEvents: 10, PrevKVMissing: 3}, wantOK: true, wantSummary: "none"},
		{name: "lost", v: Validation{Lost: 2, Violations: []Violation{{Watcher: 4, Kind: "reliable", Revision: 17}}},
			wantSummary: "2 lost, first: reliable at revision 17 (watcher 4)"},
		{name: "bookmarkable, with the key", v: Validation{Bookmarkable: 776, Violations: []Violation{{Watcher: 3, Kind: "bookmarkable", Revision: 3575, Key: "/registry/pods/ns-2/churn-252\x1b"}}},
			wantSummary: `776 bookmark violations, first: bookmarkable at revision 3575 (watcher 3, key "/registry/pods/ns-2/churn-252\x1b")`},
		{name: "unverified", v: Validation{UnverifiedEvents: 1}, wantSummary: "1 unverified events"},
		{name: "recorder", v: Validation{RecorderError: "history recorder: compacted"}, wantSummary: "history recorder: compacted"},
		{name: "unparsed resourceVersion", v: Validation{UnparsedResourceVersions: 2, Violations: []Violation{{Watcher: 1, Kind: "unparsed-resourceVersion", Key: "/registry/pods/ns-1/a"}}},
			wantSummary: `2 unparsed resourceVersions, first: unparsed-resourceVersion at revision 0 (watcher 1, key "/registry/pods/ns-1/a")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.OK(); got != tt.wantOK {
				t.Errorf("OK() = %v, want %v", got, tt.wantOK)
			}
			if got := tt.v.Summary(); got != tt.wantSummary {
				t.Errorf("Summary() = %q, want %q", got, tt.wantSummary)
			}
		})
	}
}

// TestBenchstatFormat checks the lines benchstat parses: a name starting
// with Benchmark and a GOMAXPROCS suffix, an iteration count, then value
// and unit pairs.
func TestBenchstatFormat(t *testing.T) {
	r := &RunResult{Scenario: Scenario{Profile: "informer", Watchers: 10, WriteRatePerSecond: 200, DurationMs: 20000}}
	r.Writes.ThroughputPerSecond = 199.5
	r.Writes.Latency.P99Ms = 3.25
	var b bytes.Buffer
	if err := WriteBenchstat(&b, "Test CPU", RunBenchstat(r)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 || lines[3] != "cpu: Test CPU" {
		t.Fatalf("output:\n%s", b.String())
	}
	line := regexp.MustCompile(`^BenchmarkLwbenchRun/profile=informer/watchers=10/rate=200-\d+\t1(\t[-0-9.e+]+ [a-z0-9/-]+)+$`)
	if !line.MatchString(lines[4]) {
		t.Errorf("benchmark line %q is not in Go's benchmark format", lines[4])
	}
	for _, want := range []string{"\t2e+10 ns/op", "\t199.5 writes/s", "\t3.25 p99-write-ms"} {
		if !strings.Contains(lines[4], want) {
			t.Errorf("benchmark line %q lacks %q", lines[4], want)
		}
	}
}

// TestRunResultJSON checks the names the schema documents.
func TestRunResultJSON(t *testing.T) {
	r := &RunResult{SchemaVersion: RunSchemaVersion, Relists: []Relist{{Attempts: []ListAttempt{{ResourceVersion: ""}}}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"schemaVersion":4`, `"resourceVersion":""`, `"fromResponse":`, `"intervals":null`, `"self":{`, `"p999Ms"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	// The held-back delivery and its interval fields appear only with a
	// hold, so that a run without one reads as before.
	// The API front's sections appear only for a run through
	// kube-apiserver, and no old name is written.
	for _, absent := range []string{`"heldBack"`, `"heldBackEvents"`, `"heldBackDeliveryP99Ms"`, `"apiserver"`, `"requests"`, `"holds"`,
		`"etcd"`, `"apiservers"`, `"apiserverMetrics"`, `"fromCommit"`, `"watchers":[`, `"namespaceCleanup"`} {
		if bytes.Contains(b, []byte(absent)) {
			t.Errorf("JSON of a run without a hold has %s", absent)
		}
	}
	r.Delivery.HeldBack = &HeldBackDelivery{Watchers: 1, Events: 2}
	r.Intervals = []Interval{{HeldBackEvents: 2, HeldBackDeliveryP99Ms: 1500}}
	if b, err = json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"heldBack":{"watchers":1,"events":2,"timedEvents":0,"fromResponse":{`, `"heldBackEvents":2`, `"heldBackDeliveryP99Ms":1500`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON of a run with a hold lacks %s", want)
		}
	}
}

func TestFaultRelistSummary(t *testing.T) {
	tests := []struct {
		f    Fault
		want string
	}{
		{Fault{}, "0"},
		{Fault{Relists: 4, RelistReasons: map[string]int{"watch-error": 3, "compacted": 1}}, "4 (1 compacted, 3 watch-error)"},
	}
	for _, tt := range tests {
		if got := tt.f.RelistSummary(); got != tt.want {
			t.Errorf("RelistSummary(%+v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}
