package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// A prune holds the write lock (claims from every process wait) only for a batch
// of at most Batch receipts. A prune whose cut-off leaves many newer receipts
// looked, under the lock, for its next Batch candidates past the last old
// receipt, and walked every newer receipt to find none: at 10 million receipts
// with the cut-off at the middle, five million rows read with every claim
// waiting. Now the window is read without the lock and bounded by the receipts it
// examines; the lock is taken only to delete the candidates in it.
func TestPruneReadsAtMostABatchUnderTheWriteLock(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{})
	var rs []store.Receipt
	for i := range 3 {
		rs = append(rs, store.Receipt{Time: d0.Add(time.Duration(i) * time.Second), Key: fmt.Sprint("old-", i), Decision: store.DecisionRan})
	}
	for i := range 200 {
		rs = append(rs, store.Receipt{Time: d0.Add(48*time.Hour + time.Duration(i)*time.Second), Key: fmt.Sprint("new-", i), Decision: store.DecisionRan})
	}
	if err := s.AppendReceipts(ctx, rs); err != nil {
		t.Fatal(err)
	}
	const batch = 5
	var over []string
	seen := 0
	s.seeLocked = func(q string, args []any) {
		seen++
		var in int
		if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM idemgate_receipts WHERE id > ? AND id <= ?`, args[0], args[1]).Scan(&in); err != nil {
			t.Error(err)
		}
		if in > batch {
			over = append(over, fmt.Sprintf("(%v, %v]: %d receipts", args[0], args[1], in))
		}
	}
	defer func() { s.seeLocked = nil }()
	n, err := s.Prune(ctx, store.Prune{Before: d0.Add(time.Hour), Now: d0.Add(72 * time.Hour), Reason: "r", Batch: batch})
	if err != nil || n != 3 {
		t.Fatalf("Prune = %d, %v; want the 3 old receipts", n, err)
	}
	if seen == 0 {
		t.Fatal("the prune ran no receipt query under the write lock")
	}
	if len(over) > 0 {
		t.Fatalf("under the write lock the prune read more than a batch of %d receipts: %v", batch, over)
	}
}
