package controlplane

import (
	"context"
	"io"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
)

// DefaultKWOKVersion is the KWOK release the control plane runs by default
// (release.KWOK's pin).
const DefaultKWOKVersion = "0.8.0"

// Binaries are the directories of the control plane's binaries, each as
// apiserverproc.Component.Binaries returns it.
type Binaries struct {
	KubeAPIServer, KubeControllerManager, KubeScheduler, KWOK string
}

// components are the control plane's binaries, in build order: kube-apiserver
// first, whose build fills the Go build cache the other two reuse.
var components = []apiserverproc.Component{
	apiserverproc.KubeAPIServer, apiserverproc.KubeControllerManager, apiserverproc.KubeScheduler, apiserverproc.KWOK,
}

// Cached reports whether every binary of the control plane of Kubernetes
// version and KWOK kwokVersion is in the cache, so that ResolveBinaries
// would return at once.
func Cached(version, kwokVersion string) bool {
	for _, c := range components {
		v := versionOf(c, version, kwokVersion)
		if !c.Cached(v) {
			return false
		}
	}
	return true
}

// Missing returns the names of the binaries of Cached(version,
// kwokVersion) that are not in the cache, in build order.
func Missing(version, kwokVersion string) []string {
	var missing []string
	for _, c := range components {
		v := versionOf(c, version, kwokVersion)
		if !c.Cached(v) {
			missing = append(missing, c.Name())
		}
	}
	return missing
}

// ResolveBinaries returns the directories of kube-apiserver,
// kube-controller-manager and kube-scheduler of Kubernetes version and of
// KWOK kwokVersion, building each that is not cached, one after another
// (apiserverproc.Component.Binaries: versions are checked first, progress
// may be nil, cancelling ctx stops a build within a second and the error
// wraps ctx.Err(), a failed build's error wraps apiserverproc.ErrNoBinaries).
func ResolveBinaries(ctx context.Context, version, kwokVersion string, progress io.Writer) (Binaries, error) {
	var dirs [4]string
	for i, c := range components {
		v := versionOf(c, version, kwokVersion)
		dir, err := c.Binaries(ctx, v, progress)
		if err != nil {
			return Binaries{}, err
		}
		dirs[i] = dir
	}
	return Binaries{KubeAPIServer: dirs[0], KubeControllerManager: dirs[1], KubeScheduler: dirs[2], KWOK: dirs[3]}, nil
}

// versionOf returns kwokVersion for KWOK and version for the others.
func versionOf(c apiserverproc.Component, version, kwokVersion string) string {
	if c.Name() == apiserverproc.KWOK.Name() {
		return kwokVersion
	}
	return version
}
