//go:build atkreadq

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// OPEN (docs/review/atk-readq.md, finding 8). `receipts export --before T` then
// `receipts prune --before T` is the archive-then-remove procedure. A read's
// receipt stored late (its batch retried through a store outage the CLI did not
// see) with a Time before T, appended between the two, is removed without ever
// having been exported.
func TestAtkReadqPruneRemovesOnlyWhatTheExportArchived(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		old := time.Now().Add(-2 * time.Hour)
		for i := range 3 {
			if err := st.Append(ctx, store.Receipt{Time: old.Add(time.Duration(i) * time.Second), Key: fmt.Sprint("k-w", i),
				Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionRan, WorkflowID: "wf-x"}); err != nil {
				t.Fatal(err)
			}
		}
		cut := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
		out := filepath.Join(t.TempDir(), "archive.jsonl")
		ok(t, "receipts", "export", "--store", b.spec, "--before", cut, "--out", out)
		// The worker's queue gets its batch in after the outage: a read of 90 minutes ago.
		if err := st.Append(ctx, store.Receipt{Time: time.Now().Add(-90 * time.Minute), Key: "k-late-read",
			Activity: "GetBalance", Effect: "read", Decision: store.DecisionRan, WorkflowID: "wf-x"}); err != nil {
			t.Fatal(err)
		}
		ok(t, "receipts", "prune", "--store", b.spec, "--before", cut, "--reason", "90-day rule")
		archived := map[string]bool{}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for sc := bufio.NewScanner(f); sc.Scan(); {
			var r receiptJSON
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			archived[r.Key] = true
		}
		left, err := st.Receipts(ctx, store.ReceiptFilter{Key: "k-late-read"})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 && !archived["k-late-read"] {
			t.Fatal("prune removed the late read's receipt, which the export before it never archived")
		}
	})
}

// OPEN (finding 9). `idemgate receipts --limit N` lists "the first N receipts,
// oldest first" with a read at its time; it takes the first N stored and orders
// them, so a read older than all of them but stored after them is not among "the
// first N" (and no page after it shows it in its place).
func TestAtkReadqLimitedListingKeepsALateOlderRead(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		t0 := time.Now().Add(-time.Minute)
		for i := 1; i <= 3; i++ {
			if err := st.Append(ctx, store.Receipt{Time: t0.Add(time.Duration(i) * time.Millisecond), Key: fmt.Sprint("k-w", i),
				Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionClaimed, WorkflowID: "wf-lim"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Append(ctx, store.Receipt{Time: t0, Key: "k-read", Activity: "GetBalance", Effect: "read",
			Decision: store.DecisionRan, WorkflowID: "wf-lim"}); err != nil {
			t.Fatal(err)
		}
		got := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--workflow", "wf-lim", "--limit", "3"))
		if len(got) == 0 || got[0].Key != "k-read" {
			t.Fatalf("--limit 3 listed %d receipts starting %v; want the oldest, the read of t0, first", len(got), got)
		}
	})
}
