package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/live"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

func newStatusCommand(g *globalOptions) *cobra.Command {
	lo := &liveOptions{}
	cmd := &cobra.Command{
		Use:   "status FILE | --endpoints URLS",
		Short: "Summarise an etcd database: sizes, revisions, compaction, keys, hash, consistency",
		Long: `status reads the whole file once: sizes (file, bbolt high-water mark, in
use, free pages, fragmentation), storage version, current, compact and
scheduled compact revisions, consistent index and term, live keys, revisions,
tombstones, leases, the hash 'etcdutl snapshot status' prints, the snapshot
trailer and what 'etcdutl snapshot restore' does with it, and a bbolt
consistency check. It exits 1 after printing when the check finds errors
or the snapshot's sha256 trailer does not match its content.

With --endpoints it reads a running cluster instead, read-only: every
member's Status (sizes, revision, raft index and term, leader, version,
errors), the alarms, and the compact revision, found with count_only
Ranges (etcd refuses a Range below it).`,
		Args: lo.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if lo.enabled() {
				if err := lo.Validate(); err != nil {
					return err
				}
				return runLiveStatus(cmd, g, lo, cmd.OutOrStdout())
			}
			return runStatus(cmd, g, args[0], cmd.OutOrStdout())
		},
	}
	lo.AddFlags(cmd.Flags())
	return cmd
}

func runLiveStatus(cmd *cobra.Command, g *globalOptions, lo *liveOptions, out io.Writer) error {
	c, done, err := lo.connect(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	st, err := live.ReadStatus(cmd.Context(), c, lo.conn.Endpoints, lo.conn.DialTimeout)
	if err != nil {
		return err
	}
	t, notes := makeLiveStatusTable(g, st)
	return g.write(cmd.Context(), out, t, notes, st)
}

// makeLiveStatusTable lays out one row per member, what the cluster
// shares (revision read at, compact revision) as notes below.
func makeLiveStatusTable(g *globalOptions, st *live.Status) (output.Table, []string) {
	t := output.Table{Header: []string{"member", "endpoint", "version", "db size", "in use", "fragmentation", "revision",
		"raft index", "raft term", "leader", "errors"}}
	t.Numeric = make([]bool, len(t.Header))
	for _, i := range []int{3, 4, 5, 6, 7, 8} {
		t.Numeric[i] = true
	}
	for _, m := range st.Members {
		name := m.Name + " (" + m.MemberID + ")"
		if m.Error != "" {
			t.Rows = append(t.Rows, []string{name, m.Endpoint, "", "", "", "", "", "", "", "", m.Error})
			continue
		}
		leader := m.Leader
		if m.IsLeader {
			leader += " (itself)"
		}
		errs := append(append([]string{}, m.Errors...), m.Alarms...)
		t.Rows = append(t.Rows, []string{name, m.Endpoint, m.Version, g.bytes(m.DBSizeBytes), g.bytes(m.InUseBytes),
			fmt.Sprintf("%.1f%%", m.FragmentationPercent), fmt.Sprint(m.Revision), fmt.Sprint(m.RaftIndex), fmt.Sprint(m.RaftTerm),
			leader, orDash(strings.Join(errs, "; "), "-")})
	}
	return t, []string{
		fmt.Sprintf("Source: live, read at revision %d.", st.ReadAtRevision),
		fmt.Sprintf("Compact revision: %d (%s).", st.CompactRevision, st.CompactRevisionSource),
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
