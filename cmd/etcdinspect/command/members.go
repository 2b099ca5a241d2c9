package command

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
	"github.com/kubestore/etcdkit/pkg/wal"
)

func newMembersCommand(g *globalOptions) *cobra.Command {
	lo := &liveOptions{}
	cmd := &cobra.Command{
		Use:   "members FILE_OR_DIR FILE_OR_DIR... | --endpoints URLS",
		Short: "Compare the dbs of a cluster's members: cluster, lag, consistent index, hash, first divergence, which to restore from",
		Long: `members reads the db file (or data directory) of each member of one
cluster and prints, per member, the cluster it belongs to (the WAL's
cluster ID for a data directory, the member IDs of the db's members
bucket), the current and compact revision, the consistent index and
term, how far it trails the newest member, for a data directory the WAL's
commit index and the entries etcd replays on start, and the hash at the
common revision (the lowest current revision) as 'etcdutl hashkv --rev'
computes it. When the hashes differ, it finds the first revision above
every compact revision whose entries differ, the keys that differ there,
and the last revision the members share with its hash.

It names the member to restore from only when every input is of one
cluster and more than half of them hold one hash: among those, the one
with the highest consistent index. With no majority it says so, and what
decides instead; the order of the arguments never does. It exits 1 after
printing when the inputs are of different clusters or the hashes differ,
and 2 when one file is given twice.

With --endpoints it compares the members of a running cluster instead,
read-only: every member's Status (revision, raft index and term), lag
behind the newest member, and HashKV on each member at the common
revision (the lowest current revision, at or above the compact revision),
with the same verdicts; it names no member to restore from. HashKV
modifies nothing but reads every entry of the member's key space up to
that revision, values included, on every member: it costs each member
what a full read of its db does. It exits 1 after printing when the
hashes differ or a member does not answer.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if lo.enabled() {
				return lo.args(cmd, args)
			}
			if len(args) < 2 {
				return cli.FlagErrorf("members needs at least two files or data directories, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if lo.enabled() {
				if err := lo.Validate(); err != nil {
					return err
				}
				return runLiveMembers(cmd, g, lo, cmd.OutOrStdout())
			}
			return runMembers(cmd, g, args, cmd.OutOrStdout())
		},
	}
	lo.AddFlags(cmd.Flags())
	return cmd
}

func runMembers(cmd *cobra.Command, g *globalOptions, paths []string, out io.Writer) error {
	dbs, done, err := g.openAll(cmd, paths...)
	if err != nil {
		return err
	}
	defer done()
	in := make([]snapshot.MemberInput, len(dbs))
	for i, db := range dbs {
		for j := range i {
			if db.SameFile(dbs[j]) {
				return cli.FlagErrorf("%s and %s are the same file (%s): give each member's db once", paths[j], paths[i], db.Path())
			}
		}
		w, err := memberWAL(cmd, paths[i])
		if err != nil {
			return err
		}
		in[i] = snapshot.MemberInput{DB: db, WAL: w}
	}
	rep, err := snapshot.CompareMembers(cmd.Context(), in)
	if err != nil {
		return err
	}
	done()
	t, notes := makeMembersTable(g, rep)
	if err := g.write(cmd.Context(), out, t, notes, rep); err != nil {
		return err
	}
	switch {
	case rep.Clusters > 1:
		return fmt.Errorf("the inputs belong to %d different clusters: no member to restore from", rep.Clusters)
	case !rep.HashesAgree && rep.RestoreFrom != "":
		return fmt.Errorf("members disagree: restore from %s", rep.RestoreFrom)
	case !rep.HashesAgree:
		return errors.New("members disagree and no hash has a majority: nothing decides a restore source from the data alone")
	}
	return nil
}

// memberWAL reads the WAL of a data directory: its cluster and member ID
// and commit index. A db file, or a directory without WAL segments, has
// none (nil); a WAL that cannot be read is said so on stderr and left out.
func memberWAL(cmd *cobra.Command, path string) (*snapshot.MemberWAL, error) {
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		return nil, nil
	}
	if _, _, err := wal.Dirs(path); errors.Is(err, wal.ErrNoWAL) {
		return nil, nil
	}
	rep, err := wal.Read(cmd.Context(), path, wal.Options{TopKeys: -1})
	if cmd.Context().Err() != nil {
		return nil, fmt.Errorf("%s: read its WAL: %w", path, cmd.Context().Err())
	}
	if err != nil {
		// The db still compares; only the WAL's figures are missing.
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s: its WAL is not read (%s): no commit index shown\n",
			cmd.Root().Name(), output.EscapeControl(path), output.EscapeControl(err.Error()))
		return nil, nil
	}
	return &snapshot.MemberWAL{NodeID: rep.NodeID, ClusterID: rep.ClusterID, CommitIndex: rep.HardState.Commit}, nil
}

// makeMembersTable lays the members out side by side, one column each
// (m1, m2, ... named in the notes, so that long paths do not widen the
// table), with the verdict and the rule as notes below.
func makeMembersTable(g *globalOptions, rep *snapshot.MembersReport) (output.Table, []string) {
	t := output.Table{Header: []string{"field"}}
	for i := range rep.Members {
		t.Header = append(t.Header, fmt.Sprintf("m%d", i+1))
	}
	t.Numeric = numericFrom(t.Header, 1)
	row := func(name string, cell func(m snapshot.MemberState) string) {
		r := []string{name}
		for _, m := range rep.Members {
			r = append(r, cell(m))
		}
		t.Rows = append(t.Rows, r)
	}
	hasWAL := false
	for _, m := range rep.Members {
		hasWAL = hasWAL || m.WAL != nil
	}
	row("cluster", func(m snapshot.MemberState) string {
		if m.WAL != nil && m.WAL.ClusterID != "" {
			return fmt.Sprintf("%d: %s", m.Cluster, m.WAL.ClusterID)
		}
		return fmt.Sprint(m.Cluster)
	})
	if hasWAL {
		row("member ID (WAL)", func(m snapshot.MemberState) string {
			if m.WAL == nil {
				return "-"
			}
			return m.WAL.NodeID
		})
	}
	row("members in db", func(m snapshot.MemberState) string { return orDash(strings.Join(m.MemberIDs, ","), "-") })
	row("revision", func(m snapshot.MemberState) string { return fmt.Sprint(m.Revision) })
	row("revisions behind", func(m snapshot.MemberState) string { return behind(m.RevisionsBehind) })
	row("compact revision", func(m snapshot.MemberState) string { return fmt.Sprint(m.CompactRevision) })
	row("consistent index", func(m snapshot.MemberState) string { return fmt.Sprint(m.ConsistentIndex) })
	row("index behind", func(m snapshot.MemberState) string { return behind(int64(m.IndexBehind)) })
	row("term", func(m snapshot.MemberState) string { return fmt.Sprint(m.Term) })
	if hasWAL {
		row("WAL commit index", func(m snapshot.MemberState) string {
			if m.WAL == nil {
				return "-"
			}
			return fmt.Sprint(m.WAL.CommitIndex)
		})
		row("replayed on start", func(m snapshot.MemberState) string {
			if m.WAL == nil {
				return "-"
			}
			if m.ReplayEntries > 0 {
				return fmt.Sprintf("%d entries", m.ReplayEntries)
			}
			return "0"
		})
	}
	row(fmt.Sprintf("hash at rev %d", rep.CommonRevision), func(m snapshot.MemberState) string {
		if rep.CommonRevision == 0 {
			return "-"
		}
		return fmt.Sprintf("%08x", m.Hash)
	})
	row("with the majority", func(m snapshot.MemberState) string { return yesNo(m.Agrees) })

	var notes []string
	for i, m := range rep.Members {
		notes = append(notes, fmt.Sprintf("m%d: %s", i+1, m.Path))
	}
	notes = append(notes, "Verdict: "+membersVerdict(rep))
	if rep.LastCommonRevision > 0 {
		hash := "the members' hashes there differ (different compact revisions)"
		if rep.LastCommonHash != 0 || rep.HashesAgree {
			hash = fmt.Sprintf("hash %08x", rep.LastCommonHash)
		}
		notes = append(notes, fmt.Sprintf("Last common revision: %d, %s.", rep.LastCommonRevision, hash))
	}
	if rep.FirstDivergentRevision > 0 {
		notes = append(notes, fmt.Sprintf("First divergent revision: %d; the keys that differ there, with each member's entry "+
			"(revision/sub and value CRC-32C):", rep.FirstDivergentRevision))
		for _, k := range rep.DivergentKeys {
			var e []string
			for i, entry := range k.Entries {
				e = append(e, fmt.Sprintf("m%d %s", i+1, entry))
			}
			notes = append(notes, fmt.Sprintf("  %s: %s", k.Key, strings.Join(e, ", ")))
		}
	}
	for i, m := range rep.Members {
		switch {
		case m.ReplayEntries > 0:
			notes = append(notes, fmt.Sprintf("m%d's db is %d entries behind its own WAL's commit index %d: etcd applies them when it starts, "+
				"the db alone (a restore from it) lacks them.", i+1, m.ReplayEntries, m.WAL.CommitIndex))
		case m.RevisionsBehind > 0 || m.IndexBehind > 0:
		default:
			continue
		}
		if m.RevisionsBehind > 0 || m.IndexBehind > 0 {
			notes = append(notes, fmt.Sprintf("m%d LAGS: %d revisions and %d raft entries behind the newest member; "+
				"its hash is compared at the common revision only.", i+1, m.RevisionsBehind, m.IndexBehind))
		}
	}
	if rep.RestoreFrom != "" {
		notes = append(notes, "Restore from: "+rep.RestoreFrom+".")
	}
	notes = append(notes, "Rule: "+rep.Rule+".")
	return t, notes
}

// membersVerdict sums the comparison up in a sentence.
func membersVerdict(rep *snapshot.MembersReport) string {
	switch {
	case rep.Clusters > 1:
		return fmt.Sprintf("DIFFERENT CLUSTERS: the inputs belong to %d clusters (row \"cluster\"); nothing is compared for a restore.", rep.Clusters)
	case rep.CommonRevision == 0:
		return "no common revision to compare the hashes at."
	case rep.HashesAgree:
		return fmt.Sprintf("the hashes agree at the common revision %d.", rep.CommonRevision)
	case !rep.Majority:
		return fmt.Sprintf("the hashes DIFFER at revision %d and NO hash has a majority.", rep.CommonRevision)
	}
	return fmt.Sprintf("the hashes DIFFER at revision %d; the majority's hash is the members marked yes.", rep.CommonRevision)
}

// behind shows a lag: 0, or the number.
func behind(n int64) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d LAGS", n)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
