package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/idemgate/idemgate/store"
)

// walTrees runs step after a checkpoint that empties the WAL and returns the
// B-trees (tables and indexes, by name) whose pages the step's commit wrote to
// the WAL, read from the frames' page numbers and SQLite's dbstat.
func walTrees(t *testing.T, s *Store, step func() error) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := s.w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	if err := step(); err != nil {
		t.Fatal(err)
	}
	wal, err := os.ReadFile(s.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if len(wal) < 32 {
		t.Fatalf("WAL of %d bytes after the step", len(wal))
	}
	size := int(binary.BigEndian.Uint32(wal[8:12]))
	seen := map[string]bool{}
	for off := 32; off+24+size <= len(wal); off += 24 + size {
		pg := binary.BigEndian.Uint32(wal[off : off+4])
		var name string
		if err := s.w.QueryRowContext(ctx, "SELECT name FROM dbstat WHERE pageno = ?", pg).Scan(&name); err != nil {
			t.Fatalf("page %d: %v", pg, err)
		}
		seen[name] = true
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// A claim writes five B-trees (the record, the open index; the receipt, its key
// and workflow indexes) and a completion six (the record leaves the open index
// for the closed records' expiry index): no time index, no expiry index for a
// claim (schema version 10; version 9 wrote seven and seven).
func TestStepsWriteFewBTrees(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{FlushInterval: 1 << 40})
	// Enough rows that the trees are not a single page each.
	for i := range 300 {
		k := fmt.Sprintf("warm-%03d", i)
		if _, _, err := s.Begin(ctx, dClaim(k, "a")); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, dTransition(k, "a", store.DecisionRan)); err != nil {
			t.Fatal(err)
		}
	}
	claim := walTrees(t, s, func() error { _, _, err := s.Begin(ctx, dClaim("k1", "a")); return err })
	want := []string{"idemgate_receipts", "idemgate_receipts_key", "idemgate_receipts_workflow", "idemgate_records", "idemgate_records_open"}
	if !slices.Equal(claim, want) {
		t.Errorf("a claim wrote the B-trees %v; want %v", claim, want)
	}
	done := walTrees(t, s, func() error { return s.Complete(ctx, dTransition("k1", "a", store.DecisionRan)) })
	want = []string{"idemgate_receipts", "idemgate_receipts_key", "idemgate_receipts_workflow", "idemgate_records", "idemgate_records_closed", "idemgate_records_open"}
	if !slices.Equal(done, want) {
		t.Errorf("a completion wrote the B-trees %v; want %v", done, want)
	}
}
