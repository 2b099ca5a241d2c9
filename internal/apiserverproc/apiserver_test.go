package apiserverproc

import (
	"strings"
	"testing"
	"time"
)

// TestArgs checks the command line Config turns into: kube-apiserver's
// defaults are kept for zero values, negative values pass 0, and the flags
// Start always sets are there.
func TestArgs(t *testing.T) {
	pki := PKI{TokenFile: "/p/tokens.csv", CA: "/p/ca.crt"}
	tests := []struct {
		name    string
		cfg     Config
		want    []string
		notWant []string
	}{
		{
			name: "defaults",
			cfg:  Config{EtcdServers: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}},
			want: []string{
				"--etcd-servers=http://127.0.0.1:1,http://127.0.0.1:2", "--authorization-mode=RBAC",
				"--endpoint-reconciler-type=none", "--bind-address=127.0.0.1", "--secure-port=6443",
				"--token-auth-file=/p/tokens.csv", "--service-cluster-ip-range=10.0.0.0/24",
				"--client-ca-file=/p/ca.crt", "--disable-admission-plugins=ServiceAccount",
			},
			notWant: []string{"--etcd-compaction-interval", "--event-ttl", "--watch-cache", "--default-watch-cache-size", "--feature-gates", "--etcd-cafile", "--etcd-prefix"},
		},
		{
			name: "set",
			cfg: Config{
				EtcdServers: []string{"https://127.0.0.1:1"}, EtcdCAFile: "ca", EtcdCertFile: "c", EtcdKeyFile: "k",
				EtcdPrefix: "/kube", EtcdCompactionInterval: 90 * time.Second, EventTTL: time.Minute,
				DisableWatchCache: true, DefaultWatchCacheSize: 50, FeatureGates: "WatchList=false",
				AuthorizationMode: "AlwaysAllow", ExtraArgs: []string{"--v=2"}, ServiceAccountAdmission: true,
			},
			want: []string{
				"--etcd-cafile=ca", "--etcd-certfile=c", "--etcd-keyfile=k", "--etcd-prefix=/kube",
				"--etcd-compaction-interval=1m30s", "--event-ttl=1m0s", "--watch-cache=false",
				"--default-watch-cache-size=50", "--feature-gates=WatchList=false",
				"--authorization-mode=AlwaysAllow", "--v=2",
			},
			notWant: []string{"--authorization-mode=RBAC", "--disable-admission-plugins"},
		},
		{
			name: "negative passes 0",
			cfg:  Config{EtcdServers: []string{"http://127.0.0.1:1"}, EtcdCompactionInterval: -1, DefaultWatchCacheSize: -1},
			want: []string{"--etcd-compaction-interval=0", "--default-watch-cache-size=0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := args(tt.cfg, pki, "/d", 6443)
			joined := "\n" + strings.Join(got, "\n") + "\n"
			for _, w := range tt.want {
				if !strings.Contains(joined, "\n"+w+"\n") {
					t.Errorf("got args %q, want %q among them", got, w)
				}
			}
			for _, nw := range tt.notWant {
				if strings.Contains(joined, "\n"+nw) {
					t.Errorf("got args %q, want no %q", got, nw)
				}
			}
		})
	}
}
