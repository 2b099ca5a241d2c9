package command

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kubestore/etcdkit/internal/output"
)

// maxTableWidth is the widest a text table lwbench prints by default may
// be, in columns: wider ones are split (splitTable), and their
// explanations go below them as notes.
const maxTableWidth = 120

// layout is a result as a person reads it: wide holds every column (CSV,
// markdown), text the same laid out in tables of at most maxTableWidth
// columns (the default text format), and notes explain the columns below
// the tables.
type layout struct {
	wide output.Table
	text []output.Table // nil: wide, split by splitTable on keys and groups
	keys int            // leading columns of wide each split table repeats
	// groups are the indices of wide's columns that start a group of
	// columns kept in one table when it is split.
	groups []int
	notes  []string // one paragraph each, wrapped to maxTableWidth
	// textNotes come before notes in the text format only: they explain
	// text's tables (the comparison's #).
	textNotes []string
	// wideNotes come before notes in markdown only: what textNotes say
	// of text's tables, for the wide table.
	wideNotes []string
}

// write renders l in format f (v is the JSON of -w json): the text
// tables one after another, each under a blank line, then the notes; the
// wide table and the notes in markdown; the wide table alone in CSV.
func (l layout) write(w io.Writer, f output.Format, v any) error {
	switch f {
	case output.FormatJSON, output.FormatCSV:
		return output.Write(w, f, l.wide, v)
	case output.FormatMarkdown:
		if err := output.Write(w, f, l.wide, v); err != nil {
			return err
		}
		for _, n := range append(slices.Clip(l.wideNotes), l.notes...) {
			if _, err := fmt.Fprintf(w, "\n%s\n", output.EscapeControl(n)); err != nil {
				return err
			}
		}
		return nil
	}
	tables := l.text
	if tables == nil {
		tables = splitTable(l.wide, l.keys, maxTableWidth, l.groups...)
	}
	for i, t := range tables {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := output.Write(w, f, t, v); err != nil {
			return err
		}
	}
	notes := append(slices.Clip(l.textNotes), l.notes...)
	if len(notes) > 0 {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
	}
	for _, n := range notes {
		if _, err := io.WriteString(w, wrap(output.EscapeControl(n), maxTableWidth)); err != nil {
			return err
		}
	}
	return nil
}

// textWidth is the width, in columns, of t as output.Write draws a text
// table: each column as wide as its widest escaped cell, with a space
// either side, between and around "|" borders.
func textWidth(t output.Table) int {
	w := 1
	for i := range t.Header {
		w += columnWidth(t, i) + 3
	}
	return w
}

func columnWidth(t output.Table, i int) int {
	n := utf8.RuneCountInString(output.Escape(t.Header[i]))
	for _, r := range t.Rows {
		if i < len(r) {
			n = max(n, utf8.RuneCountInString(output.Escape(r[i])))
		}
	}
	return n
}

// splitTable lays t out as tables of at most width columns: each holds
// the first keys columns, which name the row, then as many of the other
// columns, in order, as fit. groups are the indices of the columns that
// start a group kept in one table (the probe's p99 and max, ...): a table
// ends only before one of them, or anywhere when there is none. A group
// wider than width has a table of its own. A table that fits is returned
// whole.
func splitTable(t output.Table, keys int, width int, groups ...int) []output.Table {
	if textWidth(t) <= width || keys >= len(t.Header) {
		return []output.Table{t}
	}
	keyWidth := 1
	for i := range keys {
		keyWidth += columnWidth(t, i) + 3
	}
	// Each group's columns, in order.
	var spans [][]int
	for i := keys; i < len(t.Header); i++ {
		if len(spans) == 0 || len(groups) == 0 || slices.Contains(groups, i) {
			spans = append(spans, nil)
		}
		spans[len(spans)-1] = append(spans[len(spans)-1], i)
	}
	var parts [][]int
	var cols []int
	used := keyWidth
	for _, span := range spans {
		sw := 0
		for _, i := range span {
			sw += columnWidth(t, i) + 3
		}
		if len(cols) > 0 && used+sw > width {
			parts = append(parts, cols)
			cols, used = nil, keyWidth
		}
		cols = append(cols, span...)
		used += sw
	}
	parts = append(parts, cols)
	var out []output.Table
	for _, cols := range parts {
		idx := make([]int, 0, keys+len(cols))
		for i := range keys {
			idx = append(idx, i)
		}
		idx = append(idx, cols...)
		out = append(out, pick(t, idx))
	}
	return out
}

// pick returns the columns idx of t, in that order.
func pick(t output.Table, idx []int) output.Table {
	var p output.Table
	for _, i := range idx {
		p.Header = append(p.Header, t.Header[i])
		p.Numeric = append(p.Numeric, i < len(t.Numeric) && t.Numeric[i])
	}
	for _, r := range t.Rows {
		row := make([]string, len(idx))
		for j, i := range idx {
			if i < len(r) {
				row[j] = r[i]
			}
		}
		p.Rows = append(p.Rows, row)
	}
	return p
}

// wrap breaks s into lines of at most width columns at spaces (a word
// longer than width stands on a line of its own), each ending in a
// newline.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(s) {
		wl := utf8.RuneCountInString(word)
		if n > 0 && n+1+wl > width {
			b.WriteString("\n")
			n = 0
		}
		if n > 0 {
			b.WriteString(" ")
			n++
		}
		b.WriteString(word)
		n += wl
	}
	b.WriteString("\n")
	return b.String()
}
