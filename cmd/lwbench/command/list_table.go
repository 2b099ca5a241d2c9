package command

import (
	"fmt"
	"math"
	"slices"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/report"
)

// makeListTextTable is makeListTable for a person (table and markdown):
// the response in binary units, figures with the decimals their size
// needs (figure) and shorter headers (the page size is the Range
// request's limit), within maxTableWidth; the CSV keeps makeListTable's
// exact bytes.
func makeListTextTable(r *report.ListResult) output.Table {
	t := makeListTable(r)
	t.Header = slices.Clone(t.Header)
	t.Header[2], t.Header[4], t.Header[5] = "limit", "returned", "response"
	for i, row := range r.Rows {
		t.Rows[i][5] = sizeText(row.ResponseBytes)
		t.Rows[i][6], t.Rows[i][7], t.Rows[i][8] = figure(row.Latency.P50Ms), figure(row.Latency.P99Ms), figure(row.Latency.MaxMs)
		t.Rows[i][10] = figure(row.MegabytesPerSecond)
	}
	return t
}

// figure formats v with the decimals a person reads at its size: two
// below 10, one below 100, none from 100 on (12345.67 ms is "12346").
func figure(v float64) string {
	switch a := math.Abs(v); {
	case a < 10:
		return fmt.Sprintf("%.2f", v)
	case a < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

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
