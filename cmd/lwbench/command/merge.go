package command

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
)

// mergeOptions are `lwbench merge`'s options: the output format and the
// workers' result files.
type mergeOptions struct {
	out   outputOptions
	files []string
	// etcdMetrics is `lwbench scrape`'s output (its JSON, or its pod's
	// log), set beside the merged client figures.
	etcdMetrics string
}

func (o *mergeOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, false)
	fs.StringVar(&o.etcdMetrics, "etcd-metrics", "", "etcd's own /metrics per phase of the load, as lwbench scrape printed it (its JSON, or its pod's log), set beside the merged figures")
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
Each file is at most 64 MiB, all together 256 MiB.`,
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

// runMerge merges the workers' results and renders the merged result:
// the run summary (makeRunTable), the workers table (table and markdown),
// what follows a run's summary (writeRunTail). It returns a read or merge
// error before printing anything, and after printing the broken
// guarantees and a failed cleanup, as `lwbench run`.
func runMerge(o *mergeOptions, out, errOut io.Writer) error {
	if err := o.out.prepare(); err != nil {
		return err
	}
	results, err := readWorkerResults(o.files)
	if err != nil {
		return err
	}
	var m *report.EtcdMetrics
	if o.etcdMetrics != "" {
		if m, err = readEtcdMetrics(o.etcdMetrics); err != nil {
			return fmt.Errorf("--etcd-metrics: %w", err)
		}
	}
	res, err := report.MergeRuns(results)
	if err != nil {
		return fmt.Errorf("merge: %w (%s)", err, shardLegend(o.files, results))
	}
	if m != nil {
		if res.EtcdMetrics != nil {
			return fmt.Errorf("--etcd-metrics %s: the workers' results hold etcd's /metrics already (%s)", o.etcdMetrics, res.EtcdMetrics.Endpoint)
		}
		res.EtcdMetrics = m
	}
	return writeRunResult(&o.out, out, errOut, res, nil, nil)
}

// readWorkerResults reads the run results at paths (report.ReadDocument,
// report.Decode), each a worker's (with its shard); together at most
// report.MaxTotalDocumentBytes, checked before any is read. Every error is
// one line naming its file.
func readWorkerResults(paths []string) ([]*report.RunResult, error) {
	if _, err := report.SizeDocuments(paths, report.MaxTotalDocumentBytes); err != nil {
		return nil, err
	}
	var rs []*report.RunResult
	for _, p := range paths {
		b, err := report.ReadDocument(p)
		if err != nil {
			return nil, err
		}
		if trimmed := bytes.TrimSpace(b); len(trimmed) == 0 || trimmed[0] != '{' {
			// Not a JSON document: a worker's log (lwbench worker
			// --log-result), its result on one line.
			if doc, ok := loggedResult(b); ok {
				b = doc
			}
		}
		h, v, err := report.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		r, ok := v.(*report.RunResult)
		if !ok {
			return nil, fmt.Errorf("%s: a %s document; merge reads the RunResult of each worker (lwbench worker -w json)", p, h.Kind)
		}
		if r.Shard == nil {
			return nil, fmt.Errorf("%s: a run of a whole load, not a worker's (no shard): nothing to merge it with", p)
		}
		rs = append(rs, r)
	}
	return rs, nil
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
// generator limited its figures (report.GeneratorLimited).
func makeWorkerTable(ws []report.WorkerSummary) output.Table {
	t := output.Table{
		Header:  []string{"shard", "writes completed / planned", "write errors", "events (timed)", "relists", "cpu cores", "generator limited", "verdict"},
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
