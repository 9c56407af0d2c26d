//go:build atkreadq

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// OPEN (finding 9), bounded: `idemgate receipts --limit N` lists the first N
// receipts stored, a read at its time among them, so a read older than all of
// them but stored after them is not among "the first N". The listing now says
// so (its help: a read's receipt is stored up to the flush interval after its
// read, and may be on a later page) and gives the cursor of that later page
// (`--after`, TestReceiptsLimitGivesTheCursorOfALateRead); an exact listing by
// time needs a time index on SQLite, which every step would write.
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
