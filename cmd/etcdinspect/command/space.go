package command

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

type spaceOptions struct {
	quota int64
}

func (o *spaceOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Int64Var(&o.quota, "quota", snapshot.DefaultQuotaBytes, "the member's --quota-backend-bytes, in bytes")
}

func (o *spaceOptions) Validate() error {
	if o.quota <= 0 {
		return cli.FlagErrorf("--quota must be positive")
	}
	return nil
}

func newSpaceCommand(g *globalOptions) *cobra.Command {
	o := &spaceOptions{}
	cmd := &cobra.Command{
		Use:   "space FILE",
		Short: "A verdict on etcd's backend quota: size vs in use vs quota, what compaction and defragmentation would leave",
		Long: `space compares the file with etcd's backend quota (--quota, default 2 GiB)
and explains the page layout behind the verdict:

  - the DB size (bbolt's high-water mark: what the quota checks), the
    bytes in use and free, the quota used and whether NOSPACE is raised
    (etcd's rule: a write is refused, and the alarm raised, when the DB
    size plus its charge reaches the quota; a Put is charged 256 bytes
    plus its key and value, so NOSPACE comes before the size reaches the
    quota), the largest Put still admitted, and whether the file holds a
    raised NOSPACE alarm;
  - why a compaction alone never clears NOSPACE (the quota checks the
    file's size, which only a defragmentation shrinks), and the size a
    compaction at the current revision and then a defragmentation would
    leave;
  - free pages as a histogram of contiguous runs and the largest run (a
    value larger than it grows the file even with free pages left); branch,
    leaf and overflow pages and how full the leaves are;
  - whether a fragmentation alert on this file is signal or noise, with
    the rule, and a safe quota for the live data to double.`,
		Args: cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return runSpace(cmd, g, o, args[0], cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runSpace(cmd *cobra.Command, g *globalOptions, o *spaceOptions, path string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	s, err := db.Space(cmd.Context(), o.quota, g.parser())
	done()
	if err != nil {
		return err
	}
	return output.Write(out, g.format, makeSpaceTable(s), s)
}

// makeSpaceTable lays the verdict out as field/value rows.
func makeSpaceTable(s *snapshot.Space) output.Table {
	verdict := fmt.Sprintf("below the quota (%.1f%% used): the quota admits a Put of up to %d key and value bytes", s.QuotaUsedPercent, s.MaxPutBytes)
	switch {
	case s.OverQuota:
		verdict = fmt.Sprintf("NOSPACE: DB size + the cheapest write's charge (a %d-byte LeaseGrant) reaches the quota (%.1f%% used): every write is refused",
			snapshot.LeaseGrantCostBytes, s.QuotaUsedPercent)
	case s.MaxPutBytes < 0:
		verdict = fmt.Sprintf("NOSPACE on the next Put: DB size + a Put's %d-byte charge reaches the quota (%.1f%% used)", snapshot.PutOverheadBytes, s.QuotaUsedPercent)
	}
	after := "below the quota"
	if !s.AfterClearsQuota {
		after = "still at or above the quota: raise the quota or delete data"
	}
	alarm := "no"
	if s.NoSpaceAlarm {
		alarm = "yes: writes stay refused until `etcdctl alarm disarm`"
	}
	largestPut := fmt.Sprintf("%d key and value bytes", s.MaxPutBytes)
	if s.MaxPutBytes < 0 {
		largestPut = "none"
	}
	rows := [][]string{
		{"path", s.Path},
		{"verdict", verdict},
		{"rule", fmt.Sprintf("etcd refuses a write and raises NOSPACE when DB size + its charge >= quota; a Put is charged %d + key + value bytes, a LeaseGrant %d, a Txn its larger branch (server/storage/quota.go)",
			snapshot.PutOverheadBytes, snapshot.LeaseGrantCostBytes)},
		{"NOSPACE alarm in the file", alarm},
		{"quota bytes", fmt.Sprint(s.QuotaBytes)},
		{"headroom bytes", fmt.Sprint(s.HeadroomBytes)},
		{"largest Put admitted", largestPut},
		{"file size bytes", fmt.Sprint(s.SizeBytes)},
		{"db size bytes", fmt.Sprint(s.DBSizeBytes)},
		{"in use bytes", fmt.Sprint(s.InUseBytes)},
		{"free bytes", fmt.Sprintf("%d (%d pages of %d bytes)", s.FreeBytes, s.FreePages, s.PageSize)},
		{"compaction alone clears NOSPACE", fmt.Sprintf("%v: the quota checks the DB size, not the bytes in use, and only a defragmentation shrinks the file (server/storage/quota.go; -w json: why)", s.CompactionClearsNoSpace)},
		{"compaction at current revision", fmt.Sprintf("revision %d removes %d entry bytes", s.CurrentRevision, s.CompactFreesBytes)},
		{"after compaction and defragmentation", fmt.Sprintf("%d bytes: %s", s.AfterCompactDefragBytes, after)},
		{"largest free run", fmt.Sprintf("%d pages (%d bytes)", s.LargestFreeRunPages, s.LargestFreeRunBytes)},
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
		[]string{"fragmentation alert", fmt.Sprintf("%s (%s)", s.FragmentationAlert, s.FragmentationRule)},
		[]string{"safe quota bytes", fmt.Sprintf("%d (twice the size after compaction and defragmentation, rounded up to a GiB, within etcd's 2-8 GiB)", s.SafeQuotaBytes)},
	)
	return output.Table{Header: []string{"field", "value"}, Rows: rows}
}
