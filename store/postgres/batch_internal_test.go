package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
)

// A batch of receipts is one statement: when one of its receipts fails, none of
// them is appended; a NULL call stays NULL.
func TestAppendReceiptsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	d := pgtest.Schema(t, pgtest.DSN(t, "./store/postgres/"), "idemgate_batch")
	for _, dur := range []store.Durability{store.DurabilityClaim, store.DurabilityStrict} {
		s, err := OpenWith(ctx, d, Options{Durability: dur})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Durability(); got != dur {
			t.Fatalf("Durability() = %v, want %v", got, dur)
		}
		s.Close()
	}
	s, err := Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	var batch []store.Receipt
	for i := range 4 {
		batch = append(batch, store.Receipt{Time: now, Key: fmt.Sprint("r", i), Activity: "GetOrder", Effect: "read",
			Decision: store.DecisionRan, WorkflowID: "wf-batch"})
	}
	batch[2].Error = "a NUL \x00 PostgreSQL's text refuses"
	if err := s.AppendReceipts(ctx, batch); err == nil {
		t.Fatal("a batch with a receipt the database refuses was appended")
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{WorkflowID: "wf-batch"})
	if err != nil || len(rs) != 0 {
		t.Fatalf("%d receipts (%v) after a failed batch; want none of it", len(rs), err)
	}
	batch[2].Error = ""
	if err := s.AppendReceipts(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var nulls int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM idemgate_receipts WHERE workflow_id = 'wf-batch' AND call IS NULL`).
		Scan(&nulls); err != nil || nulls != 4 {
		t.Fatalf("%d receipts with a NULL call (%v); want 4, as Append stores a nil call", nulls, err)
	}
}
