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
trailer and what 'etcdutl snapshot restore' does with it, and a bbolt
consistency check. It exits 1 after printing when the check finds errors
or the snapshot's sha256 trailer does not match its content.`,
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
	t, notes := makeStatusTable(g, st)
	if err := g.write(cmd.Context(), out, t, notes, st); err != nil {
		return err
	}
	if st.SnapshotTrailer == snapshot.TrailerInvalid || !st.Check.OK {
		return fmt.Errorf("%s: %s", st.Path, restoreProblem(st.SnapshotTrailer, st.Check))
	}
	return nil
}

// makeStatusTable lays the status out as field/value rows, what etcdutl
// does with the trailer as a note below.
func makeStatusTable(g *globalOptions, st *snapshot.Status) (output.Table, []string) {
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
		{"size", g.bytes(st.SizeBytes)},
		{"db size", g.bytes(st.DBSizeBytes)},
		{"in use", g.bytes(st.InUseBytes)},
		{"free", g.bytes(st.FreeBytes)},
		{"fragmentation", fmt.Sprintf("%.1f%%", st.FragmentationPercent)},
		{"page size", g.bytes(int64(st.PageSize))},
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
		{"snapshot trailer", trailer[st.SnapshotTrailer] + " (see note)"},
		{"freelist", freelist},
		{"consistency check", check},
	}
	return output.Table{Header: []string{"field", "value"}, Rows: rows}, []string{"Snapshot trailer: " + st.SnapshotTrailer.Restore() + "."}
}

// trailer names a trailer state in a table cell.
var trailer = map[snapshot.Trailer]string{
	snapshot.TrailerValid:   "valid: the sha256 matches",
	snapshot.TrailerInvalid: "INVALID: the sha256 does not match",
	snapshot.TrailerAbsent:  "absent",
}
