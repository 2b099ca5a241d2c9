package cli

import (
	"bytes"
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
)

// TestRunMistypedCommand: cobra's suggestion for a mistyped command is
// printed as one clean line, with exit code 2.
func TestRunMistypedCommand(t *testing.T) {
	root := &cobra.Command{Use: "tool"}
	PrepareRoot(root)
	root.AddCommand(&cobra.Command{Use: "status", RunE: func(*cobra.Command, []string) error { return nil }})
	var errOut bytes.Buffer
	code := Run(root, []string{"stauts"}, &errOut)
	want := `tool: unknown command "stauts" for "tool"; did you mean status?` + "\n"
	if code != ExitUsage || errOut.String() != want {
		t.Errorf("got exit %d, stderr %q; want exit %d, stderr %q", code, errOut.String(), ExitUsage, want)
	}
}

func TestOneLine(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain", "plain"},
		{"first\nsecond\n", "first; second"},
		{"a\n\n  b  \n", "a; b"},
		{"unknown command \"x\" for \"t\"\n\nDid you mean this?\n\tstatus\n\tstats\n", `unknown command "x" for "t"; did you mean status or stats?`},
	} {
		if got := oneLine(tt.in); got != tt.want {
			t.Errorf("oneLine(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRunContextTerminated: a command annotated AnnotationTerminateExitsOK
// that SIGTERM stopped (Interrupted) exits 0; SIGINT still exits 130, and
// so does an unannotated command after SIGTERM.
func TestRunContextTerminated(t *testing.T) {
	for _, tt := range []struct {
		name      string
		sig       os.Signal
		annotated bool
		want      int
	}{
		{"annotated, SIGTERM", syscall.SIGTERM, true, ExitOK},
		{"annotated, SIGINT", syscall.SIGINT, true, ExitInterrupted},
		{"not annotated, SIGTERM", syscall.SIGTERM, false, ExitInterrupted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := &cobra.Command{Use: "tool"}
			PrepareRoot(root)
			serve := &cobra.Command{Use: "serve", RunE: func(cmd *cobra.Command, _ []string) error {
				<-cmd.Context().Done()
				return nil
			}}
			if tt.annotated {
				serve.Annotations = map[string]string{AnnotationTerminateExitsOK: "true"}
			}
			root.AddCommand(serve)
			ctx, interrupt, stop := WithInterrupt(context.Background())
			defer stop()
			interrupt(tt.sig)
			var errOut bytes.Buffer
			if got := RunContext(ctx, root, []string{"serve"}, &errOut); got != tt.want {
				t.Errorf("got exit %d (stderr %q), want %d", got, errOut.String(), tt.want)
			}
		})
	}
}
