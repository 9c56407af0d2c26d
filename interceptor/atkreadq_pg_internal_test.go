package interceptor

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
)

// Finding 1 on the real part: PostgreSQL refuses a read receipt whose error text
// holds a NUL byte. The queue drops that one alone (counted) and stores the rest,
// and goes on storing later batches.
func TestAtkReadqPostgresRefusedReceiptDropsAlone(t *testing.T) {
	ctx := context.Background()
	d := pgtest.Schema(t, pgtest.DSN(t, "./interceptor/"), "idemgate_atkreadq")
	st, err := postgres.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if store.DurabilityOf(st) != store.DurabilityClaim {
		t.Fatal("the PostgreSQL store's default is not DurabilityClaim: the gate would not queue")
	}
	q := newReadQueue(st, 16)
	q.every = time.Hour
	q.setLogger(atkDiscard)
	for i := range 5 {
		r := atkRead(i)
		if i == 2 {
			r.Error = "vendor said: \x00 binary"
		}
		q.push(ctx, r, atkDiscard, client.MetricsNopHandler)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = q.wait(fctx)
	if fctx.Err() != nil || err == nil || !strings.Contains(err.Error(), "1 read receipt") {
		t.Fatalf("Flush = %v; want it to return, naming the 1 read receipt PostgreSQL refused", err)
	}
	rs, err := st.Receipts(ctx, store.ReceiptFilter{WorkflowID: "wf-atk"})
	if err != nil || len(rs) != 4 {
		t.Fatalf("%d receipts stored (%v); want the 4 PostgreSQL takes", len(rs), err)
	}
	q.push(ctx, atkRead(7), atkDiscard, client.MetricsNopHandler)
	if err := q.wait(fctx); err != nil {
		t.Fatalf("Flush of a later good receipt = %v", err)
	}
}
