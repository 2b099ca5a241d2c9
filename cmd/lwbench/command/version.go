package command

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/buildinfo"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
)

// newVersionCommand returns `lwbench version`.
func newVersionCommand() *cobra.Command {
	var format output.Format
	formatValue := output.NewFormatValue(&format, output.FormatTable)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print lwbench's version, commit, Go version and the etcd and Kubernetes modules built in",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info, ok := buildinfo.Read()
			if !ok {
				return errors.New("this binary carries no build information")
			}
			return output.Write(cmd.OutOrStdout(), format, buildinfo.MakeTable(info), info)
		},
	}
	cmd.Flags().VarP(formatValue, "write-out", "w", "output format: "+formatValue.Names())
	return cmd
}
