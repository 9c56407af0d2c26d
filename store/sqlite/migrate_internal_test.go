package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"strings"
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

// A file written by schema version 2 opens under version 3: its records move to
// the WITHOUT ROWID table with every field intact, its receipts stay (and stay
// append-only), the activity and decision indexes are gone, and the store works.
func TestMigrateFromVersion2(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v2.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[0], migrations[1], "PRAGMA user_version = 2",
		`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason, resolution) VALUES
			(1, 'k1', 'ChargeCard', 'destructive', 'claimed', 'h', NULL, 'wf', 'run', 1, '', '', '', '', ''),
			(2, 'k2', 'SendEmail', 'destructive', 'claimed', 'h2', NULL, 'wf2', 'run', 1, '', '', '', '', ''),
			(3, 'k2', 'SendEmail', 'destructive', 'ran', 'h2', NULL, 'wf2', 'run', 1, 'sha256:ab', '', '', '', '')`,
		`INSERT INTO idemgate_records (key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
			workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at) VALUES
			('k1', 'ChargeCard', 'destructive', 'h', '[1]', 'unknown', 'o1', 1, NULL, 0, 'wf', 'run', 1, 1, 1, 1, 9999999999999999),
			('k2', 'SendEmail', 'destructive', 'h2', '[2]', 'completed', 'o2', 5, X'7b7d', 0, 'wf2', 'run', 3, 2, 4, 6, 9999999999999998),
			('k3', 'SendEmail', 'destructive', 'h3', NULL, 'claimed', 'o3', 7, NULL, 1, 'wf3', 'run3', 1, 1, 7, 7, 8)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a version 2 file: %v", err)
	}
	defer s.Close()

	got, err := s.Get(ctx, "k2")
	want := store.Record{Key: "k2", Activity: "SendEmail", Effect: "destructive", ArgsHash: "h2", Args: []byte("[2]"),
		State: store.StateCompleted, Owner: "o2", Lease: fromMicro(5), Result: []byte("{}"), WorkflowID: "wf2", RunID: "run",
		Attempt: 3, Claims: 2, CreatedAt: fromMicro(4), UpdatedAt: fromMicro(6), ExpiresAt: fromMicro(9999999999999998)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Get(k2) after the migration = %+v, %v; want %+v", got, err, want)
	}
	if got, err := s.Get(ctx, "k3"); err != nil || !got.ResultOmitted || got.Args != nil || got.State != store.StateClaimed {
		t.Fatalf("Get(k3) after the migration = %+v, %v", got, err)
	}
	if n, err := s.Sweep(ctx, fromMicro(100), 0); err != nil || n != 1 {
		t.Fatalf("Sweep after the migration = %d, %v; want the expired k3 removed", n, err)
	}
	if o, _, err := s.Begin(ctx, store.Claim{Key: "k2", ArgsHash: "h2", Owner: "o9", Now: fromMicro(10), Lease: fromMicro(20), Window: time.Hour}); err != nil || o != store.OutcomeCompleted {
		t.Fatalf("Begin(k2) after the migration = %s, %v; want completed", o, err)
	}
	if ps, err := s.Pending(ctx, time.Now(), 0); err != nil || len(ps) != 1 || ps[0].Key != "k1" {
		t.Fatalf("Pending after the migration = %+v, %v", ps, err)
	}
	for _, f := range []store.ReceiptFilter{{Activity: "SendEmail"}, {Decision: store.DecisionRan}, {Key: "k2", Decision: store.DecisionClaimed}, {WorkflowID: "wf"}} {
		rs, err := s.Receipts(ctx, f)
		if err != nil || len(rs) == 0 {
			t.Fatalf("Receipts(%+v) after the migration = %+v, %v", f, rs, err)
		}
		for _, r := range rs {
			if !f.Match(r) {
				t.Fatalf("Receipts(%+v) returned %+v", f, r)
			}
		}
	}

	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ddl string
	if err := db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'idemgate_records'`).Scan(&ddl); err != nil || !strings.Contains(ddl, "WITHOUT ROWID") {
		t.Fatalf("records table after the migration: %q, %v; want WITHOUT ROWID", ddl, err)
	}
	var idx []string
	rows, err := db.Query(`SELECT name FROM sqlite_schema WHERE type = 'index' AND name LIKE 'idemgate%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		idx = append(idx, n)
	}
	wantIdx := []string{"idemgate_receipts_key", "idemgate_receipts_time", "idemgate_receipts_workflow", "idemgate_records_expires", "idemgate_records_open"}
	if !reflect.DeepEqual(idx, wantIdx) {
		t.Fatalf("indexes after the migration = %v; want %v", idx, wantIdx)
	}
	if _, err := db.Exec("DELETE FROM idemgate_receipts"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("DELETE of receipts after the migration: %v; want the append-only trigger to abort it", err)
	}
}

// The write connection keeps WAL and synchronous=FULL (2): a commit is on disk
// before a step returns.
func TestWriteConnectionDurability(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mode string
	var sync int
	if err := s.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := s.w.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous = %d, %v; want 2 (FULL)", sync, err)
	}
}
