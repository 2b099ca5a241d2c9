package command

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/plot"
	"github.com/kubestore/etcdkit/pkg/report"
)

type reportOptions struct {
	format      output.Format
	formatValue *output.FormatValue
	plotDir     string
	files       []string
}

func (o *reportOptions) AddFlags(fs *pflag.FlagSet) {
	o.formatValue = output.NewFormatValue(&o.format, output.FormatTable, output.FormatTable, output.FormatMarkdown, output.FormatCSV)
	fs.VarP(o.formatValue, "write-out", "w", "output format: "+o.formatValue.Names())
	fs.StringVar(&o.plotDir, "plots", "", "also write the results' plots into this directory (PNG)")
}

func (o *reportOptions) Validate() error {
	if o.plotDir != "" {
		if fi, err := os.Stat(o.plotDir); err != nil || !fi.IsDir() {
			return cli.FlagErrorf("--plots %s is not a directory", o.plotDir)
		}
	}
	return nil
}

// newReportCommand returns `lwbench report`.
func newReportCommand(runF func(*cobra.Command, *reportOptions) error) *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report RESULT.json...",
		Short: "Compare experiment results in one table, and plot them",
		Long: `report reads the JSON results of relist-storm, continuation, compaction-sweep,
defrag-stall and catchup (-w json, or --out), and of lwbench run -w json, and
renders them as one comparison table, a row per case (a run is one case), in the columns every experiment shares: relists and what
they read, time to resync, LIST restarts, compactions, defragmentation time,
write throughput and latency, the probe's latency, stall and errors, db sizes
and lost events. --plots DIR writes every result's figures plus db size over
time and relist cost against object count across all of them.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cli.FlagErrorf("report needs at least one RESULT.json")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.files = args
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd, o)
			}
			return runReport(o, cmd)
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.RegisterFlagCompletionFunc("write-out", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return o.formatValue.Allowed(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func runReport(o *reportOptions, cmd *cobra.Command) error {
	var results []*experiment.Result
	for _, f := range o.files {
		r, err := readResult(f)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	if err := output.Write(cmd.OutOrStdout(), o.format, makeComparisonTable(results), nil); err != nil {
		return err
	}
	if o.plotDir == "" {
		return nil
	}
	figs, err := plot.Figures(results)
	if err != nil {
		return err
	}
	return writeFigures(o.plotDir, figs)
}

// readResult reads one experiment result, refusing other documents and
// newer schema versions.
func readResult(path string) (*experiment.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r experiment.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a JSON result: %w", path, err)
	}
	if r.Experiment == "" {
		// Perhaps `lwbench run -w json`: its scenario names a profile.
		var run report.RunResult
		if err := json.Unmarshal(b, &run); err == nil && run.Scenario.Profile != "" {
			if run.SchemaVersion > report.RunSchemaVersion {
				return nil, fmt.Errorf("%s: run schema version %d is newer than this lwbench reads (%d)", path, run.SchemaVersion, report.RunSchemaVersion)
			}
			return experiment.FromRun(&run, strings.TrimSuffix(filepath.Base(path), ".json")), nil
		}
	}
	known := false
	for _, n := range experiment.Names {
		known = known || r.Experiment == n
	}
	switch {
	case !known:
		return nil, fmt.Errorf("%s: not an experiment or run result (experiment %q; want one of relist-storm, continuation, compaction-sweep, defrag-stall, catchup, or lwbench run's JSON)", path, r.Experiment)
	case r.SchemaVersion > experiment.SchemaVersion:
		return nil, fmt.Errorf("%s: schema version %d is newer than this lwbench reads (%d)", path, r.SchemaVersion, experiment.SchemaVersion)
	}
	return &r, nil
}
