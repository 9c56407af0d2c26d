package postgres

import (
	"context"
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
