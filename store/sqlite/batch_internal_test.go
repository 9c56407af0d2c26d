package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemgate/idemgate/store"
)

// A batch of receipts is one write of the commit queue: when one of its receipts
// fails, none of them is appended, and a write queued beside it still commits.
func TestAppendReceiptsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{})
	if _, err := s.w.ExecContext(ctx, `CREATE TRIGGER poison BEFORE INSERT ON idemgate_receipts
		WHEN NEW.key = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned receipt'); END`); err != nil {
		t.Fatal(err)
	}
	var batch []store.Receipt
	for i := range 4 {
		batch = append(batch, store.Receipt{Time: d0, Key: fmt.Sprint("r", i), Activity: "GetOrder", Effect: "read",
			Decision: store.DecisionRan, WorkflowID: "wf"})
	}
	batch[2].Key = "poison"
	if err := s.AppendReceipts(ctx, batch); err == nil {
		t.Fatal("a batch with a receipt the database refuses was appended")
	}
	if err := s.Append(ctx, store.Receipt{Time: d0, Key: "alone", Activity: "GetOrder", Decision: store.DecisionRan,
		WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{WorkflowID: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Key != "alone" {
		t.Fatalf("receipts %+v; want only the one appended alone (none of the failed batch)", rs)
	}
	if d := s.Durability(); d != store.DurabilityClaim {
		t.Fatalf("Durability() = %v, want claim", d)
	}
}
