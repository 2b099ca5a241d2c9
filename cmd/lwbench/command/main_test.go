package command

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// runLoggedProcesses runs n processes of lwbench (this test binary as
// subprocessMain), process i with args(i), each with its standard output
// and error in one file of dir named name-i.log, as a pod's log holds
// them; it waits for all of them, fails the test with a process's log if
// it exited with an error, and returns the logs' paths by i.
func runLoggedProcesses(t *testing.T, dir, name string, n int, args func(i int) []string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]*exec.Cmd, n)
	logs := make([]string, n)
	for i := range n {
		logs[i] = filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, i))
		f, err := os.Create(logs[i])
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmds[i] = exec.Command(exe, args(i)...)
		cmds[i].Env = append(os.Environ(), subprocessEnv+"=1")
		cmds[i].Stdout, cmds[i].Stderr = f, f
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			b, _ := os.ReadFile(logs[i])
			t.Fatalf("%s %d (%s): %v\n%s", name, i, strings.Join(args(i), " "), err, b)
		}
	}
	return logs
}
