package command

import (
	"fmt"
	"io"

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
	return g.write(cmd.Context(), out, makeCompactionTable(rep), nil, rep)
}

func makeCompactionTable(rep *snapshot.CompactionReport) output.Table {
	t := output.Table{Header: []string{"resource", "etcd path", "revisions", "removed revisions", "removed tombstones", "removed bytes", "keys removed"}}
	t.Numeric = numericFrom(t.Header, 2)
	row := func(r snapshot.CompactionRow) []string {
		return []string{fmt.Sprint(r.Revisions), fmt.Sprint(r.RemovedRevisions), fmt.Sprint(r.RemovedTombstones), fmt.Sprint(r.RemovedBytes), fmt.Sprint(r.KeysRemoved)}
	}
	for _, r := range rep.Rows {
		t.Rows = append(t.Rows, append(labels(r.Class, r.Prefix, r.Group, r.Resource, r.Path), row(r)...))
	}
	t.Rows = append(t.Rows, append([]string{"TOTAL", fmt.Sprintf("compact at %d (now %d, current %d)", rep.At, rep.CompactRevision, rep.CurrentRevision)}, row(rep.Total)...))
	t.Rows = append(t.Rows,
		[]string{"DB SIZE NOW", "", "", "", "", fmt.Sprint(rep.DBSizeBytes), ""},
		[]string{"IN USE NOW", "", "", "", "", fmt.Sprint(rep.InUseBytes), ""},
		[]string{"AFTER DEFRAG (ESTIMATE)", "", "", "", "", fmt.Sprint(rep.EstimatedDBSizeAfterDefragBytes), ""},
		[]string{"DEFRAG RECLAIMS", "", "", "", "", fmt.Sprint(rep.DefragReclaimBytes), ""})
	return t
}
