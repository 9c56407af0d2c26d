package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/store"
)

// hostile is text a vendor or a workflow could put into a receipt: it would
// retitle the terminal, clear the screen, return the cursor, open an 8-bit CSI,
// reverse the line's direction and erase a character. (Bytes that are not UTF-8
// cannot be stored in PostgreSQL's text; TestEscape covers them.)
const hostile = "\x1b]0;pwned\x07\x1b[2J\r\u009b31m\u202egnp.exe\x7f\u2066x"

// rawControls returns what in out would reach the terminal raw: control
// characters other than newline and tab, DEL, C1 controls, bidi overrides and
// isolates, and bytes that are not UTF-8.
func rawControls(out string) []string {
	var bad []string
	for i, r := range out {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD"):
			bad = append(bad, "a byte that is not UTF-8")
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			bad = append(bad, fmt.Sprintf("%U", r))
		}
	}
	return bad
}

// Every text the CLI prints escapes control characters from receipts, records,
// pauses and arguments; table cells also escape tabs and newlines; --json carries
// no raw C1 or bidi character, and still decodes to the original text.
func TestTextOutputEscapesControls(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		now := time.Now()
		key := "key-" + hostile
		wf := "wf-" + hostile
		errText := "vendor said:\n\t" + hostile
		args := []byte(`["` + "\u009b\u202e\x7f" + `", "\u001b[31m"]`)
		c := store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Args: args, Owner: "o",
			Lease: now.Add(-time.Minute - store.LeaseMargin), Window: time.Hour, WorkflowID: wf, RunID: "run-" + hostile, Attempt: 1,
			Now: now.Add(-2*time.Minute - store.LeaseMargin)}
		if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("Begin: %v %v", o, err)
		}
		tr := store.Transition{Key: key, Owner: "o", Now: now.Add(-time.Minute), Window: time.Hour,
			Receipt: store.Receipt{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", WorkflowID: wf,
				RunID: c.RunID, Attempt: 1, Decision: store.DecisionUnknown, Error: errText}}
		if err := st.Abandon(ctx, tr); err != nil {
			t.Fatal(err)
		}

		check := func(r result, what string) {
			t.Helper()
			if bad := rawControls(r.stdout + r.stderr); len(bad) > 0 {
				t.Errorf("%s prints %d raw control(s), first %s:\n%q", what, len(bad), bad[0], r.stdout+r.stderr)
			}
		}
		table := ok(t, "receipts", "--store", b.spec)
		check(table, "receipts")
		if !strings.Contains(table.stdout, `wf-\x1b]0;pwned\x07\x1b[2J\r\u009b31m\u202egnp.exe\x7f\u2066x`) ||
			!strings.Contains(table.stdout, `vendor said: \t\x1b]0;pwned`) {
			t.Errorf("receipts does not show the escaped text:\n%s", table.stdout)
		}
		if lines := strings.Count(table.stdout, "\n"); lines != 3 {
			t.Errorf("receipts: %d lines, want a header and 2 rows:\n%s", lines, table.stdout)
		}
		js := ok(t, "receipts", "--store", b.spec, "--json")
		check(js, "receipts --json")
		rs := decodeJSON[[]receiptJSON](t, js)
		if len(rs) != 2 || rs[1].Error != errText || rs[1].WorkflowID != wf {
			t.Errorf("receipts --json does not decode to the stored text: %+v", rs)
		}
		pend := ok(t, "pending", "--store", b.spec)
		check(pend, "pending")
		if !strings.Contains(pend.stdout, `ChargeCard(["\u009b\u202e\x7f", "\u001b[31m"])`) {
			t.Errorf("pending does not show the escaped call:\n%s", pend.stdout)
		}
		pjs := ok(t, "pending", "--store", b.spec, "--json")
		check(pjs, "pending --json")
		rec := decodeJSON[[]recordJSON](t, pjs)
		var got, want []string
		if len(rec) != 1 || rec[0].Key != key || json.Unmarshal(rec[0].Args, &got) != nil || json.Unmarshal(args, &want) != nil ||
			!slices.Equal(got, want) {
			t.Errorf("pending --json does not decode to the stored record: %+v", rec)
		}

		res := ok(t, "resolve", key, "--store", b.spec, "--not-sent", "--reason", "checked "+hostile, "--actor", "op"+hostile)
		check(res, "resolve")
		again := idem(t, "resolve", key, "--store", b.spec, "--not-sent", "--reason", "again")
		check(again, "resolve's refusal")
		if again.code != exitFail || !strings.Contains(again.stderr, `is already released`) {
			t.Errorf("second resolve: %s", again)
		}
		check(ok(t, "receipts", "--store", b.spec), "receipts after resolve")

		act := "Charge" + hostile
		check(ok(t, "pause", "--store", b.spec, "--activity", act, "--reason", hostile, "--actor", hostile), "pause")
		check(ok(t, "pauses", "--store", b.spec), "pauses")
		check(ok(t, "pauses", "--store", b.spec, "--json"), "pauses --json")
		check(ok(t, "resume", "--store", b.spec, "--activity", act), "resume")
		check(ok(t, "census", "Get"+hostile, "Charge"+hostile), "census")
		check(idem(t, "census", "--strict", "Frob"+hostile), "census --strict")
		check(idem(t, "receipts", "--store", b.spec, "--"+hostile), "an unknown flag")
	})
}

func TestEscape(t *testing.T) {
	cases := []struct{ in, text, cell string }{
		{"plain ünïcode → ok", "plain ünïcode → ok", "plain ünïcode → ok"},
		{"a\tb\nc", "a\tb\nc", `a\tb\nc`},
		{"\x1b[2J\r\x00\x7f", `\x1b[2J\r\x00\x7f`, `\x1b[2J\r\x00\x7f`},
		{"\u0085\u009b\u202e\u2066\u200f\u2028", `\u0085\u009b\u202e\u2066\u200f\u2028`, `\u0085\u009b\u202e\u2066\u200f\u2028`},
		{"bad \xff\x9b byte", `bad \xff\x9b byte`, `bad \xff\x9b byte`},
		{"", "", "-"},
	}
	for _, c := range cases {
		if got := escape(c.in, false); got != c.text {
			t.Errorf("escape(%q) = %q, want %q", c.in, got, c.text)
		}
		if got := cell(c.in); got != c.cell {
			t.Errorf("cell(%q) = %q, want %q", c.in, got, c.cell)
		}
	}
	if got := string(jsonSafe([]byte(`{"a":"x` + "\u009b\u202e\x7f\xff" + `y"}`))); got != `{"a":"x\u009b\u202e\u007f\ufffdy"}` {
		t.Errorf("jsonSafe = %q", got)
	}
}

// No command prints the store's password: not --help's default from
// IDEMGATE_STORE, not an open error, not the refusal of a DSN-like path.
func TestStorePasswordNeverPrinted(t *testing.T) {
	const pw = "Zq7-s3cret"
	t.Setenv("IDEMGATE_STORE", "postgres://app:"+pw+"@127.0.0.1:1/idemgate?connect_timeout=2")
	if r := idem(t, "receipts", "--help"); r.code != exitOK || strings.Contains(r.stderr, pw) || !strings.Contains(r.stderr, "app:xxxxx@") {
		t.Errorf("--help: %s", r)
	}
	for _, spec := range []string{"", "host=127.0.0.1 port=1 user=app password=" + pw + " connect_timeout=2",
		"postgress://app:" + pw + "@db/idemgate", "host=db password=" + pw + " junk"} {
		args := []string{"pending"}
		if spec != "" {
			args = append(args, "--store", spec)
		}
		if r := idem(t, args...); r.code == exitOK || strings.Contains(r.stdout+r.stderr, pw) {
			t.Errorf("pending --store %q: %s", spec, r)
		}
	}
}
