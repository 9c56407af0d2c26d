package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// A file written by schema version 1 opens under version 2 with its receipts and
// records intact, and gains pauses and resolutions.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[0], "PRAGMA user_version = 1",
		`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason) VALUES (1, 'k1', 'ChargeCard', 'destructive', 'claimed', 'h', NULL,
			'wf', 'run', 1, '', '', '', '')`,
		`INSERT INTO idemgate_records (key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
			workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at) VALUES ('k1', 'ChargeCard',
			'destructive', 'h', '[1]', 'unknown', 'o1', 1, NULL, 0, 'wf', 'run', 1, 1, 1, 1, 9999999999999999)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a version 1 file: %v", err)
	}
	defer s.Close()
	now := time.Now()
	if ps, err := s.Pending(ctx, now, 0); err != nil || len(ps) != 1 || ps[0].Key != "k1" {
		t.Fatalf("Pending after the migration = %+v, %v", ps, err)
	}
	tr := store.Transition{Key: "k1", Owner: "o1", Now: now, Receipt: store.Receipt{Key: "k1", Decision: store.DecisionResolved,
		Actor: "alice", Reason: "r", Resolution: store.ResolvedNotSent}}
	if err := s.Resolve(ctx, tr, store.StateReleased); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(ctx, store.Pause{Effect: "destructive", Actor: "alice", Time: now}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: "k1"})
	if err != nil || len(rs) != 2 || rs[0].Resolution != "" || rs[1].Resolution != store.ResolvedNotSent {
		t.Fatalf("receipts after the migration = %+v, %v", rs, err)
	}
}
