package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Receipts carry text from outside: a vendor's error message, workflow IDs, an
// activity's arguments. Written raw to an operator's terminal, an escape sequence
// in them could retitle the terminal, erase lines or reorder what is shown. Every
// text the CLI prints goes through escape; --json through jsonSafe.

// unsafe reports whether r must not reach a terminal raw: C0 controls, DEL, C1
// controls, and the marks and overrides that reorder bidirectional text (and
// line/paragraph separators).
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// escape returns s with every unsafe character written as a Go escape (\x1b,
// \u202e) and every byte that is not UTF-8 as \xNN. Text keeps its tabs and
// newlines; a table cell (inCell) escapes them too, so a value cannot break the
// table's rows or columns.
func escape(s string, inCell bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case (r == '\n' || r == '\t') && !inCell:
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case unsafe(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

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

// jsonSafe rewrites JSON produced by encoding/json so that it carries no unsafe
// character raw: encoding/json escapes C0 controls, but not DEL, C1 controls or
// bidirectional overrides. Outside strings JSON is plain ASCII, so every such
// character is inside a string, where \uXXXX means the same character.
func jsonSafe(js []byte) []byte {
	var b bytes.Buffer
	for i := 0; i < len(js); {
		r, n := utf8.DecodeRune(js[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString(`\ufffd`) // a byte that is not UTF-8, in a json.RawMessage
		} else if unsafe(r) && r >= 0x20 {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(js[i : i+n])
		}
		i += n
	}
	return b.Bytes()
}
