// Package apiservertest starts real kube-apiservers for tests, as
// internal/etcdtest starts etcd.
package apiservertest

import (
	"os"
	"testing"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/etcdproc"
)

// BuildEnv is the environment variable that lets a test build
// kube-apiserver when it is not cached: ETCDKIT_BUILD_KUBE_APISERVER=1.
const BuildEnv = "ETCDKIT_BUILD_KUBE_APISERVER"

// Binaries returns the directory of kube-apiserver
// apiserverproc.DefaultVersion. It skips the test under -short, and when
// the binary is not cached yet unless BuildEnv=1 asks for the build (10-20
// minutes or more on 2 cores; scripts/build-kube-apiserver.sh, locked, so
// parallel tests build once). A failed build fails the test.
func Binaries(t testing.TB) string {
	t.Helper()
	v := apiserverproc.DefaultVersion
	if testing.Short() {
		t.Skip("starts kube-apiserver; skipped under -short")
	}
	if !apiserverproc.Cached(v) && os.Getenv(BuildEnv) != "1" {
		t.Skipf("kube-apiserver %s is not in %s: build it with `scripts/build-kube-apiserver.sh %s` "+
			"(10-20 minutes or more on 2 cores) or set %s=1 to let the test build it",
			v, apiserverproc.BinDir(v), v, BuildEnv)
	}
	dir, err := apiserverproc.Binaries(t.Context(), v, etcdproc.LogWriter(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
