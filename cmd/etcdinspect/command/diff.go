package command

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

func newDiffCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "diff FILE1 FILE2",
		Short: "Object-level changes from FILE1 to FILE2: added, modified and deleted keys per resource",
		Long: `diff compares the live keys of two files (two snapshots of one cluster, or
of two clusters: then it says so, as their revisions are unrelated) and counts, per resource, the keys added, modified and
deleted from FILE1 to FILE2, with the revisions between them. -w json also
lists every changed key.

` + bytesHelp + `
The byte columns sum the live keys of each resource in each file.`,
		Args: cli.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd, g, args[0], args[1], cmd.OutOrStdout())
		},
	}
}

func runDiff(cmd *cobra.Command, g *globalOptions, path1, path2 string, out io.Writer) error {
	dbs, done, err := g.openAll(cmd, path1, path2)
	if err != nil {
		return err
	}
	rep, err := dbs[0].Diff(cmd.Context(), dbs[1], g.parser())
	done()
	if err != nil {
		return err
	}
	var notes []string
	if rep.DifferentClusters {
		notes = append(notes, "DIFFERENT CLUSTERS: the two files share no member ID, so they are not two points of one history: "+
			"the keys compare, the revisions between them mean nothing.")
	}
	return g.write(cmd.Context(), out, makeDiffTable(g, rep), notes, rep)
}

func makeDiffTable(g *globalOptions, rep *snapshot.DiffReport) output.Table {
	t := output.Table{Header: []string{"resource", "etcd path", "added", "modified", "deleted", "unchanged",
		g.sizeHeader("live entries before", "live entry bytes before"), g.sizeHeader("after", "live entry bytes after"),
		g.sizeHeader("live values before", "live value bytes before"), g.sizeHeader("after", "live value bytes after")}}
	t.Numeric = numericFrom(t.Header, 2)
	row := func(r snapshot.DiffRow) []string {
		return []string{fmt.Sprint(r.Added), fmt.Sprint(r.Modified), fmt.Sprint(r.Deleted), fmt.Sprint(r.Unchanged),
			g.bytes(r.LiveEntryBytesBefore), g.bytes(r.LiveEntryBytesAfter), g.bytes(r.LiveValueBytesBefore), g.bytes(r.LiveValueBytesAfter)}
	}
	for _, r := range rep.Rows {
		t.Rows = append(t.Rows, append(labels(r.Class, r.Prefix, r.Group, r.Resource, r.Path), row(r)...))
	}
	span := fmt.Sprintf("revision %d -> %d (%+d)", rep.From.Revision, rep.To.Revision, rep.RevisionsBetween)
	t.Rows = append(t.Rows, append([]string{"TOTAL", span}, row(rep.Total)...))
	return t
}
