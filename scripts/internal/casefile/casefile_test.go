package casefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunLoad runs a stand-in lwbench that succeeds and one that fails,
// and loads what each left: the result and meta, the failure's exit code
// and log tail, and nothing for a case never run. ETCD_* stay out of the
// child's environment.
func TestRunLoad(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "lwbench")
	script := "#!/bin/sh\nif [ \"$1\" = fail ]; then echo 'Error: the control plane did not start' >&2; exit 3; fi\necho \"{\\\"etcd\\\":\\\"$ETCD_NAME\\\"}\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ETCD_NAME", "leaked")
	m := Run(bin, dir, "ok", "abc1234", []string{"run", "--nodes", "10"})
	if m.ExitCode != 0 || m.Command != "lwbench run --nodes 10 -w json" || m.Commit != "abc1234" || m.LogTail != "" {
		t.Errorf("ok case meta = %+v", m)
	}
	meta, res, err := Load(dir, "ok")
	if err != nil || meta == nil || meta.Case != "ok" || strings.TrimSpace(string(res)) != `{"etcd":""}` {
		t.Errorf("ok case loaded: %+v, %q, %v; want its result without ETCD_NAME", meta, res, err)
	}
	Run(bin, dir, "failed", "", []string{"fail"})
	meta, res, err = Load(dir, "failed")
	if meta == nil || meta.ExitCode != 3 || res != nil || err == nil || !strings.Contains(err.Error(), "no result (exit 3): Error: the control plane did not start") {
		t.Errorf("failed case loaded: %+v, %q, %v", meta, res, err)
	}
	if meta, res, err := Load(dir, "never"); meta != nil || res != nil || err != nil {
		t.Errorf("a case never run loaded: %+v, %q, %v", meta, res, err)
	}
}
