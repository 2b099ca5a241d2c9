package command

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// Tests that must signal or kill lwbench run it as a process: the test
// binary re-executed with subprocessEnv set is lwbench (subprocessMain).
const (
	subprocessEnv = "LWBENCH_TEST_SUBPROCESS"
	// holdConfirmEnv makes the subprocess's run hold its drain (watchload.PhaseDrain)
	// phase until a second interrupt (or 30 s), as a slow collection
	// does (a busy or distant cluster), and say so on stderr.
	holdConfirmEnv = "LWBENCH_TEST_HOLD_CONFIRM"
	// holdConfirmLine is what the subprocess prints when it holds.
	holdConfirmLine = "test: confirming held until a second interrupt"
)

func TestMain(m *testing.M) {
	if os.Getenv(subprocessEnv) != "" {
		os.Exit(subprocessMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// subprocessMain is lwbench's main, with `run` holding its confirmation
// when holdConfirmEnv is set.
func subprocessMain(args []string) int {
	root := NewRootCommand()
	if os.Getenv(holdConfirmEnv) != "" {
		for _, c := range root.Commands() {
			if c.Name() == "run" {
				root.RemoveCommand(c)
			}
		}
		root.AddCommand(newRunCommand(func(cmd *cobra.Command, o *runOptions) error {
			ctx := cmd.Context()
			o.load.OnPhase = func(phase string) {
				if phase != watchload.PhaseDrain {
					return
				}
				fmt.Fprintln(cmd.ErrOrStderr(), holdConfirmLine)
				var again <-chan struct{}
				if c := cli.SecondInterrupt(ctx); c != nil {
					again = c.Done()
				}
				select {
				case <-again:
				case <-time.After(30 * time.Second):
				}
			}
			return runRun(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		}))
	}
	return cli.Run(root, args, os.Stderr)
}
