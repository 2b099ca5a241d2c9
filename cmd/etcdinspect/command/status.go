package command

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

func newStatusCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status FILE",
		Short: "Summarise an etcd database: sizes, revisions, compaction, keys",
		Args:  cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd, g, args[0], cmd.OutOrStdout())
		},
	}
}

func runStatus(cmd *cobra.Command, g *globalOptions, path string, out io.Writer) error {
	db, err := g.open(path)
	if err != nil {
		return err
	}
	defer db.Close()
	st, _, err := db.Status(cmd.Context(), g.parser())
	if err != nil {
		return err
	}
	return output.Write(out, g.format, makeStatusTable(st), st)
}

// makeStatusTable lays the status out as field/value rows.
func makeStatusTable(st *snapshot.Status) output.Table {
	rows := [][]string{
		{"path", st.Path},
		{"size bytes", fmt.Sprint(st.SizeBytes)},
		{"in use bytes", fmt.Sprint(st.InUseBytes)},
		{"free bytes", fmt.Sprint(st.FreeBytes)},
		{"fragmentation", fmt.Sprintf("%.1f%%", st.FragmentationPercent)},
		{"page size", fmt.Sprint(st.PageSize)},
		{"storage version", st.StorageVersion},
		{"revision", fmt.Sprint(st.Revision)},
		{"compact revision", fmt.Sprint(st.CompactRevision)},
		{"scheduled compact revision", fmt.Sprint(st.ScheduledCompactRevision)},
		{"consistent index", fmt.Sprint(st.ConsistentIndex)},
		{"term", fmt.Sprint(st.Term)},
		{"live keys", fmt.Sprint(st.LiveKeys)},
		{"revisions", fmt.Sprint(st.Revisions)},
		{"tombstones", fmt.Sprint(st.Tombstones)},
		{"leases", fmt.Sprint(st.Leases)},
		{"snapshot trailer", string(st.SnapshotTrailer)},
	}
	return output.Table{Header: []string{"field", "value"}, Rows: rows}
}
