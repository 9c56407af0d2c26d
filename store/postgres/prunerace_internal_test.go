package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// A prune batch picks the receipts of keys without a record under its statement's
// snapshot; a claim that commits a record for one of those keys meanwhile is seen by
// the append-only trigger, which refuses the DELETE and rolls the batch back
// (storetest PruneBesideClaims failed so under load). The prune runs such a batch
// again, and the new statement keeps that key's receipt. Here a trigger that fires
// before the append-only one gives the key a record the first time only (a sequence:
// a rollback does not undo it), as the concurrent claim would.
func TestPruneRetriesABatchAClaimRaced(t *testing.T) {
	ctx := context.Background()
	dsn, _, _ := oldSchema(t, 0)
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, k := range []string{"gone-1", "raced", "gone-2"} {
		if err := s.Append(ctx, store.Receipt{Time: old, Key: k, Decision: store.DecisionRan}); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{
		`CREATE SEQUENCE race_once`,
		`CREATE FUNCTION race_claim() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF OLD.key = 'raced' AND nextval('race_once') = 1 THEN
				INSERT INTO idemgate_records (key, activity, effect, args_hash, state, owner, lease, result_omitted,
					workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at)
				VALUES ('raced', 'ChargeCard', 'destructive', 'h', 'claimed', 'o', now(), false, 'wf', 'run', 1, 1,
					now(), now(), now() + interval '1 day');
			END IF;
			RETURN OLD;
		END $$`,
		// Triggers fire in name order: this one before idemgate_receipts_append_only's.
		`CREATE TRIGGER aaa_race BEFORE DELETE ON idemgate_receipts FOR EACH ROW EXECUTE FUNCTION race_claim()`,
	} {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	removed, err := s.Prune(ctx, store.Prune{Before: now, Now: now, Actor: "alice", Reason: "retention"})
	if err != nil {
		t.Fatalf("a prune beside a claim that gave one of its keys a record: %v; want it to go on", err)
	}
	// The first run was rolled back with its record; the second deleted all three.
	if removed != 3 {
		t.Fatalf("Prune removed %d; want 3", removed)
	}
}
