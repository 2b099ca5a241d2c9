package command

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/report"
)

// mergeOptions are `lwbench merge`'s options: the output format and the
// workers' result files.
type mergeOptions struct {
	out   outputOptions
	files []string
	// etcdMetrics is `lwbench scrape`'s output (its JSON, or its pod's
	// log): etcd's and kube-apiserver's own figures, set beside the
	// merged client figures.
	etcdMetrics string
}

func (o *mergeOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, false)
	fs.StringVar(&o.etcdMetrics, "etcd-metrics", "", "etcd's (and kube-apiserver's) own /metrics per phase of the load, as lwbench scrape printed them (its JSON, or its pod's log), set beside the merged figures")
}

func (o *mergeOptions) Validate() error {
	if len(o.files) == 0 {
		return cli.FlagErrorf("merge needs the RESULT.json of every worker")
	}
	return nil
}

// newMergeCommand returns `lwbench merge`; runF replaces the merge in flag
// tests.
func newMergeCommand(runF func(*cobra.Command, *mergeOptions) error) *cobra.Command {
	o := &mergeOptions{}
	cmd := &cobra.Command{
		Use:   "merge RESULT.json...",
		Short: "Merge the results of the workers of one divided load into the load's result",
		Long: `merge reads the JSON results (-w json) of the workers of one load divided into
shards (lwbench worker), one per shard index, and prints the result of the
whole load as lwbench run prints a result, then a table of the workers.
Counts are summed and latencies merged bucket by bucket from the histograms
each worker kept (never percentiles averaged): a result without them, of
another scenario or target, or a shard missing or given twice is refused with
a line naming the files. Each worker timed only the events its own writers
wrote; the per-second intervals are aligned on the writes' wall-clock start and
carry counts only. Exits 1 when the merged validation failed, as run does.
Each file is at most 64 MiB, all together 256 MiB.
The results of the workers of a divided relist-storm or catchup (their JSON,
or their logs' result lines, --log-result) are merged as the experiment's
--workers merges them (experiment.Merge) and printed as the experiment prints
its result.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.files = args
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd, o)
			}
			return runMerge(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	o.out.registerCompletion(cmd)
	return cmd
}

// runMerge merges the workers' result files and renders the merged
// result (mergeWorkerResults). It returns a read error before printing
// anything.
func runMerge(o *mergeOptions, out, errOut io.Writer) error {
	if err := o.out.prepare(); err != nil {
		return err
	}
	if len(o.files) > 0 {
		if b, err := report.ReadDocument(o.files[0]); err == nil && isExperimentWorker(b) {
			return mergeExperimentFiles(o, out)
		}
	}
	results, err := readWorkerResults(o.files)
	if err != nil {
		return err
	}
	var m *report.ServerMetrics
	if o.etcdMetrics != "" {
		if m, err = readServerMetrics(o.etcdMetrics); err != nil {
			return fmt.Errorf("--etcd-metrics: %w", err)
		}
	}
	return mergeWorkerResults(&o.out, o.files, results, "--etcd-metrics "+o.etcdMetrics, m, out, errOut)
}

// mergeExperimentFiles is runMerge for the workers' results of a divided
// experiment (the first file's kind): each file read bounded, together at
// most report.MaxTotalDocumentBytes, decoded (decodeExperimentWorker) and
// merged (mergeExperimentWorkers). --etcd-metrics is a load's and is
// refused.
func mergeExperimentFiles(o *mergeOptions, out io.Writer) error {
	if o.etcdMetrics != "" {
		return cli.FlagErrorf("--etcd-metrics: the files are an experiment's workers' results; lwbench scrape follows a load's phases")
	}
	if _, err := report.SizeDocuments(o.files, report.MaxTotalDocumentBytes); err != nil {
		return err
	}
	var results []*experiment.Result
	for _, p := range o.files {
		b, err := report.ReadDocument(p)
		if err != nil {
			return err
		}
		r, err := decodeExperimentWorker(b)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		results = append(results, r)
	}
	return mergeExperimentWorkers(o.out.format, o.files, results, out)
}

// mergeWorkerResults merges results (report.MergeRuns), the workers' of
// one load, names[i] naming where results[i] came from (a file, a pod),
// sets the servers' own figures m (etcd's and kube-apiserver's, from
// metricsName; nil for none) beside them and
// renders the merged result as `lwbench run` does: the run summary
// (makeRunTable), the workers table (table and markdown), what follows a
// run's summary (writeRunTail). lwbench merge and lwbench gather both
// end here. It returns a merge error before printing anything, and after
// printing the broken guarantees and a failed cleanup, as `lwbench run`.
func mergeWorkerResults(oo *outputOptions, names []string, results []*report.RunResult, metricsName string, m *report.ServerMetrics, out, errOut io.Writer) error {
	res, err := report.MergeRuns(results)
	if err != nil {
		return fmt.Errorf("merge: %w (%s)", err, shardLegend(names, results))
	}
	if m != nil {
		switch {
		case m.EtcdMetrics != nil && res.EtcdMetrics != nil:
			return fmt.Errorf("%s: the workers' results hold etcd's /metrics already (%s)", metricsName, res.EtcdMetrics.Endpoint)
		case len(m.APIServers) > 0 && len(res.APIServers) > 0:
			return fmt.Errorf("%s: the workers' results hold kube-apiserver's /metrics already (%s)", metricsName, res.APIServers[0].Server)
		}
		if m.EtcdMetrics != nil {
			res.EtcdMetrics = m.EtcdMetrics
		}
		if len(m.APIServers) > 0 {
			res.APIServers, res.APIServerMetrics = m.APIServers, m.APIServerMetrics
		}
	}
	return writeRunResult(oo, out, errOut, res, nil, nil)
}

// readWorkerResults reads the run results at paths (readWorkerResult),
// each a worker's (with its shard); together at most
// report.MaxTotalDocumentBytes, checked before any is read. Every error is
// one line naming its file.
func readWorkerResults(paths []string) ([]*report.RunResult, error) {
	if _, err := report.SizeDocuments(paths, report.MaxTotalDocumentBytes); err != nil {
		return nil, err
	}
	var rs []*report.RunResult
	for _, p := range paths {
		r, err := readWorkerResult(p)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// readWorkerResult reads one worker's result file with report.ReadDocument
// (a regular file of at most report.MaxDocumentBytes) and decodes it
// (decodeWorkerResult): lwbench merge's files and the result files of
// `lwbench run --workers`' worker processes. The error is one line naming
// path.
func readWorkerResult(path string) (*report.RunResult, error) {
	b, err := report.ReadDocument(path)
	if err != nil {
		return nil, err
	}
	r, err := decodeWorkerResult(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// decodeWorkerResult decodes a worker's result: its JSON document
// (lwbench worker -w json), or a log holding its result line (lwbench
// worker --log-result: the last line with resultLinePrefix, whatever else
// the log holds). Nothing at all (a worker that failed before it had a
// result) is "no result"; a document of another kind, or a run of a
// whole load (no shard), is refused.
func decodeWorkerResult(b []byte) (*report.RunResult, error) {
	b, err := workerDocument(b)
	if err != nil {
		return nil, err
	}
	h, v, err := report.Decode(b)
	if err != nil {
		return nil, err
	}
	r, ok := v.(*report.RunResult)
	if !ok {
		return nil, fmt.Errorf("a %s document; merge reads the RunResult of each worker (lwbench worker -w json)", h.Kind)
	}
	if r.Shard == nil {
		return nil, errors.New("a run of a whole load, not a worker's (no shard): nothing to merge it with")
	}
	return r, nil
}

// workerDocument returns a worker's result document: b itself, a JSON
// document, or the last result line of b, a log (resultLinePrefix).
// Nothing at all (a worker that failed before it had a result) is "no
// result".
func workerDocument(b []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return nil, errors.New("no result")
	}
	if trimmed[0] == '{' {
		return b, nil
	}
	// Not a JSON document: a worker's log, its result on one line.
	doc, ok := loggedResult(b)
	if !ok {
		return nil, fmt.Errorf("not a JSON result, nor a log with a %q line", strings.TrimSpace(resultLinePrefix))
	}
	return doc, nil
}

// isExperimentWorker reports whether b, a worker's result document or
// log (workerDocument), holds an experiment's result (report.KindExperiment):
// a worker of a divided relist-storm or catchup, whose results merge
// with experiment.Merge rather than as a load's.
func isExperimentWorker(b []byte) bool {
	doc, err := workerDocument(b)
	if err != nil {
		return false
	}
	h, err := report.Identify(doc)
	return err == nil && h.Kind == report.KindExperiment
}

// decodeExperimentWorker decodes the result of a worker of a divided
// experiment: its JSON document (lwbench EXPERIMENT --shards N -w json),
// or a log holding its result line (--log-result). A document of another
// kind, or a whole experiment's result (no shard), is refused.
func decodeExperimentWorker(b []byte) (*experiment.Result, error) {
	b, err := workerDocument(b)
	if err != nil {
		return nil, err
	}
	r, err := experiment.Decode(b)
	if err != nil {
		return nil, err
	}
	if r.Shard == nil {
		return nil, errors.New("a whole experiment's result, not a worker's (no shard): nothing to merge it with")
	}
	return r, nil
}

// mergeExperimentWorkers merges the results of a divided experiment's
// workers (experiment.Merge), names[i] naming where results[i] came from,
// and renders the merged result as the experiment's subcommand does
// (-w table, markdown, csv or json); like it, it returns an error wrapping
// watchload.ErrViolations after printing when a case lost an event.
func mergeExperimentWorkers(format output.Format, names []string, results []*experiment.Result, out io.Writer) error {
	res, err := experiment.Merge(results)
	if err != nil {
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s is shard %s", n, results[i].Shard)
		}
		return fmt.Errorf("merge: %w (%s)", err, strings.Join(parts, ", "))
	}
	if err := experimentLayout(res).write(out, format, res); err != nil {
		return err
	}
	return violations(res)
}

// shardLegend says which file holds which shard, for a merge error.
func shardLegend(paths []string, rs []*report.RunResult) string {
	parts := make([]string, len(paths))
	for i, p := range paths {
		parts[i] = fmt.Sprintf("%s is shard %s", p, rs[i].Shard)
	}
	return strings.Join(parts, ", ")
}

// makeWorkerTable lays a merged result's workers out, one row each by
// shard: its writes, events, relists, verdict, CPU and whether the
// generator limited its figures (report.GeneratorLimited), in at most
// 118 columns with four-digit counts.
func makeWorkerTable(ws []report.WorkerSummary) output.Table {
	t := output.Table{
		Header:  []string{"shard", "writes done / planned", "write errors", "events (timed)", "relists", "cpu cores", "generator limited", "verdict"},
		Numeric: []bool{true, true, true, true, true, true, false, false},
	}
	for _, w := range ws {
		cores := fmt.Sprintf("%.2f of %d", w.Self.CPUCores, w.Self.NumCPU)
		if w.Self.CPULimitCores > 0 {
			cores = fmt.Sprintf("%.2f of %.2f", w.Self.CPUCores, w.Self.CPULimitCores)
		}
		limited := "no"
		if w.GeneratorLimited {
			limited = "yes (the warnings)"
		}
		verdict, _, _ := strings.Cut(w.Verdict, ":")
		t.Rows = append(t.Rows, []string{w.Shard.String(), fmt.Sprintf("%d / %d", w.Writes.Completed, w.Writes.Planned),
			fmt.Sprint(w.Writes.Errors), fmt.Sprintf("%d (%d)", w.Events, w.TimedEvents), fmt.Sprint(w.Relists), cores, limited, verdict})
	}
	return t
}
