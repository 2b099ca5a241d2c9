// Package output renders command results in the formats of the -w,
// --write-out flag: an aligned text table, a markdown table, CSV, or JSON.
// Every command builds one Table from its typed result and hands both to
// Write; JSON marshals the typed result itself, never the table.
package output

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Format is a value of -w, --write-out.
type Format string

// The formats.
const (
	FormatTable    Format = "table"
	FormatMarkdown Format = "markdown"
	FormatCSV      Format = "csv"
	FormatJSON     Format = "json"
)

// AllFormats lists every format, in the order help text shows them.
var AllFormats = []Format{FormatTable, FormatMarkdown, FormatCSV, FormatJSON}

// FormatValue is a pflag.Value that accepts only the given formats.
type FormatValue struct {
	target  *Format
	allowed []Format
}

// NewFormatValue sets *target to def and returns a flag value that accepts
// the allowed formats (AllFormats when none are given).
func NewFormatValue(target *Format, def Format, allowed ...Format) *FormatValue {
	if len(allowed) == 0 {
		allowed = AllFormats
	}
	*target = def
	return &FormatValue{target: target, allowed: allowed}
}

// String implements pflag.Value.
func (v *FormatValue) String() string { return string(*v.target) }

// Type implements pflag.Value.
func (v *FormatValue) Type() string { return "format" }

// Set implements pflag.Value; it rejects a format outside the allowed list
// with a message listing them.
func (v *FormatValue) Set(s string) error {
	for _, f := range v.allowed {
		if string(f) == s {
			*v.target = f
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", s, v.Names())
}

// Names returns the allowed formats joined with "|".
func (v *FormatValue) Names() string {
	names := make([]string, len(v.allowed))
	for i, f := range v.allowed {
		names[i] = string(f)
	}
	return strings.Join(names, "|")
}

// Allowed returns the allowed formats, for shell completion.
func (v *FormatValue) Allowed() []string { return strings.Split(v.Names(), "|") }

// Table is a format-neutral table: a header and rows of the same width.
// Each command builds one from its typed result (etcdctl's makeXTable)
// and Write renders it as text, markdown or CSV; JSON output marshals
// the typed result instead.
type Table struct {
	Header []string   // column names
	Rows   [][]string // rows, each as wide as Header
	// Numeric marks the columns to right-align; it may be shorter than
	// Header.
	Numeric []bool
}

// Write renders t (or, for FormatJSON, the indented JSON of v) to w.
// Table, markdown and CSV cells are escaped (Escape) and kept as they are,
// leading spaces included; JSON escapes control characters itself.
func Write(w io.Writer, f Format, t Table, v any) error {
	if f != FormatJSON {
		t = escapeTable(t)
	}
	switch f {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case FormatCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(t.Header); err != nil {
			return err
		}
		if err := cw.WriteAll(t.Rows); err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	case FormatTable, FormatMarkdown:
		align := make([]tw.Align, len(t.Header))
		for i := range align {
			align[i] = tw.AlignLeft
			if i < len(t.Numeric) && t.Numeric[i] {
				align[i] = tw.AlignRight
			}
		}
		opts := []tablewriter.Option{
			tablewriter.WithHeaderAutoFormat(tw.Off),
			tablewriter.WithHeaderAlignment(tw.AlignLeft),
			tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
			tablewriter.WithRowAutoWrap(tw.WrapNone),
			// A cell's leading spaces are kept: a table indents the rows
			// that detail the row above them.
			tablewriter.WithTrimSpace(tw.Off),
		}
		if f == FormatMarkdown {
			opts = append(opts, tablewriter.WithRenderer(renderer.NewMarkdown()))
		} else {
			// ASCII borders survive logs, pagers and every terminal.
			opts = append(opts, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})))
		}
		tbl := tablewriter.NewTable(w, opts...)
		tbl.Header(toAny(t.Header)...)
		for _, r := range t.Rows {
			if err := tbl.Append(toAny(r)...); err != nil {
				return err
			}
		}
		return tbl.Render()
	}
	return fmt.Errorf("output format %q not supported here", f)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// PrepareDir creates dir and its parents if they are missing and checks
// that a file can be created in it, so that a command finds an unusable
// output directory before its run rather than after. The error names dir.
func PrepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// PrepareFile checks, before a run, that the file path can be written at
// its end: its directory is created if missing (PrepareDir), and path
// must not be a directory nor an existing file that cannot be opened for
// writing. It neither creates nor truncates path. The error names path.
func PrepareFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case err == nil && !fi.Mode().IsRegular():
		return nil // a device or a pipe: opening it could block
	case err == nil:
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		return f.Close()
	}
	return PrepareDir(filepath.Dir(path))
}
