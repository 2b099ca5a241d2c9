package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

func newStatusCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status FILE",
		Short: "Summarise an etcd database: sizes, revisions, compaction, keys, hash, consistency",
		Long: `status reads the whole file once: sizes (file, bbolt high-water mark, in
use, free pages, fragmentation), storage version, current, compact and
scheduled compact revisions, consistent index and term, live keys, revisions,
tombstones, leases, the hash 'etcdutl snapshot status' prints, the snapshot
trailer and a bbolt consistency check. It exits 1 after printing when the
check finds errors.`,
		Args: cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd, g, args[0], cmd.OutOrStdout())
		},
	}
}

func runStatus(cmd *cobra.Command, g *globalOptions, path string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	st, _, err := db.Status(cmd.Context(), g.parser())
	done()
	if err != nil {
		return err
	}
	if err := output.Write(out, g.format, makeStatusTable(st), st); err != nil {
		return err
	}
	if !st.Check.OK {
		return fmt.Errorf("%s: consistency check found %d errors: %s", st.Path, st.Check.ErrorCount, strings.Join(st.Check.Errors, "; "))
	}
	return nil
}

// makeStatusTable lays the status out as field/value rows.
func makeStatusTable(st *snapshot.Status) output.Table {
	check := "ok"
	if !st.Check.OK {
		check = fmt.Sprintf("%d errors: %s", st.Check.ErrorCount, strings.Join(st.Check.Errors, "; "))
	}
	freelist := "not synced (rebuilt on open)"
	if st.Check.FreelistSynced {
		freelist = "synced"
	}
	rows := [][]string{
		{"path", st.Path},
		{"size bytes", fmt.Sprint(st.SizeBytes)},
		{"db size bytes", fmt.Sprint(st.DBSizeBytes)},
		{"in use bytes", fmt.Sprint(st.InUseBytes)},
		{"free bytes", fmt.Sprint(st.FreeBytes)},
		{"fragmentation", fmt.Sprintf("%.1f%%", st.FragmentationPercent)},
		{"page size", fmt.Sprint(st.PageSize)},
		{"storage version", st.StorageVersion},
		{"revision", fmt.Sprint(st.Revision)},
		{"last entry revision", fmt.Sprint(st.LastEntryRevision)},
		{"compact revision", fmt.Sprint(st.CompactRevision)},
		{"scheduled compact revision", fmt.Sprint(st.ScheduledCompactRevision)},
		{"consistent index", fmt.Sprint(st.ConsistentIndex)},
		{"term", fmt.Sprint(st.Term)},
		{"live keys", fmt.Sprint(st.LiveKeys)},
		{"revisions", fmt.Sprint(st.Revisions)},
		{"tombstones", fmt.Sprint(st.Tombstones)},
		{"leases", fmt.Sprint(st.Leases)},
		{"hash", fmt.Sprintf("%x", st.Hash)},
		{"snapshot trailer", string(st.SnapshotTrailer)},
		{"freelist", freelist},
		{"consistency check", check},
	}
	return output.Table{Header: []string{"field", "value"}, Rows: rows}
}
