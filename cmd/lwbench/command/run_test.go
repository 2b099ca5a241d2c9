package command

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	inspect "github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

func TestRunFlags(t *testing.T) {
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o600)
	tests := []struct {
		name       string
		args       []string
		wantErr    string
		wantPrefix string
		check      func(t *testing.T, o *runOptions)
	}{
		{name: "defaults", args: nil, wantPrefix: "/registry", check: func(t *testing.T, o *runOptions) {
			if !o.load.Defragment || !o.load.PhysicalCompaction || o.load.HoldBack != 1 || o.load.PageSize != 0 ||
				o.load.Profile != watchload.ProfileInformer || o.load.ResourceMix != watchload.DefaultResourceMix ||
				len(o.load.WatchResources) != 3 {
				t.Errorf("defaults %+v", o.load)
			}
		}},
		{name: "nodes: kube-apiserver's compaction interval, two of them in the steady phase", args: []string{"--nodes", "10"}, wantPrefix: "/registry",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval != 5*time.Minute || o.load.Duration != 16*time.Minute {
					t.Errorf("compaction interval %v, duration %v; want 5m0s, 16m0s", o.load.CompactionInterval, o.load.Duration)
				}
			}},
		{name: "nodes with an interval: the duration follows it", args: []string{"--nodes", "10", "--compaction-interval", "20s"}, wantPrefix: "/registry",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval != 20*time.Second || o.load.Duration != 2*time.Minute {
					t.Errorf("compaction interval %v, duration %v; want 20s, 2m0s", o.load.CompactionInterval, o.load.Duration)
				}
			}},
		{name: "nodes with both given: kept", args: []string{"--nodes", "10", "--compaction-interval", "1m", "--duration", "30s"}, wantPrefix: "/registry",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval != time.Minute || o.load.Duration != 30*time.Second {
					t.Errorf("compaction interval %v, duration %v; want 1m0s, 30s", o.load.CompactionInterval, o.load.Duration)
				}
			}},
		{name: "no nodes: a third of the duration, later", args: []string{"--duration", "30s"}, wantPrefix: "/registry",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval != 0 || o.load.Duration != 30*time.Second {
					t.Errorf("compaction interval %v, duration %v; want 0 (watchload's Duration/3), 30s", o.load.CompactionInterval, o.load.Duration)
				}
			}},
		{name: "apiserver cache profile", args: []string{"--profile", "apiserver-cache", "--resource-mix", "pods=100", "--watch-resources", "pods"}, wantPrefix: "/registry",
			check: func(t *testing.T, o *runOptions) {
				if o.load.Profile != watchload.ProfileAPIServerCache || o.load.ResourceMix.PodsPercent != 100 || len(o.load.WatchResources) != 1 {
					t.Errorf("options %+v", o.load)
				}
			}},
		{name: "unknown profile", args: []string{"--profile", "kubelet"}, wantErr: "--profile"},
		{name: "bad resource mix", args: []string{"--resource-mix", "pods=50,nodes=50"}, wantErr: "--resource-mix"},
		{name: "bad watch resource", args: []string{"--watch-resources", "nodes"}, wantErr: "--watch-resources"},
		{name: "no connections", args: []string{"--conns", "0"}, wantErr: "--conns"},
		{name: "external target defaults to its own prefix", args: []string{"--endpoints", "http://127.0.0.1:2379"}, wantPrefix: "/lwbench"},
		{name: "explicit prefix, trailing slash dropped", args: []string{"--prefix", "/kubernetes.io/"}, wantPrefix: "/kubernetes.io"},
		{name: "data dir with endpoints", args: []string{"--data-dir", t.TempDir(), "--endpoints", "http://x:1"}, wantErr: "--data-dir and --endpoints"},
		{name: "non-empty data dir", args: []string{"--data-dir", full}, wantErr: "is not empty"},
		{name: "mix", args: []string{"--create-percent", "50"}, wantErr: "sum to 100"},
		{name: "hold back too many", args: []string{"--watchers", "2", "--hold-back", "3"}, wantErr: "--hold-back"},
		{name: "relative prefix", args: []string{"--prefix", "registry"}, wantErr: "--prefix"},
		{name: "zero rate", args: []string{"--write-rate", "0"}, wantErr: "--write-rate"},
		{name: "snapshot dir missing", args: []string{"--snapshot", "/no/such/dir/x.db"}, wantErr: "does not exist"},
		{name: "bad format", args: []string{"-w", "yaml"}, wantErr: "write-out"},
		{name: "external target is left alone", args: []string{"--endpoints", "http://127.0.0.1:2379"}, wantPrefix: "/lwbench",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval >= 0 || o.load.HoldBack != 0 || o.load.Defragment || !o.load.Cleanup ||
					!o.load.NamespaceCompactRevKey || o.load.ReusePrefix {
					t.Errorf("options %+v: want no compaction, hold-back or defrag, a cleanup and the compactor's key under the prefix", o.load)
				}
			}},
		{name: "external compaction and defrag when allowed", args: []string{"--endpoints", "http://x:1", "--allow-maintenance", "--reuse-prefix"}, wantPrefix: "/lwbench",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval != 0 || o.load.HoldBack != 1 || !o.load.Defragment || !o.load.ReusePrefix || !o.load.NamespaceCompactRevKey {
					t.Errorf("options %+v", o.load)
				}
			}},
		{name: "external compaction alone", args: []string{"--endpoints", "http://x:1", "--allow-maintenance", "--no-defrag"}, wantPrefix: "/lwbench",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval != 0 || o.load.Defragment {
					t.Errorf("options %+v: want compactions and no defragmentation", o.load)
				}
			}},
		// The names before --allow-maintenance still work, deprecated,
		// each allowing its own.
		{name: "deprecated --allow-compaction", args: []string{"--endpoints", "http://x:1", "--allow-compaction"}, wantPrefix: "/lwbench",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval != 0 || o.load.Defragment {
					t.Errorf("options %+v: want compactions and no defragmentation", o.load)
				}
			}},
		{name: "deprecated --allow-defrag", args: []string{"--endpoints", "http://x:1", "--allow-defrag"}, wantPrefix: "/lwbench",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval >= 0 || !o.load.Defragment {
					t.Errorf("options %+v: want a defragmentation and no compaction", o.load)
				}
			}},
		{name: "maintenance through an existing cluster's apiservers", args: []string{"--endpoints", "http://x:1", "--kubeconfig", "/dev/null", "--allow-maintenance"}, wantErr: "--allow-maintenance cannot be used with --kubeconfig"},
		{name: "external compaction interval without permission", args: []string{"--endpoints", "http://x:1", "--compaction-interval", "1m"}, wantErr: "--allow-maintenance"},
		{name: "external hold-back without permission", args: []string{"--endpoints", "http://x:1", "--hold-back", "2"}, wantErr: "--allow-maintenance"},
		{name: "embedded member keeps compacting and owns compact_rev_key", args: []string{"--allow-maintenance"}, wantPrefix: "/registry",
			check: func(t *testing.T, o *runOptions) {
				if o.load.CompactionInterval < 0 || !o.load.Defragment || o.load.Cleanup || o.load.NamespaceCompactRevKey {
					t.Errorf("options %+v", o.load)
				}
			}},
		{name: "TLS flags need endpoints", args: []string{"--cacert", "ca.crt"}, wantErr: "need --endpoints"},
		{name: "cert without key", args: []string{"--endpoints", "https://x:1", "--cert", "c.crt"}, wantErr: "--cert and --key"},
		{name: "cluster and endpoints", args: []string{"--endpoints", "http://x:1", "--cluster-size", "3"}, wantErr: "--cluster-size and --endpoints"},
		{name: "etcd version without a cluster", args: []string{"--etcd-version", "3.6.16"}, wantErr: "--etcd-version needs --cluster-size"},
		{name: "etcd version not a release", args: []string{"--cluster-size", "3", "--etcd-version", "3.6."}, wantErr: "--etcd-version: Invalid value"},
		{name: "etcd version a minor line", args: []string{"--cluster-size", "3", "--etcd-version", "3.6"}, wantPrefix: "/registry",
			check: func(t *testing.T, o *runOptions) {
				if o.target.etcdVersion != "3.6.16" {
					t.Errorf("etcd version %q, want 3.6.16, the line's newest", o.target.etcdVersion)
				}
			}},
		{name: "fault without a cluster", args: []string{"--fault", "kill-leader"}, wantErr: "--cluster-size"},
		{name: "fault on external endpoints", args: []string{"--endpoints", "http://x:1", "--fault", "pause-follower"}, wantErr: "never kills, pauses or cuts off"},
		{name: "unknown fault", args: []string{"--cluster-size", "3", "--fault", "reboot"}, wantErr: "--fault"},
		{name: "follower fault on one member", args: []string{"--cluster-size", "1", "--fault", "pause-follower"}, wantErr: "--cluster-size 2 or more"},
		{name: "fault after the writes", args: []string{"--cluster-size", "3", "--fault", "kill-leader", "--fault-at", "30s"}, wantErr: "--fault-at"},
		{name: "fault timing without a fault", args: []string{"--fault-duration", "3s"}, wantErr: "need --fault"},
		{name: "partition fault runs members in network namespaces", args: []string{"--cluster-size", "3", "--fault", "partition-follower", "--pin-connections"}, wantPrefix: "/registry",
			check: func(t *testing.T, o *runOptions) {
				want := watchload.Fault{Kind: watchload.FaultPartitionFollower, At: o.load.Duration / 2, Duration: 5 * time.Second}
				if !o.target.netns || len(o.load.Faults) != 1 || o.load.Faults[0] != want || !o.load.PinConnections {
					t.Errorf("netns %v, faults %+v: want %+v in network namespaces", o.target.netns, o.load.Faults, want)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *runOptions
			root := &cobra.Command{Use: "lwbench"}
			cli.PrepareRoot(root)
			root.AddCommand(newRunCommand(func(_ *cobra.Command, o *runOptions) error { got = o; return nil }))
			var errOut bytes.Buffer
			code := cli.Run(root, append([]string{"run"}, tt.args...), &errOut)
			if tt.wantErr != "" {
				if code != cli.ExitUsage || !strings.Contains(errOut.String(), tt.wantErr) {
					t.Fatalf("exit %d, stderr %q; want %d mentioning %q", code, errOut.String(), cli.ExitUsage, tt.wantErr)
				}
				return
			}
			if code != 0 || got == nil {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			if got.load.Prefix != tt.wantPrefix {
				t.Errorf("prefix %q, want %q", got.load.Prefix, tt.wantPrefix)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// TestRunThenInspect runs the real command on an embedded member, saves a
// snapshot, and checks that etcdinspect reads the same state from it.
func TestRunThenInspect(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	snap := filepath.Join(t.TempDir(), "lw.db")
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	start := time.Now()
	code := cli.Run(root, []string{"run", "--unsafe-no-fsync", "--objects", "200", "--watchers", "3",
		"--write-rate", "100", "--duration", "3s", "--compaction-interval", "1s", "--snapshot", snap, "-w", "json"}, &errOut)
	if code != 0 {
		t.Fatalf("lwbench run exit %d:\n%s", code, errOut.String())
	}
	t.Logf("lwbench run took %v", time.Since(start))
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v", err)
	}
	if res.SchemaVersion != report.RunSchemaVersion || len(res.Relists) == 0 || res.Validation.Lost != 0 || !res.Validation.OK() {
		t.Fatalf("result: schema %d, %d relists, validation %+v", res.SchemaVersion, len(res.Relists), res.Validation)
	}
	if !strings.Contains(errOut.String(), "saved a snapshot") {
		t.Errorf("no snapshot log line in %q", errOut.String())
	}

	inspectJSON := func(args ...string) []byte {
		t.Helper()
		r := inspect.NewRootCommand()
		var o, e bytes.Buffer
		r.SetOut(&o)
		if code := cli.Run(r, args, &e); code != 0 {
			t.Fatalf("etcdinspect %v exit %d: %s", args, code, e.String())
		}
		return o.Bytes()
	}
	var usage struct {
		Rows []struct {
			Resource string
			Objects  int64
		}
	}
	if err := json.Unmarshal(inspectJSON("usage", snap, "-w", "json"), &usage); err != nil {
		t.Fatal(err)
	}
	counted := map[string]int64{}
	for _, r := range usage.Rows {
		counted[r.Resource] = r.Objects
	}
	// Events live for --event-ttl (1 hour by default), so nothing expires
	// between the end of the run and the snapshot.
	for _, rc := range res.Final.Resources {
		if got, ok := counted[rc.Resource]; !ok || got != rc.Objects {
			t.Errorf("etcdinspect counts %d live %s, lwbench reported %d", got, rc.Resource, rc.Objects)
		}
	}
	if counted["pods"] == 0 {
		t.Errorf("etcdinspect counts no pods: %+v", usage.Rows)
	}
	var st struct {
		Revision, CompactRevision int64
		SnapshotTrailer           string
	}
	if err := json.Unmarshal(inspectJSON("status", snap, "-w", "json"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Revision < res.Final.Revision || st.CompactRevision != res.Final.CompactRevision || st.SnapshotTrailer != "valid" {
		t.Errorf("status revision %d compact %d trailer %s; lwbench final revision %d compact %d",
			st.Revision, st.CompactRevision, st.SnapshotTrailer, res.Final.Revision, res.Final.CompactRevision)
	}
}
