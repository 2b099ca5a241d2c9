// Command lwbench drives Kubernetes-style list/watch load against etcd and
// measures event latency, relists and lost events.
package main

import (
	"os"

	"github.com/kubestore/etcdkit/cmd/lwbench/command"
	"github.com/kubestore/etcdkit/internal/cli"
)

func main() {
	os.Exit(cli.Run(command.NewRootCommand(), os.Args[1:], os.Stderr))
}
