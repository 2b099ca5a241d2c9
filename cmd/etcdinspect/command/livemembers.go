package command

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/live"
)

func runLiveMembers(cmd *cobra.Command, g *globalOptions, lo *liveOptions, out io.Writer) error {
	c, done, err := lo.connect(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	ms, err := live.ReadMembers(cmd.Context(), c, lo.conn.Endpoints, lo.conn.DialTimeout)
	if err != nil {
		return err
	}
	t, notes := makeLiveMembersTable(ms)
	if err := g.write(cmd.Context(), out, t, notes, ms); err != nil {
		return err
	}
	for _, m := range ms.Members {
		if m.Error != "" {
			return fmt.Errorf("member %s (%s) did not answer: its hash is not compared", m.Name, m.MemberID)
		}
	}
	if !ms.HashesAgree {
		return errors.New("members disagree")
	}
	return nil
}

// makeLiveMembersTable lays the members out side by side as
// makeMembersTable does, m1, m2, ... named in the notes.
func makeLiveMembersTable(ms *live.Members) (output.Table, []string) {
	t := output.Table{Header: []string{"field"}}
	for i := range ms.Members {
		t.Header = append(t.Header, fmt.Sprintf("m%d", i+1))
	}
	t.Numeric = numericFrom(t.Header, 1)
	t.Rows = append(t.Rows, []string{"member ID"})
	for _, m := range ms.Members {
		t.Rows[0] = append(t.Rows[0], m.MemberID)
	}
	// A member that did not answer Status has no figures.
	row := func(name string, cell func(m live.MemberHash) string) {
		r := []string{name}
		for _, m := range ms.Members {
			if m.Error != "" && m.Revision == 0 {
				r = append(r, "-")
				continue
			}
			r = append(r, cell(m))
		}
		t.Rows = append(t.Rows, r)
	}
	row("version", func(m live.MemberHash) string { return m.Version })
	row("leader", func(m live.MemberHash) string { return yesNo(m.IsLeader) })
	row("revision", func(m live.MemberHash) string { return fmt.Sprint(m.Revision) })
	row("revisions behind", func(m live.MemberHash) string { return behind(m.RevisionsBehind) })
	row("raft index", func(m live.MemberHash) string { return fmt.Sprint(m.RaftIndex) })
	row("index behind", func(m live.MemberHash) string { return behind(int64(m.IndexBehind)) })
	row("term", func(m live.MemberHash) string { return fmt.Sprint(m.RaftTerm) })
	row(fmt.Sprintf("hash at rev %d", ms.CommonRevision), func(m live.MemberHash) string {
		if ms.CommonRevision == 0 || m.Error != "" {
			return "-"
		}
		return fmt.Sprintf("%08x", m.Hash)
	})
	row("with the majority", func(m live.MemberHash) string { return yesNo(m.Agrees) })

	var notes []string
	for i, m := range ms.Members {
		n := fmt.Sprintf("m%d: %s at %s", i+1, m.Name, m.Endpoint)
		if m.Error != "" {
			n += ": NO ANSWER: " + m.Error
		}
		notes = append(notes, n)
	}
	notes = append(notes, "Verdict: "+liveMembersVerdict(ms))
	for i, m := range ms.Members {
		if m.RevisionsBehind > 0 || m.IndexBehind > 0 {
			notes = append(notes, fmt.Sprintf("m%d LAGS: %d revisions and %d raft entries behind the newest member; "+
				"its hash is compared at the common revision only.", i+1, m.RevisionsBehind, m.IndexBehind))
		}
	}
	notes = append(notes, fmt.Sprintf("Source: live, read at revision %d; compact revision %d. Each member computed its hash (HashKV): "+
		"a read of every entry up to the common revision on every member.", ms.ReadAtRevision, ms.CompactRevision),
		"No member to restore from is named live: save a snapshot of each member and run members on the files.")
	return t, notes
}

// liveMembersVerdict sums the comparison up as membersVerdict does, and
// tells members that did not answer from hashes that differ.
func liveMembersVerdict(ms *live.Members) string {
	hashes, silent := map[uint32]bool{}, 0
	for _, m := range ms.Members {
		if m.Error != "" {
			silent++
			continue
		}
		hashes[m.Hash] = true
	}
	switch {
	case ms.CommonRevision == 0:
		return "no common revision to compare the hashes at."
	case ms.HashesAgree:
		return fmt.Sprintf("the hashes agree at the common revision %d.", ms.CommonRevision)
	case len(hashes) == 1:
		return fmt.Sprintf("the hashes of the %d members that answered agree at revision %d; %d member(s) did NOT ANSWER and are not compared.",
			len(ms.Members)-silent, ms.CommonRevision, silent)
	case !ms.Majority:
		return fmt.Sprintf("the hashes DIFFER at revision %d and NO hash has a majority.", ms.CommonRevision)
	}
	return fmt.Sprintf("the hashes DIFFER at revision %d; the majority's hash is the members marked yes.", ms.CommonRevision)
}
