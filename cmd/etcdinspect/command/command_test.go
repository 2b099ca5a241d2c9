package command_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// run executes etcdinspect in-process and returns stdout, stderr and the
// exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := command.NewRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, args, &errOut)
	return out.String(), errOut.String(), code
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func makeDB(t *testing.T) string {
	return etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
		codec, err := keyspace.NewCodec()
		if err != nil {
			t.Fatal(err)
		}
		gen := keyspace.NewGenerator(2)
		for i := range 6 {
			b, err := codec.Encode(gen.Pod("default", fmt.Sprintf("p%d", i), 0))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Put(ctx, fmt.Sprintf("/registry/pods/default/p%d", i), string(b)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Put(ctx, "/registry/minions/node-1", "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Delete(ctx, "/registry/pods/default/p5"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestUsageAndStatusJSON(t *testing.T) {
	path := makeDB(t)
	before := fileSum(t, path)

	out, stderr, code := run(t, "usage", path, "-w", "json")
	if code != 0 {
		t.Fatalf("usage exit %d: %s", code, stderr)
	}
	var usage struct {
		SchemaVersion int `json:"schemaVersion"`
		Rows          []struct {
			Group, Resource, Path string
			Objects, Revisions    int64
			Tombstones            int64
		} `json:"rows"`
		Total struct{ Objects, Revisions, Tombstones int64 } `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &usage); err != nil {
		t.Fatalf("usage JSON: %v\n%s", err, out)
	}
	want := map[string][3]int64{"pods": {5, 7, 1}, "nodes": {1, 1, 0}}
	for _, r := range usage.Rows {
		w, ok := want[r.Resource]
		if !ok {
			t.Errorf("unexpected row %+v", r)
			continue
		}
		if got := [3]int64{r.Objects, r.Revisions, r.Tombstones}; got != w {
			t.Errorf("%s: objects/revisions/tombstones %v, want %v", r.Resource, got, w)
		}
		delete(want, r.Resource)
	}
	if len(want) != 0 || usage.SchemaVersion != 1 || usage.Total.Objects != 6 {
		t.Errorf("missing rows %v, schema %d, total %+v", want, usage.SchemaVersion, usage.Total)
	}

	out, stderr, code = run(t, "status", path, "-w", "json")
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, stderr)
	}
	var st struct {
		Revision, LiveKeys, Revisions, Tombstones int64
		SnapshotTrailer                           string
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Revision != 9 || st.LiveKeys != 6 || st.Revisions != 8 || st.Tombstones != 1 || st.SnapshotTrailer != "absent" {
		t.Errorf("status %+v: want revision 9, 6 live keys, 8 revisions, 1 tombstone, trailer absent", st)
	}

	out, _, code = run(t, "usage", path, "--by", "namespace", "-w", "csv")
	if code != 0 || !strings.HasPrefix(out, "namespace,objects,live bytes") || !strings.Contains(out, "\ndefault,5,") {
		t.Errorf("usage --by namespace csv (exit %d):\n%s", code, out)
	}
	if fileSum(t, path) != before {
		t.Fatal("etcdinspect modified the file")
	}
}

func TestBadInputExitsWithOneLine(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, bytes.Repeat([]byte("not a database "), 1000), 0o600)
	truncated := filepath.Join(dir, "truncated.db")
	full, err := os.ReadFile(makeDB(t))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(truncated, full[:len(full)/3], 0o600)

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantMsg  string
	}{
		{"empty", []string{"status", empty}, 1, "empty"},
		{"garbage", []string{"status", garbage}, 1, "not a bbolt database"},
		{"truncated", []string{"status", truncated}, 1, "truncated"},
		{"missing", []string{"status", filepath.Join(dir, "missing.db")}, 1, "no such file"},
		{"no argument", []string{"status"}, 2, "accepts 1 arg"},
		{"bad format", []string{"status", empty, "-w", "yaml"}, 2, "write-out"},
		{"bad --by", []string{"usage", empty, "--by", "kind"}, 2, "--by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sum [32]byte
			if len(tt.args) > 1 {
				if _, err := os.Stat(tt.args[1]); err == nil {
					sum = fileSum(t, tt.args[1])
				}
			}
			out, stderr, code := run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.wantMsg) || strings.Contains(stderr, "goroutine") {
				t.Errorf("stderr %q: want one line mentioning %q", stderr, tt.wantMsg)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if sum != ([32]byte{}) && fileSum(t, tt.args[1]) != sum {
				t.Error("file changed")
			}
		})
	}
}
