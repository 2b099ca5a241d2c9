package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChurnPhase(t *testing.T) {
	for _, tc := range []struct {
		phase string
		want  bool
	}{
		{"seed", false},
		{"seed after compaction 1", false},
		{"sync", false},
		{"before", false},
		{"steady", true},
		{"steady after compaction 2", true},
		{"defrag", true},
		{"restart kube-apiserver after compaction 3", true},
		{"after restart", true},
		{"drain after compaction 4", false},
		{"stop", false},
	} {
		if got := churnPhase(tc.phase); got != tc.want {
			t.Errorf("churnPhase(%q): got %v, want %v", tc.phase, got, tc.want)
		}
	}
}

// TestRenderFailedCase: a case whose lwbench failed without a result is
// in the summary as failed, with the end of its log; a case never run is
// left out.
func TestRenderFailedCase(t *testing.T) {
	dir := t.TempDir()
	meta := `{"case":"quick-20","command":"lwbench run --nodes 20","exitCode":1,"logTail":"Error: the control plane did not start"}`
	if err := os.WriteFile(filepath.Join(dir, "quick-20.meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	md, err := render(options{out: dir}, cases(true))
	if err != nil {
		t.Fatal(err)
	}
	s := string(md)
	if !strings.Contains(s, "| quick-20 | - | - | failed: no result (exit 1): Error: the control plane did not start") {
		t.Errorf("got\n%s\nwant quick-20 failed with its log", s)
	}
	if strings.Contains(s, "quick-defrag") {
		t.Errorf("got\n%s\nwant no section of a case that never ran", s)
	}
}
