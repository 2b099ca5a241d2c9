// Command etcdinspect reads an etcd database file or snapshot offline and
// read-only and explains it in Kubernetes terms.
package main

import (
	"os"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
)

func main() {
	// SIGINT and SIGTERM end every lock wait and scan: exit 130 (the
	// exporter exits 0 on SIGTERM: cli.AnnotationTerminateExitsOK).
	ctx, stop := cli.NotifyInterrupts()
	code := cli.RunContext(ctx, command.NewRootCommand(), os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
