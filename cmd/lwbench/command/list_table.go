package command

import (
	"fmt"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
)

// makeListTable lays a list result out, one row per ListRow.
func makeListTable(r *report.ListResult) output.Table {
	t := output.Table{
		Header:  []string{"objects", "mode", "page size", "pages", "objects returned", "response bytes", "p50 ms", "p99 ms", "max ms", "objects/s", "MB/s", "errors"},
		Numeric: []bool{true, false, true, true, true, true, true, true, true, true, true, true},
	}
	for _, row := range r.Rows {
		ps := fmt.Sprint(row.PageSize)
		if row.PageSize == 0 {
			ps = "none"
		}
		t.Rows = append(t.Rows, []string{fmt.Sprint(row.Objects), row.Mode, ps, fmt.Sprint(row.Pages), fmt.Sprint(row.ObjectsReturned),
			fmt.Sprint(row.ResponseBytes), fmt.Sprintf("%.2f", row.Latency.P50Ms), fmt.Sprintf("%.2f", row.Latency.P99Ms),
			fmt.Sprintf("%.2f", row.Latency.MaxMs), fmt.Sprintf("%.0f", row.ObjectsPerSecond), fmt.Sprintf("%.1f", row.MegabytesPerSecond),
			fmt.Sprint(row.Errors)})
	}
	return t
}
