package main

import (
	"strings"
	"testing"
)

// TestTable checks the markdown table: a header, the alignment row (the
// first column left, the others right) and short rows padded to the
// header's width.
func TestTable(t *testing.T) {
	var b strings.Builder
	table(&b, []string{"fault", "member 0", "member 1"}, [][]string{{"kill-leader, pinned", "m0*: 1.0 / 2.0"}, {"pause", "a", "b"}})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("table has %d lines, want 4:\n%s", len(lines), b.String())
	}
	if !strings.HasPrefix(lines[0], "| fault") || !strings.Contains(lines[1], ":|") {
		t.Errorf("header %q and alignment %q; want the columns and right-aligned figures", lines[0], lines[1])
	}
	for i, l := range lines {
		if got := strings.Count(l, "|"); got != 4 {
			t.Errorf("line %d %q has %d cell borders, want 4", i, l, got)
		}
	}
}
