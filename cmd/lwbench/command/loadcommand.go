package command

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
)

// loadOptions are a load command's options (run, watch, put, list): its
// flags and their check.
type loadOptions interface {
	AddFlags(fs *pflag.FlagSet)
	Validate() error
}

// newLoadCommand completes cmd, whose use and help are set, as a load
// command: no arguments, o's flags, the completion of out's format, and a
// RunE that checks o and then runs run with the command's context and
// output streams, or runF instead when it is not nil (flag tests).
func newLoadCommand[O loadOptions](cmd *cobra.Command, o O, out *outputOptions, runF func(*cobra.Command, O) error,
	run func(ctx context.Context, o O, out, errOut io.Writer) error) *cobra.Command {
	cmd.Args = cli.NoArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.Validate(); err != nil {
			return err
		}
		if runF != nil {
			return runF(cmd, o)
		}
		return run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	o.AddFlags(cmd.Flags())
	out.registerCompletion(cmd)
	return cmd
}
