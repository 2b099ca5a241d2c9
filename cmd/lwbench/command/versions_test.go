package command

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// signalWriter is a stderr for a command under test, written from its
// goroutines, that closes seen once what was written contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := bytes.Contains(w.buf.Bytes(), []byte(w.want))
	w.buf.Write(p)
	if !had && bytes.Contains(w.buf.Bytes(), []byte(w.want)) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestBuildWaitInterrupted: `lwbench run --cluster-size 1` and `lwbench
// run --kube-apiserver` whose build script waits for another process's
// build (the test holds the lock) stop within 2 s of SIGINT (the
// context's cancellation), exit 130 and say they were interrupted while
// waiting; nothing of the script's is left in the cache.
func TestBuildWaitInterrupted(t *testing.T) {
	tests := []struct {
		name string
		args []string
		lock string
	}{
		{"etcd", []string{"run", "--cluster-size", "1", "--etcd-version", "3.7.3", "--duration", "2s"}, "etcd-v3.7.3.lock"},
		{"kube-apiserver", []string{"run", "--kube-apiserver", "1.36.3", "--duration", "2s"}, "kube-apiserver-v1.36.3.lock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := cacheWithBuilds(t)
			goCalls := buildtest.FakeGo(t, buildtest.Fail)
			t.Setenv("TMPDIR", t.TempDir())
			cache := filepath.Join(parent, "cache")
			lock, err := os.OpenFile(filepath.Join(cache, tt.lock), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Close()
			if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			if tt.name == "etcd" {
				// The cached etcd 3.7.3 is incomplete without etcdctl:
				// the script must build, so it waits for the lock.
				if err := os.Remove(filepath.Join(cache, "etcd-v3.7.3", "etcdctl")); err != nil {
					t.Fatal(err)
				}
			}
			defer filetest.TreeUnchanged(t, parent)()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stderr := &signalWriter{want: "waiting for it", seen: make(chan struct{})}
			root := NewRootCommand()
			root.SetOut(io.Discard)
			root.SetErr(stderr)
			done := make(chan int, 1)
			go func() { done <- cli.RunContext(ctx, root, tt.args, stderr) }()
			select {
			case <-stderr.seen:
			case code := <-done:
				t.Fatalf("exit %d before the build script waited; stderr %q", code, stderr.String())
			case <-time.After(30 * time.Second):
				t.Fatalf("the build script did not say it waits within 30 s; stderr %q", stderr.String())
			}
			cancelled := time.Now()
			cancel()
			var code int
			select {
			case code = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("lwbench did not return within 5 s of the interruption")
			}
			if took := time.Since(cancelled); took > 2*time.Second {
				t.Errorf("lwbench returned %v after the interruption, want at most 2 s", took)
			}
			last := stderr.String()
			if i := strings.LastIndex(strings.TrimSuffix(last, "\n"), "\n"); i >= 0 {
				last = last[i+1:]
			}
			if code != cli.ExitInterrupted || !strings.HasPrefix(last, "lwbench: interrupted: ") || !strings.Contains(last, "waiting for it") {
				t.Errorf("got exit %d, last line %q; want exit %d, \"lwbench: interrupted: ...\" saying it was waiting", code, last, cli.ExitInterrupted)
			}
			if calls := goCalls(); len(calls) > 0 {
				t.Errorf("a build script ran go while the lock was held: %q", calls)
			}
		})
	}
}
