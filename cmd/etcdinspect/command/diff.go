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
of two clusters) and counts, per resource, the keys added, modified and
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
	return output.Write(out, g.format, makeDiffTable(rep), rep)
}

func makeDiffTable(rep *snapshot.DiffReport) output.Table {
	t := output.Table{Header: []string{"resource", "etcd path", "added", "modified", "deleted", "unchanged",
		"live entry bytes before", "live entry bytes after", "live value bytes before", "live value bytes after"}}
	t.Numeric = numericFrom(t.Header, 2)
	row := func(r snapshot.DiffRow) []string {
		return []string{fmt.Sprint(r.Added), fmt.Sprint(r.Modified), fmt.Sprint(r.Deleted), fmt.Sprint(r.Unchanged),
			fmt.Sprint(r.LiveEntryBytesBefore), fmt.Sprint(r.LiveEntryBytesAfter), fmt.Sprint(r.LiveValueBytesBefore), fmt.Sprint(r.LiveValueBytesAfter)}
	}
	for _, r := range rep.Rows {
		t.Rows = append(t.Rows, append(labels(r.Class, r.Prefix, r.Group, r.Resource, r.Path), row(r)...))
	}
	span := fmt.Sprintf("revision %d -> %d (%+d)", rep.From.Revision, rep.To.Revision, rep.RevisionsBetween)
	t.Rows = append(t.Rows, append([]string{"TOTAL", span}, row(rep.Total)...))
	return t
}
