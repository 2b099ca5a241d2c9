// Package apiservertest starts real kube-apiservers for tests, as
// internal/etcdtest starts etcd.
package apiservertest

import (
	"os"
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/controlplane"
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

// ControlPlaneBuildEnv is the environment variable that lets a test build
// the control plane's binaries when they are not cached:
// ETCDKIT_BUILD_CONTROL_PLANE=1.
const ControlPlaneBuildEnv = "ETCDKIT_BUILD_CONTROL_PLANE"

// ControlPlaneBinaries returns the directories of kube-apiserver,
// kube-controller-manager and kube-scheduler apiserverproc.DefaultVersion
// and KWOK controlplane.DefaultKWOKVersion. It skips the test under -short,
// and when one of them is not cached unless ControlPlaneBuildEnv=1 asks for
// the builds (kube-apiserver 10-40 minutes on 2 cores, then
// kube-controller-manager 2-9 minutes, kube-scheduler 10-60 s, KWOK 1-5
// minutes; locked, so parallel tests build once). The skip
// names the missing binaries and the commands that build them. A failed
// build fails the test.
func ControlPlaneBinaries(t testing.TB) controlplane.Binaries {
	t.Helper()
	v, kv := apiserverproc.DefaultVersion, controlplane.DefaultKWOKVersion
	if testing.Short() {
		t.Skip("starts a control plane; skipped under -short")
	}
	if missing := controlplane.Missing(v, kv); len(missing) > 0 && os.Getenv(ControlPlaneBuildEnv) != "1" {
		t.Skipf("%s not in %s: build them with `scripts/build-kube.sh COMPONENT %s` and `scripts/build-kwok.sh %s` "+
			"(kube-apiserver 10-40 minutes on 2 cores, the others minutes after it) or set %s=1 to let the test build them",
			strings.Join(missing, ", "), etcdproc.CacheDir(), v, kv, ControlPlaneBuildEnv)
	}
	bins, err := controlplane.ResolveBinaries(t.Context(), v, kv, etcdproc.LogWriter(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	return bins
}
