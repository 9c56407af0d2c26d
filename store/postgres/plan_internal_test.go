package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
)

// A page of held records (and a sweep batch of closed ones) is a range of the
// closed records' expiry index in its order, not a sort of every record past its
// window (at 10 million records the sort took 16 s).
func TestHeldPageIsAnIndexRange(t *testing.T) {
	ctx := context.Background()
	d := pgtest.Schema(t, pgtest.DSN(t, "./store/postgres/"), "idemgate_plan")
	s, err := Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// A small table: take the planner's choice of a sequential scan off the table.
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET enable_seqscan")
	now := time.Now()
	for _, c := range []struct {
		name, q string
		args    []any
	}{
		{"held", heldSQL + " LIMIT 100", []any{now}},
		{"sweep", sweepSQL, []any{now, store.LeaseMargin, 1000}},
	} {
		rows, err := conn.Query(ctx, "EXPLAIN "+c.q, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, strings.TrimSpace(l))
		}
		rows.Close()
		p := strings.Join(plan, "\n")
		if !strings.Contains(p, "idemgate_records_closed") || strings.Contains(p, "Sort") {
			t.Errorf("%s: plan\n%s\nwant a range of idemgate_records_closed and no sort", c.name, p)
		}
	}
}

// A page of receipts by time (`receipts --since 1h`, no key or workflow) is a
// range of the time index in its order; the plain receipt query by time walked
// the primary key from the first receipt, filtering by time, and took 11 s at
// 10 million receipts for the last hour (they are all at the end). A page of the
// activity alone is a range of the primary key: its window, then its receipts.
func TestReceiptPagesAreIndexRanges(t *testing.T) {
	ctx := context.Background()
	d := pgtest.Schema(t, pgtest.DSN(t, "./store/postgres/"), "idemgate_plan")
	s, err := Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for i := range 30 {
		if err := s.Append(ctx, store.Receipt{Time: now.Add(time.Duration(i-30) * time.Minute), Key: fmt.Sprint("k", i),
			Activity: "ChargeCard", Decision: store.DecisionRan}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "ANALYZE idemgate_receipts"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    store.ReceiptFilter
		want string
	}{
		{"--since", store.ReceiptFilter{Since: now.Add(-10 * time.Minute), Limit: 5, Scan: 5}, "idemgate_receipts_time"},
		{"--since --activity", store.ReceiptFilter{Since: now.Add(-10 * time.Minute), Activity: "NoSuch", Limit: 5, Scan: 5}, "idemgate_receipts_time"},
		{"--since, the next page", store.ReceiptFilter{Since: now.Add(-10 * time.Minute), AfterTime: now.Add(-5 * time.Minute), AfterID: 3, Limit: 5, Scan: 5}, "idemgate_receipts_time"},
		{"--activity", store.ReceiptFilter{Activity: "NoSuch", AfterID: 3, Limit: 5, Scan: 5}, "idemgate_receipts_pkey"},
	} {
		var plans []string
		s.seeQuery = func(q string, args []any) {
			if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
				t.Fatal(err)
			}
			rows, err := conn.Query(ctx, "EXPLAIN "+q, args...)
			if err != nil {
				t.Fatalf("explain %s: %v", q, err)
			}
			var plan []string
			for rows.Next() {
				var l string
				if err := rows.Scan(&l); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, strings.TrimSpace(l))
			}
			rows.Close()
			plans = append(plans, strings.Join(plan, "\n"))
		}
		if _, err := s.ReceiptPage(ctx, c.f); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(plans) == 0 {
			t.Fatalf("%s: no query seen", c.name)
		}
		for _, p := range plans {
			if !strings.Contains(p, c.want) || strings.Contains(p, "Seq Scan") {
				t.Errorf("%s: plan\n%s\nwant a range of %s", c.name, p, c.want)
			}
			if c.want == "idemgate_receipts_time" && strings.Contains(p, "idemgate_receipts_pkey") {
				t.Errorf("%s: plan\n%s\nwalks the primary key", c.name, p)
			}
		}
	}
	s.seeQuery = nil
}
