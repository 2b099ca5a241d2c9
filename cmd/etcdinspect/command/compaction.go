package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

type compactionOptions struct {
	at int64
}

func (o *compactionOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Int64Var(&o.at, "at", 0, "the revision to compact at, as 'etcdctl compact REV' would (required)")
}

func (o *compactionOptions) Validate() error {
	if o.at <= 0 {
		return cli.FlagErrorf("--at must be a positive revision")
	}
	return nil
}

func newCompactionCommand(g *globalOptions) *cobra.Command {
	o := &compactionOptions{}
	cmd := &cobra.Command{
		Use:   "compaction FILE --at REV",
		Short: "What compacting at REV would remove, per resource, and what a defragmentation afterwards would reclaim",
		Args:  cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return runCompaction(cmd, g, o, args[0], cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runCompaction(cmd *cobra.Command, g *globalOptions, o *compactionOptions, path string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	rep, err := db.Compaction(cmd.Context(), o.at, g.parser())
	done()
	if err != nil {
		return err
	}
	t, notes := makeCompactionTable(g, rep)
	return g.write(cmd.Context(), out, t, notes, rep)
}

// makeCompactionTable lays the estimate out per resource with a total
// row. For a person (table, markdown) with one prefix the resource column
// stands alone (as usage's) and the sizes before and after a
// defragmentation are notes below; CSV keeps the etcd path column and the
// size rows.
func makeCompactionTable(g *globalOptions, rep *snapshot.CompactionReport) (output.Table, []string) {
	prefixes := map[string]bool{}
	var prefix string
	for _, r := range rep.Rows {
		if r.Prefix != "" {
			prefixes[r.Prefix], prefix = true, r.Prefix
		}
	}
	pathColumn := !g.human() || len(prefixes) != 1
	t := output.Table{Header: []string{"resource", "etcd path", "revisions", "removed revisions", "removed tombstones", "removed bytes", "keys removed"}}
	if !pathColumn {
		t.Header = []string{"resource", "revisions", "removed", "tombstones", "bytes", "keys gone"}
	}
	nLabels := len(t.Header) - 5
	t.Numeric = numericFrom(t.Header, nLabels)
	row := func(r snapshot.CompactionRow) []string {
		return []string{fmt.Sprint(r.Revisions), fmt.Sprint(r.RemovedRevisions), fmt.Sprint(r.RemovedTombstones), g.bytes(r.RemovedBytes), fmt.Sprint(r.KeysRemoved)}
	}
	var renamed []string
	for _, r := range rep.Rows {
		l := labels(r.Class, r.Prefix, r.Group, r.Resource, r.Path)
		if !pathColumn {
			l, renamed = oneLabel(snapshot.UsageRow{Class: r.Class, Prefix: r.Prefix, Group: r.Group, Resource: r.Resource, Path: r.Path}, l, renamed)
		}
		t.Rows = append(t.Rows, append(l, row(r)...))
	}
	span := fmt.Sprintf("compact at %d (now %d, current %d)", rep.At, rep.CompactRevision, rep.CurrentRevision)
	total := []string{"TOTAL", span}
	if !pathColumn {
		total = []string{"TOTAL"}
	}
	t.Rows = append(t.Rows, append(total, row(rep.Total)...))
	sizes := []struct {
		name  string
		bytes int64
	}{{"DB SIZE NOW", rep.DBSizeBytes}, {"IN USE NOW", rep.InUseBytes},
		{"AFTER DEFRAG (ESTIMATE)", rep.EstimatedDBSizeAfterDefragBytes}, {"DEFRAG RECLAIMS", rep.DefragReclaimBytes}}
	if pathColumn {
		for _, sz := range sizes {
			t.Rows = append(t.Rows, []string{sz.name, "", "", "", "", g.bytes(sz.bytes), ""})
		}
		return t, nil
	}
	notes := []string{fmt.Sprintf("A compaction at revision %d (compacted now at %d, current revision %d) removes the revisions counted above; "+
		"tombstones: of them, deletes; bytes: their entry bytes; keys gone: keys with no revision left.", rep.At, rep.CompactRevision, rep.CurrentRevision),
		fmt.Sprintf("DB size now %s, in use %s; after the compaction and a defragmentation about %s: a defragmentation reclaims %s.",
			g.bytes(rep.DBSizeBytes), g.bytes(rep.InUseBytes), g.bytes(rep.EstimatedDBSizeAfterDefragBytes), g.bytes(rep.DefragReclaimBytes)),
		"Prefix: " + prefix + "."}
	if len(renamed) > 0 {
		notes = append(notes, "Stored under another name: "+strings.Join(renamed, ", ")+".")
	}
	return t, notes
}
