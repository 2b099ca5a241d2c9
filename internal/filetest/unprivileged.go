package filetest

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// unprivilegedEnv marks the re-run of a test binary as nobody.
const unprivilegedEnv = "ETCDKIT_TEST_UNPRIVILEGED"

// nobody is the user and group a test runs as when it must not be root.
const nobody = 65534

// Unprivileged runs f as a user that file modes bind, so that a test of
// "permission denied" (a directory of mode 000) means something when the
// tests run as root, which passes over modes. When the effective user is
// not root, f runs here, with t. Otherwise a copy of the test binary is
// run as nobody (uid and gid 65534) with -test.run selecting t's test and
// subtest, in which f runs; its output is logged, and a failure or a test
// not found fails t. It fails t when the process cannot switch users
// (no CAP_SETUID).
func Unprivileged(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	if os.Geteuid() != 0 {
		f(t)
		return
	}
	if os.Getenv(unprivilegedEnv) != "" {
		t.Fatalf("re-run as nobody, but the effective user is still root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The go command builds the test binary in a directory only root can
	// enter: run a copy from a directory nobody can.
	dir, err := os.MkdirTemp("", "unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(exe))
	if err := copyFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.CommandContext(t.Context(), bin, "-test.run="+strings.Join(run, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), unprivilegedEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: true}}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody (uid %d): %s", nobody, out)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Errorf("the test failed as nobody (%v)", err)
	case err != nil:
		t.Fatalf("run the test as nobody: %v", err)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Errorf("the test did not run as nobody (-test.run %s)", strings.Join(run, "/"))
	}
}

// copyFile copies the regular file src to dst, created with mode perm.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
