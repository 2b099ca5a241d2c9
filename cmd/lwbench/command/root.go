// Package command holds lwbench's cobra commands, one file each.
package command

import (
	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
)

// NewRootCommand returns a fresh lwbench command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "lwbench",
		Short: "Kubernetes-style list/watch load against etcd, with compaction and defragmentation",
		Long: `lwbench drives the load Kubernetes puts on etcd: writers churn pods while
reflector-like clients LIST then WATCH from the list's revision and relist when
their revision has been compacted; compaction runs on kube-apiserver's schedule
and a defragmentation stalls the member. It measures event delivery latency,
relists and their cost, and checks that no event is lost.

By default it starts its own etcd member in a temporary directory; use
--endpoints to drive an existing cluster.`,
	}
	cli.PrepareRoot(root)
	root.AddCommand(newRunCommand(nil), newWatchCommand(nil), newPutCommand(nil), newListCommand(nil))
	return root
}
