package command_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// fixtureVersions are the etcd minor versions whose real servers wrote
// the committed fixtures (scripts/make-inspect-fixtures.sh).
var fixtureVersions = []string{"3.4", "3.5", "3.6", "3.7"}

func fixture(v string) string {
	return filepath.Join("..", "..", "..", "testdata", "fixtures", "etcd-"+v+".db")
}

// goldenCases run on every fixture; each gets a table and a JSON golden.
var goldenCases = []struct {
	name string
	args func(file string) []string
}{
	{"status", func(f string) []string { return []string{"status", f} }},
	{"usage", func(f string) []string { return []string{"usage", f} }},
	{"usage-namespace", func(f string) []string { return []string{"usage", f, "--by", "namespace"} }},
	{"usage-group-top3", func(f string) []string { return []string{"usage", f, "--by", "group", "--top", "3"} }},
	{"keys", func(f string) []string { return []string{"keys", f} }},
	{"keys-pods-default", func(f string) []string { return []string{"keys", f, "--resource", "pods", "-n", "default"} }},
	{"keys-prefix-secrets", func(f string) []string { return []string{"keys", f, "--prefix", "/registry/secrets/"} }},
	{"get-pod", func(f string) []string { return []string{"get", f, "/registry/pods/default/web-0"} }},
	{"get-secret", func(f string) []string { return []string{"get", f, "/registry/secrets/default/db-password"} }},
	{"get-encrypted", func(f string) []string { return []string{"get", f, "/registry/secrets/kube-system/bootstrap-token"} }},
	{"get-custom-resource", func(f string) []string {
		return []string{"get", f, "/registry/stable.example.com/crontabs/default/nightly", "-o", "json"}
	}},
	{"get-crd", func(f string) []string {
		return []string{"get", f, "/registry/apiextensions.k8s.io/customresourcedefinitions/crontabs.stable.example.com"}
	}},
	{"history-pod", func(f string) []string { return []string{"history", f, "/registry/pods/default/web-1"} }},
	{"compaction", func(f string) []string { return []string{"compaction", f, "--at", "27"} }},
	{"leases", func(f string) []string { return []string{"leases", f} }},
	{"meta", func(f string) []string { return []string{"meta", f} }},
	{"diff-from-3.4", func(f string) []string { return []string{"diff", fixture("3.4"), f} }},
	{"space", func(f string) []string { return []string{"space", f} }},
	{"space-quota-64k", func(f string) []string { return []string{"space", f, "--quota", "65536"} }},
}

// TestGolden runs every command on the fixture of every etcd version, as
// a table and as JSON (get: its default YAML and -w json), compares the
// output with testdata/golden/<version>/, and checks that no fixture
// changed.
func TestGolden(t *testing.T) {
	sums := map[string][32]byte{}
	for _, v := range fixtureVersions {
		sums[v] = fileSum(t, fixture(v))
	}
	for _, v := range fixtureVersions {
		for _, c := range goldenCases {
			for _, format := range []string{"table", "json"} {
				name := c.name + "." + format
				if format == "table" && strings.HasPrefix(c.name, "get") {
					name = c.name + ".object" // get prints the object unless -w is given
				}
				t.Run(v+"/"+name, func(t *testing.T) {
					args := c.args(fixture(v))
					if format == "json" || !strings.HasPrefix(c.name, "get") {
						args = append(args, "-w", format)
					}
					out, stderr, code := run(t, args...)
					if code != 0 {
						t.Fatalf("etcdinspect %v: exit %d: %s", args, code, stderr)
					}
					compareGolden(t, filepath.Join("testdata", "golden", v, name+".golden"), out)
				})
			}
		}
	}
	for _, v := range fixtureVersions {
		if fileSum(t, fixture(v)) != sums[v] {
			t.Errorf("fixture %s changed", fixture(v))
		}
	}
}

// TestGoldenFormats renders one result in every -w format.
func TestGoldenFormats(t *testing.T) {
	for _, format := range []string{"markdown", "csv"} {
		out, stderr, code := run(t, "usage", fixture("3.7"), "-w", format)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		compareGolden(t, filepath.Join("testdata", "golden", "3.7", "usage."+format+".golden"), out)
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, []byte(got)) {
		t.Errorf("output differs from %s (run with -update after checking the change):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
