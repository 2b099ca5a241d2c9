package command

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	benchstat   string
	files       []string
}

func (o *reportOptions) AddFlags(fs *pflag.FlagSet) {
	o.formatValue = output.NewFormatValue(&o.format, output.FormatTable)
	fs.VarP(o.formatValue, "write-out", "w", "output format: "+o.formatValue.Names())
	fs.StringVar(&o.plotDir, "plots", "", "also write the results' plots into this directory (PNG)")
	fs.StringVar(&o.benchstat, "benchstat", "", "also write a benchstat-compatible line per case to this file (\"-\": stderr)")
}

func (o *reportOptions) Validate() error {
	return nil
}

// newReportCommand returns `lwbench report`.
func newReportCommand(runF func(*cobra.Command, *reportOptions) error) *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report RESULT.json...",
		Short: "Compare experiment results in one table, and plot them",
		Long: `report reads the JSON results of relist-storm, continuation, compaction-sweep,
defrag-stall and catchup (-w json, or --out), and of lwbench run -w json (with
or without --kube-apiserver), and renders them as one comparison table, a row
per case (a run is one case; the kube-apiserver column names the apiservers a
result went through, "-" for the etcd-direct model), in the columns every
experiment shares: relists and what
they read, backoff, relist and resync times (resync = backoff + relist),
LIST restarts, compactions, defragmentation time, write throughput and
latency, the probe's latency, stall and errors, db sizes and lost events; a
figure a result does not measure shows "-". The text table is split into
tables of at most 120 columns keyed by the case's number, notes below;
markdown and CSV keep one wide table. -w json prints the comparison as a
Comparison document. Other JSON files (watch, put and list results, lwbench
conformance's, scripts/' faults.json, version-matrix.json, provenance.json,
...) are refused with a line naming their kind, and a result lacking a
field its kind requires with a line naming the field. Each file is at most
64 MiB, all together 256 MiB; report keeps only each result's cases once
read. --plots DIR (created if missing) writes every result's figures plus db
size over time and relist cost against object count across all of them;
--benchstat FILE a benchstat line per case.`,
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
	if o.plotDir != "" {
		if err := output.PrepareDir(o.plotDir); err != nil {
			return cli.FlagErrorf("--plots: %v", err)
		}
	}
	if o.benchstat != "" && o.benchstat != "-" {
		if err := output.PrepareFile(o.benchstat); err != nil {
			return cli.FlagErrorf("--benchstat: %v", err)
		}
	}
	results, pngs, err := readResults(o.files, o.plotDir != "")
	if err != nil {
		return err
	}
	if err := writeComparison(cmd.OutOrStdout(), o.format, results); err != nil {
		return err
	}
	if o.benchstat != "" {
		var lines []report.BenchstatLine
		for _, r := range results {
			lines = append(lines, experiment.Benchstat(r)...)
		}
		if err := writeBenchstat(o.benchstat, cmd.ErrOrStderr(), lines); err != nil {
			return err
		}
	}
	for _, p := range pngs {
		path := filepath.Join(o.plotDir, p.name+".png")
		if err := os.WriteFile(path, p.data, 0o644); err != nil {
			return fmt.Errorf("--plots: %w", err)
		}
	}
	return nil
}

// png is one figure drawn as a PNG image, to be written as name.png.
type png struct {
	name string
	data []byte
}

// readResults reads the results at paths one at a time, keeping of each
// only its summary (experiment.Result.Summary) and, when plots, its
// figures drawn as PNG images (plot.Collector keeps what the figures
// across results need), so that memory holds one whole result at a time.
// The files together must hold at most report.MaxTotalDocumentBytes,
// checked before any is read.
func readResults(paths []string, plots bool) ([]*experiment.Result, []png, error) {
	if _, err := report.SizeDocuments(paths, report.MaxTotalDocumentBytes); err != nil {
		return nil, nil, err
	}
	var results []*experiment.Result
	var pngs []png
	figures := plot.NewCollector(experimentFigures)
	draw := func(figs []plot.Figure) error {
		for _, f := range figs {
			var b bytes.Buffer
			if err := f.WritePNG(&b); err != nil {
				return err
			}
			pngs = append(pngs, png{f.Name, b.Bytes()})
		}
		return nil
	}
	for _, f := range paths {
		r, err := readResult(f)
		if err != nil {
			return nil, nil, err
		}
		if plots {
			figs, err := figures.Add(r)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, err)
			}
			if err := draw(figs); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, err)
			}
		}
		results = append(results, r.Summary())
	}
	if plots {
		figs, err := figures.Across()
		if err != nil {
			return nil, nil, err
		}
		if err := draw(figs); err != nil {
			return nil, nil, err
		}
	}
	return results, pngs, nil
}

// readResult reads one experiment or run result (a run, through
// kube-apiserver or not, becomes a result of one case), dispatching on the
// document's kind; any other document is refused with a line naming its
// kind, and a result lacking a field its kind requires with a line naming
// the field. Every error names path.
func readResult(path string) (*experiment.Result, error) {
	b, err := report.ReadDocument(path)
	if err != nil {
		return nil, err
	}
	h, err := report.Identify(b)
	if errors.Is(err, report.ErrUnknownKind) {
		return nil, fmt.Errorf("%s: %w; report reads the JSON of the experiments (%s) and of lwbench run", path, err, strings.Join(experiment.Names, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch h.Kind {
	case report.KindExperiment:
		r, err := experiment.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return r, nil
	case report.KindRun, report.KindKubeRun: // a KubeRunResult is a run through kube-apiserver before RunSchemaVersion 4
		_, v, err := report.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return experiment.FromRun(v.(*report.RunResult), strings.TrimSuffix(filepath.Base(path), ".json")), nil
	}
	if !slices.Contains(report.Kinds, h.Kind) {
		return nil, fmt.Errorf("%s: %w; report reads the JSON of the experiments (%s) and of lwbench run",
			path, report.UnknownKind(h.Kind), strings.Join(experiment.Names, ", "))
	}
	return nil, fmt.Errorf("%s: a %s document, which report does not compare; it reads the JSON of the experiments (%s) and of lwbench run",
		path, h.Kind, strings.Join(experiment.Names, ", "))
}
