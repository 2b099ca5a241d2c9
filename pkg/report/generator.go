package report

import (
	"fmt"
	"strings"
)

// GeneratorCPUShare is the share of the CPU a process could use (SelfStats.
// CPULimitCores, else NumCPU) at or above which GeneratorLimited calls the
// load generator saturated: it was using about all it had, so its own
// waits for a CPU may be in the figures it measured.
const GeneratorCPUShare = 0.9

// GeneratorLimited reports whether the lwbench process s describes was the
// bottleneck of its own figures, and why, in one line naming the
// measurements: its CPU use (CPUCores, which includes an embedded etcd
// member's when IncludesEmbeddedEtcd) at or above GeneratorCPUShare of the
// CPU it could use (its cgroup's limit, CPULimitCores, when set, else the
// machine's NumCPU), or its goroutines' scheduling delay
// (SchedLatencyP99Ms) above SchedLatencyBusyMs. It returns false and ""
// when neither was seen, or could not be measured (NumCPU 0: a result
// that did not record its CPUs).
func GeneratorLimited(s SelfStats) (bool, string) {
	var why []string
	limit, of := s.CPULimitCores, "its cgroup's CPU limit"
	if limit <= 0 {
		limit, of = float64(s.NumCPU), fmt.Sprintf("the machine's %d CPUs", s.NumCPU)
	}
	if limit > 0 && s.CPUCores >= GeneratorCPUShare*limit {
		why = append(why, fmt.Sprintf("its CPU was %.2f cores of %.2f (%s), at least %.0f%%", s.CPUCores, limit, of, GeneratorCPUShare*100))
	}
	if s.SchedLatencyP99Ms > SchedLatencyBusyMs {
		why = append(why, fmt.Sprintf("its goroutines waited %.1f ms (p99) for a CPU, above %.0f ms", s.SchedLatencyP99Ms, SchedLatencyBusyMs))
	}
	return len(why) > 0, strings.Join(why, "; ")
}
