// Package cmdtest holds the checks both tools' command tests make of the
// whole command tree: the version command, flag usage strings, and a
// mistyped command's error.
package cmdtest

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

// CheckVersion runs `version -w json` and `version` on fresh trees from
// newRoot and checks that they report this binary's etcd, Kubernetes and
// Go versions.
func CheckVersion(t *testing.T, newRoot func() *cobra.Command) {
	t.Helper()
	want, ok := buildinfo.Read()
	if !ok {
		t.Skip("test binary without build information")
	}
	run := func(args ...string) string {
		var out, errOut bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		if code := cli.Run(root, args, &errOut); code != 0 {
			t.Fatalf("%v: got exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(run("version", "-w", "json")), &got); err != nil {
		t.Fatalf("version -w json: %v", err)
	}
	if got.EtcdVersion == "" || got.EtcdVersion != want.EtcdVersion || got.KubernetesVersion != want.KubernetesVersion || got.GoVersion != want.GoVersion {
		t.Errorf("got %+v, want etcd %s, kubernetes %s, go %s", got, want.EtcdVersion, want.KubernetesVersion, want.GoVersion)
	}
	table := run("version")
	for _, s := range []string{"etcd", want.EtcdVersion, "kubernetes", want.GoVersion} {
		if !strings.Contains(table, s) {
			t.Errorf("version table lacks %q:\n%s", s, table)
		}
	}
}

// CheckUsageWithoutBackticks checks every flag of root and its commands:
// pflag turns a backticked word of a usage string into the flag's value
// name in help (--etcd-prefix keys), so no usage may have one.
func CheckUsageWithoutBackticks(t *testing.T, root *cobra.Command) {
	t.Helper()
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
	walk(root)
}

// CheckMistypedCommand runs root with the mistyped command typo and
// checks for exit code 2 and exactly want on stderr (cobra's suggestion
// on one line).
func CheckMistypedCommand(t *testing.T, root *cobra.Command, typo, want string) {
	t.Helper()
	var errOut bytes.Buffer
	if code := cli.Run(root, []string{typo}, &errOut); code != cli.ExitUsage || errOut.String() != want {
		t.Errorf("got exit %d, stderr %q; want exit %d, stderr %q", code, errOut.String(), cli.ExitUsage, want)
	}
}
