package experiment

import (
	"strings"
	"unicode"

	"github.com/kubestore/etcdkit/pkg/report"
)

// Benchstat returns a benchstat line per case of r (report.BenchstatLine):
// named "Lwbench<Experiment>/<case>", the experiment in CamelCase and the
// case's words as sub-benchmark keys (e.g.
// "LwbenchRelistStorm/objects=1000/pageSize=500"), with the CaseSummary
// figures the case measured (Measured): counts, "-ms" times (lower is
// better), "-B" sizes, "writes/s". Results of the same experiment and
// cases give lines of the same names, which benchstat compares.
func Benchstat(r *Result) []report.BenchstatLine {
	var out []report.BenchstatLine
	for _, c := range r.Cases {
		var m []report.BenchstatMetric
		add := func(figure string, metrics ...report.BenchstatMetric) {
			if Measured(c, figure) {
				m = append(m, metrics...)
			}
		}
		add(FigureRelists, report.BenchstatMetric{Value: float64(c.Relists), Unit: "relists"})
		add(FigureRelistObjects, report.BenchstatMetric{Value: float64(c.RelistObjects), Unit: "relist-objects"})
		add(FigureRelistBytes, report.BenchstatMetric{Value: float64(c.RelistBytes), Unit: "relist-B"})
		if c.RelistP50Ms > 0 || c.BackoffP50Ms > 0 {
			add(FigureRelistTime, report.BenchstatMetric{Value: c.BackoffP50Ms, Unit: "p50-backoff-ms"},
				report.BenchstatMetric{Value: c.RelistP50Ms, Unit: "p50-relist-ms"})
		}
		add(FigureResync, report.BenchstatMetric{Value: c.ResyncP50Ms, Unit: "p50-resync-ms"},
			report.BenchstatMetric{Value: c.ResyncMaxMs, Unit: "max-resync-ms"})
		add(FigureListRestarts, report.BenchstatMetric{Value: float64(c.ListRestarts), Unit: "list-restarts"})
		add(FigureCompactions, report.BenchstatMetric{Value: float64(c.Compactions), Unit: "compactions"})
		add(FigureDefrag, report.BenchstatMetric{Value: c.DefragMs, Unit: "defrag-ms"})
		add(FigureWrites, report.BenchstatMetric{Value: c.WritesPerSecond, Unit: "writes/s"},
			report.BenchstatMetric{Value: c.WriteP99Ms, Unit: "p99-write-ms"})
		add(FigureProbe, report.BenchstatMetric{Value: c.Probe.P99Ms, Unit: "p99-probe-ms"},
			report.BenchstatMetric{Value: c.Probe.MaxMs, Unit: "max-probe-ms"},
			report.BenchstatMetric{Value: c.Probe.LongestStallMs, Unit: "stall-probe-ms"},
			report.BenchstatMetric{Value: float64(c.Probe.Errors), Unit: "probe-errors"})
		add(FigureDBSize, report.BenchstatMetric{Value: float64(c.DBSizeBeforeBytes), Unit: "db-before-B"},
			report.BenchstatMetric{Value: float64(c.DBSizeAfterBytes), Unit: "db-after-B"})
		add(FigureLostEvents, report.BenchstatMetric{Value: float64(c.LostEvents), Unit: "lost-events"})
		add(FigureOtherViolations, report.BenchstatMetric{Value: float64(c.OtherViolations), Unit: "other-violations"})
		if len(m) == 0 {
			continue
		}
		out = append(out, report.BenchstatLine{Name: benchName(c.Experiment, c.Case), Metrics: m})
	}
	return out
}

// benchName is "Lwbench" and the experiment in CamelCase, then the case's
// words as sub-benchmark keys: a benchmark name holds no space, a slash
// inside a word ("rate=200/s") would split it, so it becomes "-per-", and a
// rune that does not print becomes "_".
func benchName(experiment, c string) string {
	var b strings.Builder
	b.WriteString("Lwbench")
	for _, w := range strings.Split(experiment, "-") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	for _, w := range strings.Fields(c) {
		b.WriteString("/")
		b.WriteString(strings.Map(func(r rune) rune {
			if !unicode.IsPrint(r) {
				return '_'
			}
			return r
		}, strings.ReplaceAll(w, "/", "-per-")))
	}
	return b.String()
}
