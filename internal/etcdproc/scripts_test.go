package etcdproc

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/internal/buildtest"
	"github.com/kubestore/etcdkit/internal/filetest"
)

// hostileVersions are versions no build script may act on: each names a
// path other than the script's own directory, or is not a version.
var hostileVersions = []struct{ name, version string }{
	{"installed binary as directory", "1.37.2/kube-apiserver"},
	{"etcd binary as directory", "3.7.3/etcd"},
	{"benchmark binary as directory", "3.7.3/benchmark"},
	{"outside the cache", "3.7.3/../../precious"},
	{"outside the cache, kubernetes", "1.37.2/../../precious"},
	{"absolute", "/tmp"},
	{"trailing dot", "1.37."},
	{"negative patch", "1.37.-1"},
	{"minor only", "1.37"},
	{"leading zero", "3.07.3"},
	{"empty", ""},
	{"v alone", "v"},
	{"newline", "1.37.2\n"},
	{"space", "1.37.2 1.36.3"},
	{"command substitution", "$(touch pwned)"},
	{"backquote", "`touch pwned`"},
	{"semicolon", "1.37.2;touch pwned"},
	{"glob", "1.37.*"},
	{"not utf-8", "1.37.\xff"},
	{"unknown pre-release", "1.37.2-evil.0"},
	{"long", strings.Repeat("9", 5000)},
}

// scriptCache lays out a cache as builds leave it, a complete build of
// each script's, beside a directory of someone else's, and returns the
// parent of both and the cache.
func scriptCache(t *testing.T) (parent, cache string) {
	t.Helper()
	parent = t.TempDir()
	cache = filepath.Join(parent, "cache")
	files := map[string]string{
		"cache/etcd-v3.7.3/etcd":                                        "#!/bin/sh\necho fake etcd\n",
		"cache/etcd-v3.7.3/etcdctl":                                     "#!/bin/sh\necho fake etcdctl\n",
		"cache/kube-apiserver-v1.37.2/kube-apiserver":                   "#!/bin/sh\necho fake kube-apiserver\n",
		"cache/kube-controller-manager-v1.37.2/kube-controller-manager": "#!/bin/sh\necho fake kube-controller-manager\n",
		"cache/kube-scheduler-v1.37.2/kube-scheduler":                   "#!/bin/sh\necho fake kube-scheduler\n",
		"cache/kwok-v0.8.0/kwok":                                        "#!/bin/sh\necho fake kwok\n",
		"cache/kwok-v0.8.0/node-initialize.yaml":                        "kind: Stage\n",
		"cache/kwok-v0.8.0/node-heartbeat-with-lease.yaml":              "kind: Stage\n",
		"cache/kwok-v0.8.0/pod-ready.yaml":                              "kind: Stage\n",
		"cache/kwok-v0.8.0/pod-complete.yaml":                           "kind: Stage\n",
		"cache/kwok-v0.8.0/pod-delete.yaml":                             "kind: Stage\n",
		"cache/benchmark-v3.7.3/benchmark":                              "#!/bin/sh\necho fake benchmark\n",
		"cache/benchmark-v3.7.3/etcd-dump-logs":                         "#!/bin/sh\necho fake etcd-dump-logs\n",
		"cache/benchmark-v3.7.3/SOURCE_VERSION":                         "3.7.3\n",
		"cache/benchmark-v3.7.3/SOURCE_PROBED":                          "probed\n",
		"precious/data":                                                 "someone else's\n",
		"cwd/.keep":                                                     "",
	}
	for name, content := range files {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return parent, cache
}

// TestBuildScriptsRefuseHostileVersions runs each build script with each
// of hostileVersions and a cache holding complete builds: the script must
// refuse it (exit 2, nothing on stdout, one line on stderr) and leave the
// cache, the directory beside it and its working directory exactly as they
// were, without running go. Before the scripts checked their version,
// build-kube-apiserver.sh 1.37.2/kube-apiserver deleted the cached
// kube-apiserver (its `rm -rf` of the output path).
func TestBuildScriptsRefuseHostileVersions(t *testing.T) {
	for _, sc := range buildScripts {
		path, err := buildScript(sc.script)
		if err != nil {
			t.Fatal(err)
		}
		script := sc.script
		for _, tt := range hostileVersions {
			t.Run(sc.name()+"/"+tt.name, func(t *testing.T) {
				goCalls := buildtest.FakeGo(t, buildtest.Fail)
				parent, cache := scriptCache(t)
				defer filetest.TreeUnchanged(t, parent)()
				code, stdout, stderr := runScript(t, path, filepath.Join(parent, "cwd"), append(sc.args(), tt.version, cache)...)
				if code != 2 {
					t.Errorf("got exit %d, want 2; stderr %q", code, stderr)
				}
				if stdout != "" {
					t.Errorf("got stdout %q, want none", stdout)
				}
				if lines := strings.Count(stderr, "\n"); lines != 1 || !strings.HasPrefix(stderr, script+": ") {
					t.Errorf("got stderr %q, want one line beginning %q", stderr, script+": ")
				}
				if calls := goCalls(); len(calls) > 0 {
					t.Fatalf("the script ran go: %q", calls)
				}
			})
		}
	}
}

// TestBuildScriptsRefuseACacheThatIsNotADirectory: a CACHE_DIR argument
// that is a file is refused (exit 2) and left as it was, instead of the
// script making a lock file or a directory of it.
func TestBuildScriptsRefuseACacheThatIsNotADirectory(t *testing.T) {
	for _, tt := range []struct {
		call    buildScriptCall
		version string
	}{
		{buildScriptCall{script: "build-etcd.sh"}, "3.7.3"},
		{buildScriptCall{script: "build-kube-apiserver.sh"}, "1.37.2"},
		{buildScriptCall{script: "build-kube.sh", component: "kube-controller-manager"}, "1.37.2"},
		{buildScriptCall{script: "build-kwok.sh"}, "0.8.0"},
		{buildScriptCall{script: "build-benchmark.sh"}, "3.7.3"},
	} {
		t.Run(tt.call.name(), func(t *testing.T) {
			path, err := buildScript(tt.call.script)
			if err != nil {
				t.Fatal(err)
			}
			goCalls := buildtest.FakeGo(t, buildtest.Fail)
			parent, _ := scriptCache(t)
			defer filetest.TreeUnchanged(t, parent)()
			code, stdout, stderr := runScript(t, path, filepath.Join(parent, "cwd"), append(tt.call.args(), tt.version, filepath.Join(parent, "precious", "data"))...)
			if code != 2 || stdout != "" || !strings.Contains(stderr, "is not a directory") {
				t.Errorf("got exit %d, stdout %q, stderr %q; want exit 2, no stdout, \"is not a directory\"", code, stdout, stderr)
			}
			if calls := goCalls(); len(calls) > 0 {
				t.Fatalf("the script ran go: %q", calls)
			}
		})
	}
}

// TestBuildScriptsReuseACompleteBuild: with a valid version whose build is
// in the cache, each script prints its directory (a relative CACHE_DIR made
// absolute) and touches nothing.
func TestBuildScriptsReuseACompleteBuild(t *testing.T) {
	for _, tt := range []struct {
		call          buildScriptCall
		version, want string
	}{
		{buildScriptCall{script: "build-etcd.sh"}, "v3.7.3", "cache/etcd-v3.7.3"},
		{buildScriptCall{script: "build-kube-apiserver.sh"}, "1.37.2", "cache/kube-apiserver-v1.37.2"},
		{buildScriptCall{script: "build-kube.sh", component: "kube-apiserver"}, "1.37.2", "cache/kube-apiserver-v1.37.2"},
		{buildScriptCall{script: "build-kube.sh", component: "kube-controller-manager"}, "v1.37.2", "cache/kube-controller-manager-v1.37.2"},
		{buildScriptCall{script: "build-kube.sh", component: "kube-scheduler"}, "1.37.2", "cache/kube-scheduler-v1.37.2"},
		{buildScriptCall{script: "build-kwok.sh"}, "v0.8.0", "cache/kwok-v0.8.0"},
		{buildScriptCall{script: "build-benchmark.sh"}, "3.7.3", "cache/benchmark-v3.7.3/benchmark"},
	} {
		t.Run(tt.call.name(), func(t *testing.T) {
			path, err := buildScript(tt.call.script)
			if err != nil {
				t.Fatal(err)
			}
			goCalls := buildtest.FakeGo(t, buildtest.Fail)
			parent, _ := scriptCache(t)
			defer filetest.TreeUnchanged(t, parent)()
			code, stdout, stderr := runScript(t, path, filepath.Join(parent, "cwd"), append(tt.call.args(), tt.version, "../cache")...)
			if want := filepath.Join(parent, tt.want) + "\n"; code != 0 || stdout != want {
				t.Errorf("got exit %d, stdout %q (stderr %q); want exit 0, stdout %q", code, stdout, stderr, want)
			}
			if calls := goCalls(); len(calls) > 0 {
				t.Fatalf("the script ran go: %q", calls)
			}
		})
	}
}

// buildScripts are the build scripts, with the arguments before VERSION.
var buildScripts = []buildScriptCall{
	{script: "build-etcd.sh"},
	{script: "build-kube-apiserver.sh"},
	{script: "build-kube.sh", component: "kube-apiserver"},
	{script: "build-kube.sh", component: "kube-controller-manager"},
	{script: "build-kube.sh", component: "kube-scheduler"},
	{script: "build-kwok.sh"},
	{script: "build-benchmark.sh"},
}

// buildScriptCall is a build script and the component it builds, if it
// takes one before VERSION (build-kube.sh).
type buildScriptCall struct{ script, component string }

func (c buildScriptCall) name() string {
	if c.component == "" {
		return c.script
	}
	return c.script + " " + c.component
}

func (c buildScriptCall) args() []string {
	if c.component == "" {
		return nil
	}
	return []string{c.component}
}

// TestBuildKubeRefusesOtherComponents: build-kube.sh builds only the three
// components it names; any other first argument, a path included, is
// refused (exit 2, one line naming it) before anything is created.
func TestBuildKubeRefusesOtherComponents(t *testing.T) {
	path, err := buildScript("build-kube.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, component := range []string{"kubelet", "", "kube-apiserver/../../precious", "../kube-scheduler", "kube-proxy", "$(touch pwned)"} {
		t.Run(component, func(t *testing.T) {
			goCalls := buildtest.FakeGo(t, buildtest.Fail)
			parent, cache := scriptCache(t)
			defer filetest.TreeUnchanged(t, parent)()
			code, stdout, stderr := runScript(t, path, filepath.Join(parent, "cwd"), component, "1.37.2", cache)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "build-kube.sh: component ") {
				t.Errorf("got exit %d, stdout %q, stderr %q; want exit 2, no stdout, one line \"build-kube.sh: component ...\"", code, stdout, stderr)
			}
			if calls := goCalls(); len(calls) > 0 {
				t.Fatalf("the script ran go: %q", calls)
			}
		})
	}
}

// runScript runs bash script args in dir with CleanEnv and returns its
// exit code, stdout and stderr.
func runScript(t *testing.T, script, dir string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir, cmd.Env = dir, CleanEnv()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("run %s: %v", script, err)
	return 0, "", ""
}
