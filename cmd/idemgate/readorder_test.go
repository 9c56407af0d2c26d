package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/store"
)

// Issue 21: a read's receipt is appended in a batch up to 100 ms after the read,
// so it can land after the receipts of a write that followed the read. The
// listing shows it at its read's time; the write's receipts keep their order; and
// with --since over more than one page (paged by receipt ID) nothing is skipped.
func TestReceiptsListALateReadAtItsTime(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		app := func(at time.Duration, key, act, effect string, d store.Decision) {
			t.Helper()
			if err := st.Append(ctx, store.Receipt{Time: t0.Add(at), Key: key, Activity: act, Effect: effect, Decision: d,
				WorkflowID: "wf-late", RunID: "run-1", Attempt: 1}); err != nil {
				t.Fatal(err)
			}
		}
		// The read ran at t0+1ms; the charge claimed at t0+2ms and ran at t0+5ms; the
		// read's batch came after both. A second worker's clock runs behind: its
		// takeover of another key is stamped before that key's unknown outcome, and
		// must still list after it.
		app(0, "key-refund", "RefundCard", "destructive", store.DecisionUnknown)
		app(-time.Millisecond, "key-refund", "RefundCard", "destructive", store.DecisionTakenOver)
		app(2*time.Millisecond, "key-charge", "ChargeCard", "destructive", store.DecisionClaimed)
		app(5*time.Millisecond, "key-charge", "ChargeCard", "destructive", store.DecisionRan)
		app(time.Millisecond, "key-read", "GetBalance", "read", store.DecisionRan)
		got := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--workflow", "wf-late"))
		var order []string
		for _, r := range got {
			order = append(order, r.Activity+":"+r.Decision)
		}
		want := "[RefundCard:unknown RefundCard:taken-over GetBalance:ran ChargeCard:claimed ChargeCard:ran]"
		if fmt.Sprint(order) != want {
			t.Fatalf("receipts listed %v; want %s (the read at its time, the rest in append order)", order, want)
		}

		// More than one page of the listing (1000 receipts), the late read at the end.
		var page []store.Receipt
		for i := range operate.ReceiptPage + 5 {
			page = append(page, store.Receipt{Time: t0.Add(time.Second + time.Duration(i)*time.Microsecond),
				Key: fmt.Sprint("key-w-", i), Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionClaimed,
				WorkflowID: "wf-many"})
		}
		page = append(page, store.Receipt{Time: t0.Add(time.Second - time.Microsecond), Key: "key-late-read",
			Activity: "GetBalance", Effect: "read", Decision: store.DecisionRan, WorkflowID: "wf-many"})
		if err := store.AppendReceipts(ctx, st, page); err != nil {
			t.Fatal(err)
		}
		many := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--workflow", "wf-many",
			"--since", "2m", "--limit", "0"))
		if len(many) != len(page) || many[0].Key != "key-late-read" {
			first := ""
			if len(many) > 0 {
				first = many[0].Key
			}
			t.Fatalf("--since over two pages: %d receipts, first %q; want all %d, the late read first", len(many), first, len(page))
		}
	})
}
