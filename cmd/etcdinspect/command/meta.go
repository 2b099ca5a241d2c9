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

func newMetaCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "meta FILE",
		Short: "Show the meta, cluster, members, alarm and auth buckets (never password hashes)",
		Args:  cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMeta(cmd, g, args[0], cmd.OutOrStdout())
		},
	}
}

func runMeta(cmd *cobra.Command, g *globalOptions, path string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	ci, err := db.ClusterInfo()
	done()
	if err != nil {
		return err
	}
	return g.write(cmd.Context(), out, makeMetaTable(ci), nil, ci)
}

// confState shows the raft membership with member IDs in hex, as every
// other member ID is shown.
func confState(m snapshot.Meta) string {
	switch {
	case m.ConfState == "":
		return "-"
	case m.Voters == nil && m.Learners == nil:
		return m.ConfState
	}
	return fmt.Sprintf("voters=%s learners=%s", orDash(strings.Join(m.Voters, ","), "-"), orDash(strings.Join(m.Learners, ","), "-"))
}

func makeMetaTable(ci *snapshot.ClusterInfo) output.Table {
	m := ci.Meta
	term := "-"
	if m.HasTerm {
		term = fmt.Sprint(m.Term)
	}
	rows := [][]string{
		{"meta", "consistent index", fmt.Sprint(m.ConsistentIndex)},
		{"meta", "term", term},
		{"meta", "storage version", m.DetectedVersion()},
		{"meta", "conf state", confState(m)},
		{"meta", "finished compact revision", fmt.Sprint(m.FinishedCompactRevision)},
		{"meta", "scheduled compact revision", fmt.Sprint(m.ScheduledCompactRevision)},
		{"cluster", "cluster version", orDash(ci.ClusterVersion, "-")},
	}
	if ci.Downgrade != "" {
		rows = append(rows, []string{"cluster", "downgrade", ci.Downgrade})
	}
	for _, mb := range ci.Members {
		rows = append(rows, []string{"member", mb.ID, fmt.Sprintf("name=%s learner=%v", orDash(mb.Name, "-"), mb.IsLearner)},
			[]string{"member", mb.ID + " peer URLs", strings.Join(mb.PeerURLs, ",")},
			[]string{"member", mb.ID + " client URLs", orDash(strings.Join(mb.ClientURLs, ","), "-")})
	}
	for _, id := range ci.RemovedMembers {
		rows = append(rows, []string{"removed member", id, "removed"})
	}
	if len(ci.Alarms) == 0 {
		rows = append(rows, []string{"alarm", "-", "none"})
	}
	for _, a := range ci.Alarms {
		rows = append(rows, []string{"alarm", a.MemberID, a.Alarm})
	}
	rows = append(rows, []string{"auth", "enabled", fmt.Sprint(ci.AuthEnabled)}, []string{"auth", "revision", fmt.Sprint(ci.AuthRevision)})
	for _, u := range ci.Users {
		pw := "no password"
		if u.HasPassword {
			pw = "password set"
		}
		rows = append(rows, []string{"user", u.Name, fmt.Sprintf("roles=%s %s", orDash(strings.Join(u.Roles, ","), "-"), pw)})
	}
	for _, r := range ci.Roles {
		var perms []string
		for _, p := range r.Permissions {
			s := p.Type + " " + p.Key
			if p.RangeEnd != "" {
				s += " to " + p.RangeEnd
			}
			perms = append(perms, s)
		}
		rows = append(rows, []string{"role", r.Name, orDash(strings.Join(perms, "; "), "no permissions")})
	}
	return output.Table{Header: []string{"section", "name", "value"}, Rows: rows}
}
