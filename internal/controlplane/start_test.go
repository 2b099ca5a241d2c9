package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestStartReportsAComponentsLog starts the control plane with a
// kube-controller-manager that prints what it sees of its environment and
// exits: Start must fail at once, naming the component, how it exited and
// the end of its log, which shows it had no ETCD_* variable and no
// KUBECONFIG of the caller's.
func TestStartReportsAComponentsLog(t *testing.T) {
	api := apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	fake := t.TempDir()
	script := "#!/bin/sh\necho \"ETCD variables: $(env | grep -c '^ETCD_')\"\necho \"KUBECONFIG=${KUBECONFIG-unset}\"\n" +
		"echo 'F1128 fatal: etcdkit-test-marker' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(fake, "kube-controller-manager"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ETCD_NAME", "from-the-caller")
	t.Setenv("KUBECONFIG", "/nonexistent/from-the-caller")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	_, err := controlplane.Start(ctx, controlplane.Config{
		Binaries:  controlplane.Binaries{KubeAPIServer: api, KubeControllerManager: fake, KubeScheduler: fake, KWOK: fake},
		Dir:       t.TempDir(),
		APIServer: apiserverproc.Config{EtcdServers: srv.Endpoints},
	})
	if err == nil {
		t.Fatal("got no error from a control plane whose kube-controller-manager exits")
	}
	t.Logf("error after %v: %v", time.Since(began).Round(time.Millisecond), err)
	for _, want := range []string{"kube-controller-manager", "exited before it was ready", "exit status 3", "etcdkit-test-marker", "ETCD variables: 0", "KUBECONFIG=unset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got error %q, want it to contain %q", err, want)
		}
	}
	if ctx.Err() != nil {
		t.Errorf("Start waited until its context ended (%v), want it to return when the process exits", ctx.Err())
	}
}
