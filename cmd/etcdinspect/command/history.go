package command

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// historySchemaVersion versions the JSON of `history -w json`.
const historySchemaVersion = 2

func newHistoryCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "history FILE KEY",
		Short: "List every stored revision of one key: puts and tombstones not yet compacted",
		Args:  cli.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runHistory(cmd, g, args[0], args[1], cmd.OutOrStdout())
		},
	}
}

// historyResult is the JSON of `history -w json`.
type historyResult struct {
	SchemaVersion int                     `json:"schemaVersion"`
	Path          string                  `json:"path"`
	Key           string                  `json:"key"`
	Revisions     []snapshot.HistoryEntry `json:"revisions"`
}

func runHistory(cmd *cobra.Command, g *globalOptions, path, key string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	h, err := db.History(cmd.Context(), key)
	done()
	if err != nil {
		return err
	}
	t := output.Table{Header: []string{"main", "sub", "mod rev", "create rev", "version", "tombstone", g.sizeHeader("value", "value bytes"), "lease"}}
	t.Numeric = numericFrom(t.Header, 0)
	t.Numeric[5] = false
	for _, e := range h {
		lease := "-"
		if e.Lease != 0 {
			lease = fmt.Sprintf("%x", e.Lease)
		}
		t.Rows = append(t.Rows, []string{fmt.Sprint(e.Main), fmt.Sprint(e.Sub), fmt.Sprint(e.ModRevision), fmt.Sprint(e.CreateRevision),
			fmt.Sprint(e.Version), fmt.Sprint(e.Tombstone), g.bytes(e.ValueBytes), lease})
	}
	return g.write(cmd.Context(), out, t, nil, historyResult{SchemaVersion: historySchemaVersion, Path: db.Path(), Key: key, Revisions: h})
}
