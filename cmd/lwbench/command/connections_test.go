package command

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/etcdclient"
	"github.com/kubestore/etcdkit/pkg/kubeload"
)

// TestSharedConnectionFlag: the kube-apiservers lwbench starts (run,
// the experiments) get the informers' and writers' connection layout of
// --shared-connection: a connection each by default, one for all with
// the flag; and --apiserver-arg's flags, in order.
func TestSharedConnectionFlag(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		want     kubeload.ConnectionLayout
		wantArgs []string
	}{
		{"default", nil, kubeload.ConnectionsPerClient, nil},
		{"shared", []string{"--shared-connection"}, kubeload.ConnectionsShared, nil},
		{"flags", []string{"--apiserver-arg=--disable-admission-plugins=LimitRanger", "--apiserver-arg", "--watch-cache-sizes=limitranges#0"},
			kubeload.ConnectionsPerClient, []string{"--disable-admission-plugins=LimitRanger", "--watch-cache-sizes=limitranges#0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o kubeOptions
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			cfg := o.stackConfig("", "", 0, 0, nil, etcdclient.Flags{})
			if cfg.Connections != tt.want {
				t.Errorf("got connections %q, want %q", cfg.Connections, tt.want)
			}
			if !slices.Equal(cfg.Args, tt.wantArgs) {
				t.Errorf("got args %q, want %q", cfg.Args, tt.wantArgs)
			}
		})
	}
}
