package command

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/cli"
)

// TestInterruptedLoadPrintsWhatWasMeasured cancels the context of run, put
// and watch during their writes, as SIGINT does through cli.Run's
// signal.NotifyContext: each must print its result (interrupted, with the
// writes done so far), exit 130, and say so in one line. Before, they
// printed nothing and exited 1 with "context canceled"; then, they waited
// up to 10 s for their stopped watchers to confirm the final revision.
func TestInterruptedLoadPrintsWhatWasMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	tests := [][]string{
		{"run", "--objects", "50", "--watchers", "2", "--duration", "60s", "--write-rate", "100", "--no-defrag"},
		{"put", "--keys", "50", "--writes", "6000", "--write-rate", "100"},
		{"watch", "--watchers", "4", "--streams", "2", "--keys", "5", "--writes", "6000", "--write-rate", "100"},
	}
	for _, args := range tests {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errOut bytes.Buffer
			root := NewRootCommand()
			root.SetOut(&out)
			root.SetErr(&errOut)
			// Interrupt while the writes run (they start within a second or
			// two here, and are planned for a minute).
			var interruptedAt time.Time
			timer := time.AfterFunc(5*time.Second, func() { interruptedAt = time.Now(); cancel() })
			defer timer.Stop()
			code := cli.RunContext(ctx, root, append(args, "--unsafe-no-fsync", "-w", "json"), &errOut)
			// Its watchers stopped with the interruption: waiting for them
			// to confirm the final revision is waiting for nothing.
			if d := time.Since(interruptedAt); interruptedAt.IsZero() || d > 2*time.Second {
				t.Errorf("interrupted %s took %v to end, want within 2s", args[0], d.Round(time.Millisecond))
			}
			if code != cli.ExitInterrupted {
				t.Fatalf("got exit code %d, want %d; stderr:\n%s", code, cli.ExitInterrupted, errOut.String())
			}
			var res struct {
				Interrupted bool `json:"interrupted"`
				Writes      struct {
					Planned   int64 `json:"planned"`
					Completed int64 `json:"completed"`
				} `json:"writes"`
			}
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
		})
	}
}
