package command

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dustin/go-humanize"

	"github.com/kubestore/etcdkit/internal/output"
)

// maxTableColumns is the widest line a table or markdown output may have:
// what a terminal shows without wrapping. A wider table is printed in the
// vertical layout (verticalTable).
const maxTableColumns = 120

// bytes formats a size for the table: binary IEC units for a person
// (table and markdown: "1.5 GiB", humanize.IBytes), the exact number of
// bytes for a program (CSV). JSON marshals the typed result, whose sizes
// are bytes.
func (o *globalOptions) bytes(n int64) string {
	if o.human() {
		if n < 0 {
			return "-" + humanize.IBytes(uint64(-n))
		}
		return humanize.IBytes(uint64(n))
	}
	return strconv.FormatInt(n, 10)
}

// human reports whether the output is for a person to read: a table or
// markdown, not CSV or JSON.
func (o *globalOptions) human() bool {
	return o.format == output.FormatTable || o.format == output.FormatMarkdown
}

// sizeHeader names a size column: short for a person (the cells carry
// their unit), with "bytes" for a program reading CSV (the cells are
// bytes), as before units were shown.
func (o *globalOptions) sizeHeader(human, csv string) string {
	if o.format == output.FormatCSV {
		return csv
	}
	return human
}

// write prints t (or the JSON of v) in the -w format after checking that
// ctx has not ended: a command interrupted after its scan prints nothing
// and exits 130 (cli.RunContext). Table and markdown get notes below the
// table, escaped as cells are (output.Escape) and wrapped at
// maxTableColumns; a table wider than that has its long values moved
// below (a field/value table: valuesBelow) or is printed in the vertical
// layout (verticalTable).
func (o *globalOptions) write(ctx context.Context, out io.Writer, t output.Table, notes []string, v any) error {
	return o.writeTables(ctx, out, t, nil, notes, v)
}

// writeTables is write for a result a person reads as several tables:
// table and markdown print tables (t when there are none) one after
// another, separated by an empty line, each fitted to maxTableColumns as
// write fits t, then the notes; CSV prints t, the one table holding
// every figure, and JSON v.
func (o *globalOptions) writeTables(ctx context.Context, out io.Writer, t output.Table, tables []output.Table, notes []string, v any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("before printing: %w", err)
	}
	if !o.human() {
		return output.Write(out, o.format, t, v)
	}
	if tables == nil {
		tables = []output.Table{t}
	}
	var b bytes.Buffer
	var below []string
	for i, t := range tables {
		if i > 0 {
			b.WriteString("\n")
		}
		long, err := o.writeFitted(&b, t, v)
		if err != nil {
			return err
		}
		below = append(below, long...)
	}
	for _, n := range append(below, notes...) {
		if o.format == output.FormatMarkdown {
			b.WriteString("\n")
		}
		b.WriteString(wrap(output.Escape(n), maxTableColumns))
	}
	_, err := out.Write(b.Bytes())
	return err
}

// writeFitted renders t to b in a human format within maxTableColumns
// where it can: a wider field/value table has its long values moved
// below it (returned as notes), any other is printed in the vertical
// layout.
func (o *globalOptions) writeFitted(b *bytes.Buffer, t output.Table, v any) (notes []string, err error) {
	start := b.Len()
	if err := output.Write(b, o.format, t, v); err != nil {
		return nil, err
	}
	if widest(b.String()[start:]) <= maxTableColumns {
		return nil, nil
	}
	if len(t.Header) == 2 {
		t, notes = valuesBelow(t)
	} else {
		t = verticalTable(t)
	}
	b.Truncate(start)
	return notes, output.Write(b, o.format, t, v)
}

// verticalTable turns each row of t into a block of "column | value"
// rows, blocks separated by an empty row, so that a wide table reads down
// instead of across (psql's expanded display). Empty cells are left out.
func verticalTable(t output.Table) output.Table {
	v := output.Table{Header: []string{"field", "value"}}
	for n, r := range t.Rows {
		if n > 0 {
			v.Rows = append(v.Rows, []string{"", ""})
		}
		for i := 0; i < len(r) && i < len(t.Header); i++ {
			if r[i] != "" {
				v.Rows = append(v.Rows, []string{t.Header[i], r[i]})
			}
		}
	}
	return v
}

// maxValueColumns is the longest value valuesBelow leaves in a
// field/value table.
const maxValueColumns = 60

// valuesBelow moves the values of a field/value table longer than
// maxValueColumns below it: the cell says "(below)" and a note
// "field: value" carries the value.
func valuesBelow(t output.Table) (output.Table, []string) {
	var notes []string
	out := t
	out.Rows = make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		out.Rows[i] = r
		if len(r) == 2 && utf8.RuneCountInString(output.Escape(r[1])) > maxValueColumns {
			out.Rows[i] = []string{r[0], "(below)"}
			notes = append(notes, r[0]+": "+r[1])
		}
	}
	return out, notes
}

// widest returns the length in runes of the longest line of s.
func widest(s string) int {
	m := 0
	for _, l := range strings.Split(s, "\n") {
		m = max(m, utf8.RuneCountInString(l))
	}
	return m
}

// wrap breaks s at spaces into lines of at most width runes (a word
// longer than width keeps its own line), each ended by a newline; the
// lines after the first are indented by two spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	line := 0
	for i, w := range strings.Fields(s) {
		n := utf8.RuneCountInString(w)
		switch {
		case i == 0:
		case line+1+n > width:
			b.WriteString("\n  ")
			line = 2
		default:
			b.WriteString(" ")
			line++
		}
		b.WriteString(w)
		line += n
	}
	b.WriteString("\n")
	return b.String()
}

// byteSize is a pflag.Value holding a size in bytes, given as a plain
// number of bytes or with a unit, binary (8GiB, 8Gi) or decimal (2G,
// 2GB), as humanize.ParseBytes reads it; a fraction of a byte is dropped.
type byteSize struct {
	n *int64
}

func newByteSize(n *int64, def int64) *byteSize {
	*n = def
	return &byteSize{n: n}
}

// String implements pflag.Value: the size in bytes, as help shows the
// default.
func (b *byteSize) String() string {
	if b.n == nil {
		return "0"
	}
	return strconv.FormatInt(*b.n, 10)
}

// Type implements pflag.Value.
func (b *byteSize) Type() string { return "size" }

// Set implements pflag.Value.
func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a size (bytes, or a number with a unit: 8GiB, 1.5MiB, 2G): %w", s, err)
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("%q is larger than %d bytes", s, int64(math.MaxInt64))
	}
	*b.n = int64(n)
	return nil
}
