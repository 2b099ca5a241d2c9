// Package etcdproc runs real etcd processes on loopback: single members or
// N-member clusters of a chosen release, optionally behind TLS, with the
// faults a production member suffers (kill and restart, SIGSTOP and
// SIGCONT, a network partition when members run in network namespaces).
// Tests use it for the multi-member and multi-version cases, lwbench's
// --cluster-size for the clusters it starts and faults, and the scripts
// under scripts/ to start and stop clusters by PID.
//
// Binaries are built from the Go module proxy by scripts/build-etcd.sh into
// a cache directory. Every process is started with its own data directory,
// free loopback ports, and an environment stripped of ETCD_* variables
// (etcd reads each of them as a flag). Only processes started here are ever
// signalled, always by PID.
package etcdproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/kubestore/etcdkit/internal/release"
)

// Versions are the etcd releases, one per supported minor line, that the
// version matrix and tests use: the newest patch of each line the module
// proxy served when they were chosen.
var Versions = []string{"3.5.35", "3.6.16", "3.7.3"}

// CacheDir returns where scripts/build-etcd.sh keeps binaries:
// $ETCDKIT_CACHE, else ~/.cache/etcdkit.
func CacheDir() string {
	if d := os.Getenv("ETCDKIT_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "etcdkit-cache")
	}
	return filepath.Join(home, ".cache", "etcdkit")
}

// Cached reports whether etcd and etcdctl of version (as Binaries resolves
// it) are in CacheDir already, so that Binaries would return without a
// build. An invalid version is not cached.
func Cached(version string) bool {
	version, err := release.Etcd.Resolve(version)
	if err != nil {
		return false
	}
	dir := filepath.Join(CacheDir(), "etcd-v"+version)
	return IsExecutable(filepath.Join(dir, "etcd")) && IsExecutable(filepath.Join(dir, "etcdctl"))
}

// ErrNoBinaries is returned by Binaries when etcd of the version is not in
// the cache and cannot be built here.
var ErrNoBinaries = errors.New("etcd binaries unavailable")

// Binaries returns the directory holding etcd, etcdctl (and, from 3.5,
// etcdutl) of version, building them with scripts/build-etcd.sh when they
// are not cached yet. version is checked first (release.Etcd.Resolve: an
// error wrapping release.ErrInvalid or release.ErrUnknown, and nothing
// created). The build takes one to three minutes per version and needs the
// Go module proxy; concurrent callers, in this process or others, build
// once (the script holds a lock in the cache directory and renames a
// finished build into place). The script's progress lines are copied to
// progress, which may be nil. Cancelling ctx stops the build, or the wait
// for another process's build, within WaitDelay; the error then wraps
// ctx.Err(). Otherwise a failure wraps ErrNoBinaries and carries the end of
// the build's output.
func Binaries(ctx context.Context, version string, progress io.Writer) (string, error) {
	version, err := release.Etcd.Resolve(version)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(CacheDir(), "etcd-v"+version)
	if IsExecutable(filepath.Join(dir, "etcd")) && IsExecutable(filepath.Join(dir, "etcdctl")) {
		return dir, nil
	}
	if err := RunBuildScript(ctx, "build-etcd.sh", version, progress); err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: %v", ErrNoBinaries, err)
	}
	if !IsExecutable(filepath.Join(dir, "etcd")) {
		return "", fmt.Errorf("%w: scripts/build-etcd.sh %s did not produce %s", ErrNoBinaries, version, filepath.Join(dir, "etcd"))
	}
	return dir, nil
}

// WaitDelay bounds how long RunBuildScript waits, once its context is
// cancelled, for the script's process group to exit after SIGTERM before
// it kills the script and returns.
const WaitDelay = time.Second

// RunBuildScript runs the repository's scripts/name (build-etcd.sh,
// build-kube-apiserver.sh, build-benchmark.sh, build-kwok.sh) with version
// and CacheDir as its arguments: RunBuildScriptArgs(ctx, name,
// []string{version}, progress).
func RunBuildScript(ctx context.Context, name, version string, progress io.Writer) error {
	return RunBuildScriptArgs(ctx, name, []string{version}, progress)
}

// RunBuildScriptArgs runs the repository's scripts/name with args and
// CacheDir as its arguments (build-kube.sh COMPONENT VERSION CACHE_DIR), in
// CleanEnv and a process group of its own, copying the script's stderr to
// progress, which may be nil. The caller has checked args (package
// release); the script checks them again. The scripts print the installed
// directory on stdout, which is discarded: the caller knows where it is.
// Cancelling ctx sends SIGTERM to the script's process group (the script,
// the lock wait, go build), which removes the script's temporary
// directories; RunBuildScriptArgs returns within WaitDelay with an error
// wrapping ctx.Err() that says what the script was doing. Any other error
// names the script and carries the last five lines of its stderr.
func RunBuildScriptArgs(ctx context.Context, name string, args []string, progress io.Writer) error {
	script, err := buildScript(name)
	if err != nil {
		return err
	}
	what := script + " " + strings.Join(args, " ")
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s not started: %w", what, err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append(append([]string{script}, args...), CacheDir())...)
	cmd.Env = CleanEnv()
	cmd.Stderr = &stderr
	if progress != nil {
		cmd.Stderr = io.MultiWriter(&stderr, progress)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = WaitDelay
	_, err = cmd.Output()
	if ctx.Err() != nil {
		return fmt.Errorf("%s stopped%s: %w", what, lastSaid(stderr.String(), name), ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("%s: %v: %s", what, err, LastLines(stderr.String(), 5))
	}
	return nil
}

// lastSaid returns the last progress line of script name in stderr (one
// beginning "name: "), as " (it had said: LINE)", or "" if there is none.
func lastSaid(stderr, name string) string {
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], name+": ") {
			return " (it had said: " + strings.TrimSpace(lines[i]) + ")"
		}
	}
	return ""
}

// buildScript finds scripts/name from this source file's location, which
// works for tests and `go run` inside the repository.
func buildScript(name string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the repository")
	}
	p := filepath.Join(filepath.Dir(file), "..", "..", "scripts", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("build script: %w", err)
	}
	return p, nil
}

// IsExecutable reports whether p is a regular file with an execute bit.
func IsExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// LastLines joins the last n lines of s (trimmed) with " | ", for error
// messages that quote the end of a process's output or log.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// CleanEnv returns this process's environment without ETCD_* variables,
// which etcd and etcdctl would read as flags, and without ETCDCTL_*.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "ETCDCTL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// LogWriter returns an io.Writer that hands each non-empty line written to
// it to logf (a logger's Printf, testing.T's Logf), for Binaries' progress.
// A line split across two writes is logged as two lines.
func LogWriter(logf func(format string, args ...any)) io.Writer {
	return logWriter(logf)
}

type logWriter func(format string, args ...any)

func (l logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(string(p), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			l("%s", line)
		}
	}
	return len(p), nil
}
