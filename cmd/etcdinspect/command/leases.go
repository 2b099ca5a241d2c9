package command

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

func newLeasesCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "leases FILE",
		Short: "List leases with their TTL and the live keys attached to each (Kubernetes events hold most)",
		Long: `leases lists every lease of the lease bucket with the TTL it was granted
with and the live keys attached to it, by resource (Kubernetes events hold
most; kube-apiserver's master leases one each).

A file has no clock, so the TTL left now cannot be read from it: the
"checkpointed ttl seconds" column is the remaining TTL etcd last stored,
which it does only with the LeaseCheckpoint and LeaseCheckpointPersist
feature gates, and "-" otherwise. A member started from the file gives
each lease that remaining TTL, or its full TTL.

` + bytesHelp,
		Args: cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLeases(cmd, g, args[0], cmd.OutOrStdout())
		},
	}
}

func runLeases(cmd *cobra.Command, g *globalOptions, path string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	rep, err := db.Leases(cmd.Context(), g.parser())
	done()
	if err != nil {
		return err
	}
	t := output.Table{Header: []string{"lease", g.sizeHeader("ttl", "ttl seconds"), g.sizeHeader("checkpointed ttl", "checkpointed ttl seconds"), "keys",
		g.sizeHeader("live", "live entry bytes"), g.sizeHeader("values", "live value bytes"), "resources"}}
	t.Numeric = []bool{false, true, true, true, true, true, false}
	for _, r := range rep.Rows {
		ttl, rem := seconds(g, r.TTLSeconds), seconds(g, r.RemainingTTLSeconds)
		if r.RemainingTTLSeconds == 0 {
			rem = "-"
		}
		if r.Missing {
			ttl, rem = "(no lease)", "-"
		}
		t.Rows = append(t.Rows, []string{r.IDHex, ttl, rem, fmt.Sprint(r.Keys), g.bytes(r.LiveEntryBytes), g.bytes(r.LiveValueBytes),
			orDash(snapshot.FormatCounts(r.Resources), "-")})
	}
	t.Rows = append(t.Rows, []string{"TOTAL", "", "", fmt.Sprint(rep.KeysWithLease), "", "", fmt.Sprintf("(%d live keys without a lease)", rep.KeysWithoutLease)})
	var notes []string
	if g.human() {
		notes = []string{"ttl: as granted; checkpointed ttl: the remaining TTL etcd last checkpointed (- without its LeaseCheckpoint feature gates); " +
			"live: the attached live keys' entry bytes; values: their values alone."}
	}
	return g.write(cmd.Context(), out, t, notes, rep)
}

// seconds shows a TTL: with its unit for a person ("3600s"), the number
// of seconds for a program (CSV).
func seconds(g *globalOptions, n int64) string {
	if g.human() {
		return fmt.Sprintf("%ds", n)
	}
	return fmt.Sprint(n)
}
