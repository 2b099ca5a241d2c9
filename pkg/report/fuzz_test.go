package report_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/report"
)

// committedResults returns the paths of the JSON results under results/
// and results/experiments/ (and their kube and quick subdirectories).
func committedResults(t testing.TB) []string {
	t.Helper()
	var paths []string
	for _, pattern := range []string{"*.json", "experiments/*.json", "*/experiments/*.json", "*/*.json", "*/*/*.json"} {
		m, err := filepath.Glob(filepath.Join("..", "..", "results", pattern))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) == 0 {
		t.Fatal("no result under results/")
	}
	return paths
}

// TestCommittedResultsDecode checks that every committed run and
// experiment result decodes, the required fields (Result.Check,
// scenario.profile) included.
func TestCommittedResultsDecode(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range committedResults(t) {
		if seen[p] {
			continue
		}
		seen[p] = true
		b, err := report.ReadDocument(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := report.Identify(b)
		if err != nil {
			continue // not a result of lwbench or scripts/
		}
		switch h.Kind {
		case report.KindExperiment:
			if _, err := experiment.Decode(b); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		case report.KindRun, report.KindKubeRun, report.KindConformance, report.KindWatch, report.KindPut, report.KindList:
			if _, _, err := report.Decode(b); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
	}
}

// FuzzDecode feeds report decoding (Identify, Decode, experiment.Decode,
// then what `lwbench report` computes of a result) bytes seeded from the
// committed results: no input may panic, and none may allocate more than
// a bounded multiple of its size (a length read from the input must not
// size an allocation).
func FuzzDecode(f *testing.F) {
	for _, p := range committedResults(f) {
		if b, err := os.ReadFile(p); err == nil && len(b) <= 128<<10 { // small seeds mutate faster
			f.Add(b)
		}
	}
	f.Add([]byte(`{"experiment":"defrag-stall"}`))
	f.Add([]byte(`{"kind":"ExperimentResult","schemaVersion":1,"experiment":"catchup","cases":[{}]}`))
	f.Add([]byte(`{"kind":"RunResult","schemaVersion":2,"scenario":{"profile":"informer"},"relists":[{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		decode(b)
		runtime.ReadMemStats(&after)
		// encoding/json's own cost and a decoded struct per few input
		// bytes (an array of {}) are both linear in the input.
		if alloc, bound := after.TotalAlloc-before.TotalAlloc, uint64(1<<20+400*len(b)); alloc > bound {
			t.Errorf("decoding %d bytes allocated %d bytes, more than %d", len(b), alloc, bound)
		}
	})
}

// decode does with b what `lwbench report` does with a file's bytes.
func decode(b []byte) {
	h, err := report.Identify(b)
	if err != nil {
		return
	}
	var r *experiment.Result
	switch h.Kind {
	case report.KindExperiment:
		if r, err = experiment.Decode(b); err != nil {
			return
		}
	default:
		_, v, err := report.Decode(b)
		if err != nil {
			return
		}
		switch v := v.(type) {
		case *report.RunResult:
			r = experiment.FromRun(v, "fuzz")
		default:
			return
		}
	}
	if err := r.Check(); err != nil {
		panic("a decoded result fails Check: " + err.Error())
	}
	experiment.Compare([]*experiment.Result{r.Summary()})
	experiment.Benchstat(r)
}
