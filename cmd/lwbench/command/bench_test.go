package command

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/report"
)

// parse runs a subcommand with a runF hook and returns its exit code and
// stderr.
func parse(t *testing.T, sub *cobra.Command, args ...string) (int, string) {
	t.Helper()
	root := &cobra.Command{Use: "lwbench"}
	cli.PrepareRoot(root)
	root.AddCommand(sub)
	var errOut bytes.Buffer
	code := cli.Run(root, append([]string{sub.Name()}, args...), &errOut)
	return code, errOut.String()
}

func TestBenchFlags(t *testing.T) {
	tests := []struct {
		name    string
		sub     func() *cobra.Command
		args    []string
		wantErr string
	}{
		{name: "watch defaults", sub: func() *cobra.Command {
			return newWatchCommand(func(*cobra.Command, *watchOptions) error { return nil })
		}},
		{name: "watch streams above watchers", sub: func() *cobra.Command { return newWatchCommand(nil) }, args: []string{"--watchers", "5", "--streams", "6"}, wantErr: "--streams"},
		{name: "watch conns above streams", sub: func() *cobra.Command { return newWatchCommand(nil) }, args: []string{"--streams", "2", "--conns", "3"}, wantErr: "--conns"},
		{name: "watch zero rate", sub: func() *cobra.Command { return newWatchCommand(nil) }, args: []string{"--put-rate", "0"}, wantErr: "--write-rate"},
		{name: "put defaults", sub: func() *cobra.Command { return newPutCommand(func(*cobra.Command, *putOptions) error { return nil }) }},
		{name: "put conns above clients", sub: func() *cobra.Command { return newPutCommand(nil) }, args: []string{"--clients", "2", "--conns", "3"}, wantErr: "--writer-conns"},
		{name: "put negative value size", sub: func() *cobra.Command { return newPutCommand(nil) }, args: []string{"--value-size", "-1"}, wantErr: "--value-size"},
		{name: "list defaults", sub: func() *cobra.Command { return newListCommand(func(*cobra.Command, *listOptions) error { return nil }) }},
		{name: "list bad page size", sub: func() *cobra.Command { return newListCommand(nil) }, args: []string{"--page-sizes", "500,all"}, wantErr: "--page-sizes"},
		{name: "list descending objects", sub: func() *cobra.Command { return newListCommand(nil) }, args: []string{"--objects", "100,10"}, wantErr: "ascending"},
		{name: "list bad mode", sub: func() *cobra.Command { return newListCommand(nil) }, args: []string{"--modes", "full,fast"}, wantErr: "fast"},
		{name: "list bad resource", sub: func() *cobra.Command { return newListCommand(nil) }, args: []string{"--resource", "nodes"}, wantErr: "nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, errOut := parse(t, tt.sub(), tt.args...)
			if tt.wantErr == "" {
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				return
			}
			if code != cli.ExitUsage || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want %d mentioning %q", code, errOut, cli.ExitUsage, tt.wantErr)
			}
		})
	}
}

// TestBenchCommands runs watch, put and list on an embedded member and
// reads their JSON, interval CSV and benchstat outputs back.
func TestBenchCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	dir := t.TempDir()
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, out []byte)
	}{
		{name: "watch", args: []string{"watch", "--watchers", "20", "--streams", "4", "--writes", "50", "--write-rate", "500", "--value-size", "4", "--keys", "1"},
			check: func(t *testing.T, out []byte) {
				var r report.WatchResult
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatal(err)
				}
				if r.SchemaVersion != report.WatchSchemaVersion || r.Delivery.Events != 1000 || !r.Validation.OK() {
					t.Errorf("watch result: schema %d, %d events, validation %s", r.SchemaVersion, r.Delivery.Events, r.Validation.Summary())
				}
			}},
		{name: "put", args: []string{"put", "--writes", "100", "--write-rate", "1000", "--value-size", "8", "--writer-concurrency", "4"},
			check: func(t *testing.T, out []byte) {
				var r report.PutResult
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatal(err)
				}
				if r.SchemaVersion != report.PutSchemaVersion || r.Writes.Completed != 100 {
					t.Errorf("put result: schema %d, writes %+v", r.SchemaVersion, r.Writes)
				}
			}},
		{name: "list", args: []string{"list", "--objects", "10,30", "--page-sizes", "10,none", "--repeats", "2"},
			check: func(t *testing.T, out []byte) {
				var r report.ListResult
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatal(err)
				}
				if r.SchemaVersion != report.ListSchemaVersion || len(r.Rows) != 12 {
					t.Errorf("list result: schema %d, %d rows", r.SchemaVersion, len(r.Rows))
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bench := filepath.Join(dir, tt.name+".bench")
			args := append(tt.args, "--unsafe-no-fsync", "-w", "json", "--benchstat", bench)
			csvPath := ""
			if tt.name != "list" {
				csvPath = filepath.Join(dir, tt.name+".csv")
				args = append(args, "--interval-csv", csvPath)
			}
			root := NewRootCommand()
			var out, errOut bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&errOut)
			if code := cli.Run(root, args, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			tt.check(t, out.Bytes())
			b, err := os.ReadFile(bench)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "\nBenchmarkLwbench") || !strings.Contains(string(b), "goos: ") {
				t.Errorf("benchstat file:\n%s", b)
			}
			if csvPath != "" {
				f, err := os.Open(csvPath)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				rows, err := csv.NewReader(f).ReadAll()
				if err != nil || len(rows) < 2 || rows[0][0] != "start_ms" {
					t.Errorf("interval CSV: %v, %d rows", err, len(rows))
				}
			}
		})
	}
}

// TestExternalPrefixDefaults checks that no subcommand writes into a real
// cluster's /registry unless asked to.
func TestExternalPrefixDefaults(t *testing.T) {
	ext := []string{"--endpoints", "http://127.0.0.1:2379"}
	var w *watchOptions
	if code, errOut := parse(t, newWatchCommand(func(_ *cobra.Command, o *watchOptions) error { w = o; return nil }), ext...); code != 0 {
		t.Fatal(errOut)
	}
	var p *putOptions
	if code, errOut := parse(t, newPutCommand(func(_ *cobra.Command, o *putOptions) error { p = o; return nil }), append(ext, "--value-size", "8")...); code != 0 {
		t.Fatal(errOut)
	}
	var l *listOptions
	if code, errOut := parse(t, newListCommand(func(_ *cobra.Command, o *listOptions) error { l = o; return nil }), ext...); code != 0 {
		t.Fatal(errOut)
	}
	for name, got := range map[string]string{"watch": w.load.Prefix, "put": p.load.Prefix, "list": l.load.Prefix} {
		if !strings.HasPrefix(got, "/lwbench") {
			t.Errorf("%s with --endpoints writes under %q, want /lwbench...", name, got)
		}
	}
}

// TestRunClientWatchList: --client-feature-gates WatchListClient= sets
// the model's informers' gate too, without --kube-apiserver; unset, the
// load keeps nil (watchload's default, on).
func TestRunClientWatchList(t *testing.T) {
	on, off := true, false
	tests := []struct {
		args []string
		want *bool
	}{
		{nil, nil},
		{[]string{"--client-feature-gates", "WatchListClient=false"}, &off},
		{[]string{"--client-feature-gates", "WatchListClient=true"}, &on},
	}
	for _, tt := range tests {
		var got *bool
		called := false
		code, errOut := parse(t, newRunCommand(func(_ *cobra.Command, o *runOptions) error {
			called, got = true, o.load.WatchList
			return nil
		}), tt.args...)
		if code != 0 || !called {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errOut)
		}
		if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("%v: load WatchList %v, want %v", tt.args, ptrString(got), ptrString(tt.want))
		}
	}
}

// TestRunAPIServerGates: without --kube-apiserver,
// --apiserver-feature-gates sets the model's gates: EtcdRangeStream its
// RangeStream, and WatchList=false its informers' WatchList off (the
// server refuses every watch-list, whatever client-go's gate); unset, the
// load keeps nil (watchload's defaults, kube-apiserver 1.37's).
func TestRunAPIServerGates(t *testing.T) {
	on, off := true, false
	tests := []struct {
		args            []string
		wantRangeStream *bool
		wantWatchList   *bool
	}{
		{nil, nil, nil},
		{[]string{"--apiserver-feature-gates", "EtcdRangeStream=false"}, &off, nil},
		{[]string{"--apiserver-feature-gates", "EtcdRangeStream=true"}, &on, nil},
		{[]string{"--apiserver-feature-gates", "WatchList=false"}, nil, &off},
		{[]string{"--apiserver-feature-gates", "WatchList=true"}, nil, nil},
		{[]string{"--apiserver-feature-gates", "WatchList=false,EtcdRangeStream=false", "--client-feature-gates", "WatchListClient=true"}, &off, &off},
		{[]string{"--apiserver-feature-gates", "WatchList=true", "--client-feature-gates", "WatchListClient=false"}, nil, &off},
	}
	for _, tt := range tests {
		var gotRS, gotWL *bool
		called := false
		code, errOut := parse(t, newRunCommand(func(_ *cobra.Command, o *runOptions) error {
			called, gotRS, gotWL = true, o.load.RangeStream, o.load.WatchList
			return nil
		}), tt.args...)
		if code != 0 || !called {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errOut)
		}
		if ptrString(gotRS) != ptrString(tt.wantRangeStream) || ptrString(gotWL) != ptrString(tt.wantWatchList) {
			t.Errorf("%v: load RangeStream %s, WatchList %s; want %s, %s", tt.args,
				ptrString(gotRS), ptrString(gotWL), ptrString(tt.wantRangeStream), ptrString(tt.wantWatchList))
		}
	}
}

// TestConformanceModelGates: conformance runs the model with the gates
// of the release it compares it with, unless --apiserver-feature-gates
// sets them: EtcdRangeStream off for 1.35 and 1.36, which have no such
// gate (k8s.io/apiserver/pkg/features/kube_features.go), on for 1.37.
func TestConformanceModelGates(t *testing.T) {
	on, off := true, false
	tests := []struct {
		version, gates  string
		client          *bool
		wantRangeStream *bool
		wantWatchList   *bool
	}{
		{"1.35", "", nil, &off, nil},
		{"1.36.3", "", &on, &off, &on},
		{"1.37", "", &off, &on, &off},
		{"1.37.2", "EtcdRangeStream=false", nil, &off, nil},
		{"1.36.3", "WatchList=false", &on, &off, &off},
	}
	for _, tt := range tests {
		k := &kubeOptions{version: tt.version, apiserverGates: tt.gates, servers: 1}
		if err := k.Validate(); err != nil {
			t.Fatalf("%s %q: %v", tt.version, tt.gates, err)
		}
		rs, wl := k.modelRangeStream(k.resolvedVersion), k.modelWatchList(k.resolvedVersion, tt.client)
		if ptrString(rs) != ptrString(tt.wantRangeStream) || ptrString(wl) != ptrString(tt.wantWatchList) {
			t.Errorf("kube-apiserver %s, gates %q, WatchListClient %s: model RangeStream %s, WatchList %s; want %s, %s", tt.version, tt.gates,
				ptrString(tt.client), ptrString(rs), ptrString(wl), ptrString(tt.wantRangeStream), ptrString(tt.wantWatchList))
		}
	}
}

func ptrString(b *bool) string {
	if b == nil {
		return "nil"
	}
	return onOff(*b)
}
