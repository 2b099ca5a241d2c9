package command

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
)

// TestFlagErrorsNameTheFlag: every options error, from watchload's and
// the experiments' Validate, names the flag (fieldFlags), is one line and
// exits 2 before anything is created: no temporary directory is left.
func TestFlagErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // stderr, from its start
	}{
		{"run NaN rate", []string{"run", "--write-rate", "NaN"}, "lwbench: --write-rate: Invalid value: NaN: must be finite and positive\n"},
		{"run infinite rate", []string{"run", "--write-rate", "Inf"}, "lwbench: --write-rate: Invalid value: +Inf: must be finite and positive\n"},
		{"run rate of no write", []string{"run", "--write-rate", "1e-300"}, "lwbench: --write-rate: Invalid value: 1e-300: must be at least 0.001 per second\n"},
		{"run rate of no write in the duration", []string{"run", "--write-rate", "0.01", "--duration", "10s"}, "lwbench: --write-rate: Invalid value: 0.01: plans no write in a duration of 10s\n"},
		{"run rate of a ring beyond memory", []string{"run", "--write-rate", "1e9"}, "lwbench: --write-rate: Invalid value: 1e+09: must be at most 1e+07 per second (1e6 already measures etcd's ceiling)\n"},
		{"run rate beyond memory", []string{"run", "--write-rate", "1e7", "--duration", "1h"}, "lwbench: --write-rate: Invalid value: 1e+07: plans 3.6e+10 writes in a duration of 1h0m0s, more than 100000000\n"},
		{"run explicit zero", []string{"run", "--namespaces", "0"}, "lwbench: --namespaces: Invalid value: 0: must be greater than 0\n"},
		{"run zero duration", []string{"run", "--duration", "0s"}, `lwbench: --duration: Invalid value: "0s": must be greater than 0` + "\n"},
		{"run negative sync timeout", []string{"run", "--sync-timeout", "-1s"}, `lwbench: --sync-timeout: Invalid value: "-1s": must not be negative (0: 60s)` + "\n"},
		{"run event ttl", []string{"run", "--event-ttl", "0s"}, `lwbench: --event-ttl: Invalid value: "0s": must be greater than 0` + "\n"},
		{"run several flags", []string{"run", "--conns", "0", "--writer-conns", "0"}, "lwbench: --conns: Invalid value: 0: must be greater than 0; --writer-conns: Invalid value: 0: must be greater than 0\n"},
		{"run mix", []string{"run", "--create-percent", "50"}, `lwbench: --create-percent, --update-percent, --delete-percent: Invalid value: "50/70/10": create/update/delete percentages must be non-negative and sum to 100` + "\n"},
		{"run resource mix", []string{"run", "--resource-mix", "pods=50"}, `lwbench: --resource-mix: Invalid value: "pods=50,configmaps=0,events=0": percentages must be non-negative and sum to 100` + "\n"},
		{"run watch resource", []string{"run", "--watch-resources", "pods,nodes"}, `lwbench: --watch-resources: Unsupported value: "nodes": supported values: "pods", "configmaps", "events"` + "\n"},
		{"run profile", []string{"run", "--profile", "kubelet"}, `lwbench: --profile: Unsupported value: "kubelet": supported values: "informer", "apiserver-cache"` + "\n"},
		{"run fault after the writes", []string{"run", "--cluster-size", "3", "--fault", "kill-leader", "--fault-at", "30s"}, `lwbench: --fault-at: Invalid value: "30s": must fall within the duration (20s)` + "\n"},
		{"run apiservers without kube-apiserver", []string{"run", "--apiservers", "2"}, "lwbench: --apiservers needs --kube-apiserver\n"},
		{"run shared connection without an API front", []string{"run", "--shared-connection"}, "lwbench: --shared-connection needs --kube-apiserver or --kubeconfig: the etcd-direct model's connections are --conns and --streams\n"},
		{"experiment shared connection without an API front", []string{"relist-storm", "--shared-connection"}, "lwbench: --shared-connection needs --kube-apiserver or --kubeconfig: the etcd-direct model's connections are --conns and --streams\n"},
		{"run apiserver arg without kube-apiserver", []string{"run", "--apiserver-arg", "--disable-admission-plugins=LimitRanger"}, "lwbench: --apiserver-arg needs --kube-apiserver\n"},
		{"run apiserver arg not a flag", []string{"run", "--kube-apiserver", "1.37", "--apiserver-arg", "disable-admission-plugins=LimitRanger"}, `lwbench: --apiserver-arg: Invalid value: "disable-admission-plugins=LimitRanger": give one kube-apiserver flag, e.g. --apiserver-arg=--disable-admission-plugins=LimitRanger` + "\n"},
		{"conformance apiserver arg not a flag", []string{"conformance", "--apiserver-arg=--"}, `lwbench: --apiserver-arg: Invalid value: "--": give one kube-apiserver flag, e.g. --apiserver-arg=--disable-admission-plugins=LimitRanger` + "\n"},
		{"run kube-apiserver release", []string{"run", "--kube-apiserver", "1.34"}, `lwbench: --kube-apiserver: Unsupported value: "1.34": lwbench builds Kubernetes 1.35, 1.36, 1.37 or 1.38` + "\n"},
		{"run no apiserver", []string{"run", "--kube-apiserver", "1.37", "--apiservers", "0"}, "lwbench: --apiservers: Invalid value: 0: must be at least 1\n"},
		{"run client gate", []string{"run", "--kube-apiserver", "1.37", "--client-feature-gates", "WatchList=true"}, `lwbench: --client-feature-gates: Invalid value: "WatchList=true": give WatchListClient=true or WatchListClient=false` + "\n"},
		{"run model client gate", []string{"run", "--client-feature-gates", "WatchListClient=maybe"}, `lwbench: --client-feature-gates: Invalid value: "WatchListClient=maybe": give WatchListClient=true or WatchListClient=false` + "\n"},
		{"run model apiserver gate value", []string{"run", "--apiserver-feature-gates", "EtcdRangeStream=maybe"}, `lwbench: --apiserver-feature-gates: Invalid value: "EtcdRangeStream=maybe": invalid value of EtcdRangeStream=maybe: want true or false` + "\n"},
		{"run model apiserver gate without value", []string{"run", "--apiserver-feature-gates", "WatchList"}, `lwbench: --apiserver-feature-gates: Invalid value: "WatchList": missing bool value for WatchList` + "\n"},
		{"run model apiserver gate it does not follow", []string{"run", "--apiserver-feature-gates", "EtcdRangeStream=false,ConsistentListFromCache=false"}, `lwbench: --apiserver-feature-gates: Unsupported value: "ConsistentListFromCache": the etcd-direct model follows EtcdRangeStream and WatchList only; give other gates with --kube-apiserver` + "\n"},
		{"run apiserver gate the release lacks", []string{"run", "--kube-apiserver", "1.36", "--apiserver-feature-gates", "EtcdRangeStream=true"}, `lwbench: --apiserver-feature-gates: Unsupported value: "EtcdRangeStream": kube-apiserver 1.36.3 has no such gate` + "\n"},
		{"conformance apiserver gate the release lacks", []string{"conformance", "--kube-apiserver", "1.35.4", "--apiserver-feature-gates", "EtcdRangeStream=false"}, `lwbench: --apiserver-feature-gates: Unsupported value: "EtcdRangeStream": kube-apiserver 1.35.4 has no such gate` + "\n"},
		{"conformance apiserver gate value", []string{"conformance", "--apiserver-feature-gates", "EtcdRangeStream=no way"}, `lwbench: --apiserver-feature-gates: Invalid value: "EtcdRangeStream=no way": invalid value of EtcdRangeStream=no way: want true or false` + "\n"},
		{"experiment apiserver gates without kube-apiserver", []string{"relist-storm", "--apiserver-feature-gates", "EtcdRangeStream=false"}, "lwbench: --apiserver-feature-gates needs --kube-apiserver: the experiments' model follows kube-apiserver 1.37's defaults\n"},
		{"run cluster flag without nodes", []string{"run", "--pod-churn", "20"}, "lwbench: --pod-churn needs --nodes\n"},
		{"run no nodes", []string{"run", "--nodes", "0"}, "lwbench: --nodes: Invalid value: 0: must be at least 1\n"},
		{"run nodes through a kubeconfig", []string{"run", "--nodes", "10", "--kubeconfig", "/nonexistent", "--endpoints", "http://127.0.0.1:1"}, "lwbench: --nodes cannot be used with --kubeconfig: a cluster's load needs a control plane and KWOK lwbench starts\n"},
		{"run pod size", []string{"run", "--nodes", "10", "--pod-size", "2Mi"}, `lwbench: --pod-size: Invalid value: "2Mi": must be 0 to 1048576 bytes` + "\n"},
		{"run node size", []string{"run", "--nodes", "10", "--node-size", "big"}, `lwbench: --node-size: Invalid value: "big": give a size such as 4Ki or 20000` + "\n"},
		{"run pod churn", []string{"run", "--nodes", "10", "--pod-churn", "0"}, "lwbench: --pod-churn: Invalid value: 0: must be above 0\n"},
		{"run db size", []string{"run", "--nodes", "10", "--db-size", "7Gi"}, `lwbench: --db-size: Invalid value: "7Gi": must be 0 to 6442450944 bytes (6Gi) of etcd's 8Gi quota` + "\n"},
		{"run db size on endpoints", []string{"run", "--nodes", "10", "--db-size", "1Gi", "--endpoints", "http://127.0.0.1:1"}, "lwbench: --db-size needs an etcd lwbench starts: it writes outside --prefix, which it never does to an --endpoints cluster\n"},
		{"run restart component", []string{"run", "--nodes", "10", "--restart", "etcd"}, `lwbench: --restart: Unsupported value: "etcd": supported values: kube-apiserver, kube-controller-manager, kube-scheduler, kwok` + "\n"},
		{"run restart-at alone", []string{"run", "--nodes", "10", "--restart-at", "10s"}, "lwbench: --restart-at needs --restart and a duration above 0\n"},
		{"run defrag-at with hold-back", []string{"run", "--nodes", "10", "--defrag-at", "10s", "--hold-back", "1"}, "lwbench: --hold-back cannot be used with --defrag-at or --restart: the run defragments or restarts at a fixed time instead of after a held informer's compaction\n"},
		{"run events etcd watching events", []string{"run", "--nodes", "10", "--events-etcd", "--watch-resources", "pods,events"}, "lwbench: --watch-resources events cannot be used with --events-etcd: informers are checked against the main etcd's history, and events are then stored in the other\n"},
		{"run experiment flag without nodes", []string{"run", "--defrag-at", "10s"}, "lwbench: --defrag-at needs --nodes\n"},
		{"run experiment with the model", []string{"run", "--nodes", "10", "--cluster-model", "--restart", "kube-apiserver"}, "lwbench: --restart cannot be used with --cluster-model: it is an experiment on the real control plane\n"},
		{"run empty endpoints", []string{"run", "--endpoints", ""}, "lwbench: --endpoints: Required value: give etcd client URLs, or leave --endpoints out for an embedded member\n"},
		{"put empty endpoint", []string{"put", "--endpoints", "http://127.0.0.1:1,"}, `lwbench: --endpoints: Invalid value: "http://127.0.0.1:1,": endpoint 2 is empty` + "\n"},
		{"put NaN rate", []string{"put", "--write-rate", "NaN"}, "lwbench: --write-rate: Invalid value: NaN: must be finite and positive\n"},
		{"put more connections than workers", []string{"put", "--writer-concurrency", "2", "--writer-conns", "3"}, "lwbench: --writer-conns: Invalid value: 3: must not exceed the writer concurrency (2)\n"},
		{"put old flag names", []string{"put", "--rate", "-1", "--total", "0"}, "lwbench: --writes: Invalid value: 0: must be greater than 0; --write-rate: Invalid value: -1: must be finite and positive\n"},
		{"watch infinite rate", []string{"watch", "--write-rate", "-Inf"}, "lwbench: --write-rate: Invalid value: -Inf: must be finite and positive\n"},
		{"watch old flag name", []string{"watch", "--put-workers", "0"}, "lwbench: --writer-concurrency: Invalid value: 0: must be greater than 0\n"},
		{"watch conns above streams", []string{"watch", "--streams", "2", "--conns", "3"}, "lwbench: --conns: Invalid value: 3: must not exceed the number of streams (2)\n"},
		{"list repeats", []string{"list", "--repeats", "0"}, "lwbench: --repeats: Invalid value: 0: must be greater than 0\n"},
		// The experiments' writers: one name with run, put and watch.
		{"catchup writer concurrency", []string{"catchup", "--writer-concurrency", "-1"}, "lwbench: --writer-concurrency: Invalid value: -1: must be greater than 0\n"},
		{"defrag-stall old flag name", []string{"defrag-stall", "--concurrency", "-1"}, "lwbench: --writer-concurrency: Invalid value: -1: must be greater than 0\n"},
		{"list objects", []string{"list", "--objects", "100,10"}, "lwbench: --objects: Invalid value: 10: must be greater than the value before it (values ascending)\n"},
		{"relist-storm NaN rate", []string{"relist-storm", "--write-rate", "NaN"}, "lwbench: --write-rate: Invalid value: NaN: must be finite and positive\n"},
		{"relist-storm watchers", []string{"relist-storm", "--watchers", "-1"}, "lwbench: --watchers: Invalid value: -1: must be greater than 0\n"},
		{"continuation retain-lists", []string{"continuation", "--retain-lists", "1,NaN"}, "lwbench: --retain-lists: Invalid value: NaN: must be finite and positive (lists' worth of history)\n"},
		{"compaction-sweep flaky", []string{"compaction-sweep", "--flaky", "99"}, "lwbench: --flaky: Invalid value: 99: must not exceed the number of watchers (10)\n"},
		{"compaction-sweep disconnect-every", []string{"compaction-sweep", "--disconnect", "20s"}, `lwbench: --disconnect-every: Invalid value: "12s": must be longer than the disconnection (20s)` + "\n"},
		{"defrag-stall value size", []string{"defrag-stall", "--value-size", "-1"}, "lwbench: --value-size: Invalid value: -1: must be greater than 0\n"},
		{"catchup probe rate", []string{"catchup", "--probe-rate", "Inf"}, "lwbench: --probe-rate: Invalid value: +Inf: must be finite and positive\n"},
		{"catchup prefix", []string{"catchup", "--prefix", "registry"}, `lwbench: --prefix: Invalid value: "registry": must start with '/' and name a path` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			var errOut bytes.Buffer
			code := cli.Run(NewRootCommand(), tt.args, &errOut)
			if code != cli.ExitUsage || errOut.String() != tt.want {
				t.Errorf("got exit %d, stderr %q; want exit %d, stderr %q", code, errOut.String(), cli.ExitUsage, tt.want)
			}
			if entries, err := os.ReadDir(tmp); err != nil || len(entries) > 0 {
				t.Errorf("got %d entries in TMPDIR (%v) after a usage error, want none", len(entries), err)
			}
		})
	}
}

// TestCPUProfileRemovedOnUsageError: --cpu-profile creates its file
// before the command checks its flags; a usage error removes it, and
// --heap-profile writes none.
func TestCPUProfileRemovedOnUsageError(t *testing.T) {
	dir := t.TempDir()
	cpu, heap := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "heap.prof")
	var errOut bytes.Buffer
	if code := cli.Run(NewRootCommand(), []string{"run", "--cpu-profile", cpu, "--heap-profile", heap, "--write-rate", "NaN"}, &errOut); code != cli.ExitUsage {
		t.Fatalf("got exit %d (%s), want %d", code, errOut.String(), cli.ExitUsage)
	}
	for _, path := range []string{cpu, heap} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("got %s left behind (stat: %v), want it removed", path, err)
		}
	}
	// A --heap-profile that is not a file is a usage error naming it.
	errOut.Reset()
	if code := cli.Run(NewRootCommand(), []string{"version", "--heap-profile", dir}, &errOut); code != cli.ExitUsage || !strings.Contains(errOut.String(), "--heap-profile") {
		t.Errorf("--heap-profile DIR: exit %d, %q; want a usage error naming the flag", code, errOut.String())
	}
}

// TestHeapProfileWritten: a command that ran leaves a heap profile
// (gzipped, as go tool pprof reads it), even when its heap stayed small.
func TestHeapProfileWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.prof")
	var out bytes.Buffer
	if code := cli.Run(NewRootCommand(), []string{"version", "--heap-profile", path}, &out); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("%s: %d bytes (%v), want a gzipped profile", path, len(b), err)
	}
}

// TestDeprecatedFlagNames: the names each setting had before it got one
// name across commands still set it, hidden from help.
func TestDeprecatedFlagNames(t *testing.T) {
	tests := []struct {
		name string
		args []string
		got  func(p *putOptions, w *watchOptions) any
		want any
	}{
		{"put --rate", []string{"put", "--rate", "123"}, func(p *putOptions, _ *watchOptions) any { return p.load.Rate }, 123.0},
		{"put --total", []string{"put", "--total", "77"}, func(p *putOptions, _ *watchOptions) any { return p.load.Total }, int64(77)},
		{"put --clients", []string{"put", "--clients", "5"}, func(p *putOptions, _ *watchOptions) any { return p.load.Workers }, 5},
		{"put --conns", []string{"put", "--conns", "2"}, func(p *putOptions, _ *watchOptions) any { return p.load.Connections }, 2},
		{"watch --put-rate", []string{"watch", "--put-rate", "321"}, func(_ *putOptions, w *watchOptions) any { return w.load.PutRate }, 321.0},
		{"watch --puts", []string{"watch", "--puts", "9"}, func(_ *putOptions, w *watchOptions) any { return w.load.Puts }, int64(9)},
		{"watch --put-workers", []string{"watch", "--put-workers", "3"}, func(_ *putOptions, w *watchOptions) any { return w.load.PutWorkers }, 3},
		{"watch --put-conns", []string{"watch", "--put-conns", "4"}, func(_ *putOptions, w *watchOptions) any { return w.load.PutConnections }, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *putOptions
			var w *watchOptions
			root := &cobra.Command{Use: "lwbench"}
			cli.PrepareRoot(root)
			root.AddCommand(newPutCommand(func(_ *cobra.Command, o *putOptions) error { p = o; return nil }),
				newWatchCommand(func(_ *cobra.Command, o *watchOptions) error { w = o; return nil }))
			var out, errOut bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&errOut)
			if code := cli.Run(root, tt.args, &errOut); code != 0 {
				t.Fatalf("got exit %d: %s", code, errOut.String())
			}
			if got := tt.got(p, w); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if !strings.Contains(out.String()+errOut.String(), "has been deprecated, use --") {
				t.Errorf("got output %q, want a deprecation notice", out.String()+errOut.String())
			}
		})
	}
	var help bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&help)
	for _, cmd := range []string{"put", "watch"} {
		root.SetArgs([]string{cmd, "--help"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
	}
	for _, old := range []string{"rate", "total", "clients", "puts", "put-rate", "put-workers", "put-conns"} {
		if regexp.MustCompile(`(?m)^ +--` + old + ` `).MatchString(help.String()) {
			t.Errorf("help lists the deprecated --%s", old)
		}
	}
}

func TestKebab(t *testing.T) {
	for _, tt := range []struct{ path, want string }{
		{"writeRate", "write-rate"}, {"eventTTL", "event-ttl"}, {"watchers", "watchers"},
		{"disconnectEvery", "disconnect-every"}, {"probeRate", "probe-rate"}, {"a.bC", "a-b-c"},
	} {
		if got := kebab(tt.path); got != tt.want {
			t.Errorf("kebab(%q): got %q, want %q", tt.path, got, tt.want)
		}
	}
}
