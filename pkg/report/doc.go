// Package report holds the versioned results of lwbench's commands
// (RunResult, WatchResult, PutResult, ListResult), the parts they share
// (Latency, WriteStats, Validation, MemberStats, Fault, ...), their
// benchstat lines, and the reading of every JSON document lwbench and
// scripts/ write. It renders nothing: each command builds its table from
// these types (cmd/lwbench/command, etcdctl's makeXTable), and
// internal/output writes it.
//
// # Kinds
//
// Every document carries a kind (KindRun, KindExperiment, KindFaultRuns,
// ...) and the schemaVersion of that kind. Identify tells a document's
// kind, from its kind field or, for documents written before that field,
// from the fields only that kind has; Decode decodes lwbench's own
// results by kind, and experiment.Decode the experiments'. A reader
// dispatches on the kind instead of trying one type after another.
//
// # Reading
//
// ReadDocument reads a regular file of at most MaxDocumentBytes and opens
// it without blocking, so that a FIFO or a device given as a result is
// refused at once.
//
// # Schema versions
//
// A kind's schema version changes when a field is renamed, removed or
// changes meaning; adding a field keeps it. docs/lwbench-json.md and
// docs/lwbench-experiments.md document every field.
package report
