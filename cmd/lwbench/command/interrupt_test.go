package command

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/report"
)

// TestRunInterruptedPrintsWhatWasMeasured cancels lwbench run's context
// during its write phase, as SIGINT does through cli.Run's
// signal.NotifyContext: the run must print its result (interrupted, with
// the writes done so far), exit 130, and say so in one line. Before, it
// printed nothing and exited 1 with "context canceled".
func TestRunInterruptedPrintsWhatWasMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	args := []string{"run", "--objects", "50", "--watchers", "2", "--duration", "60s", "--write-rate", "100",
		"--unsafe-no-fsync", "--no-defrag", "-w", "json"}
	// Interrupt while the writes run (they start within a second here).
	timer := time.AfterFunc(6*time.Second, cancel)
	defer timer.Stop()
	start := time.Now()
	code := cli.RunContext(ctx, root, args, &errOut)
	if d := time.Since(start); d > 45*time.Second {
		t.Errorf("interrupted run took %v, want it to end within the grace period", d)
	}
	if code != cli.ExitInterrupted {
		t.Fatalf("got exit code %d, want %d; stderr:\n%s", code, cli.ExitInterrupted, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("no result on stdout after the interruption: %v\nstdout %q\nstderr:\n%s", err, out.String(), errOut.String())
	}
	if !res.Interrupted || res.Writes.Completed == 0 || res.Writes.Completed >= res.Writes.Planned {
		t.Errorf("got interrupted %v, %d of %d writes completed; want an interrupted result with some but not all writes", res.Interrupted, res.Writes.Completed, res.Writes.Planned)
	}
	last := strings.TrimSpace(errOut.String())
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	if !strings.HasPrefix(last, "lwbench: interrupted: ") {
		t.Errorf("got last stderr line %q, want it to start with \"lwbench: interrupted: \"", last)
	}
}
