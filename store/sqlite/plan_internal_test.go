package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// plan is SQLite's query plan of q, one line per step.
func plan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.r.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "; ")
}

// Every operator query reads a bounded part of the store for a page: an index
// range or the ID range its filter bounds, in ID order (no sort of everything that
// matches). The one exception is a filter on the activity alone (or a decision of
// the two a step writes): it walks the IDs until a page has matched.
func TestOperatorQueriesAreBounded(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{})
	now := d0.Add(time.Hour)
	for i := range 50 {
		k := fmt.Sprintf("k%02d", i)
		if _, _, err := s.Begin(ctx, dClaim(k, "a")); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, dTransition(k, "a", store.DecisionRan)); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	s.seeQuery = func(q string, args []any) { seen = append(seen, plan(t, s, q, args...)) }
	for _, c := range []struct {
		name string
		f    store.ReceiptFilter
		want string // in the plan of each query Receipts runs
	}{
		{"--key", store.ReceiptFilter{Key: "k07", Limit: 100}, "USING INDEX idemgate_receipts_key (key=?)"},
		{"--workflow", store.ReceiptFilter{WorkflowID: "wf", Limit: 100}, "USING INDEX idemgate_receipts_workflow (workflow_id=?)"},
		{"--since", store.ReceiptFilter{Since: d0, Limit: 100}, "USING INTEGER PRIMARY KEY (rowid>?)"},
		{"--since --until", store.ReceiptFilter{Since: d0, Until: now, Limit: 100}, "USING INTEGER PRIMARY KEY (rowid>?)"},
		{"--decision resolved", store.ReceiptFilter{Decision: store.DecisionResolved, Limit: 100}, "USING INDEX idemgate_receipts_decision_rare (decision=?)"},
		{"--decision unknown --since", store.ReceiptFilter{Decision: store.DecisionUnknown, Since: d0, Limit: 100}, "idemgate_receipts_decision_rare"},
		{"export page", store.ReceiptFilter{Until: now, AfterID: 5, Limit: 1000}, "USING INTEGER PRIMARY KEY (rowid>?)"},
	} {
		seen = nil
		if _, err := s.Receipts(ctx, c.f); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(seen) == 0 {
			t.Fatalf("%s: no query seen", c.name)
		}
		for _, p := range seen {
			if !strings.Contains(p, c.want) || strings.Contains(p, "TEMP B-TREE") {
				t.Errorf("%s: plan %q; want %q and no sort", c.name, p, c.want)
			}
		}
	}
	s.seeQuery = nil
	n, m := now.UnixMicro(), now.Add(-store.LeaseMargin).UnixMicro()
	for _, c := range []struct {
		name, q string
		args    []any
		want    string
	}{
		// The receipts are asked only about a claim that was refused (the refusals' index).
		{"pending", selectPending + " LIMIT 100", []any{n, n, m, n}, "USING INDEX idemgate_records_open; CORRELATED SCALAR SUBQUERY 1; SEARCH f USING COVERING INDEX idemgate_receipts_refusals (key=?)"},
		{"held", selectHeld + " LIMIT 100", []any{n}, "USING INDEX idemgate_records_closed (expires_at<?)"},
		{"sweep (closed)", sweepClosed, []any{n, n, m, 1000}, "USING INDEX idemgate_records_closed (expires_at<?)"},
		// The open records not past their expiry are read from the index alone.
		{"sweep (open)", sweepOpen, []any{n, n, m, 1000}, "USING COVERING INDEX idemgate_records_open"},
	} {
		p := plan(t, s, c.q, c.args...)
		if !strings.Contains(p, c.want) || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s: plan %q; want %q and no sort", c.name, p, c.want)
		}
		// A scan of a partial index reads its rows only (the open claims).
		for _, step := range strings.Split(p, "; ") {
			if strings.HasPrefix(step, "SCAN idemgate_records") && !strings.Contains(step, "INDEX idemgate_records_open") {
				t.Errorf("%s: plan %q scans every record", c.name, p)
			}
		}
	}
}

// A page of a filter no index selects (the activity alone, with or without
// --since) reads a bounded range of the primary key: its window (at most Scan
// IDs after the cursor) and then the receipts in it. Receipts with the activity
// alone scans every receipt (11 s at 10 million).
func TestReceiptPagesAreRanges(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{})
	for i := range 50 {
		k := fmt.Sprintf("k%02d", i)
		if _, _, err := s.Begin(ctx, dClaim(k, "a")); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	s.seeQuery = func(q string, args []any) { seen = append(seen, plan(t, s, q, args...)) }
	defer func() { s.seeQuery = nil }()
	for _, c := range []struct {
		name string
		f    store.ReceiptFilter
		want string // in the plan of each query the page runs
	}{
		{"--activity", store.ReceiptFilter{Activity: "NoSuch", AfterID: 5, Limit: 100, Scan: 10}, "USING INTEGER PRIMARY KEY (rowid>?)"},
		{"--activity --since", store.ReceiptFilter{Activity: "NoSuch", Since: d0, Limit: 100, Scan: 10}, "USING INTEGER PRIMARY KEY (rowid>?)"},
		{"--key --activity", store.ReceiptFilter{Key: "k07", Activity: "NoSuch", AfterID: 5, Limit: 100}, "idemgate_receipts_key (key=? AND rowid>?)"},
	} {
		seen = nil
		if _, err := s.ReceiptPage(ctx, c.f); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// The page's query, then (the page not full) the window's end.
		if len(seen) != 2 {
			t.Fatalf("%s: %d queries seen (%q), want the page and the window's end", c.name, len(seen), seen)
		}
		for _, p := range seen {
			if !strings.Contains(p, c.want) || strings.Contains(p, "TEMP B-TREE") || strings.Contains(p, "SCAN idemgate_receipts") {
				t.Errorf("%s: plan %q; want %q, no scan and no sort", c.name, p, c.want)
			}
		}
	}
}
