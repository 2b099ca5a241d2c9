package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kubestore/etcdkit/internal/inputfile"
)

// The kinds of JSON document lwbench and scripts/ write. Every result
// carries its kind beside its schemaVersion, so that a reader (Decode,
// `lwbench report`) knows the Go type that decodes it without trying one
// after another. Documents written before the kind field existed are
// recognised by their shape (Identify).
const (
	KindRun   = "RunResult"   // lwbench run: RunResult
	KindWatch = "WatchResult" // lwbench watch: WatchResult
	KindPut   = "PutResult"   // lwbench put: PutResult
	KindList  = "ListResult"  // lwbench list: ListResult
	// KindKubeRun is `lwbench run --kube-apiserver` before
	// RunSchemaVersion 4 (KubeRunResult); Decode reads it as a RunResult.
	KindKubeRun = "KubeRunResult"
	// KindConformance is lwbench conformance: Conformance.
	KindConformance = "Conformance"
	KindExperiment  = "ExperimentResult" // the experiments: experiment.Result
	KindComparison  = "Comparison"       // lwbench report -w json: experiment.Comparison
	// KindFaultRuns is results/faults.json (scripts/faults.sh).
	KindFaultRuns = "FaultRuns"
	// KindVersionMatrix is results/version-matrix.json
	// (scripts/version-matrix.sh).
	KindVersionMatrix = "VersionMatrix"
	// KindSuiteProvenance is provenance.json of scripts/run-suite.sh.
	KindSuiteProvenance = "SuiteProvenance"
	// KindBenchmarkComparison is results/lwbench-vs-benchmark.json
	// (scripts/bench-vs-etcd.sh).
	KindBenchmarkComparison = "BenchmarkComparison"
	// KindInspectBench is results/inspect-bench.json
	// (scripts/inspect-bench.sh).
	KindInspectBench = "InspectBench"
)

// MaxDocumentBytes bounds the size of a JSON document ReadDocument reads:
// 64 MiB, over a hundred times the largest result the suite writes.
const MaxDocumentBytes = 64 << 20

// MaxDocumentObjects bounds the JSON objects ({...}) a document may hold:
// 524,288, over 200 times those of the largest result the suite writes
// (about one per 190 bytes of indented JSON). An array of empty objects
// ("[{},{},...]", 3 bytes each) decodes into a Go struct of up to a few
// hundred bytes each; this bounds what decoding any document allocates to
// about 200 MB besides its bytes.
const MaxDocumentObjects = 1 << 19

// ErrTooManyObjects is returned (wrapped, with the count and the limit)
// for a document of more than MaxDocumentObjects JSON objects.
var ErrTooManyObjects = errors.New("more JSON objects than the limit")

// MaxTotalDocumentBytes bounds the JSON `lwbench report` reads across
// all its files together: 256 MiB. Each file is still at most
// MaxDocumentBytes; what a reader keeps of each (a summary) adds up
// with the number of files, the bytes it holds while decoding one do
// not.
const MaxTotalDocumentBytes = 256 << 20

// ErrUnknownKind is returned when a JSON document is none of the kinds
// above.
var ErrUnknownKind = errors.New("not a result lwbench or scripts/ write")

// ErrNewerSchema is returned for a document whose schemaVersion is newer
// than this build reads.
var ErrNewerSchema = errors.New("schema version newer than this lwbench reads")

// ErrMissingField is returned (wrapped, naming the field by its JSON path,
// e.g. "cases[0].case") for a result that lacks a field every result of
// its kind has: a table of it would be empty or made of zeros that were
// never measured.
var ErrMissingField = errors.New("missing required field")

// Kinds lists every kind above.
var Kinds = []string{KindRun, KindWatch, KindPut, KindList, KindKubeRun, KindConformance, KindExperiment, KindComparison,
	KindFaultRuns, KindVersionMatrix, KindSuiteProvenance, KindBenchmarkComparison, KindInspectBench}

// MissingField returns an error wrapping ErrMissingField that names
// field, a JSON path such as "cases" or "scenario.profile".
func MissingField(field string) error {
	return fmt.Errorf("%w %q", ErrMissingField, field)
}

// Header is what identifies a JSON document: its kind and the version of
// that kind's schema.
type Header struct {
	Kind          string `json:"kind"`          // one of the Kind constants
	SchemaVersion int    `json:"schemaVersion"` // the kind's schema version; 0 when the document has none
}

// ReadDocument reads the JSON document at path: a regular file of at
// most MaxDocumentBytes (internal/inputfile: a FIFO or a device is refused
// instead of waited on or read forever).
func ReadDocument(path string) ([]byte, error) {
	return inputfile.Read(path, MaxDocumentBytes)
}

// SizeDocuments returns the total size of the files at paths after
// checking, without reading them, that each is a regular file ReadDocument
// would read and that together they hold at most maxTotal bytes; the
// error names the file that brings the total over maxTotal, the total
// and the limit, and wraps inputfile.ErrTooLarge.
func SizeDocuments(paths []string, maxTotal int64) (int64, error) {
	var total int64
	for _, p := range paths {
		f, err := inputfile.Open(p, MaxDocumentBytes)
		if err != nil {
			return total, err
		}
		size := f.Info.Size()
		f.Close()
		total += size
		if total > maxTotal {
			return total, fmt.Errorf("%s: %d bytes, which brings the files read to %d bytes, %w of %d bytes across all files",
				p, size, total, inputfile.ErrTooLarge, maxTotal)
		}
	}
	return total, nil
}

// countObjects returns the number of "{" in b outside JSON strings, up to
// MaxDocumentObjects+1: the objects of a JSON document, counted in one
// pass without allocating.
func countObjects(b []byte) int {
	n := 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && c == '{':
			if n++; n > MaxDocumentObjects {
				return n
			}
		}
	}
	return n
}

// shape holds the fields that tell apart the documents written before
// the kind field existed.
type shape struct {
	Header
	Experiment string          `json:"experiment"`
	Scenario   json.RawMessage `json:"scenario"`
	Provenance *struct {
		Script string `json:"script"`
	} `json:"provenance"`
	Creation      json.RawMessage `json:"creation"`
	Rows          json.RawMessage `json:"rows"`
	ReportCommand *string         `json:"reportCommand"`
	BenchmarkTool json.RawMessage `json:"benchmarkTool"`
	Timings       json.RawMessage `json:"timings"`
}

// Identify returns the kind and schema version of the JSON document b:
// its kind field or, for a document written before that field existed,
// the kind its fields show. It returns ErrUnknownKind for any other JSON
// object, ErrTooManyObjects for a document of more than MaxDocumentObjects
// objects (counted before anything is decoded), and a syntax error for
// bytes that are not one.
func Identify(b []byte) (Header, error) {
	if n := countObjects(b); n > MaxDocumentObjects {
		return Header{}, fmt.Errorf("%d JSON objects or more, %w of %d objects", n, ErrTooManyObjects, MaxDocumentObjects)
	}
	var s shape
	if err := json.Unmarshal(b, &s); err != nil {
		return Header{}, fmt.Errorf("not a JSON result: %w", err)
	}
	h := s.Header
	if h.Kind != "" {
		return h, nil
	}
	var sc struct {
		Profile       string   `json:"profile"`
		PutRate       *float64 `json:"putRatePerSecond"`
		RatePerSecond *float64 `json:"ratePerSecond"`
	}
	_ = json.Unmarshal(s.Scenario, &sc) // an array or absent: not a run's scenario
	switch {
	case s.Experiment != "":
		h.Kind = KindExperiment
	case sc.Profile != "":
		h.Kind = KindRun
	case s.Creation != nil && sc.PutRate != nil:
		h.Kind = KindWatch
	case sc.RatePerSecond != nil:
		h.Kind = KindPut
	case s.Rows != nil && s.Scenario != nil:
		h.Kind = KindList
	case s.Provenance != nil && s.Provenance.Script == "scripts/faults.sh":
		h.Kind = KindFaultRuns
	case s.Provenance != nil && s.Provenance.Script == "scripts/version-matrix.sh":
		h.Kind = KindVersionMatrix
	case s.ReportCommand != nil:
		h.Kind = KindSuiteProvenance
	case s.BenchmarkTool != nil:
		h.Kind = KindBenchmarkComparison
	case s.Timings != nil:
		h.Kind = KindInspectBench
	default:
		return h, ErrUnknownKind
	}
	return h, nil
}

// Decode decodes a result of one of lwbench's own commands: it returns a
// *RunResult, *WatchResult, *PutResult, *ListResult or *Conformance by
// the document's kind (Identify); a KubeRunResult (a run through
// kube-apiserver before RunSchemaVersion 4) decodes into a *RunResult
// (legacy.go), its kind and version kept in the returned Header. It returns an error
// wrapping ErrNewerSchema for a newer schema version, one wrapping
// ErrUnknownKind, naming the kind, for every other document (experiment
// results decode with experiment.Decode; a kind value none of Kinds is
// called unknown), and one wrapping ErrMissingField for a run (through
// kube-apiserver or not) without its scenario's profile.
func Decode(b []byte) (Header, any, error) {
	h, err := Identify(b)
	if err != nil {
		return h, nil, err
	}
	var v any
	var current int
	switch h.Kind {
	case KindRun:
		v, current = &RunResult{}, RunSchemaVersion
	case KindWatch:
		v, current = &WatchResult{}, WatchSchemaVersion
	case KindPut:
		v, current = &PutResult{}, PutSchemaVersion
	case KindList:
		v, current = &ListResult{}, ListSchemaVersion
	case KindKubeRun:
		v, current = &RunResult{}, lastKubeRunSchemaVersion
	case KindConformance:
		v, current = &Conformance{}, ConformanceSchemaVersion
	default:
		return h, nil, UnknownKind(h.Kind)
	}
	if err := CheckSchema(h, current); err != nil {
		return h, nil, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return h, nil, fmt.Errorf("%s: %w", h.Kind, err)
	}
	var profile string
	switch r := v.(type) {
	case *RunResult:
		profile = r.Scenario.Profile
	default:
		return h, v, nil
	}
	if profile == "" {
		return h, nil, fmt.Errorf("%s: %w", h.Kind, MissingField("scenario.profile"))
	}
	return h, v, nil
}

// UnknownKind returns the error wrapping ErrUnknownKind for a document
// of kind k that the caller does not read: "a FaultRuns document" for
// one of Kinds, `unknown kind "X"` for any other value.
func UnknownKind(k string) error {
	if slices.Contains(Kinds, k) {
		return fmt.Errorf("%w: a %s document", ErrUnknownKind, k)
	}
	return fmt.Errorf("%w: unknown kind %q (lwbench and scripts/ write %s)", ErrUnknownKind, k, strings.Join(Kinds, ", "))
}

// CheckSchema returns an error wrapping ErrNewerSchema when h's schema
// version is newer than current, the version this build writes.
func CheckSchema(h Header, current int) error {
	if h.SchemaVersion > current {
		return fmt.Errorf("%s %w: version %d, this lwbench reads up to %d", h.Kind, ErrNewerSchema, h.SchemaVersion, current)
	}
	return nil
}
