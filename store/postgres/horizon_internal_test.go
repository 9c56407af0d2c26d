package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
)

// The receipt horizon is an ID up to which every receipt is stored. A
// transaction that took its receipt's ID from the sequence and has not committed
// yet holds a receipt below the sequence's last ID that nobody sees: an export
// that read up to that ID would miss it, and a prune through it would remove it
// unarchived once it commits. ReceiptHorizon waits for such a transaction.
func TestReceiptHorizonWaitsForAnOpenAppend(t *testing.T) {
	ctx := context.Background()
	d := pgtest.Schema(t, pgtest.DSN(t, "./store/postgres/"), "idemgate_horizon")
	s, err := Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(ctx, store.Receipt{Time: time.Now(), Key: "k-before", Decision: store.DecisionRan}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var open int64
	if err := tx.QueryRow(ctx, `INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, workflow_id,
		run_id, attempt, result_ref, error, actor, reason) VALUES (now(), 'k-open', '', '', 'ran', '', '', '', 0, '', '', '', '')
		RETURNING id`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	// A later receipt commits first: the last ID stored is above the open one.
	if err := s.Append(ctx, store.Receipt{Time: time.Now(), Key: "k-after", Decision: store.DecisionRan}); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		h       int64
		visible bool
		err     error
	}
	got := make(chan answer, 1)
	go func() {
		h, err := s.ReceiptHorizon(ctx)
		a := answer{h: h, err: err}
		if err == nil && open <= h {
			// Up to the horizon every receipt is stored: the open one must be visible now.
			var n int
			a.err = s.pool.QueryRow(ctx, `SELECT count(*) FROM idemgate_receipts WHERE id = $1`, open).Scan(&n)
			a.visible = n == 1
		}
		got <- a
	}()
	// A horizon that does not wait answers at once; give it time to (a wait for
	// something that must not happen: it never delays a correct horizon's answer).
	select {
	case a := <-got:
		if a.err != nil {
			t.Fatal(a.err)
		}
		if open <= a.h && !a.visible {
			t.Fatalf("ReceiptHorizon = %d while the receipt %d was not committed: it is below the horizon and nobody sees it", a.h, open)
		}
		return // answered below the open receipt: as good
	case <-time.After(2 * time.Second):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-got:
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.h < open || !a.visible {
			t.Fatalf("ReceiptHorizon = %d after the receipt %d committed (visible %v); want it at or above, and visible", a.h, open, a.visible)
		}
	case <-time.After(time.Minute):
		t.Fatal("ReceiptHorizon did not answer a minute after the open transaction committed")
	}
}
