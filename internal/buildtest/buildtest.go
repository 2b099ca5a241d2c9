// Package buildtest keeps tests that reach the build scripts
// (scripts/build-*.sh, through etcdproc.Binaries and
// apiserverproc.Binaries) from building anything: it puts a `go` of its
// own first on PATH, which records each call and then fails or waits, so
// that a script that gets as far as a build is seen, in a second, instead
// of fetching modules and compiling for minutes.
package buildtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Go is what the fake `go` does after recording its call.
type Go string

const (
	// Fail exits 97 at once, as a build that cannot fetch a module.
	Fail Go = "exit 97"
	// Hang sleeps for ten minutes, as a long build: for tests that
	// cancel it. `exec` keeps the sleep the process the script waits on.
	Hang Go = "exec sleep 600"
)

// FakeGo puts an executable `go` first on PATH for the rest of the test
// (t.Setenv: the test cannot be parallel) that appends its process ID and
// arguments to a file and then does what behaviour says. The function it
// returns lists the calls so far, one "PID ARGS" string each; none means
// no script got as far as running go.
func FakeGo(t testing.TB, behaviour Go) (calls func() []string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$$ $*\" >> '" + log + "'\n" + string(behaviour) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() []string {
		b, err := os.ReadFile(log)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
}
