package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestIdentify checks the kind of every JSON document lwbench and
// scripts/ write, with the kind field and, for the committed results
// written before it, without.
func TestIdentify(t *testing.T) {
	results := filepath.Join("..", "..", "results")
	tests := []struct {
		name     string
		doc      string // JSON, or @path under results/
		wantKind string
		wantErr  error
	}{
		{name: "kind field", doc: `{"kind": "WatchResult", "schemaVersion": 1}`, wantKind: KindWatch},
		{name: "run without kind", doc: `{"schemaVersion": 2, "scenario": {"profile": "informer"}}`, wantKind: KindRun},
		{name: "watch without kind", doc: `{"schemaVersion": 1, "scenario": {"putRatePerSecond": 1}, "creation": {}}`, wantKind: KindWatch},
		{name: "put without kind", doc: `{"schemaVersion": 1, "scenario": {"ratePerSecond": 1}}`, wantKind: KindPut},
		{name: "list without kind", doc: `{"schemaVersion": 1, "scenario": {}, "rows": []}`, wantKind: KindList},
		{name: "experiment", doc: "@experiments/catchup.json", wantKind: KindExperiment},
		{name: "faults", doc: "@faults.json", wantKind: KindFaultRuns},
		{name: "version matrix", doc: "@version-matrix.json", wantKind: KindVersionMatrix},
		{name: "suite provenance", doc: "@experiments/provenance.json", wantKind: KindSuiteProvenance},
		{name: "benchmark comparison", doc: "@lwbench-vs-benchmark.json", wantKind: KindBenchmarkComparison},
		{name: "inspect bench", doc: "@inspect-bench.json", wantKind: KindInspectBench},
		{name: "other object", doc: `{"schemaVersion": 2, "scenario": {}}`, wantErr: ErrUnknownKind},
		{name: "array", doc: `[1, 2]`, wantErr: errors.New("any")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.doc)
			if p, ok := strings.CutPrefix(tt.doc, "@"); ok {
				var err error
				if b, err = ReadDocument(filepath.Join(results, p)); err != nil {
					t.Fatal(err)
				}
			}
			h, err := Identify(b)
			switch {
			case tt.wantErr != nil && err == nil:
				t.Fatalf("Identify = %+v, want an error", h)
			case tt.wantErr == ErrUnknownKind && !errors.Is(err, ErrUnknownKind):
				t.Fatalf("Identify error %v, want ErrUnknownKind", err)
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Identify: %v", err)
			case h.Kind != tt.wantKind:
				t.Errorf("kind %q, want %q", h.Kind, tt.wantKind)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	h, v, err := Decode([]byte(`{"kind": "RunResult", "schemaVersion": 2, "scenario": {"profile": "informer", "watchers": 3}}`))
	if r, ok := v.(*RunResult); err != nil || !ok || h.Kind != KindRun || r.Scenario.Watchers != 3 {
		t.Errorf("Decode of a run = %+v, %T, %v; want a *RunResult with 3 watchers", h, v, err)
	}
	// A version 2 run (delivery latencies over every watcher, held back
	// or not) still decodes; one newer than this build's does not.
	newer := RunSchemaVersion + 1
	if _, _, err := Decode([]byte(fmt.Sprintf(`{"kind": "RunResult", "schemaVersion": %d}`, newer))); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("Decode of schema version %d: %v, want ErrNewerSchema", newer, err)
	}
	if _, _, err := Decode([]byte(`{"kind": "FaultRuns", "schemaVersion": 1}`)); !errors.Is(err, ErrUnknownKind) || !strings.Contains(err.Error(), "FaultRuns") {
		t.Errorf("Decode of faults.json: %v, want ErrUnknownKind naming FaultRuns", err)
	}
}

// TestReadDocumentRefuses checks that a FIFO is refused without blocking,
// a device without reading it, and a file over the bound by its size.
func TestReadDocumentRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxDocumentBytes+1); err != nil { // sparse
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{fifo, "is a FIFO"},
		{"/dev/zero", "character device"},
		{dir, "directory"},
		{big, "larger than the limit"},
	} {
		done := make(chan error, 1)
		go func() { _, err := ReadDocument(tt.path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
				t.Errorf("ReadDocument(%s): %v, want an error naming the file and %q", tt.path, err, tt.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadDocument(%s) still blocked after 10s", tt.path)
		}
	}
}

// TestTooManyObjects checks that a document of more objects than
// MaxDocumentObjects (an array of empty objects, each of which decodes
// into a struct of hundreds of bytes) is refused before it is decoded,
// allocating little, while one within the limit decodes.
func TestTooManyObjects(t *testing.T) {
	doc := func(n int) []byte {
		return []byte(`{"kind":"RunResult","schemaVersion":2,"scenario":{"profile":"informer"},"relists":[` +
			strings.Repeat(`{},`, n) + `{}]}`)
	}
	var before, after runtime.MemStats
	b := doc(MaxDocumentObjects)
	runtime.ReadMemStats(&before)
	_, _, err := Decode(b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooManyObjects) || !strings.Contains(err.Error(), fmt.Sprint(MaxDocumentObjects)) {
		t.Errorf("Decode of %d objects: %v, want ErrTooManyObjects naming the limit", MaxDocumentObjects+2, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("refusing %d objects allocated %d bytes, want them uncounted, undecoded", MaxDocumentObjects+2, alloc)
	}
	if _, _, err := Decode(doc(1000)); err != nil {
		t.Errorf("Decode of 1002 objects: %v", err)
	}
	if n := countObjects([]byte(`{"a": "{\"{", "b": [{}, "\\"], "c": {}}`)); n != 3 {
		t.Errorf("countObjects counted %d objects, want 3 (braces in strings and escapes are not objects)", n)
	}
}
