package command

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// errNotReady is returned, after the verdict is printed, for a file that
// is not ready to restore (exit 1).
var errNotReady = errors.New("not ready to restore")

func newVerifyCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "verify FILE",
		Short: "One-line restore-readiness verdict: snapshot trailer, consistency check, revision; exit 0 when ready, 1 when not",
		Long: `verify says in one line whether 'etcdutl snapshot restore' can restore the
file: its sha256 trailer ('etcdctl snapshot save' appends one; restore
refuses a file whose trailer does not match, and a file without one
unless given --skip-hash-check), the bbolt consistency check, and the
revision and consistent index a restored cluster starts at. It exits 0
when the file is ready (a file without a trailer, such as a member's db,
is ready with --skip-hash-check) and 1 when it is not. -w json prints the
verdict's fields.`,
		Args: cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd, g, args[0], cmd.OutOrStdout())
		},
	}
}

func runVerify(cmd *cobra.Command, g *globalOptions, path string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	v, err := db.Verify(cmd.Context())
	done()
	if err != nil {
		return err
	}
	if err := cmd.Context().Err(); err != nil {
		return fmt.Errorf("before printing: %w", err)
	}
	if g.format == output.FormatJSON {
		err = output.Write(out, g.format, output.Table{}, v)
	} else {
		_, err = fmt.Fprintln(out, output.EscapeControl(v.Verdict()))
	}
	if err != nil {
		return err
	}
	if !v.Ready {
		return fmt.Errorf("%s: %w: %s", v.Path, errNotReady, restoreProblem(v.SnapshotTrailer, v.Check))
	}
	return nil
}

// restoreProblem names what keeps a file from being restored as saved:
// a mismatched trailer, the consistency check's errors.
func restoreProblem(t snapshot.Trailer, c *snapshot.Check) string {
	var what []string
	if t == snapshot.TrailerInvalid {
		what = append(what, t.Restore())
	}
	if !c.OK {
		what = append(what, fmt.Sprintf("consistency check found %d errors: %s", c.ErrorCount, strings.Join(c.Errors, "; ")))
	}
	return strings.Join(what, "; ")
}
