// Package apiserverproc runs real kube-apiserver processes on loopback in
// front of an etcd the caller started: N servers of one Kubernetes release,
// a generated PKI (a serving certificate for 127.0.0.1 and a
// service-account key pair), a static token file with an admin token in
// group system:masters, and a client-go rest.Config to reach them.
//
// # Binaries
//
// kube-apiserver is built from the Go module proxy by
// scripts/build-kube-apiserver.sh into the cache etcd's binaries use
// (etcdproc.CacheDir), under a lock that parallel callers share. The first
// build of a release takes 10-40 minutes on 2 cores (36 minutes measured on
// a loaded machine), more than the README's 30-minute test timeout leaves,
// so tests do not start it by default: the tests that start kube-apiserver
// (internal/apiservertest.Binaries) use a DefaultVersion binary already in
// the cache and otherwise skip, saying to run
// `scripts/build-kube-apiserver.sh 1.37.2`, unless
// ETCDKIT_BUILD_KUBE_APISERVER=1 is set, in which case they build it. Under
// -short they skip. `.ci/run` links in the binary the machine's cache
// holds, so CI runs them wherever one was built. lwbench itself
// (`run --kube-apiserver`, `conformance`) builds what it needs.
//
// # Processes
//
// Every server has a directory of its own (its log, kube-apiserver's
// --cert-dir), free loopback ports, and an environment stripped of ETCD_*
// variables. Only processes started here are signalled, always by PID.
package apiserverproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/release"
)

// DefaultVersion is the Kubernetes release whose kube-apiserver tests and
// commands start by default: the release of the k8s.io modules go.mod pins,
// and release.Kubernetes' default of its line.
const DefaultVersion = "1.37.2"

// ErrNoBinaries is returned by Binaries when kube-apiserver of the version
// is not in the cache and cannot be built here.
var ErrNoBinaries = errors.New("kube-apiserver binary unavailable")

// BinDir returns the directory scripts/build-kube-apiserver.sh installs
// kube-apiserver of version into, whether or not it is there yet.
func BinDir(version string) string {
	return filepath.Join(etcdproc.CacheDir(), "kube-apiserver-v"+strings.TrimPrefix(version, "v"))
}

// Cached reports whether kube-apiserver of version is in the cache, so
// that Binaries would return at once.
func Cached(version string) bool {
	return etcdproc.IsExecutable(filepath.Join(BinDir(version), "kube-apiserver"))
}

// Binaries returns the directory holding kube-apiserver of version (a
// release of release.Kubernetes: 1.35.x, 1.36.x, 1.37.x or 1.38.0-beta.0),
// building it with scripts/build-kube-apiserver.sh when it is not cached
// yet. version is checked first (release.Kubernetes.Resolve: an error
// wrapping release.ErrInvalid or release.ErrUnknown, and nothing created).
// The first build takes 10-20 minutes or more on 2 cores and needs the Go
// module proxy; concurrent callers, in this process or others, build once
// (the script holds a lock in the cache directory and renames a finished
// build into place). The script's progress lines are copied to progress,
// which may be nil. Cancelling ctx stops the build, or the wait for another
// process's build, within etcdproc.WaitDelay; the error then wraps
// ctx.Err(). Otherwise a failure wraps ErrNoBinaries and carries the end of
// the build's output.
func Binaries(ctx context.Context, version string, progress io.Writer) (string, error) {
	version, err := release.Kubernetes.Resolve(version)
	if err != nil {
		return "", err
	}
	dir := BinDir(version)
	if Cached(version) {
		return dir, nil
	}
	if err := etcdproc.RunBuildScript(ctx, "build-kube-apiserver.sh", version, progress); err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: %v", ErrNoBinaries, err)
	}
	if !Cached(version) {
		return "", fmt.Errorf("%w: scripts/build-kube-apiserver.sh %s did not produce %s", ErrNoBinaries, version, filepath.Join(dir, "kube-apiserver"))
	}
	return dir, nil
}
