package command

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/buildinfo"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
)

// newVersionCommand returns `etcdinspect version`.
func newVersionCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print etcdinspect's version, commit, Go version and the etcd and Kubernetes modules built in",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info, ok := buildinfo.Read()
			if !ok {
				return errors.New("this binary carries no build information")
			}
			return output.Write(cmd.OutOrStdout(), g.format, buildinfo.MakeTable(info), info)
		},
	}
}
