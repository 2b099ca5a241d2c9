// Package command holds etcdinspect's cobra commands, one file each.
package command

import (
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// globalOptions are the flags every subcommand shares.
type globalOptions struct {
	format      output.Format
	formatValue *output.FormatValue
	prefixes    []string
	lockTimeout time.Duration
}

func (o *globalOptions) AddFlags(fs *pflag.FlagSet) {
	o.formatValue = output.NewFormatValue(&o.format, output.FormatTable)
	fs.VarP(o.formatValue, "write-out", "w", "output format: "+o.formatValue.Names())
	fs.StringSliceVar(&o.prefixes, "prefix", nil,
		"Kubernetes etcd prefix (kube-apiserver --etcd-prefix); repeatable; default: detect "+strings.Join(keyspace.KnownPrefixes, ", "))
	fs.DurationVar(&o.lockTimeout, "lock-timeout", 2*time.Second,
		"how long to wait for a file held by a running etcd member before giving up")
}

func (o *globalOptions) Validate() error {
	for _, p := range o.prefixes {
		if !strings.HasPrefix(p, "/") || strings.TrimRight(p, "/") == "" {
			return cli.FlagErrorf("--prefix %q must start with '/' and name a path", p)
		}
	}
	if o.lockTimeout <= 0 {
		return cli.FlagErrorf("--lock-timeout must be positive")
	}
	return nil
}

func (o *globalOptions) parser() keyspace.Parser {
	return keyspace.Parser{Prefixes: o.prefixes}
}

func (o *globalOptions) open(path string) (*snapshot.DB, error) {
	return snapshot.Open(path, snapshot.Options{LockTimeout: o.lockTimeout})
}

// NewRootCommand returns a fresh etcdinspect command tree.
func NewRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "etcdinspect",
		Short: "Inspect etcd database files and snapshots offline, read-only, in Kubernetes terms",
		Long: `etcdinspect reads an etcd database (a member's member/snap/db, a data
directory, or a file written by 'etcdctl snapshot save') without starting etcd
and without modifying the file, maps every key onto Kubernetes' key space and
explains where the bytes go: live objects, history not yet compacted,
tombstones and free pages.`,
		PersistentPreRunE: func(*cobra.Command, []string) error { return g.Validate() },
	}
	cli.PrepareRoot(root)
	g.AddFlags(root.PersistentFlags())
	root.RegisterFlagCompletionFunc("write-out", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return g.formatValue.Allowed(), cobra.ShellCompDirectiveNoFileComp
	})
	root.AddCommand(newStatusCommand(g), newUsageCommand(g))
	return root
}
