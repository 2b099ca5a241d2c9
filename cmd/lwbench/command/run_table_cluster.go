package command

import (
	"fmt"
	"strings"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
)

// clusterRows are the run table's rows of a cluster's load (--nodes):
// its plan, seeding and churn, the experiment's filler, defragmentation
// time and restart, and what the nodes' Leases and Ready conditions did.
func clusterRows(c *report.ClusterScenario, writeRate float64) [][]string {
	rows := [][]string{
		{"cluster: KWOK nodes / namespaces", fmt.Sprintf("%d / %d", c.Nodes, c.Namespaces)},
		{"cluster: deployments / services / pods", fmt.Sprintf("%d / %d / %d planned", c.Deployments, c.Services, c.Pods)},
		{"cluster seeding", fmt.Sprintf("%d pods Running after %.1f s", c.PodsRunning, c.SeedMs/1000)},
		{"pod churn", fmt.Sprintf("%.0f pods/s (%.1f deployment writes/s%s)", c.PodChurn, writeRate, rolloutText(c.RolloutPercent))},
	}
	if c.Model == nil { // the model's etcd sees no kubelet watch (the watch cache serves them)
		rows = append(rows, []string{"kubelet watches: nodes / objects", fmt.Sprintf("%d / %d", c.KubeletWatchNodes, c.KubeletWatchObjects)})
	}
	if len(c.EventsEtcd) > 0 {
		rows = append(rows, []string{"events stored in", "a second etcd, " + strings.Join(c.EventsEtcd, ",")})
	}
	if c.FillerBytes > 0 {
		rows = append(rows, []string{"filler (live, outside the prefix)", sizeText(c.FillerBytes)})
	}
	if c.DefragAtMs > 0 {
		rows = append(rows, []string{"defragmentation at (into the churn)", fmt.Sprintf("%.1f s", c.DefragAtMs/1000)})
	}
	if rs := c.Restart; rs != nil {
		v := fmt.Sprintf("at %.1f s, ready again after %.1f s", rs.AtMs/1000, rs.DownMs/1000)
		if rs.Error != "" {
			v = fmt.Sprintf("at %.1f s, failed: %s", rs.AtMs/1000, rs.Error)
		}
		rows = append(rows, []string{"restart of " + rs.Component, v})
	}
	if len(c.Exits) > 0 {
		var cell []string
		for _, e := range c.Exits {
			cell = append(cell, fmt.Sprintf("%s at %.1f s (%s)", e.Component, e.AtMs/1000, e.Status))
		}
		rows = append(rows, []string{"components exited, started again", strings.Join(cell, "; ")})
	}
	if m := c.Model; m != nil {
		rows = append(rows,
			[]string{"node Lease renewals (model)", fmt.Sprintf("%d (%d of %d nodes, %d to %d each in %.0f s)", m.NodeLeaseRenewals, m.NodesRenewed,
				m.NodeTo-m.NodeFrom, m.RenewalsPerNodeMin, m.RenewalsPerNodeMax, m.NodeLeaseMs/1000)},
			[]string{"node Lease renewal interval", fmt.Sprintf("%.1f to %.1f s", m.NodeLeaseIntervalMinMs/1000, m.NodeLeaseIntervalMaxMs/1000)},
			[]string{"pods created / deleted, events", fmt.Sprintf("%d / %d, %d", m.PodsCreated, m.PodsDeleted, m.Events)},
			[]string{"control plane (model)", fmt.Sprintf("%d Lease renewals, %d failed periodic requests", m.ControlPlaneLeaseRenewals, m.PeriodicFailures)})
	}
	if h := c.NodeHealth; h != nil {
		rows = append(rows,
			[]string{"node Lease renewals (nodes)", fmt.Sprintf("%d (%d)", h.Renewals, h.Nodes)},
			[]string{"node Lease renewal interval", fmt.Sprintf("p50 %.1f / p99 %.1f / max %.1f s", h.IntervalP50Ms/1000, h.IntervalP99Ms/1000, h.IntervalMaxMs/1000)},
			[]string{"nodes past their Lease (40 s)", fmt.Sprint(h.LeaseExpired)},
			[]string{"nodes NotReady (times; at end)", notReadyCell(h)})
	}
	return rows
}

// notReadyCell says how many nodes left Ready, how often, when first and
// how many were still not Ready at the end.
func notReadyCell(h *report.NodeHealth) string {
	if h.NotReady == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d; %d), first at %.1f s", h.NotReady, h.Transitions, h.StillNotReady, h.FirstNotReadyMs/1000)
}

// makeNodeHealthTable is the node Lease renewal intervals by phase.
func makeNodeHealthTable(h *report.NodeHealth) output.Table {
	t := output.Table{Header: []string{"node leases: phase", "renewals", "interval p50 s", "interval p99 s", "interval max s"},
		Numeric: []bool{false, true, true, true, true}}
	for _, p := range h.Phases {
		t.Rows = append(t.Rows, []string{p.Phase, fmt.Sprint(p.Renewals), fmt.Sprintf("%.1f", p.IntervalP50Ms/1000), fmt.Sprintf("%.1f", p.IntervalP99Ms/1000), fmt.Sprintf("%.1f", p.IntervalMaxMs/1000)})
	}
	return t
}

// rolloutText is the churn's share of rollouts, as the pod churn row's
// end: "" when not recorded (results from before it could be set).
func rolloutText(percent *int) string {
	if percent == nil {
		return ""
	}
	return fmt.Sprintf(", %d %% of them rollouts", *percent)
}
