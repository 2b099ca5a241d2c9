// Package command holds lwbench's cobra commands, one file each.
package command

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/heapprofile"
)

// NewRootCommand returns a fresh lwbench command tree.
func NewRootCommand() *cobra.Command {
	var cpuProfile, heapProfile string
	var profileFile *os.File
	var heap *heapprofile.Recorder
	// stopProfile ends both profiles; ran says whether the command ran
	// (a usage error leaves no heap profile).
	stopProfile := func(ran bool) error {
		var err error
		if heap != nil {
			if _, herr := heap.Stop(ran); herr != nil {
				err = fmt.Errorf("--heap-profile %s: %w", heapProfile, herr)
			}
			heap = nil
		}
		if profileFile == nil {
			return err
		}
		pprof.StopCPUProfile()
		err = errors.Join(err, profileFile.Close())
		profileFile = nil
		return err
	}
	root := &cobra.Command{
		Use:   "lwbench",
		Short: "Kubernetes-style list/watch load against etcd, with compaction and defragmentation",
		Long: `lwbench drives the load Kubernetes puts on etcd: writers churn pods, configmaps
and events while informers (or kube-apiserver's watch caches) LIST then WATCH
from the list's revision and relist when their revision has been compacted;
compaction runs on kube-apiserver's schedule and a defragmentation stalls the
member. It measures event delivery latency, relists and their cost, and checks
every watch against etcd's guarantees.

By default it starts its own etcd member in a temporary directory; use
--endpoints to drive an existing cluster.`,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if heapProfile != "" {
				r, err := heapprofile.Start(heapProfile)
				if err != nil {
					return cli.FlagErrorf("--heap-profile %s: %v", heapProfile, err)
				}
				heap = r
			}
			if cpuProfile == "" {
				return nil
			}
			f, err := os.Create(cpuProfile)
			if err != nil {
				stopProfile(false)
				return cli.FlagErrorf("--cpu-profile %s: %v", cpuProfile, err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				stopProfile(false)
				return fmt.Errorf("--cpu-profile %s: %w", cpuProfile, err)
			}
			profileFile = f
			return nil
		},
		PersistentPostRunE: func(cmd *cobra.Command, args []string) error {
			return stopProfile(true)
		},
	}
	root.PersistentFlags().StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of lwbench (and an embedded member) to this file")
	root.PersistentFlags().StringVar(&heapProfile, "heap-profile", "", "write a heap profile of lwbench (and an embedded member) to this file as the live heap grows: rewritten each time it is 25% past the last profile's, so it shows what the run held near its peak (go tool pprof reads it)")
	cli.PrepareRoot(root)
	root.AddCommand(newRunCommand(nil), newWorkerCommand(nil), newWatchCommand(nil), newPutCommand(nil), newListCommand(nil))
	root.AddCommand(newExperimentCommands()...)
	root.AddCommand(newConformanceCommand())
	root.AddCommand(newReportCommand(nil))
	root.AddCommand(newMergeCommand(nil), newScrapeCommand(nil), newGatherCommand(nil))
	root.AddCommand(newManifestCommand(nil))
	root.AddCommand(newVersionCommand())
	// The profile starts before a command validates its flags; a usage
	// error removes it again (nothing is left behind), and a failed run
	// still flushes it (cobra skips PersistentPostRunE after an error).
	for _, c := range root.Commands() {
		run := c.RunE
		if run == nil {
			continue
		}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			if err != nil && (profileFile != nil || heap != nil) {
				cpu := profileFile != nil
				var fe *cli.FlagError
				usage := errors.As(err, &fe)
				stopProfile(!usage)
				if usage && cpu {
					os.Remove(cpuProfile)
				}
			}
			return err
		}
	}
	return root
}
