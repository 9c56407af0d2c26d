package main

import (
	"context"
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
