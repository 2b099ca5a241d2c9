package command

import (
	"testing"

	"github.com/kubestore/etcdkit/internal/cmdtest"
)

// TestVersion: `lwbench version` names the etcd and Kubernetes modules
// built in, as a table and as JSON.
func TestVersion(t *testing.T) { cmdtest.CheckVersion(t, NewRootCommand) }

// TestUsageWithoutBackticks: no flag's help shows a backticked word as
// its value name.
func TestUsageWithoutBackticks(t *testing.T) { cmdtest.CheckUsageWithoutBackticks(t, NewRootCommand()) }

// TestMistypedCommand: a mistyped command gets cobra's suggestion on one
// line.
func TestMistypedCommand(t *testing.T) {
	cmdtest.CheckMistypedCommand(t, NewRootCommand(), "rn", `lwbench: unknown command "rn" for "lwbench"; did you mean run?`+"\n")
}
