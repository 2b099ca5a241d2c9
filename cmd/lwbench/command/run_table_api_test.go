package command

import (
	"testing"

	"github.com/kubestore/etcdkit/pkg/report"
)

// TestKubeAPIServerRow: the summary's kube-apiserver row names the
// further flags lwbench passed and the clients' connection layout with
// the connections open at the end, when the result records them.
func TestKubeAPIServerRow(t *testing.T) {
	tests := []struct {
		name string
		a    report.APIServerTarget
		want string
	}{
		{"not recorded", report.APIServerTarget{Version: "v1.37.2", Servers: 1, Managed: true, EtcdCompactionIntervalMs: 10000},
			"v1.37.2 x1, watch cache off, compaction every 10000 ms"},
		{"per client, with flags", report.APIServerTarget{Version: "v1.37.2", Servers: 1, Managed: true, EtcdCompactionIntervalMs: 10000,
			Args: []string{"--disable-admission-plugins=LimitRanger"}, Connections: "per-client", ClientConnections: 26},
			"v1.37.2 x1, watch cache off, compaction every 10000 ms, flags --disable-admission-plugins=LimitRanger, client connections per-client (26 open at the end)"},
		{"shared, existing cluster", report.APIServerTarget{Version: "v1.36.3", URL: "https://10.0.0.1:6443", Connections: "shared", ClientConnections: 1},
			"v1.36.3 at https://10.0.0.1:6443 (an existing cluster's: watch cache as its operator set it), compaction the cluster's own, client connections shared (1 open at the end)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kubeAPIServerRow(tt.a); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
