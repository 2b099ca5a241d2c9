// Command lwbench drives Kubernetes-style list/watch load against etcd and
// measures event latency, relists and lost events.
package main

import (
	"os"
	"runtime/debug"

	"github.com/kubestore/etcdkit/cmd/lwbench/command"
	"github.com/kubestore/etcdkit/internal/cli"
)

func main() {
	// A load generator trades memory for CPU: with GOGC unset, collect at
	// 400% heap growth so that garbage collection competes less with the
	// etcd member for the machine's cores. Results report lwbench's memory.
	// A run of client-go informers collects at 100, as client-go's own
	// processes do (command.collectAsClientGo).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(cli.Run(command.NewRootCommand(), os.Args[1:], os.Stderr))
}
