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

func newMembersCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "members FILE_OR_DIR FILE_OR_DIR...",
		Short: "Compare the dbs of a cluster's members: revisions, consistent index, hash, first divergence, which to restore from",
		Long: `members reads the db file (or data directory) of each member of one
cluster and prints, per member, the current and compact revision, the
consistent index and term, and the hash at the common revision (the lowest
current revision) as 'etcdutl hashkv --rev' computes it. When the hashes
differ, it finds the first revision above every compact revision whose
entries differ and the keys that differ there. It names the member to
restore from and the rule: among the members whose hash is the most common,
the one with the highest consistent index. It exits 1 after printing when
the hashes differ.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return cli.FlagErrorf("members needs at least two files or data directories, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMembers(cmd, g, args, cmd.OutOrStdout())
		},
	}
}

func runMembers(cmd *cobra.Command, g *globalOptions, paths []string, out io.Writer) error {
	dbs, done, err := g.openAll(cmd, paths...)
	if err != nil {
		return err
	}
	rep, err := snapshot.CompareMembers(cmd.Context(), dbs)
	done()
	if err != nil {
		return err
	}
	if err := output.Write(out, g.format, makeMembersTable(rep), rep); err != nil {
		return err
	}
	if !rep.HashesAgree {
		return fmt.Errorf("members disagree: restore from %s", rep.RestoreFrom)
	}
	return nil
}

// makeMembersTable lays out one row per member, then the verdict rows.
func makeMembersTable(rep *snapshot.MembersReport) output.Table {
	t := output.Table{Header: []string{"member", "revision", "compact rev", "consistent index", "term", "hash", "agrees"}}
	t.Numeric = []bool{false, true, true, true, true, false, false}
	for _, m := range rep.Members {
		hash := "-"
		if rep.CommonRevision > 0 {
			hash = fmt.Sprintf("%d", m.Hash)
		}
		t.Rows = append(t.Rows, []string{m.Path, fmt.Sprint(m.Revision), fmt.Sprint(m.CompactRevision), fmt.Sprint(m.ConsistentIndex),
			fmt.Sprint(m.Term), hash, fmt.Sprint(m.Agrees)})
	}
	verdict := func(name, value string) {
		t.Rows = append(t.Rows, []string{name, "", "", "", "", "", value})
	}
	verdict("common revision", fmt.Sprint(rep.CommonRevision))
	if rep.HashesAgree {
		verdict("hashes", "agree")
	} else {
		verdict("hashes", "differ")
	}
	if rep.FirstDivergentRevision > 0 {
		verdict("first divergent revision", fmt.Sprint(rep.FirstDivergentRevision))
	}
	for _, k := range rep.DivergentKeys {
		verdict("differs: "+k.Key, strings.Join(k.Entries, " | "))
	}
	verdict("restore from", rep.RestoreFrom)
	verdict("rule", rep.Rule)
	return t
}
