package report

// Table is a format-neutral table: a header and rows of the same width.
// Commands build one per result and render it as text, markdown or CSV;
// JSON output marshals the typed result instead.
type Table struct {
	Header []string   // column names
	Rows   [][]string // rows, each as wide as Header
	// Numeric marks the columns to right-align; it may be shorter than
	// Header.
	Numeric []bool
}
