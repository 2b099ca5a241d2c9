package command

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/buildinfo"
	"github.com/kubestore/etcdkit/internal/cli"
)

// TestVersion: `etcdinspect version` names the etcd and Kubernetes modules
// built in, as a table and as JSON.
func TestVersion(t *testing.T) {
	want, ok := buildinfo.Read()
	if !ok {
		t.Skip("test binary without build information")
	}
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	if code := cli.Run(root, []string{"version", "-w", "json"}, &errOut); code != 0 {
		t.Fatalf("got exit %d: %s", code, errOut.String())
	}
	var got buildinfo.Info
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("version -w json: %v: %s", err, out.String())
	}
	if got.EtcdVersion == "" || got.EtcdVersion != want.EtcdVersion || got.KubernetesVersion != want.KubernetesVersion || got.GoVersion != want.GoVersion {
		t.Errorf("got %+v, want etcd %s, kubernetes %s, go %s", got, want.EtcdVersion, want.KubernetesVersion, want.GoVersion)
	}
	out.Reset()
	root = NewRootCommand()
	root.SetOut(&out)
	if code := cli.Run(root, []string{"version"}, &errOut); code != 0 {
		t.Fatalf("got exit %d: %s", code, errOut.String())
	}
	for _, s := range []string{"etcd", want.EtcdVersion, "kubernetes", want.GoVersion} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("version table lacks %q:\n%s", s, out.String())
		}
	}
}

// TestUsageWithoutBackticks: pflag turns a backticked word of a usage
// string into the flag's value name in help, so no usage has one.
func TestUsageWithoutBackticks(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if strings.Contains(f.Usage, "`") {
					t.Errorf("%s --%s: got usage %q, want no backtick", c.CommandPath(), f.Name, f.Usage)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCommand())
}

// TestMistypedCommand: a mistyped command gets cobra's suggestion on one
// line.
func TestMistypedCommand(t *testing.T) {
	var errOut bytes.Buffer
	code := cli.Run(NewRootCommand(), []string{"stauts"}, &errOut)
	want := `etcdinspect: unknown command "stauts" for "etcdinspect"; did you mean status?` + "\n"
	if code != cli.ExitUsage || errOut.String() != want {
		t.Errorf("got exit %d, stderr %q; want exit %d, stderr %q", code, errOut.String(), cli.ExitUsage, want)
	}
}
