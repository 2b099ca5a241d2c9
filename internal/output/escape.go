package output

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape returns s as a table, markdown or CSV cell may show it: every rune
// a terminal, a CSV reader or a markdown renderer would act on written as
// Go writes it inside a quoted string (strconv.Quote): control characters
// as \n, \r, \t, \x00, \x1b, \x7f, \u009b, other non-printable runes
// (strconv.IsPrint: bidirectional overrides, ...) as \uXXXX, a byte that
// is not UTF-8 as \xNN, and the backslash itself as \\, so that an
// escaped cell never reads like another string. Everything else,
// printable non-ASCII text included, is kept; a string with nothing to
// escape is returned as is. Etcd keys are arbitrary bytes, and so are the
// names Kubernetes' key space parses out of them.
func Escape(s string) string { return escape(s, true) }

// EscapeControl is Escape leaving backslashes alone, for one line of text
// such as an error message, whose quoted operands (%q) are escaped already.
func EscapeControl(s string) string { return escape(s, false) }

func escape(s string, backslash bool) string {
	if !needsEscape(s, backslash) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\' && backslash:
			b.WriteString(`\\`)
		case r == '\\' || strconv.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// needsEscape reports whether escape would change s: it holds a byte
// outside printable ASCII, or a backslash to escape.
func needsEscape(s string, backslash bool) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f || c == '\\' && backslash {
			return true
		}
	}
	return false
}

// escapeTable returns a copy of t with Escape applied to the header and
// every cell.
func escapeTable(t Table) Table {
	e := t
	e.Header = escapeRow(t.Header)
	e.Rows = make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		e.Rows[i] = escapeRow(r)
	}
	return e
}

func escapeRow(r []string) []string {
	out := make([]string, len(r))
	for i, s := range r {
		out[i] = Escape(s)
	}
	return out
}
