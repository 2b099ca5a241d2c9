// Package apiserverproc runs real kube-apiserver processes on loopback in
// front of an etcd the caller started: N servers of one Kubernetes release,
// a generated PKI (a serving certificate for 127.0.0.1 and a
// service-account key pair), a static token file with an admin token in
// group system:masters, and a client-go rest.Config to reach them.
//
// # Binaries
//
// kube-apiserver is built from the Go module proxy by scripts/build-kube.sh
// (scripts/build-kube-apiserver.sh is that script for kube-apiserver) into
// the cache etcd's binaries use (etcdproc.CacheDir), under a lock that
// parallel callers share; kube-controller-manager and kube-scheduler, which
// internal/controlplane starts beside it, by the same script, and KWOK by
// scripts/build-kwok.sh (Component). The first
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
	"os"
	"path/filepath"
	"strings"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/release"
)

// DefaultVersion is the Kubernetes release whose kube-apiserver tests and
// commands start by default: the release of the k8s.io modules go.mod pins,
// and release.Kubernetes' default of its line.
const DefaultVersion = "1.37.2"

// ErrNoBinaries is returned by Binaries when a component of the version is
// not in the cache and cannot be built here.
var ErrNoBinaries = errors.New("control plane binary unavailable")

// Component is a binary a build script installs into the cache as
// etcdproc.CacheDir()/NAME-vVERSION/NAME, with, for KWOK, the files it
// needs beside it. The values are KubeAPIServer, KubeControllerManager,
// KubeScheduler and KWOK.
type Component struct {
	name    string
	release *release.Product
	script  string   // under scripts/
	pre     []string // the script's arguments before VERSION
	files   []string // beside the binary, required too
}

var (
	// KubeAPIServer is kube-apiserver of a release.Kubernetes version,
	// built by scripts/build-kube.sh kube-apiserver (10-40 minutes on 2
	// cores the first time).
	KubeAPIServer = Component{name: "kube-apiserver", release: &release.Kubernetes, script: "build-kube.sh", pre: []string{"kube-apiserver"}}
	// KubeControllerManager is kube-controller-manager of a
	// release.Kubernetes version, built by scripts/build-kube.sh (2-9
	// minutes once kube-apiserver's build filled the Go build cache).
	KubeControllerManager = Component{name: "kube-controller-manager", release: &release.Kubernetes, script: "build-kube.sh", pre: []string{"kube-controller-manager"}}
	// KubeScheduler is kube-scheduler of a release.Kubernetes version,
	// built by scripts/build-kube.sh (10-60 s after
	// kube-controller-manager's build).
	KubeScheduler = Component{name: "kube-scheduler", release: &release.Kubernetes, script: "build-kube.sh", pre: []string{"kube-scheduler"}}
	// KWOK is kwok of a release.KWOK version with KWOKStageFiles beside
	// it, built by scripts/build-kwok.sh (1-5 minutes).
	KWOK = Component{name: "kwok", release: &release.KWOK, script: "build-kwok.sh", files: KWOKStageFiles}
)

// KWOKStageFiles are the stage files scripts/build-kwok.sh copies beside
// kwok from the module's kustomize/stage directory, kwokctl's defaults:
// nodes initialized Ready, node Lease heartbeats (with node status every
// 10-20 minutes), pods Ready (and Succeeded when their containers end),
// deleted pods removed.
var KWOKStageFiles = []string{
	"node-initialize.yaml", "node-heartbeat-with-lease.yaml",
	"pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml",
}

// Name is the binary's name: "kube-apiserver", "kwok", ...
func (c Component) Name() string { return c.name }

// Resolve checks version as the component's release table does (an error
// wrapping release.ErrInvalid or release.ErrUnknown) and returns the
// release it names.
func (c Component) Resolve(version string) (string, error) { return c.release.Resolve(version) }

// BinDir returns the directory the component's build script installs
// version (as given, without a leading v) into, whether or not it is there
// yet.
func (c Component) BinDir(version string) string {
	return filepath.Join(etcdproc.CacheDir(), c.name+"-v"+strings.TrimPrefix(version, "v"))
}

// Cached reports whether the component of version (as Resolve resolves
// it) is in the cache, so that Binaries would return at once. An invalid
// version is not cached.
func (c Component) Cached(version string) bool {
	version, err := c.Resolve(version)
	if err != nil {
		return false
	}
	dir := c.BinDir(version)
	if !etcdproc.IsExecutable(filepath.Join(dir, c.name)) {
		return false
	}
	for _, f := range c.files {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// Binaries returns the directory holding the component of version,
// building it with its script when it is not cached yet. version is
// checked first (Resolve: an error wrapping release.ErrInvalid or
// release.ErrUnknown, and nothing created). A build needs the Go module
// proxy; concurrent callers, in this process or others, build once (the
// script holds a lock in the cache directory and renames a finished build
// into place). The script's progress lines are copied to progress, which
// may be nil. Cancelling ctx stops the build, or the wait for another
// process's build, within etcdproc.WaitDelay; the error then wraps
// ctx.Err(). Otherwise a failure wraps ErrNoBinaries and carries the end of
// the build's output.
func (c Component) Binaries(ctx context.Context, version string, progress io.Writer) (string, error) {
	version, err := c.Resolve(version)
	if err != nil {
		return "", err
	}
	dir := c.BinDir(version)
	if c.Cached(version) {
		return dir, nil
	}
	args := append(append([]string(nil), c.pre...), version)
	if err := etcdproc.RunBuildScriptArgs(ctx, c.script, args, progress); err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: %s: %v", ErrNoBinaries, c.name, err)
	}
	if !c.Cached(version) {
		return "", fmt.Errorf("%w: scripts/%s %s did not produce %s", ErrNoBinaries, c.script, strings.Join(args, " "), filepath.Join(dir, c.name))
	}
	return dir, nil
}

// BinDir returns the directory scripts/build-kube.sh installs
// kube-apiserver of version into, whether or not it is there yet:
// KubeAPIServer.BinDir.
func BinDir(version string) string { return KubeAPIServer.BinDir(version) }

// Cached reports whether kube-apiserver of version is in the cache, so
// that Binaries would return at once: KubeAPIServer.Cached.
func Cached(version string) bool { return KubeAPIServer.Cached(version) }

// Binaries returns the directory holding kube-apiserver of version (a
// release of release.Kubernetes: 1.35.x, 1.36.x, 1.37.x or 1.38.0-beta.0),
// building it when it is not cached yet: KubeAPIServer.Binaries. The first
// build takes 10-40 minutes on 2 cores.
func Binaries(ctx context.Context, version string, progress io.Writer) (string, error) {
	return KubeAPIServer.Binaries(ctx, version, progress)
}
