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
	t, notes := makeDiffTable(g, rep)
	return g.write(cmd.Context(), out, t, notes, rep)
}

// makeDiffTable lays the changes out per resource with a total row. For
// a person (table, markdown) with one prefix, the resource column stands
// alone (as usage's), the value bytes are left to CSV and JSON, and the
// revisions between the files, and whether they are of one cluster, are
// notes below.
func makeDiffTable(g *globalOptions, rep *snapshot.DiffReport) (output.Table, []string) {
	prefixes := map[string]bool{}
	var prefix string
	for _, r := range rep.Rows {
		if r.Prefix != "" {
			prefixes[r.Prefix], prefix = true, r.Prefix
		}
	}
	wide := !g.human() || len(prefixes) > 1
	t := output.Table{Header: []string{"resource", "etcd path", "added", "modified", "deleted", "unchanged",
		"live entry bytes before", "live entry bytes after", "live value bytes before", "live value bytes after"}}
	nLabels := 2
	if !wide {
		t.Header = []string{"resource", "added", "modified", "deleted", "unchanged", "live before", "after"}
		nLabels = 1
	}
	t.Numeric = numericFrom(t.Header, nLabels)
	row := func(r snapshot.DiffRow) []string {
		cells := []string{fmt.Sprint(r.Added), fmt.Sprint(r.Modified), fmt.Sprint(r.Deleted), fmt.Sprint(r.Unchanged),
			g.bytes(r.LiveEntryBytesBefore), g.bytes(r.LiveEntryBytesAfter)}
		if wide {
			cells = append(cells, g.bytes(r.LiveValueBytesBefore), g.bytes(r.LiveValueBytesAfter))
		}
		return cells
	}
	var renamed []string
	for _, r := range rep.Rows {
		l := labels(r.Class, r.Prefix, r.Group, r.Resource, r.Path)
		if !wide {
			l, renamed = oneLabel(snapshot.UsageRow{Class: r.Class, Prefix: r.Prefix, Group: r.Group, Resource: r.Resource, Path: r.Path}, l, renamed)
		}
		t.Rows = append(t.Rows, append(l, row(r)...))
	}
	span := fmt.Sprintf("revision %d -> %d (%+d)", rep.From.Revision, rep.To.Revision, rep.RevisionsBetween)
	total := []string{"TOTAL", span}
	if !wide {
		total = []string{"TOTAL"}
	}
	t.Rows = append(t.Rows, append(total, row(rep.Total)...))
	var notes []string
	if rep.DifferentClusters {
		notes = append(notes, "DIFFERENT CLUSTERS: the two files share no member ID, so they are not two points of one history: "+
			"the keys compare, the revisions between them mean nothing.")
	}
	if !wide {
		notes = append(notes, fmt.Sprintf("From %s (revision %d) to %s (revision %d): %+d revisions; live: the live keys' entry bytes "+
			"(their values alone: -w csv or json).", rep.From.Path, rep.From.Revision, rep.To.Path, rep.To.Revision, rep.RevisionsBetween))
		if prefix != "" {
			notes = append(notes, "Prefix: "+prefix+".")
		}
		if len(renamed) > 0 {
			notes = append(notes, "Stored under another name: "+strings.Join(renamed, ", ")+".")
		}
	}
	return t, notes
}
