package cli

import (
	"bytes"
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
