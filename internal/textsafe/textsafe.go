// Package textsafe makes text from outside safe to show to a person: a vendor's
// error message, workflow IDs, an activity's arguments. Written raw to an
// operator's terminal, an escape sequence in them could retitle the terminal,
// erase lines or reorder what is shown; on a web page a bidirectional override
// could make one key read as another. The CLI (cmd/idemgate) and the console
// (package console) show every such text through Escape, and JSON through
// JSONSafe: one set of rules for both.
package textsafe

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Unsafe reports whether r must not be shown raw: C0 controls, DEL, C1 controls,
// and the marks and overrides that reorder bidirectional text (and line/paragraph
// separators).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Escape returns s with every unsafe character written as a Go escape (\x1b,
// \u202e) and every byte that is not UTF-8 as \xNN. Text keeps its tabs and
// newlines; a table cell (inCell) escapes them too, so a value cannot break the
// table's rows or columns.
func Escape(s string, inCell bool) string {
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
		case Unsafe(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// JSONSafe rewrites JSON produced by encoding/json so that it carries no unsafe
// character raw: encoding/json escapes C0 controls, but not DEL, C1 controls or
// bidirectional overrides. Outside strings JSON is plain ASCII, so every such
// character is inside a string, where \uXXXX means the same character.
func JSONSafe(js []byte) []byte {
	var b bytes.Buffer
	for i := 0; i < len(js); {
		r, n := utf8.DecodeRune(js[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString(`\ufffd`) // a byte that is not UTF-8, in a json.RawMessage
		} else if Unsafe(r) && r >= 0x20 {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(js[i : i+n])
		}
		i += n
	}
	return b.Bytes()
}
