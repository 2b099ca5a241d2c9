// Package cli holds what both commands share at the edge: the usage error
// type that maps to exit code 2 and the one place that turns an error into
// an exit code and a single line on stderr.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/output"
)

// Exit codes, decided only by Run.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
	// ExitInterrupted follows SIGINT or SIGTERM: 128 plus SIGINT's
	// number, what a shell reports for a command ^C ended.
	ExitInterrupted = 130
)

// AnnotationTerminateExitsOK, set (to any value) in a command's
// Annotations, makes RunContext exit ExitOK when SIGTERM ended the
// command's context (Interrupted) and the command returned no error: a server's normal stop, as Prometheus and
// kube-apiserver exit 0 on SIGTERM. SIGINT still exits ExitInterrupted.
const AnnotationTerminateExitsOK = "etcdkit/sigterm-exits-ok"

// FlagError is a usage error: a bad flag, flag combination or argument. Run
// exits with ExitUsage for it.
type FlagError struct{ Err error }

// Error returns the wrapped error's message.
func (e *FlagError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error, for errors.Is and errors.As.
func (e *FlagError) Unwrap() error { return e.Err }

// FlagErrorf returns a FlagError with a formatted message; name the flag in
// it ("--top must be positive").
func FlagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// ExactArgs is cobra.ExactArgs returning a FlagError.
func ExactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return &FlagError{Err: err}
		}
		return nil
	}
}

// NoArgs is cobra.NoArgs returning a FlagError.
func NoArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return &FlagError{Err: err}
	}
	return nil
}

// PrepareRoot silences cobra's own error and usage printing (Run prints
// one line instead) and makes flag parsing errors FlagErrors.
func PrepareRoot(root *cobra.Command) {
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &FlagError{Err: err} })
}

// Run executes root with args under a context cancelled by SIGINT or
// SIGTERM, which carries the context a second such signal cancels
// (SecondInterrupt); see RunContext.
func Run(root *cobra.Command, args []string, stderr io.Writer) int {
	ctx, stop := notifyInterrupts()
	defer stop()
	return RunContext(ctx, root, args, stderr)
}

// RunContext executes root with args under ctx, which the caller cancels on
// SIGINT or SIGTERM (signal.NotifyContext), prints an error as one line
// "<name>: <error>" on stderr (control characters escaped:
// output.EscapeControl) and returns the exit code: 0, 1 for a
// runtime error, 2 for a usage error, ExitInterrupted for an error that
// ends in ctx's cancellation ("<name>: interrupted: <what it stopped>")
// and for a command that returned after ctx ended: an interrupted command
// exits 130 always, except a command annotated AnnotationTerminateExitsOK
// that SIGTERM stopped without an error (0).
// Unknown subcommands are usage errors too.
func RunContext(ctx context.Context, root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil && Interrupted(ctx) == syscall.SIGTERM && cmd != nil &&
		cmd.Annotations[AnnotationTerminateExitsOK] != "" {
		return ExitOK
	}
	if err == nil && ctx.Err() != nil {
		// The signal landed after the command's last look at ctx: its
		// output may be whole, but the user asked it to stop.
		fmt.Fprintf(stderr, "%s: interrupted\n", root.Name())
		return ExitInterrupted
	}
	if err == nil {
		return ExitOK
	}
	// One line, without control characters a key or a path may carry.
	msg := output.EscapeControl(oneLine(err.Error()))
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		msg = strings.TrimSuffix(msg, ": "+context.Canceled.Error())
		fmt.Fprintf(stderr, "%s: interrupted: %s\n", root.Name(), msg)
		return ExitInterrupted
	}
	fmt.Fprintf(stderr, "%s: %s\n", root.Name(), msg)
	var fe *FlagError
	if errors.As(err, &fe) || strings.HasPrefix(err.Error(), "unknown command") {
		return ExitUsage
	}
	return ExitError
}

// oneLine makes msg one line: its lines trimmed and joined by "; ", and
// cobra's suggestion for a mistyped command ("unknown command \"stauts\"
// for \"etcdinspect\"\n\nDid you mean this?\n\tstatus\n") as "unknown
// command \"stauts\" for \"etcdinspect\"; did you mean status?".
func oneLine(msg string) string {
	head, suggestions, found := strings.Cut(strings.TrimSpace(msg), "\n\nDid you mean this?\n")
	var lines []string
	for _, l := range strings.Split(head, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	out := strings.Join(lines, "; ")
	if found {
		out += "; did you mean " + strings.Join(strings.Fields(suggestions), " or ") + "?"
	}
	return out
}
