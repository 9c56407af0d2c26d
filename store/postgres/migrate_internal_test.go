package postgres

import (
	"context"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/store"
)

// A schema at version 2, with records and receipts in it, opens under version 3:
// the data stays, the activity and decision indexes are gone, the filters still
// answer, receipts stay append-only, and Begin claims and replays.
func TestMigrateFromVersion2(t *testing.T) {
	d := os.Getenv("IDEMGATE_POSTGRES_DSN")
	if d == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("IDEMGATE_POSTGRES_DSN is not set (CI=true: refusing to skip)")
		}
		t.Skip("IDEMGATE_POSTGRES_DSN is not set: run with scripts/with-postgres.sh")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := "idemgate_v2_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
	u, err := url.Parse(d)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	sd := u.String()

	v2, err := pgx.Connect(ctx, sd)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`CREATE TABLE idemgate_schema_version (version integer NOT NULL PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		migrations[0], migrations[1], `INSERT INTO idemgate_schema_version (version) VALUES (1), (2)`,
		`INSERT INTO idemgate_records (key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
			workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at) VALUES
			('k2', 'SendEmail', 'destructive', 'h2', '\x5b325d', 'completed', 'o2', '2026-11-29 12:00:05Z', '\x7b7d', false,
			 'wf2', 'run', 3, 2, '2026-11-29 12:00:04Z', '2026-11-29 12:00:06Z', '2099-01-01 00:00:00Z')`,
		`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason) VALUES
			('2026-11-29 12:00:04Z', 'k2', 'SendEmail', 'destructive', 'claimed', 'h2', NULL, 'wf2', 'run', 3, '', '', '', ''),
			('2026-11-29 12:00:06Z', 'k2', 'SendEmail', 'destructive', 'ran', 'h2', NULL, 'wf2', 'run', 3, 'sha256:ab', '', '', '')`,
	} {
		if _, err := v2.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	v2.Close(ctx)

	s, err := Open(ctx, sd)
	if err != nil {
		t.Fatalf("open a version 2 schema: %v", err)
	}
	defer s.Close()
	at := func(sec int) time.Time { return time.Date(2026, 11, 29, 12, 0, sec, 0, time.UTC) }
	want := store.Record{Key: "k2", Activity: "SendEmail", Effect: "destructive", ArgsHash: "h2", Args: []byte("[2]"),
		State: store.StateCompleted, Owner: "o2", Lease: at(5), Result: []byte("{}"), WorkflowID: "wf2", RunID: "run",
		Attempt: 3, Claims: 2, CreatedAt: at(4), UpdatedAt: at(6), ExpiresAt: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}
	if got, err := s.Get(ctx, "k2"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Get(k2) after the migration = %+v, %v; want %+v", got, err, want)
	}
	if o, _, err := s.Begin(ctx, store.Claim{Key: "k2", ArgsHash: "h2", Owner: "o9", Now: at(10), Lease: at(20), Window: time.Hour}); err != nil || o != store.OutcomeCompleted {
		t.Fatalf("Begin(k2) after the migration = %s, %v; want completed", o, err)
	}
	if o, _, err := s.Begin(ctx, store.Claim{Key: "k3", Activity: "SendEmail", ArgsHash: "h3", Owner: "o3", Now: at(10), Lease: at(20), Window: time.Hour}); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("Begin(k3) after the migration = %s, %v; want claimed", o, err)
	}
	for _, f := range []store.ReceiptFilter{{Activity: "SendEmail"}, {Decision: store.DecisionRan}, {Key: "k2", Decision: store.DecisionClaimed}, {WorkflowID: "wf2"}} {
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
	var idx []string
	rows, err := conn.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'idemgate_receipts' ORDER BY indexname`, name)
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
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if w := []string{"idemgate_receipts_key", "idemgate_receipts_pkey", "idemgate_receipts_time", "idemgate_receipts_workflow"}; !reflect.DeepEqual(idx, w) {
		t.Fatalf("receipts indexes after the migration = %v; want %v", idx, w)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM "+name+".idemgate_receipts"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("DELETE of receipts after the migration: %v; want the append-only trigger to reject it", err)
	}
}
