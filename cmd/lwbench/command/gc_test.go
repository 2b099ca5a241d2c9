package command

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestRunOfInformersCollectsAsClientGo checks the garbage collector's
// target a run leaves: a run of client-go informers (--kube-apiserver,
// --kubeconfig) collects at GOGC 100, as client-go's own processes do,
// not at lwbench's 400, at which the informers' heap grew to five times
// what they held (issue 21); the etcd-direct model keeps 400, and GOGC,
// when set, is left alone. Each run fails on its --interval-csv before it
// starts anything.
func TestRunOfInformersCollectsAsClientGo(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	under := filepath.Join(file, "x") // a path under a regular file
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	const lwbenchGC = 400 // main.go's
	tests := []struct {
		name string
		gogc string
		args []string
		want int
	}{
		{"kube-apiserver", "", []string{"run", "--kube-apiserver", "1.37.2"}, clientGoGCPercent},
		{"kubeconfig", "", []string{"run", "--kubeconfig", kubeconfig, "--endpoints", "127.0.0.1:1", "--prefix", "/registry"}, clientGoGCPercent},
		{"model", "", []string{"run"}, lwbenchGC},
		{"GOGC set", "250", []string{"run", "--kube-apiserver", "1.37.2"}, lwbenchGC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOGC", tt.gogc)
			prev := debug.SetGCPercent(lwbenchGC)
			_, errOut, code := lwbench(t, append(tt.args, "--interval-csv", under)...)
			got := debug.SetGCPercent(prev)
			if code == 0 || !strings.Contains(errOut, "--interval-csv") {
				t.Fatalf("lwbench %s: exit %d, %q; want it to fail on --interval-csv", strings.Join(tt.args, " "), code, errOut)
			}
			if got != tt.want {
				t.Errorf("lwbench %s with GOGC=%q: GC percent %d, want %d", strings.Join(tt.args, " "), tt.gogc, got, tt.want)
			}
		})
	}
}
