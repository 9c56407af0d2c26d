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

// A read's retries share its key, and each attempt's receipt is appended in its
// worker's batch: attempt 2 (another worker) can be stored before attempt 1. With
// --key and --limit N the listing promises the newest N of the key's story as it
// lists it (reads at their time): the newest N by time, not the last N stored.
func TestAtkReadqKeyLimitShowsTheNewestByTheListedOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		for _, a := range []int32{2, 1, 3} { // stored out of their time's order
			if err := st.Append(ctx, store.Receipt{Time: t0.Add(time.Duration(a) * time.Second), Key: "key-read-retried",
				Activity: "GetBalance", Effect: "read", Decision: store.DecisionRan, WorkflowID: "wf-r", RunID: "run-1",
				Attempt: a}); err != nil {
				t.Fatal(err)
			}
		}
		got := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", "key-read-retried",
			"--limit", "2"))
		var attempts []int32
		for _, r := range got {
			attempts = append(attempts, r.Attempt)
		}
		if len(attempts) != 2 || attempts[0] != 2 || attempts[1] != 3 {
			t.Fatalf("--key --limit 2 listed attempts %v; want the newest two by the listing's order, [2 3]", attempts)
		}
	})
}

// docs/review/atk-readq.md, finding 8. `receipts export --before T` then
// `receipts prune --before T --through-id ID` (the ID the export printed) is the
// archive-then-remove procedure. A read's receipt stored late (its batch retried
// through a store outage the CLI did not see) with a Time before T, appended
// between the two, was removed without ever having been exported: the prune now
// removes only receipts at or below the export's horizon.
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
		exported := decodeJSON[map[string]any](t, ok(t, "receipts", "export", "--store", b.spec, "--before", cut, "--out", out, "--json"))
		through, isNum := exported["through_id"].(float64)
		if !isNum || through <= 0 {
			t.Fatalf("the export printed %v; want the receipt ID it read through (through_id), for the prune", exported)
		}
		// The worker's queue gets its batch in after the outage: a read of 90 minutes ago.
		if err := st.Append(ctx, store.Receipt{Time: time.Now().Add(-90 * time.Minute), Key: "k-late-read",
			Activity: "GetBalance", Effect: "read", Decision: store.DecisionRan, WorkflowID: "wf-x"}); err != nil {
			t.Fatal(err)
		}
		ok(t, "receipts", "prune", "--store", b.spec, "--before", cut, "--through-id", fmt.Sprint(int64(through)), "--reason", "90-day rule")
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
