package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/store"
)

// cursorOf is the cursor a listing printed after "More may follow: --after".
func cursorOf(t *testing.T, r result) string {
	t.Helper()
	m := regexp.MustCompile(`More may follow: --after (\S+)`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("the listing did not say that more may follow, with a cursor:\n%s", r)
	}
	return m[1]
}

// `receipts --activity X` alone reads the store a bounded page at a time (the
// activity is not indexed; at 10 million receipts the one query took 11 s): when
// few receipts match, it stops after operate.ListPages pages, says more may
// follow and gives the cursor, and --after goes on from there.
func TestReceiptsActivityAloneIsReadInBoundedPages(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		t0 := time.Now().Add(-time.Hour)
		const before = 3 * operate.ListPages // receipts of another activity, stored first
		var rs []store.Receipt
		for i := range before {
			rs = append(rs, store.Receipt{Time: t0.Add(time.Duration(i) * time.Millisecond), Key: fmt.Sprint("k-c", i),
				Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionClaimed, WorkflowID: "wf-p"})
		}
		rs = append(rs, store.Receipt{Time: t0.Add(time.Second), Key: "k-rare", Activity: "RefundCard", Effect: "destructive",
			Decision: store.DecisionClaimed, WorkflowID: "wf-p"})
		if err := store.AppendReceipts(ctx, st, rs); err != nil {
			t.Fatal(err)
		}
		first := ok(t, "receipts", "--store", b.spec, "--activity", "RefundCard", "--scan", "2")
		if strings.Contains(first.stdout, "k-rare") || strings.Contains(first.stdout, "no receipts match") {
			t.Fatalf("pages of 2 receipts, %d of them, reached the receipt stored after %d others, or said none match:\n%s",
				operate.ListPages, before, first)
		}
		cur := cursorOf(t, first)
		if !strings.Contains(first.stderr, "the store was not read to its end") {
			t.Fatalf("the listing did not say it stopped before the store's end:\n%s", first)
		}
		var found bool
		for range 3 {
			next := ok(t, "receipts", "--store", b.spec, "--activity", "RefundCard", "--scan", "2", "--after", cur)
			if found = strings.Contains(next.stdout, "k-rare"); found {
				if strings.Contains(next.stderr, "More may follow") {
					t.Fatalf("the listing that read to the store's end said more may follow:\n%s", next)
				}
				break
			}
			cur = cursorOf(t, next)
		}
		if !found {
			t.Fatal("going on with --after never reached the receipt")
		}
		// The same in one listing with pages that examine enough.
		whole := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--activity", "RefundCard"))
		if len(whole) != 1 || whole[0].Key != "k-rare" {
			t.Fatalf("--activity RefundCard with the default pages: %v; want k-rare", whole)
		}
		if r := idem(t, "receipts", "--store", b.spec, "--after", "x"); r.code != 2 {
			t.Fatalf("--after x: exit %d, want 2 (usage):\n%s", r.code, r)
		}
	})
}

// atk-readq finding 9, bounded: `receipts --limit N` lists the first N receipts
// stored, so a read older than them but stored after them is on a later page.
// The listing says more may follow and gives the cursor of that page.
func TestReceiptsLimitGivesTheCursorOfALateRead(t *testing.T) {
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
		first := ok(t, "receipts", "--store", b.spec, "--workflow", "wf-lim", "--limit", "3")
		next := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--workflow", "wf-lim", "--limit", "3",
			"--after", cursorOf(t, first)))
		if len(next) != 1 || next[0].Key != "k-read" || !next[0].Time.Equal(t0.UTC().Truncate(time.Microsecond)) {
			t.Fatalf("the page after the first 3: %v; want the late read, with its time", next)
		}
		help := idem(t, "receipts", "--help")
		if !strings.Contains(help.stderr, "may be on a later page") {
			t.Fatalf("receipts --help does not say where a late read is listed:\n%s", help)
		}
	})
}

// A prune without --through-id after an export may remove a receipt stored after
// the export (a late read): it says so, and how to prune only what was archived.
func TestReceiptsPruneWithoutThroughIDSaysWhatItMayRemove(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		if err := st.Append(context.Background(), store.Receipt{Time: time.Now().Add(-2 * time.Hour), Key: "k-old",
			Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionRan}); err != nil {
			t.Fatal(err)
		}
		r := ok(t, "receipts", "prune", "--store", b.spec, "--before", "1h", "--reason", "rule")
		if !strings.Contains(r.stderr, "--through-id") {
			t.Fatalf("a prune without --through-id said nothing of it:\n%s", r)
		}
	})
}
