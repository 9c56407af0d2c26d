package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/idemgate/idemgate/internal/textsafe"
)

// Receipts carry text from outside: a vendor's error message, workflow IDs, an
// activity's arguments. Every text the CLI prints goes through escape; --json
// through jsonSafe. The rules are internal/textsafe's, shared with the console.

// escape is textsafe.Escape: unsafe characters written as Go escapes; a table
// cell (inCell) escapes tabs and newlines too.
func escape(s string, inCell bool) string { return textsafe.Escape(s, inCell) }

// cell is escape for a table cell: "-" when empty.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return escape(s, true)
}

// row writes one table row: the cells escaped, joined by tabs.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// printf prints to stdout with the text escaped.
func (c *cli) printf(format string, a ...any) {
	fmt.Fprint(c.stdout, escape(fmt.Sprintf(format, a...), false))
}

// escapeWriter escapes what is written through it (the flag package's messages
// quote what the user typed).
type escapeWriter struct{ w io.Writer }

func (e escapeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, escape(string(p), false)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// jsonSafe is textsafe.JSONSafe: JSON with no unsafe character raw.
func jsonSafe(js []byte) []byte { return textsafe.JSONSafe(js) }
