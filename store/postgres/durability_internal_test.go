package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
)

// synchronousAtCommit runs sql with args inside a transaction and reports the
// synchronous_commit the transaction's commit would use, then rolls back.
func synchronousAtCommit(t *testing.T, s *Store, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var v string
	if err := tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The statements of a write's steps (claim, completion, release, unknown outcome),
// a claim's second evidence and the pauses make their own commit synchronous; the
// receipts alone and a claim's first evidence commit with the session's level: off
// by default, on when strict.
func TestClaimCommitsSynchronously(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r := store.Receipt{Time: now, Key: "k1", Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionClaimed}
	p := store.Pause{Activity: "ChargeCard", Actor: "ops", Reason: "test", Time: now}
	for _, tc := range []struct {
		d       store.Durability
		session string
	}{{store.DurabilityClaim, "off"}, {store.DurabilityStrict, "on"}} {
		t.Run(tc.d.String(), func(t *testing.T) {
			d := pgtest.Schema(t, pgtest.DSN(t, "./store/postgres/"), "idemgate_durability")
			s, err := OpenWith(context.Background(), d, Options{Durability: tc.d})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var session string
			if err := s.pool.QueryRow(context.Background(), "SHOW synchronous_commit").Scan(&session); err != nil || session != tc.session {
				t.Fatalf("session synchronous_commit = %q, %v; want %q", session, err, tc.session)
			}
			// A claim of k1 for the steps that move a record (each runs in a
			// transaction rolled back after it).
			ctx := context.Background()
			claim := store.Claim{Key: "k1", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h1", Owner: "a",
				Lease: now.Add(time.Minute), Window: time.Hour, WorkflowID: "wf", RunID: "run", Attempt: 1, Now: now}
			if o, _, err := s.Begin(ctx, claim); err != nil || o != store.OutcomeClaimed {
				t.Fatalf("Begin = %q, %v", o, err)
			}
			first := store.EncodeSent([]store.Sent{{Via: "idemhttp:stripe", Host: "api.stripe.com", Window: time.Hour}})
			second := store.EncodeSent([]store.Sent{{Via: "idemhttp:mail", Host: "mail.example"}})
			steps := []struct {
				name, sql string
				args      []any
				want      string
			}{
				{"claim", beginSQL + syncedCommit, []any{"k1", "ChargeCard", "destructive", "h1", []byte(nil), "a",
					now.Add(time.Minute), now.Add(time.Hour), false, "wf", "run", 1, now, store.LeaseMargin, store.EffectByName, "root"}, "on"},
				{"complete", completeSQL, append([]any{"k1", "a", now, []byte("{}"), false, now.Add(time.Hour)},
					receiptArgs(r)...), "on"},
				{"release", releaseSQL, append([]any{"k1", "a", now}, receiptArgs(r)...), "on"},
				{"abandon", abandonSQL, append([]any{"k1", "a", now}, receiptArgs(r)...), "on"},
				{"first evidence", recordSentSQL, []any{"k1", "a", first}, tc.session},
				{"append a read's receipt", appendSQL, receiptArgs(r), tc.session},
				{"append any other receipt", appendSyncedSQL, receiptArgs(r), "on"},
				{"pause", pauseSQL, append([]any{p.Activity, p.Effect, p.Actor, p.Reason, now}, receiptArgs(r)...), "on"},
			}
			for _, st := range steps {
				if got := synchronousAtCommit(t, s, st.sql, st.args...); got != st.want {
					t.Errorf("%s: commits with synchronous_commit = %q; want %q", st.name, got, st.want)
				}
			}
			// A second evidence: the first must be there.
			if _, err := s.pool.Exec(ctx, recordSentSQL, "k1", "a", first); err != nil {
				t.Fatal(err)
			}
			if got := synchronousAtCommit(t, s, recordSentSQL, "k1", "a", second); got != "on" {
				t.Errorf("second evidence: commits with synchronous_commit = %q; want on", got)
			}
			// Resume: a pause must exist for its DELETE to return a row.
			if err := s.Pause(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if got := synchronousAtCommit(t, s, resumeSQL, append([]any{p.Activity, p.Effect}, receiptArgs(r)...)...); got != "on" {
				t.Errorf("resume: commits with synchronous_commit = %q; want on", got)
			}
		})
	}
}
