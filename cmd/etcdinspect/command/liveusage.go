package command

import (
	"cmp"
	"context"
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
	// HistoryEntryBytes is counted by liveUsageResult.HistoryMethod,
	// absent when it is not known; Tombstones only with exact history.
	HistoryEntryBytes *int64 `json:"historyEntryBytes,omitempty"`
	Tombstones        *int64 `json:"tombstones,omitempty"`
}

// liveUsageResult is the JSON of `usage --endpoints -w json`: usageResult's
// shape, with source and the revisions read at instead of a path.
type liveUsageResult struct {
	SchemaVersion       int      `json:"schemaVersion"`
	Source              string   `json:"source"`
	Endpoints           []string `json:"endpoints"`
	ReadAtRevision      int64    `json:"readAtRevision"`
	CompactRevision     int64    `json:"compactRevision"`
	RevisionsLowerBound bool     `json:"revisionsLowerBound"`
	// HistoryMethod is how historyEntryBytes was counted: "exact" (a
	// watch replayed from the compact revision), "estimate" (revisions
	// kept less one times the current entry bytes), absent when not.
	HistoryMethod live.HistoryMethod `json:"historyMethod,omitempty"`
	// Member is the member the keys were read from.
	Member liveMember `json:"member"`
	// Partial is true when SIGINT interrupted the scan: the rows count
	// only what was read until then (PartialPhase).
	Partial      bool               `json:"partial,omitempty"`
	PartialPhase string             `json:"partialPhase,omitempty"`
	By           snapshot.Dimension `json:"by"`
	Prefixes     []string           `json:"prefixes"`
	Rows         []liveUsageRow     `json:"rows"`
	Others       *liveUsageRow      `json:"others,omitempty"`
	Total        liveUsageRow       `json:"total"`
}

func runLiveUsage(cmd *cobra.Command, g *globalOptions, o *usageOptions, out io.Writer) error {
	ctx := cmd.Context()
	c, versions, member, done, err := o.live.connectForKeys(ctx, o.allowValueReads, o.member)
	if err != nil {
		return err
	}
	defer done()
	prog, stopBar := startBar(cmd, "reading the keys of "+member.Name)
	u, err := live.ReadUsage(ctx, c, live.UsageOptions{Parser: g.parser(), Values: o.values, AllowValueReads: o.allowValueReads,
		MaxKeysPerRequest: o.maxKeysPerRequest, Versions: versions, Method: o.method, History: live.HistoryMethod(o.history), Progress: prog, Partial: true})
	stopBar()
	if err != nil && (u == nil || !u.Partial) {
		return err
	}
	if bad := u.PrefixesWithoutResources(); len(g.prefixes) > 0 && len(bad) > 0 && !u.Partial {
		return notAPrefix(bad[0])
	}
	dim := snapshot.Dimension(o.by)
	rows := u.By(dim)
	if !o.values && u.History != live.HistoryExact {
		// Without bytes, By's order (largest bytes first) is by name
		// alone: the most objects come first instead.
		slices.SortStableFunc(rows, func(a, b snapshot.UsageRow) int { return cmp.Compare(b.Objects, a.Objects) })
	}
	rows, others := topRows(rows, o.top)
	cols := liveUsageColumns{values: o.values, revisions: u.RevisionsCounted, history: u.History}
	res := liveUsageResult{SchemaVersion: usageSchemaVersion, Source: live.SourceLive, Endpoints: o.live.conn.Endpoints,
		ReadAtRevision: u.ReadAtRevision, CompactRevision: u.CompactRevision, RevisionsLowerBound: u.RevisionsLowerBound,
		HistoryMethod: u.History, Member: readFrom(member, u.MemberID), Partial: u.Partial, PartialPhase: u.PartialPhase,
		By: dim, Prefixes: u.Prefixes, Total: cols.row(u.Total)}
	for _, r := range rows {
		res.Rows = append(res.Rows, cols.row(r))
	}
	if others != nil {
		r := cols.row(*others)
		res.Others = &r
	}
	t, notes := makeUsageTable(g, dim, u.Prefixes, rows, others, u.Total)
	t = cols.table(t)
	if g.human() {
		if len(notes) > 0 {
			notes = notes[1:] // the offline columns' legend
		}
		legend := "Live bytes are read only with --values."
		if o.values {
			legend = "live: the live keys' entry bytes (revision key and KeyValue); values: their values alone."
		}
		switch u.History {
		case live.HistoryExact:
			legend += " history: the entry bytes of older revisions and tombstones, exact: a watch replayed from the compact revision."
		case live.HistoryEstimate:
			legend += " history (estimate): per key, its revisions kept less one times its current entry bytes; --history exact counts them."
		}
		revisions := "revisions: a lower bound when keys were deleted (or deleted and re-created) after the compact revision: a Range does not see them. " +
			"Tombstones are counted only with --history exact."
		if u.History == live.HistoryExact {
			revisions = "revisions, history and tombstones: exact, every entry since the compact revision replayed."
		}
		source := fmt.Sprintf("Source: live, read at revision %d; revisions kept counted from the compact revision %d.", u.ReadAtRevision, u.CompactRevision)
		if !u.RevisionsCounted {
			source, revisions = fmt.Sprintf("Source: live, read at revision %d.", u.ReadAtRevision), "revisions: not read (interrupted)."
		}
		notes = append([]string{legend, source, revisions, res.Member.note()}, notes...)
	}
	if u.Partial {
		return writePartial(ctx, g, out, u.PartialPhase, err, func(ctx context.Context) error { return g.write(ctx, out, t, notes, res) })
	}
	return g.write(ctx, out, t, notes, res)
}

// liveUsageColumns are the figures a live usage knows: bytes with values,
// revisions unless a partial read stopped before them, history bytes by
// its method (tombstones only exact).
type liveUsageColumns struct {
	values, revisions bool
	history           live.HistoryMethod
}

func (lc liveUsageColumns) row(r snapshot.UsageRow) liveUsageRow {
	lr := liveUsageRow{Class: string(r.Class), Prefix: r.Prefix, Group: r.Group, Resource: r.Resource, Path: r.Path,
		Namespace: r.Namespace, Objects: r.Objects, Revisions: r.Revisions}
	if lc.values {
		lr.LiveEntryBytes, lr.LiveValueBytes = &r.LiveEntryBytes, &r.LiveValueBytes
	}
	if lc.history != "" {
		lr.HistoryEntryBytes = &r.HistoryEntryBytes
	}
	if lc.history == live.HistoryExact {
		lr.Tombstones = &r.Tombstones
	}
	return lr
}

// table drops the columns of an offline usage table that a live read
// does not know, and labels an estimate of history bytes.
func (lc liveUsageColumns) table(t output.Table) output.Table {
	n := len(t.Header)
	// makeUsageTable's last six columns: objects, live, values,
	// revisions, history, tombstones.
	keep := func(i int) bool {
		switch i - (n - 6) {
		case 1, 2:
			return lc.values
		case 3:
			return lc.revisions
		case 4:
			return lc.history != ""
		case 5:
			return lc.history == live.HistoryExact
		}
		return true
	}
	if lc.history == live.HistoryEstimate {
		t.Header = slices.Clone(t.Header)
		t.Header[n-2] += " (estimate)"
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
