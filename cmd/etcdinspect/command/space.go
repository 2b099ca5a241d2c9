package command

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/live"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

type spaceOptions struct {
	quota           int64
	maxRequestBytes int64
}

func (o *spaceOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Var(newByteSize(&o.quota, snapshot.DefaultQuotaBytes), "quota", "the member's --quota-backend-bytes: bytes, or with a unit (8GiB, 2G)")
	fs.Var(newByteSize(&o.maxRequestBytes, snapshot.DefaultMaxRequestBytes), "max-request-bytes",
		"the member's --max-request-bytes: bytes, or with a unit (1.5MiB, 10MiB)")
}

func (o *spaceOptions) Validate() error {
	if o.quota <= 0 {
		return cli.FlagErrorf("--quota must be positive")
	}
	if o.maxRequestBytes <= 0 {
		return cli.FlagErrorf("--max-request-bytes must be positive")
	}
	return nil
}

func newSpaceCommand(g *globalOptions) *cobra.Command {
	o := &spaceOptions{}
	lo := &liveOptions{}
	cmd := &cobra.Command{
		Use:   "space FILE | --endpoints URLS",
		Short: "A verdict on etcd's backend quota: size vs in use vs quota, what compaction and defragmentation would leave",
		Long: `space compares the file with etcd's backend quota (--quota, default 2 GiB)
and explains the page layout behind the verdict:

  - the DB size (bbolt's high-water mark: what the quota checks), the
    bytes in use and free, the quota used and whether NOSPACE is raised
    (etcd's rule: a write is refused, and the alarm raised, when the DB
    size plus its charge reaches the quota; a Put is charged 256 bytes
    plus its key and value, so NOSPACE comes before the size reaches the
    quota), the largest Put still admitted (by the quota and by etcd's
    --max-request-bytes, default 1.5 MiB: a larger request is refused
    as too large), and whether the file holds a raised NOSPACE alarm;
  - why a compaction alone never clears NOSPACE (the quota checks the
    file's size, which only a defragmentation shrinks), and the size a
    compaction at the current revision and then a defragmentation would
    leave;
  - free pages as a histogram of contiguous runs and the largest run (a
    value larger than it grows the file even with free pages left); branch,
    leaf and overflow pages and how full the leaves are;
  - whether a fragmentation alert on this file is signal or noise, with
    the rule, and a safe quota for the live data to double.

With --endpoints it judges every member of a running cluster instead, from
its Status (DB size, in use, its quota on etcd 3.6 and later unless --quota
is given) and the alarms, by the same rules; what only the file's pages
tell (free runs, what a compaction frees) is not shown.`,
		Args: lo.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if lo.enabled() {
				if err := lo.Validate(); err != nil {
					return err
				}
				return runLiveSpace(cmd, g, o, lo, cmd.OutOrStdout())
			}
			return runSpace(cmd, g, o, args[0], cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd.Flags())
	lo.AddFlags(cmd.Flags())
	return cmd
}

func runLiveSpace(cmd *cobra.Command, g *globalOptions, o *spaceOptions, lo *liveOptions, out io.Writer) error {
	c, done, err := lo.connect(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	st, err := live.ReadStatus(cmd.Context(), c, lo.conn.Endpoints, lo.conn.DialTimeout)
	if err != nil {
		return err
	}
	sp := live.SpaceOf(st, o.quota, !cmd.Flags().Changed("quota"))
	t, notes := makeLiveSpaceTable(g, sp)
	return g.write(cmd.Context(), out, t, notes, sp)
}

// makeLiveSpaceTable lays out one row per member, the rules as notes.
func makeLiveSpaceTable(g *globalOptions, sp *live.Space) (output.Table, []string) {
	t := output.Table{Header: []string{"member", "verdict", "NOSPACE alarm", "quota", "headroom", "db size", "in use",
		"fragmentation", "fragmentation alert"}}
	t.Numeric = make([]bool, len(t.Header))
	for _, i := range []int{3, 4, 5, 6, 7} {
		t.Numeric[i] = true
	}
	var rule string
	for _, m := range sp.Members {
		name := m.Name + " (" + m.MemberID + ")"
		if m.Error != "" {
			t.Rows = append(t.Rows, []string{name, "unknown: " + m.Error, "", "", "", "", "", "", ""})
			continue
		}
		verdict := fmt.Sprintf("below the quota (%.1f%% used)", m.QuotaUsedPercent)
		switch {
		case m.OverQuota:
			verdict = fmt.Sprintf("NOSPACE: every write is refused (%.1f%% used)", m.QuotaUsedPercent)
		case m.MaxPutBytes < 0:
			verdict = fmt.Sprintf("NOSPACE on the next Put (%.1f%% used)", m.QuotaUsedPercent)
		}
		alarm := "no"
		if m.NoSpaceAlarm {
			alarm = "yes"
		}
		rule = m.FragmentationRule
		t.Rows = append(t.Rows, []string{name, verdict, alarm, g.bytes(m.QuotaBytes) + " (" + m.QuotaSource + ")", g.bytes(m.HeadroomBytes),
			g.bytes(m.DBSizeBytes), g.bytes(m.InUseBytes), fmt.Sprintf("%.1f%%", m.FragmentationPercent), m.FragmentationAlert})
	}
	notes := []string{
		fmt.Sprintf("Source: live, read at revision %d; quota (member): the member's --quota-backend-bytes as its Status reports it, "+
			"(flag): --quota.", sp.ReadAtRevision),
		fmt.Sprintf("NOSPACE: etcd refuses a write, and raises NOSPACE, when DB size + the write's charge >= quota: a Put is charged %d bytes "+
			"+ key + value (server/storage/quota.go); a compaction alone never clears it, only a defragmentation shrinks the DB size.",
			snapshot.PutOverheadBytes),
	}
	if rule != "" {
		notes = append(notes, "Fragmentation alert: "+rule+".")
	}
	return t, notes
}

func runSpace(cmd *cobra.Command, g *globalOptions, o *spaceOptions, path string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	s, err := db.Space(cmd.Context(), snapshot.SpaceOptions{QuotaBytes: o.quota, MaxRequestBytes: o.maxRequestBytes}, g.parser())
	done()
	if err != nil {
		return err
	}
	t, notes := makeSpaceTable(g, s)
	return g.write(cmd.Context(), out, t, notes, s)
}

// makeSpaceTable lays the verdict out as field/value rows, the rules
// behind it as notes below.
func makeSpaceTable(g *globalOptions, s *snapshot.Space) (output.Table, []string) {
	verdict := fmt.Sprintf("below the quota (%.1f%% used)", s.QuotaUsedPercent)
	switch {
	case s.OverQuota:
		verdict = fmt.Sprintf("NOSPACE: every write is refused (%.1f%% of the quota used, see note 1)", s.QuotaUsedPercent)
	case s.MaxPutBytes < 0:
		verdict = fmt.Sprintf("NOSPACE on the next Put (%.1f%% of the quota used, see note 1)", s.QuotaUsedPercent)
	}
	after := "below the quota"
	if !s.AfterClearsQuota {
		after = "still at or above the quota: raise it or delete data"
	}
	alarm := "no"
	if s.NoSpaceAlarm {
		alarm = "yes: writes stay refused until `etcdctl alarm disarm`"
	}
	largestPut := "none"
	if s.LargestPutBytes >= 0 {
		largestPut = fmt.Sprintf("%s of key and value (limited by %s, see note 2)", g.bytes(s.LargestPutBytes), s.LargestPutLimit)
	}
	rows := [][]string{
		{"path", s.Path},
		{"verdict", verdict},
		{"NOSPACE alarm in the file", alarm},
		{"quota", g.bytes(s.QuotaBytes)},
		{"headroom", g.bytes(s.HeadroomBytes)},
		{"largest Put admitted", largestPut},
		{"max request bytes", g.bytes(s.MaxRequestBytes)},
		{"file size", g.bytes(s.SizeBytes)},
		{"db size", g.bytes(s.DBSizeBytes)},
		{"in use", g.bytes(s.InUseBytes)},
		{"free", fmt.Sprintf("%s (%d pages of %s)", g.bytes(s.FreeBytes), s.FreePages, g.bytes(int64(s.PageSize)))},
		{"compaction alone clears NOSPACE", fmt.Sprintf("%v (see note 3)", s.CompactionClearsNoSpace)},
		{"compaction at current revision", fmt.Sprintf("revision %d removes %s of entries", s.CurrentRevision, g.bytes(s.CompactFreesBytes))},
		{"after compaction and defragmentation", fmt.Sprintf("%s: %s", g.bytes(s.AfterCompactDefragBytes), after)},
		{"largest free run", fmt.Sprintf("%d pages (%s)", s.LargestFreeRunPages, g.bytes(s.LargestFreeRunBytes))},
	}
	for _, b := range s.FreeRuns {
		if b.Runs == 0 {
			continue
		}
		rows = append(rows, []string{fmt.Sprintf("free runs of %d-%d pages", b.MinPages, b.MaxPages), fmt.Sprintf("%d runs, %d pages", b.Runs, b.Pages)})
	}
	rows = append(rows,
		[]string{"pages", fmt.Sprintf("%d branch, %d leaf, %d overflow", s.BranchPages, s.LeafPages, s.OverflowPages)},
		[]string{"leaf fill", fmt.Sprintf("%.1f%%", s.LeafFillPercent)},
		[]string{"fragmentation", fmt.Sprintf("%.1f%%", s.FragmentationPercent)},
		[]string{"fragmentation alert", fmt.Sprintf("%s (see note 4)", s.FragmentationAlert)},
		[]string{"safe quota", fmt.Sprintf("%s (see note 5)", g.bytes(s.SafeQuotaBytes))},
	)
	notes := []string{
		fmt.Sprintf("1. etcd refuses a write, and raises NOSPACE, when DB size + the write's charge >= quota: a Put is charged %d bytes + key + value, "+
			"a LeaseGrant %d, a Txn its larger branch; deletes and compactions are never refused (server/storage/quota.go). "+
			"So NOSPACE comes before the DB size reaches the quota.", snapshot.PutOverheadBytes, snapshot.LeaseGrantCostBytes),
		fmt.Sprintf("2. The quota admits a Put of up to %s of key and value; --max-request-bytes (%s) admits up to %s: etcd refuses a larger "+
			"marshalled request with \"request is too large\" (server/etcdserver/v3_server.go).",
			putBytes(g, s.MaxPutBytes), g.bytes(s.MaxRequestBytes), putBytes(g, s.MaxRequestPutBytes)),
		"3. " + s.Why + ".",
		"4. Fragmentation alert: " + s.FragmentationRule + ".",
		"5. Safe quota: twice the size after compaction and defragmentation, rounded up to a GiB, within etcd's 2-8 GiB.",
	}
	return output.Table{Header: []string{"field", "value"}, Rows: rows}, notes
}

// putBytes is a largest-Put figure: a size, or "nothing" when no Put fits.
func putBytes(g *globalOptions, n int64) string {
	if n < 0 {
		return "nothing"
	}
	return g.bytes(n)
}
