package command

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/buildtest"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/filetest"
)

// hostileVersions are values of --kube-apiserver and --etcd-version that
// name no release lwbench builds; each must be a usage error.
var hostileVersions = []struct{ name, kube, etcd string }{
	{"path to the cached binary", "1.37.2/kube-apiserver", "3.7.3/etcd"},
	{"path outside the cache", "1.37.2/../../precious", "3.7.3/../../precious"},
	{"absolute path", "/tmp", "/tmp"},
	{"empty", "", ""},
	{"trailing dot", "1.37.", "3.7."},
	{"negative patch", "1.37.-1", "3.7.-1"},
	{"patch not served", "1.37.999", "3.7.999"},
	{"next patch", "1.37.3", "3.7.4"},
	{"unknown minor", "1.34", "3.3"},
	{"other product", "3.7.3", "1.37.2"},
	{"leading zero", "1.037.2", "3.07.3"},
	{"four parts", "1.37.2.0", "3.7.3.0"},
	{"unknown pre-release", "1.38.0-beta.1", "3.7.0-rc.0"},
	{"command substitution", "$(touch pwned)", "$(touch pwned)"},
	{"semicolon", "1.37.2;touch pwned", "3.7.3;touch pwned"},
	{"space", "1.37.2 1.36.3", "3.7.3 3.6.16"},
	{"glob", "1.37.*", "3.7.*"},
	{"newline", "1.37.2\n", "3.7.3\n"},
	{"carriage return", "1.37.2\r", "3.7.3\r"},
	{"not utf-8", "1.37.\xff", "3.7.\xff"},
	{"long", strings.Repeat("1.37.2", 834), strings.Repeat("3.7.3", 1000)},
}

// TestHostileVersionsLeaveTheCacheAlone runs every command that takes
// --kube-apiserver or --etcd-version with each of hostileVersions, through
// the real root command, with a cache that holds a kube-apiserver and an
// etcd build beside a directory of someone else's: each run must exit 2
// with one line naming the flag, and leave the cache and what is beside it
// byte for byte as they were (no lock file, no directory), run no build
// (a `go` of the test's own on PATH would record it) and leave nothing in
// TMPDIR. Before, --kube-apiserver 1.37.2/kube-apiserver reached
// scripts/build-kube-apiserver.sh, whose `rm -rf` of its output path
// deleted the cached kube-apiserver, and --kube-apiserver= ran the load
// without kube-apiserver.
func TestHostileVersionsLeaveTheCacheAlone(t *testing.T) {
	tests := []struct {
		flag  string
		extra []string // what the flag needs
		value func(i int) string
	}{
		{"kube-apiserver", nil, func(i int) string { return hostileVersions[i].kube }},
		{"etcd-version", []string{"--cluster-size", "1"}, func(i int) string { return hostileVersions[i].etcd }},
	}
	for _, tt := range tests {
		commands := commandsWithFlag(NewRootCommand(), tt.flag)
		if len(commands) < 2 {
			t.Fatalf("got %d commands with --%s (%q), want run and more", len(commands), tt.flag, commands)
		}
		for _, command := range commands {
			for i, h := range hostileVersions {
				t.Run(tt.flag+"/"+strings.Join(command, "-")+"/"+h.name, func(t *testing.T) {
					parent := cacheWithBuilds(t)
					goCalls := buildtest.FakeGo(t, buildtest.Fail)
					tmp := t.TempDir()
					t.Setenv("TMPDIR", tmp)
					defer filetest.TreeUnchanged(t, parent)()
					// The = form carries an empty value and one that
					// begins with a dash.
					args := append(append(slices.Clone(command), "--"+tt.flag+"="+tt.value(i)), tt.extra...)
					root := NewRootCommand()
					// Short, should a value get past validation: the
					// test then fails in seconds, not minutes.
					if c, _, err := root.Find(command); err == nil {
						if c.Flags().Lookup("quick") != nil {
							args = append(args, "--quick")
						}
						if c.Flags().Lookup("duration") != nil {
							args = append(args, "--duration", "2s")
						}
					}
					var out, errOut bytes.Buffer
					root.SetOut(&out)
					code := cli.Run(root, args, &errOut)
					if code != cli.ExitUsage {
						t.Errorf("got exit %d, want %d; stderr %q", code, cli.ExitUsage, errOut.String())
					}
					if got, prefix := errOut.String(), "lwbench: --"+tt.flag+": "; !strings.HasPrefix(got, prefix) || strings.Count(got, "\n") != 1 || len(got) > 400 {
						t.Errorf("got stderr %q, want one line of at most 400 bytes beginning %q", got, prefix)
					}
					if out.Len() > 0 {
						t.Errorf("got stdout %q, want none", out.String())
					}
					if calls := goCalls(); len(calls) > 0 {
						t.Fatalf("a build script ran go: %q", calls)
					}
					if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
						t.Errorf("got %d entries in TMPDIR, want none", len(entries))
					}
				})
			}
		}
	}
}

// cacheWithBuilds makes ETCDKIT_CACHE, for the rest of the test, a cache
// holding a kube-apiserver 1.37.2 and an etcd 3.7.3 build, beside a
// directory of someone else's, and returns the parent of both.
func cacheWithBuilds(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	for name, content := range map[string]string{
		"cache/kube-apiserver-v1.37.2/kube-apiserver": "#!/bin/sh\necho fake kube-apiserver\n",
		"cache/etcd-v3.7.3/etcd":                      "#!/bin/sh\necho fake etcd\n",
		"cache/etcd-v3.7.3/etcdctl":                   "#!/bin/sh\necho fake etcdctl\n",
		"precious/data":                               "someone else's\n",
	} {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("ETCDKIT_CACHE", filepath.Join(parent, "cache"))
	return parent
}

// TestAcceptedVersions: the forms release.Kubernetes and release.Etcd
// accept reach the commands resolved, the pre-release 1.38.0-beta.0
// included.
func TestAcceptedVersions(t *testing.T) {
	tests := []struct {
		value, want string
	}{
		{"1.37", "1.37.2"},
		{"v1.36.1", "1.36.1"},
		{"1.38", "1.38.0-beta.0"},
		{"1.38.0-beta.0", "1.38.0-beta.0"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			o := &kubeOptions{version: tt.value, servers: 1}
			if err := o.Validate(); err != nil || o.resolvedVersion != tt.want {
				t.Errorf("--kube-apiserver %s: got %q, %v; want %q", tt.value, o.resolvedVersion, err, tt.want)
			}
		})
	}
}

// commandsWithFlag returns the path below root of every runnable command
// that has the flag name.
func commandsWithFlag(root *cobra.Command, name string) [][]string {
	var found [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Runnable() && c.Flags().Lookup(name) != nil {
			found = append(found, path)
		}
		for _, sub := range c.Commands() {
			walk(sub, append(slices.Clone(path), sub.Name()))
		}
	}
	walk(root, nil)
	return found
}
