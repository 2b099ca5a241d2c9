// Command etcdinspect reads an etcd database file or snapshot offline and
// read-only and explains it in Kubernetes terms.
package main

import (
	"os"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
)

func main() {
	os.Exit(cli.Run(command.NewRootCommand(), os.Args[1:], os.Stderr))
}
