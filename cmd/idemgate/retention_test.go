package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// readLines decodes JSON lines.
func readLines(t *testing.T, text string) []receiptJSON {
	t.Helper()
	var out []receiptJSON
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var r receiptJSON
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func TestReceiptsExportAndPrune(t *testing.T) {
	defer func(p int) { exportPage = p }(exportPage)
	exportPage = 2 // page through the store, not one read
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		now := time.Now()
		old, cut := now.Add(-48*time.Hour), now.Add(-24*time.Hour)
		// A live key (claimed and completed two days ago: its record stays), five old
		// receipts of keys without a record (one carrying a terminal escape and a
		// bidirectional override), and one recent receipt.
		seed(t, st, "key-live", "wf-live", old, old.Add(time.Minute), "complete")
		for i := range 5 {
			r := store.Receipt{Time: old.Add(time.Duration(i) * time.Minute), Key: "key-gone-" + string(rune('a'+i)), Activity: "ChargeCard",
				Effect: "destructive", Decision: store.DecisionRan}
			if i == 2 {
				r.Error = "vendor said \x1b]0;pwned\x07 \u202eevil"
			}
			if err := st.Append(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Append(ctx, store.Receipt{Time: now.Add(-time.Hour), Key: "key-recent", Decision: store.DecisionRan}); err != nil {
			t.Fatal(err)
		}
		before := cut.UTC().Format(time.RFC3339Nano)

		// Export: every receipt older than the cut-off, oldest first, 0600, escaped.
		out := filepath.Join(t.TempDir(), "archive.jsonl")
		ok(t, "receipts", "export", "--store", b.spec, "--before", before, "--out", out)
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("archive mode %v, want 0600", fi.Mode().Perm())
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(string(raw), "\x1b\x07\u202e") {
			t.Fatalf("archive carries a control character raw:\n%q", raw)
		}
		lines := readLines(t, string(raw))
		if len(lines) != 7 {
			t.Fatalf("exported %d receipts, want 7 (the live key's 2, the 5 gone): %s", len(lines), raw)
		}
		for i := 1; i < len(lines); i++ {
			if lines[i].ID <= lines[i-1].ID {
				t.Fatalf("export out of order: %d then %d", lines[i-1].ID, lines[i].ID)
			}
		}
		if lines[4].Error != "vendor said \x1b]0;pwned\x07 \u202eevil" {
			t.Fatalf("the escaped error does not decode back: %q", lines[4].Error)
		}
		// To standard output the same lines; an existing archive is never overwritten.
		if r := ok(t, "receipts", "export", "--store", b.spec, "--before", before); r.stdout != string(raw) {
			t.Fatalf("export to stdout differs from the file:\n%s\nvs\n%s", r.stdout, raw)
		}
		if r := idem(t, "receipts", "export", "--store", b.spec, "--before", before, "--out", out); r.code != exitFail || !strings.Contains(r.stderr, "never overwritten") {
			t.Fatalf("export onto an existing file: %s", r)
		}

		// Prune: refused without a reason or with a cut-off in the future, or with the
		// subcommand after a flag; nothing changed.
		snapBefore := snap(t, st)
		if r := idem(t, "receipts", "--store", b.spec, "prune"); r.code != exitUsage || !strings.Contains(r.stderr, `put "prune" first`) {
			t.Fatalf("prune after a flag: %s; want a usage error", r)
		}
		for _, args := range [][]string{{"--before", before}, {"--before", now.Add(time.Hour).UTC().Format(time.RFC3339), "--reason", "r"}, {"--reason", "r"}} {
			if r := idem(t, append([]string{"receipts", "prune", "--store", b.spec}, args...)...); r.code != exitUsage {
				t.Fatalf("prune %v: %s; want a usage error", args, r)
			}
		}
		unchanged(t, snapBefore, st)
		r := decodeJSON[map[string]any](t, ok(t, "receipts", "prune", "--store", b.spec, "--before", before, "--reason", "90-day rule",
			"--actor", "alice", "--batch", "2", "--json"))
		if r["removed"] != float64(5) {
			t.Fatalf("prune: %v; want 5 removed", r)
		}
		left := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--limit", "0"))
		var keys []string
		for _, l := range left {
			keys = append(keys, l.Key+":"+l.Decision)
		}
		if got := strings.Join(keys, " "); got != "key-live:claimed key-live:ran key-recent:ran :pruned" {
			t.Fatalf("after the prune: %s; want the live key's receipts, the recent one and the prune's", got)
		}
		p := left[3]
		var sum store.PruneSummary
		if err := json.Unmarshal(p.Call, &sum); err != nil || p.Actor != "alice" || p.Reason != "90-day rule" || sum.Count != 5 || sum.Before.Format(time.RFC3339Nano) != before {
			t.Fatalf("pruned receipt = %+v (%+v, %v)", p, sum, err)
		}
		if r := ok(t, "receipts", "--store", b.spec, "--decision", "pruned"); !strings.Contains(r.stdout, "removed 5 receipt(s) before") ||
			!strings.Contains(r.stdout, "by alice: 90-day rule") {
			t.Fatalf("the table does not say what the prune removed:\n%s", r)
		}
		// The archive of the same cut-off now holds only what was kept.
		if l := readLines(t, ok(t, "receipts", "export", "--store", b.spec, "--before", before).stdout); len(l) != 2 || l[0].Key != "key-live" {
			t.Fatalf("export after the prune: %+v; want the live key's 2 receipts", l)
		}
	})
}
