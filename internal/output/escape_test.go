package output

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	tests := []struct {
		in, want, wantControl string
	}{
		{"/registry/pods/default/web-0", "/registry/pods/default/web-0", "/registry/pods/default/web-0"},
		{"naïve 日本", "naïve 日本", "naïve 日本"},
		{"a\x1b[31mred", `a\x1b[31mred`, `a\x1b[31mred`},
		{"a\r\nb\tc\x00d\x7f", `a\r\nb\tc\x00d\x7f`, `a\r\nb\tc\x00d\x7f`},
		{"bad \xff\xfe utf-8", `bad \xff\xfe utf-8`, `bad \xff\xfe utf-8`},
		{"c1 \u009b2J, bidi \u202e", `c1 \u009b2J, bidi \u202e`, `c1 \u009b2J, bidi \u202e`},
		{`back\slash "quoted"`, `back\\slash "quoted"`, `back\slash "quoted"`},
	}
	for _, tt := range tests {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := EscapeControl(tt.in); got != tt.wantControl {
			t.Errorf("EscapeControl(%q) = %q, want %q", tt.in, got, tt.wantControl)
		}
	}
}

// TestWriteEscapesEveryCell renders a table with control characters in the
// header and the cells in every format: no raw control byte may reach the
// output but the line ends, and JSON keeps its own escaping.
func TestWriteEscapesEveryCell(t *testing.T) {
	evil := "k\x1b]0;owned\x07\r\n\x00\xff"
	tbl := Table{Header: []string{"key", "h\x1b"}, Rows: [][]string{{evil, "1"}}}
	for _, f := range AllFormats {
		var b bytes.Buffer
		if err := Write(&b, f, tbl, map[string]string{"key": evil}); err != nil {
			t.Fatal(err)
		}
		for i, c := range b.Bytes() {
			if c < ' ' && c != '\n' || c == 0x7f || c == 0xff {
				t.Errorf("%s: raw byte %#x at %d in %q", f, c, i, b.String())
				break
			}
		}
		if lines := strings.Count(b.String(), "\n"); f == FormatCSV && lines != 2 {
			t.Errorf("csv: %d lines, want 2: %q", lines, b.String())
		}
		if f != FormatJSON && !strings.Contains(b.String(), `k\x1b]0;owned\a\r\n\x00\xff`) {
			t.Errorf("%s: the escaped key is missing: %q", f, b.String())
		}
	}
	if tbl.Rows[0][0] != evil {
		t.Error("Write modified the caller's table")
	}
}

// FuzzEscape checks that Escape leaves no control character or invalid
// UTF-8 and reads back with strconv.Unquote, so that two keys never print
// alike.
func FuzzEscape(f *testing.F) {
	f.Add("a\x1b[31m\r\n")
	f.Add("\xff\\x")
	f.Add("日本\u202e")
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		for _, r := range e {
			if !strconv.IsPrint(r) {
				t.Fatalf("Escape(%q) = %q keeps %U", s, e, r)
			}
		}
		back, err := strconv.Unquote(`"` + strings.ReplaceAll(e, `"`, `\"`) + `"`)
		if err != nil || back != s {
			t.Fatalf("Escape(%q) = %q reads back as %q, %v", s, e, back, err)
		}
		if c := EscapeControl(s); strings.ContainsFunc(c, func(r rune) bool { return !strconv.IsPrint(r) }) {
			t.Fatalf("EscapeControl(%q) = %q keeps a control character", s, c)
		}
	})
}
