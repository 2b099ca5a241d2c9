package command

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/live"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// liveUsageRow is a usage row read live: the figures a Range tells; the
// byte figures only with --values, history bytes and tombstones never.
type liveUsageRow struct {
	Class     string `json:"class"`
	Prefix    string `json:"prefix,omitempty"`
	Group     string `json:"group"`
	Resource  string `json:"resource,omitempty"`
	Path      string `json:"path,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Objects   int64  `json:"objects"`
	// Revisions is a lower bound when keys were deleted after the compact
	// revision (liveUsageResult.RevisionsLowerBound).
	Revisions      int64  `json:"revisions"`
	LiveEntryBytes *int64 `json:"liveEntryBytes,omitempty"`
	LiveValueBytes *int64 `json:"liveValueBytes,omitempty"`
}

// liveUsageResult is the JSON of `usage --endpoints -w json`: usageResult's
// shape, with source and the revisions read at instead of a path.
type liveUsageResult struct {
	SchemaVersion       int                `json:"schemaVersion"`
	Source              string             `json:"source"`
	Endpoints           []string           `json:"endpoints"`
	ReadAtRevision      int64              `json:"readAtRevision"`
	CompactRevision     int64              `json:"compactRevision"`
	RevisionsLowerBound bool               `json:"revisionsLowerBound"`
	By                  snapshot.Dimension `json:"by"`
	Prefixes            []string           `json:"prefixes"`
	Rows                []liveUsageRow     `json:"rows"`
	Others              *liveUsageRow      `json:"others,omitempty"`
	Total               liveUsageRow       `json:"total"`
}

func runLiveUsage(cmd *cobra.Command, g *globalOptions, o *usageOptions, out io.Writer) error {
	ctx := cmd.Context()
	c, versions, done, err := o.live.connectForKeys(ctx, o.allowValueReads)
	if err != nil {
		return err
	}
	defer done()
	u, err := live.ReadUsage(ctx, c, live.UsageOptions{Parser: g.parser(), Values: o.values, AllowValueReads: o.allowValueReads,
		MaxKeysPerRequest: o.maxKeysPerRequest, Versions: versions})
	if err != nil {
		return err
	}
	if bad := u.PrefixesWithoutResources(); len(g.prefixes) > 0 && len(bad) > 0 {
		return notAPrefix(bad[0])
	}
	dim := snapshot.Dimension(o.by)
	rows := u.By(dim)
	if !o.values {
		// Without bytes, By's order (largest bytes first) is by name
		// alone: the most objects come first instead.
		slices.SortStableFunc(rows, func(a, b snapshot.UsageRow) int { return cmp.Compare(b.Objects, a.Objects) })
	}
	rows, others := topRows(rows, o.top)
	res := liveUsageResult{SchemaVersion: usageSchemaVersion, Source: live.SourceLive, Endpoints: o.live.conn.Endpoints,
		ReadAtRevision: u.ReadAtRevision, CompactRevision: u.CompactRevision, RevisionsLowerBound: u.RevisionsLowerBound,
		By: dim, Prefixes: u.Prefixes, Total: liveRow(u.Total, o.values)}
	for _, r := range rows {
		res.Rows = append(res.Rows, liveRow(r, o.values))
	}
	if others != nil {
		r := liveRow(*others, o.values)
		res.Others = &r
	}
	t, notes := makeUsageTable(g, dim, u.Prefixes, rows, others, u.Total)
	t = liveColumns(t, o.values)
	if g.human() {
		if len(notes) > 0 {
			notes = notes[1:] // the offline columns' legend
		}
		legend := "Bytes are read only with --values."
		if o.values {
			legend = "live: the live keys' entry bytes (revision key and KeyValue); values: their values alone."
		}
		notes = append([]string{legend, fmt.Sprintf("Source: live, read at revision %d; revisions kept counted from the compact revision %d.",
			u.ReadAtRevision, u.CompactRevision),
			"revisions: a lower bound when keys were deleted (or deleted and re-created) after the compact revision: a Range does not see them. " +
				"History bytes and tombstones are not known live."}, notes...)
	}
	return g.write(ctx, out, t, notes, res)
}

func liveRow(r snapshot.UsageRow, values bool) liveUsageRow {
	lr := liveUsageRow{Class: string(r.Class), Prefix: r.Prefix, Group: r.Group, Resource: r.Resource, Path: r.Path,
		Namespace: r.Namespace, Objects: r.Objects, Revisions: r.Revisions}
	if values {
		lr.LiveEntryBytes, lr.LiveValueBytes = &r.LiveEntryBytes, &r.LiveValueBytes
	}
	return lr
}

// liveColumns drops the columns of an offline usage table that a live read
// does not know: history bytes and tombstones always, the byte columns
// without values.
func liveColumns(t output.Table, values bool) output.Table {
	n := len(t.Header)
	// makeUsageTable's last six columns: objects, live, values,
	// revisions, history, tombstones.
	keep := func(i int) bool {
		switch i - (n - 6) {
		case 1, 2:
			return values
		case 4, 5:
			return false
		}
		return true
	}
	out := output.Table{}
	pick := func(r []string) []string {
		var o []string
		for i, c := range r {
			if keep(i) {
				o = append(o, c)
			}
		}
		return o
	}
	out.Header = pick(t.Header)
	for i := range t.Header {
		if keep(i) && t.Numeric != nil {
			out.Numeric = append(out.Numeric, t.Numeric[i])
		}
	}
	for _, r := range t.Rows {
		out.Rows = append(out.Rows, pick(r))
	}
	return out
}
