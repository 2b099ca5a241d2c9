package command

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	inspect "github.com/kubestore/etcdkit/cmd/etcdinspect/command"
)

// readmePath is the repository's README, read at test time so that the
// test follows every command and flag added to it.
var readmePath = filepath.Join("..", "..", "..", "README.md")

// readmeTools are the commands the README runs with `go run`, by path.
var readmeTools = map[string]func() *cobra.Command{
	"./cmd/lwbench":     NewRootCommand,
	"./cmd/etcdinspect": inspect.NewRootCommand,
}

// TestReadmeCommandLines: every `go run ./cmd/lwbench ...` and `go run
// ./cmd/etcdinspect ...` command of the README's sh blocks names a
// command that exists, and its flags and arguments parse against that
// command's flag set (cobra's ParseFlags and ValidateArgs: nothing runs),
// without a deprecated flag name. A flag the README promises that a
// command does not take fails here.
func TestReadmeCommandLines(t *testing.T) {
	lines := readmeCommandLines(t)
	if len(lines) < 10 {
		t.Fatalf("found %d go run command lines in %s, want 10 or more: is the parser broken?", len(lines), readmePath)
	}
	for _, l := range lines {
		t.Run(strings.Join(l.args, " "), func(t *testing.T) {
			root := readmeTools[l.tool]()
			if err := parseCommandLine(root, l.args); err != nil {
				t.Errorf("README.md:%d: go run %s %s: %v", l.line, l.tool, strings.Join(l.args, " "), err)
			}
		})
	}
}

// TestReadmeFlagTables: every flag in the first cell of a README table
// row under a command's section exists on that command: the rows
// "| `--flag` | ..." under "### lwbench CMD", and, under "## etcdinspect",
// the rows "| `CMD ARGS [--flag ...]` | ...", and none is deprecated.
func TestReadmeFlagTables(t *testing.T) {
	rows := readmeFlagRows(t)
	if len(rows) < 20 {
		t.Fatalf("found %d flags in %s's tables, want 20 or more: is the parser broken?", len(rows), readmePath)
	}
	for _, r := range rows {
		t.Run(r.tool+" "+r.command+" "+r.flag, func(t *testing.T) {
			root := readmeTools[r.tool]()
			cmd, _, err := root.Find([]string{r.command})
			if err != nil || cmd == root {
				t.Fatalf("README.md:%d: %s has no command %q", r.line, r.tool, r.command)
			}
			f := lookupFlag(cmd, r.flag)
			switch {
			case f == nil:
				t.Errorf("README.md:%d: %s %s has no flag --%s", r.line, r.tool, r.command, r.flag)
			case f.Deprecated != "":
				t.Errorf("README.md:%d: %s %s --%s is deprecated (%s)", r.line, r.tool, r.command, r.flag, f.Deprecated)
			}
		})
	}
}

// TestParseCommandLine holds the checks the README tests rely on to
// fail: an unknown command, an unknown flag, a deprecated flag, a flag
// without its value, too many arguments.
func TestParseCommandLine(t *testing.T) {
	for _, tt := range []struct {
		tool    string
		args    []string
		wantErr string
	}{
		{"./cmd/lwbench", []string{"run", "--objects", "10", "--allow-maintenance"}, ""},
		{"./cmd/lwbench", []string{"run", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{"./cmd/lwbench", []string{"run", "--allow-defrag"}, "deprecated"},
		{"./cmd/lwbench", []string{"runn"}, `unknown command "runn"`},
		{"./cmd/lwbench", []string{}, "no command"},
		{"./cmd/lwbench", []string{"run", "--objects"}, "needs an argument"},
		{"./cmd/lwbench", []string{"run", "extra"}, "unknown command"},
		{"./cmd/etcdinspect", []string{"usage", "/tmp/lw.db", "--top", "5"}, ""},
		{"./cmd/etcdinspect", []string{"usage", "/tmp/lw.db", "--tops", "5"}, "unknown flag: --tops"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			err := parseCommandLine(readmeTools[tt.tool](), tt.args)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// parseCommandLine finds the command args name under root and parses the
// rest of args with its flags and argument rules, without running it.
func parseCommandLine(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root {
		return fmt.Errorf("no command in %q", args)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	var deprecated []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Deprecated != "" {
			deprecated = append(deprecated, fmt.Sprintf("--%s is deprecated (%s)", f.Name, f.Deprecated))
		}
	})
	if len(deprecated) > 0 {
		return fmt.Errorf("%s", strings.Join(deprecated, "; "))
	}
	return cmd.ValidateArgs(cmd.Flags().Args())
}

// lookupFlag finds name among cmd's flags and those it inherits.
func lookupFlag(cmd *cobra.Command, name string) *pflag.Flag {
	if f := cmd.Flags().Lookup(name); f != nil {
		return f
	}
	return cmd.InheritedFlags().Lookup(name)
}

// readmeLine is one `go run` command of the README.
type readmeLine struct {
	line int // where it starts
	tool string
	args []string
}

// readmeCommandLines returns the `go run ./cmd/...` commands of the
// README's sh blocks: lines joined across backslash continuations,
// comments dropped, split into commands at ;, &&, || and |, with
// redirections removed.
func readmeCommandLines(t *testing.T) []readmeLine {
	t.Helper()
	f, err := os.Open(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readmeLine
	sc := bufio.NewScanner(f)
	n, start, inSh, pending := 0, 0, false, ""
	for sc.Scan() {
		n++
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```"):
			inSh = !inSh && strings.TrimPrefix(l, "```") == "sh"
			continue
		case !inSh:
			continue
		}
		if pending == "" {
			start = n
		}
		if s, ok := strings.CutSuffix(l, `\`); ok {
			pending += s + " "
			continue
		}
		l, pending = pending+l, ""
		for _, words := range shellCommands(l) {
			if len(words) >= 3 && words[0] == "go" && words[1] == "run" && readmeTools[words[2]] != nil {
				out = append(out, readmeLine{line: start, tool: words[2], args: words[3:]})
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// shellCommands splits a shell line into its simple commands' words: it
// honours single and double quotes, ends at a comment, splits at ;, &&,
// || and |, and drops redirections (>, >>, 2>, <) with their target.
// It expands nothing: $HOME and ~ stay as written.
func shellCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord, quote, skipNext := false, rune(0), false
	endWord := func() {
		if inWord {
			if skipNext {
				skipNext = false
			} else {
				words = append(words, word.String())
			}
		}
		word.Reset()
		inWord = false
	}
	endCommand := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				word.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			endWord()
		case c == '#' && !inWord:
			endCommand()
			return cmds
		case c == ';' || c == '|' || c == '&':
			endCommand()
		case c == '>' || c == '<':
			if word.String() == "2" || word.String() == "1" {
				word.Reset()
				inWord = false
			}
			endWord()
			if i+1 < len(rs) && rs[i+1] == '>' {
				i++
			}
			skipNext = true // the redirection's target
		default:
			word.WriteRune(c)
			inWord = true
		}
	}
	endCommand()
	return cmds
}

// readmeFlag is a flag named in the first cell of a README table row.
type readmeFlag struct {
	line          int
	tool, command string
	flag          string // without dashes
}

var (
	lwbenchSection = regexp.MustCompile("^### lwbench ([a-z-]+)$")
	firstCell      = regexp.MustCompile("^\\| `([^`]*)`")
	longFlag       = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
)

// readmeFlagRows returns the flags of the README's tables that name a
// command: under "### lwbench CMD" (one command) the rows whose first
// cell starts with `--flag`; under "## etcdinspect" the rows whose first
// cell is `CMD ...`, a command of etcdinspect, with its flags.
func readmeFlagRows(t *testing.T) []readmeFlag {
	t.Helper()
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	inspectRoot := inspect.NewRootCommand()
	var out []readmeFlag
	tool, command := "", ""
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			tool, command = "", ""
			if l == "## etcdinspect" {
				tool = "./cmd/etcdinspect"
			}
			continue
		case strings.HasPrefix(l, "### "):
			tool, command = "", ""
			if m := lwbenchSection.FindStringSubmatch(l); m != nil {
				tool, command = "./cmd/lwbench", m[1]
			}
			continue
		}
		m := firstCell.FindStringSubmatch(l)
		if m == nil || tool == "" {
			continue
		}
		cell, cmdName := m[1], command
		if tool == "./cmd/etcdinspect" {
			// "| `usage FILE [--by ...] [--top N]` |": the command, then
			// its flags.
			word, _, _ := strings.Cut(cell, " ")
			if c, _, err := inspectRoot.Find([]string{word}); err != nil || c == inspectRoot {
				continue
			}
			cmdName = word
			// The whole row's first cell: \| escapes inside it.
			cell = strings.SplitN(strings.ReplaceAll(l, `\|`, " "), "|", 3)[1]
		} else {
			if !strings.HasPrefix(cell, "--") {
				continue
			}
			cell = strings.SplitN(strings.ReplaceAll(l, `\|`, " "), "|", 3)[1]
		}
		for _, f := range longFlag.FindAllStringSubmatch(cell, -1) {
			out = append(out, readmeFlag{line: i + 1, tool: tool, command: cmdName, flag: f[1]})
		}
	}
	return out
}
