package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
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
	ctx := context.Background()
	sd, conn, name := oldSchema(t, 2,
		`INSERT INTO idemgate_records (key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
			workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at) VALUES
			('k2', 'SendEmail', 'destructive', 'h2', '\x5b325d', 'completed', 'o2', '2026-11-29 12:00:05Z', '\x7b7d', false,
			 'wf2', 'run', 3, 2, '2026-11-29 12:00:04Z', '2026-11-29 12:00:06Z', '2099-01-01 00:00:00Z')`,
		`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason) VALUES
			('2026-11-29 12:00:04Z', 'k2', 'SendEmail', 'destructive', 'claimed', 'h2', NULL, 'wf2', 'run', 3, '', '', '', ''),
			('2026-11-29 12:00:06Z', 'k2', 'SendEmail', 'destructive', 'ran', 'h2', NULL, 'wf2', 'run', 3, 'sha256:ab', '', '', '')`)

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
	// The indexes of the latest version (11 adds the partial ones of the rare
	// decisions and of the refusals).
	if w := []string{"idemgate_receipts_decision_rare", "idemgate_receipts_key", "idemgate_receipts_pkey", "idemgate_receipts_refusals",
		"idemgate_receipts_time", "idemgate_receipts_workflow"}; !reflect.DeepEqual(idx, w) {
		t.Fatalf("receipts indexes after the migration = %v; want %v", idx, w)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM "+name+".idemgate_receipts"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("DELETE of receipts after the migration: %v; want the append-only trigger to reject it", err)
	}
}

// oldSchema makes a fresh PostgreSQL schema at version (applying migrations up to
// it), runs stmts in it, and returns a DSN whose search_path is that schema, a
// connection to the database, and the schema's name. The schema is dropped when
// the test ends.
func oldSchema(t *testing.T, version int, stmts ...string) (dsn string, conn *pgx.Conn, name string) {
	t.Helper()
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
	t.Cleanup(func() { conn.Close(ctx) })
	name = fmt.Sprintf("idemgate_v%d_%s", version, strings.ReplaceAll(uuid.NewString()[:8], "-", ""))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE") })
	u, err := url.Parse(d)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	dsn = u.String()

	old, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(ctx)
	all := []string{`CREATE TABLE idemgate_schema_version (version integer NOT NULL PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`}
	for i := range version {
		all = append(all, migrations[i], fmt.Sprintf("INSERT INTO idemgate_schema_version (version) VALUES (%d)", i+1))
	}
	for _, stmt := range append(all, stmts...) {
		if _, err := old.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return dsn, conn, name
}

// A schema at version 3, with records and receipts in it, opens under version 4
// with its records under the rules of version 4: what may have reached the vendor
// says so (unknown records, claims taken over, and keys a takeover's definite
// failure released without a person's word), a live claim is kept past its
// window, and the new idemgate_begin applies the rules.
func TestMigrateFromVersion3(t *testing.T) {
	ctx := context.Background()
	// Times are hours after t0: 25h is t0 + 25 hours.
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	hours := regexp.MustCompile(`\b(\d+)h\b`)
	at := func(q string) string {
		return hours.ReplaceAllString(q, `(timestamptz '2026-11-29 00:00:00Z' + interval '$1 hours')`)
	}
	sd, _, _ := oldSchema(t, 3,
		// Receipts: k-takeover-released was claimed at 1h, taken over at 2h, released;
		// k-resolved likewise but a person resolved it not-sent at 4h; k-reclaimed
		// was taken over at 2h and re-claimed after a person's release at 5h.
		at(`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason, resolution) VALUES
			(1h, 'k-takeover-released', 'ChargeCard', 'destructive', 'claimed', 'h', NULL, 'wf', 'run', 1, '', '', '', '', ''),
			(2h, 'k-takeover-released', 'ChargeCard', 'destructive', 'taken-over', 'h', NULL, 'wf', 'run', 2, '', '', '', '', ''),
			(3h, 'k-takeover-released', 'ChargeCard', 'destructive', 'released', 'h', NULL, 'wf', 'run', 2, '', '', '', '', ''),
			(1h, 'k-resolved', 'ChargeCard', 'destructive', 'claimed', 'h', NULL, 'wf', 'run', 1, '', '', '', '', ''),
			(2h, 'k-resolved', 'ChargeCard', 'destructive', 'taken-over', 'h', NULL, 'wf', 'run', 2, '', '', '', '', ''),
			(4h, 'k-resolved', 'ChargeCard', 'destructive', 'resolved', 'h', NULL, 'wf', 'run', 2, '', '', 'alice', 'r', 'not-sent'),
			(1h, 'k-reclaimed', 'ChargeCard', 'destructive', 'claimed', 'h', NULL, 'wf', 'run', 1, '', '', '', '', ''),
			(2h, 'k-reclaimed', 'ChargeCard', 'destructive', 'taken-over', 'h', NULL, 'wf', 'run', 2, '', '', '', '', ''),
			(5h, 'k-reclaimed', 'ChargeCard', 'destructive', 'claimed', 'h', NULL, 'wf', 'run', 3, '', '', '', '', ''),
			(6h, 'k-reclaimed', 'ChargeCard', 'destructive', 'released', 'h', NULL, 'wf', 'run', 3, '', '', '', '', '')`),
		// Records: state, lease, claims, created_at, updated_at, expires_at (in hours).
		at(`INSERT INTO idemgate_records (key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
			workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at) VALUES
			('k-unknown', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'unknown', 'o1', 1h, NULL, false, 'wf', 'run', 1, 1, 1h, 1h, 25h),
			('k-fresh', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'claimed', 'o2', 48h, NULL, false, 'wf', 'run', 1, 1, 1h, 1h, 25h),
			('k-taken', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'claimed', 'o3', 3h, NULL, false, 'wf', 'run', 2, 2, 1h, 2h, 25h),
			('k-takeover-released', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'released', 'o4', 3h, NULL, false, 'wf', 'run', 2, 2, 1h, 3h, 25h),
			('k-resolved', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'released', 'o5', 3h, NULL, false, 'wf', 'run', 2, 2, 1h, 4h, 25h),
			('k-reclaimed', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'released', 'o6', 6h, NULL, false, 'wf', 'run', 3, 3, 5h, 6h, 29h),
			('k-completed', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'completed', 'o7', 1h, '\x7b7d', false, 'wf', 'run', 1, 1, 1h, 1h, 25h)`))

	s, err := Open(ctx, sd)
	if err != nil {
		t.Fatalf("open a version 3 schema: %v", err)
	}
	defer s.Close()
	for _, w := range []struct {
		key     string
		state   store.State
		may     bool
		expires time.Time
	}{
		{"k-unknown", store.StateUnknown, true, h(25)},
		{"k-fresh", store.StateClaimed, false, h(48).Add(store.LeaseMargin)},
		{"k-taken", store.StateClaimed, true, h(25)},
		{"k-takeover-released", store.StateUnknown, true, h(25)},
		{"k-resolved", store.StateReleased, false, h(25)},
		{"k-reclaimed", store.StateReleased, false, h(29)},
		{"k-completed", store.StateCompleted, false, h(25)},
	} {
		r, err := s.Get(ctx, w.key)
		if err != nil || r.State != w.state || r.MayHaveSent != w.may || !r.ExpiresAt.Equal(w.expires) || string(r.Args) != "[1]" {
			t.Errorf("%s after the migration = state %q MayHaveSent %v ExpiresAt %v args %q (%v); want %q %v %v",
				w.key, r.State, r.MayHaveSent, r.ExpiresAt, r.Args, err, w.state, w.may, w.expires)
		}
	}
	if r, err := s.Get(ctx, "k-completed"); err != nil || string(r.Result) != "{}" || r.Claims != 1 || !r.CreatedAt.Equal(h(1)) {
		t.Fatalf("k-completed after the migration = %+v, %v", r, err)
	}
	// The live claim outlives its window; the takeover's definite failure now refuses.
	c := store.Claim{Key: "k-fresh", ArgsHash: "h", Owner: "o9", Now: h(30), Lease: h(31), Window: time.Hour, TakeOver: true}
	if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeInFlight {
		t.Fatalf("Begin(k-fresh) past its window, lease running = %s, %v; want in-flight", o, err)
	}
	c.Key, c.TakeOver, c.Now = "k-takeover-released", false, h(5)
	if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeUnknown {
		t.Fatalf("Begin(k-takeover-released) = %s, %v; want unknown", o, err)
	}
	if err := s.Release(ctx, store.Transition{Key: "k-taken", Owner: "o3", Now: h(2)}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(ctx, "k-taken"); err != nil || r.State != store.StateUnknown {
		t.Fatalf("release of a migrated takeover = %q, %v; want unknown", r.State, err)
	}
	// The takeover by the new idemgate_begin marks the record and keeps it while it may run.
	c = store.Claim{Key: "k-unknown", ArgsHash: "h", Owner: "o10", Now: h(24), Lease: h(72), Window: time.Hour, TakeOver: true}
	if o, r, err := s.Begin(ctx, c); err != nil || o != store.OutcomeTakenOver || !r.MayHaveSent || !r.ExpiresAt.Equal(h(72).Add(store.LeaseMargin)) || !r.CreatedAt.Equal(h(1)) {
		t.Fatalf("Begin(k-unknown, take over) = %s %+v, %v", o, r, err)
	}
}

// A schema at version 4 with 25,000 receipts opens under version 5: receipts stay
// append-only outside a prune (a token committed by another transaction opens
// nothing), and inside one for a live key's receipt and a pruned receipt; a
// prune in three batches removes the old receipts of keys without a record, keeps
// the rest, and records itself once.
func TestMigrateFromVersion4Prune(t *testing.T) {
	ctx := context.Background()
	const n, live = 25000, 100
	sd, conn, name := oldSchema(t, 4,
		fmt.Sprintf(`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason, resolution)
			SELECT timestamptz '2020-01-01Z' + i * interval '1 second', 'old-' || i, 'ChargeCard', 'destructive', 'ran', 'h', NULL,
				'wf', 'run', 1, '', '', '', '', '' FROM generate_series(0, %d) i`, n-1),
		`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason, resolution)
			SELECT timestamptz '2026-01-01Z', 'new-' || i, 'ChargeCard', 'destructive', 'ran', 'h', NULL,
				'wf', 'run', 1, '', '', '', '', '' FROM generate_series(0, 9) i`,
		fmt.Sprintf(`INSERT INTO idemgate_records (`+recordColumnsV7+`)
			SELECT 'old-' || i, 'ChargeCard', 'destructive', 'h', NULL, 'completed', 'o', timestamptz '2020-01-01Z', NULL, false,
				'wf', 'run', 1, 1, timestamptz '2020-01-01Z', timestamptz '2020-01-01Z', timestamptz '2099-01-01Z', false
			FROM generate_series(0, %d) i`, live-1))

	s, err := Open(ctx, sd)
	if err != nil {
		t.Fatalf("open a version 4 schema: %v", err)
	}
	defer s.Close()
	var v int
	if err := conn.QueryRow(ctx, "SELECT max(version) FROM "+name+".idemgate_schema_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version = %d, %v; want %d", v, err, SchemaVersion)
	}
	tbl := name + ".idemgate_receipts"
	if _, err := conn.Exec(ctx, "DELETE FROM "+tbl+" WHERE key = 'old-500'"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("DELETE outside a prune: %v; want the append-only trigger to reject it", err)
	}
	// A token committed by another transaction opens nothing.
	if _, err := conn.Exec(ctx, "INSERT INTO "+name+".idemgate_prune_token (txid) VALUES (txid_current())"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM "+tbl+" WHERE key = 'old-500'"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("DELETE beside another transaction's token: %v; want the append-only trigger to reject it", err)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM "+name+".idemgate_prune_token"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DELETE FROM " + tbl + " WHERE key = 'old-5'",
		"UPDATE " + tbl + " SET reason = 'x' WHERE key = 'old-500'",
		"INSERT INTO " + tbl + " (time, key, activity, effect, decision, args_hash, workflow_id, run_id, attempt, result_ref, error, actor, reason) VALUES (now(), '', '', '', 'pruned', '', '', '', 0, '', '', '', '')"} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+name+".idemgate_prune_token (txid) VALUES (txid_current())"); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, q)
		if strings.HasPrefix(q, "INSERT") && err == nil {
			_, err = tx.Exec(ctx, "DELETE FROM "+tbl+" WHERE decision = 'pruned'")
		}
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s inside a prune's transaction: %v; want the trigger to reject it", q, err)
		}
		tx.Rollback(ctx)
	}

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	removed, err := s.Prune(ctx, store.Prune{Before: now, Now: now, Actor: "alice", Reason: "retention"})
	if err != nil || removed != n-live {
		t.Fatalf("Prune = %d, %v; want %d", removed, err, n-live)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var kept, fresh []string
	var pruned []store.Receipt
	for _, r := range rs {
		switch {
		case r.Decision == store.DecisionPruned:
			pruned = append(pruned, r)
		case strings.HasPrefix(r.Key, "new-"):
			fresh = append(fresh, r.Key)
		default:
			kept = append(kept, r.Key)
		}
	}
	if len(kept) != live || kept[0] != "old-0" || kept[live-1] != fmt.Sprint("old-", live-1) || len(fresh) != 10 {
		t.Fatalf("after the prune: kept %d old receipts (%v…), %d new; want old-0 … old-%d and the 10 new ones", len(kept), kept[:min(3, len(kept))], len(fresh), live-1)
	}
	if len(pruned) != 1 || pruned[0].Actor != "alice" || !strings.Contains(string(pruned[0].Call), fmt.Sprintf(`"count":%d`, n-live)) {
		t.Fatalf("pruned receipts = %+v; want one by alice counting %d", pruned, n-live)
	}
}

// A schema at version 5 opens under version 6: its receipts stay whole and say
// nothing of what decided their effect (""), one idemgate_begin is left (the old
// signature is gone), and new receipts — the claim and takeover receipts the new
// idemgate_begin appends, a transition's, an appended one — keep theirs.
func TestMigrateFromVersion5(t *testing.T) {
	ctx := context.Background()
	at := func(sec int) time.Time { return time.Date(2026, 11, 29, 12, 0, sec, 0, time.UTC) }
	sd, conn, name := oldSchema(t, 5,
		`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason, resolution) VALUES
			('2026-11-29 12:00:01Z', 'k1', 'ChargeCard', 'destructive', 'claimed', 'h', NULL, 'wf', 'run', 1, '', '', '', '', ''),
			('2026-11-29 12:00:02Z', 'k1', 'ChargeCard', 'destructive', 'unknown', 'h', NULL, 'wf', 'run', 1, '', 'reset', '', '', '')`,
		`INSERT INTO idemgate_records (`+recordColumnsV7+`) VALUES
			('k1', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'unknown', 'o1', '2026-11-29 12:00:01Z', NULL, false,
			 'wf', 'run', 1, 1, '2026-11-29 12:00:01Z', '2026-11-29 12:00:02Z', '2099-01-01 00:00:00Z', true)`)

	s, err := Open(ctx, sd)
	if err != nil {
		t.Fatalf("open a version 5 schema: %v", err)
	}
	defer s.Close()
	var v, fns int
	if err := conn.QueryRow(ctx, "SELECT max(version) FROM "+name+".idemgate_schema_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version = %d, %v; want %d", v, err, SchemaVersion)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = $1 AND p.proname = 'idemgate_begin'`, name).Scan(&fns); err != nil || fns != 1 {
		t.Fatalf("idemgate_begin functions after the migration = %d, %v; want 1 (the old signature dropped)", fns, err)
	}
	old, err := s.Receipts(ctx, store.ReceiptFilter{Key: "k1"})
	if err != nil || len(old) != 2 {
		t.Fatalf("receipts of version 5 after the migration = %+v, %v", old, err)
	}
	want := []store.Receipt{
		{ID: old[0].ID, Time: at(1), Key: "k1", Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionClaimed,
			ArgsHash: "h", WorkflowID: "wf", RunID: "run", Attempt: 1},
		{ID: old[1].ID, Time: at(2), Key: "k1", Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionUnknown,
			ArgsHash: "h", WorkflowID: "wf", RunID: "run", Attempt: 1, Error: "reset"},
	}
	if !reflect.DeepEqual(old, want) {
		t.Fatalf("receipts of version 5 after the migration = %+v; want %+v", old, want)
	}
	c := store.Claim{Key: "k1", Activity: "ChargeCard", Effect: "destructive", EffectSource: store.EffectByHint, ArgsHash: "h",
		Owner: "o2", Now: at(10), Lease: at(70), Window: time.Hour, TakeOver: true}
	if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeTakenOver {
		t.Fatalf("Begin(k1, take over) = %s, %v", o, err)
	}
	if err := s.Complete(ctx, store.Transition{Key: "k1", Owner: "o2", Now: at(11), Window: time.Hour,
		Receipt: store.Receipt{Key: "k1", Decision: store.DecisionRan, EffectSource: store.EffectByHint}}); err != nil {
		t.Fatal(err)
	}
	c = store.Claim{Key: "k2", Activity: "ChargeCard", Effect: "destructive", EffectSource: store.EffectByOverride, ArgsHash: "h",
		Owner: "o3", Now: at(12), Lease: at(72), Window: time.Hour}
	if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("Begin(k2) = %s, %v", o, err)
	}
	if err := s.Append(ctx, store.Receipt{Time: at(13), Key: "k2", Decision: store.DecisionRefusedInFlight, EffectSource: store.EffectByName}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, fmt.Sprintf("%s %s/%s", r.Key, r.Decision, r.EffectSource))
	}
	if w := "[k1 claimed/ k1 unknown/ k1 taken-over/hint k1 ran/hint k2 claimed/override k2 refused-in-flight/name]"; fmt.Sprint(got) != w {
		t.Fatalf("receipts after the migration = %v; want %s", got, w)
	}
}

// recordColumnsV7 are the record columns of schema versions 4 to 7, which the tests
// of older schemas write.
const recordColumnsV7 = `key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
	workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at, may_have_sent`

// A schema of every earlier version opens under version 8: its records carry no
// evidence that a key left through a keyed transport (an unknown destructive
// outcome is refused, not re-sent), evidence is recorded for the owner only, and
// the schema gets an identity, created once: the same after a reopen, another in
// another schema. (Since version 12 a takeover keeps the evidence of the claims
// before it, and a blank for a claim that recorded none: TestMigrateToVersion12.)
func TestMigrateToVersion8(t *testing.T) {
	ctx := context.Background()
	at := func(sec int) time.Time { return time.Date(2026, 11, 29, 12, 0, sec, 0, time.UTC) }
	ids := map[string]bool{}
	for from := 1; from <= 7; from++ {
		cols := strings.TrimSuffix(recordColumnsV7, ", may_have_sent")
		vals := `'k1', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'unknown', 'o1', '2026-11-29 12:00:01Z', NULL, false,
			 'wf', 'run', 1, 1, '2026-11-29 12:00:01Z', '2026-11-29 12:00:02Z', '2099-01-01 00:00:00Z'`
		if from >= 4 {
			cols, vals = recordColumnsV7, vals+", true"
		}
		sd, _, _ := oldSchema(t, from, `INSERT INTO idemgate_records (`+cols+`) VALUES (`+vals+`)`)
		s, err := Open(ctx, sd)
		if err != nil {
			t.Fatalf("open a version %d schema: %v", from, err)
		}
		r, err := s.Get(ctx, "k1")
		if err != nil || r.State != store.StateUnknown || len(r.Sent) != 0 {
			t.Fatalf("version %d: the old record = %+v, %v; want unknown without evidence", from, r, err)
		}
		if _, ok := store.ResendWindow(r, time.Hour); ok {
			t.Fatalf("version %d: an old record allows a re-send", from)
		}
		id := s.Identity()
		if id == "" || ids[id] {
			t.Fatalf("version %d: identity %q (seen %v); want a new one per schema", from, id, ids)
		}
		ids[id] = true
		c := store.Claim{Key: "k1", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Owner: "o2", Now: at(10),
			Lease: at(70), Window: time.Hour, TakeOver: true}
		if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeTakenOver {
			t.Fatalf("version %d: Begin(k1, take over) = %s, %v", from, o, err)
		}
		e := store.Sent{Via: "idemhttp:stripe", Host: "api.stripe.com", Window: 1<<63 - 1}
		if err := s.RecordSent(ctx, "k1", "o1", e); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("version %d: RecordSent by the old owner = %v, want ErrNotOwner", from, err)
		}
		for range 2 {
			if err := s.RecordSent(ctx, "k1", "o2", e); err != nil {
				t.Fatalf("version %d: RecordSent: %v", from, err)
			}
		}
		if err := s.Abandon(ctx, store.Transition{Key: "k1", Owner: "o2", Now: at(11)}); err != nil {
			t.Fatal(err)
		}
		mine := e
		mine.Owner = "o2"
		want := []store.Sent{{Owner: "o1"}, mine} // o1's claim recorded none
		if r, err := s.Get(ctx, "k1"); err != nil || !reflect.DeepEqual(r.Sent, want) {
			t.Fatalf("version %d: evidence = %+v, %v; want %+v (o2's once)", from, r.Sent, err, want)
		}
		c.Owner, c.Now, c.Lease = "o3", at(20), at(80)
		if _, rec, err := s.Begin(ctx, c); err != nil || !reflect.DeepEqual(rec.Sent, want) {
			t.Fatalf("version %d: a takeover kept the evidence %+v, %v; want %+v", from, rec.Sent, err, want)
		}
		s.Close()
		s, err = Open(ctx, sd)
		if err != nil {
			t.Fatal(err)
		}
		if s.Identity() != id {
			t.Fatalf("version %d: identity after a reopen %q, want %q", from, s.Identity(), id)
		}
		s.Close()
	}
}

// A schema of every earlier version opens under version 10: its records have no
// root workflow ID (store.Root falls back to the workflow ID, so a finished charge
// past its window still answers its own workflow's reset, and another workflow's
// claim is a new write), and a claim's root is stored, compared (the new
// idemgate_begin) and kept by a takeover.
func TestMigrateToVersion10(t *testing.T) {
	ctx := context.Background()
	at := func(sec int) time.Time { return time.Date(2026, 11, 29, 12, 0, sec, 0, time.UTC) }
	for from := 1; from <= 9; from++ {
		cols := strings.TrimSuffix(recordColumnsV7, ", may_have_sent")
		vals := `'k1', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'completed', 'o1', '2026-11-29 12:00:01Z', '\x7b7d', false,
			 'wf', 'run', 1, 1, '2026-11-29 12:00:01Z', '2026-11-29 12:00:02Z', '2026-11-29 12:00:03Z'`
		if from >= 4 {
			cols, vals = recordColumnsV7, vals+", false"
		}
		sd, _, _ := oldSchema(t, from, `INSERT INTO idemgate_records (`+cols+`) VALUES (`+vals+`)`)
		s, err := Open(ctx, sd)
		if err != nil {
			t.Fatalf("open a version %d schema: %v", from, err)
		}
		r, err := s.Get(ctx, "k1")
		if err != nil || r.RootWorkflowID != "" || store.Root(r) != "wf" {
			t.Fatalf("version %d: the old record = %+v, %v; want no root", from, r, err)
		}
		reset := store.Claim{Key: "k1", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Owner: "o2", Now: at(10),
			Lease: at(70), Window: time.Hour, WorkflowID: "wf", RunID: "run-2", RootWorkflowID: "root"}
		if o, _, err := s.Begin(ctx, reset); err != nil || o != store.OutcomeCompleted {
			t.Fatalf("version %d: its workflow's reset past the window = %s, %v; want the stored result", from, o, err)
		}
		c := reset
		c.Key, c.WorkflowID, c.RunID = "k2", "child-1", "run-c1"
		if o, rec, err := s.Begin(ctx, c); err != nil || o != store.OutcomeClaimed || rec.RootWorkflowID != "root" {
			t.Fatalf("version %d: Begin(k2) = %s, root %q, %v", from, o, rec.RootWorkflowID, err)
		}
		if err := s.Complete(ctx, store.Transition{Key: "k2", Owner: "o2", Now: at(11), Window: time.Second,
			Receipt: store.Receipt{Key: "k2", Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionRan, ArgsHash: "h"}}); err != nil {
			t.Fatalf("version %d: Complete(k2): %v", from, err)
		}
		// Past the window: a child of the same root under a new ID gets the stored result.
		again := c
		again.Owner, again.WorkflowID, again.RunID, again.Now, again.Lease = "o3", "child-2", "run-c2", at(8000), at(8060)
		if o, rec, err := s.Begin(ctx, again); err != nil || o != store.OutcomeCompleted || rec.WorkflowID != "child-1" {
			t.Fatalf("version %d: the re-created child past the window = %s (workflow %q), %v; want the stored result",
				from, o, rec.WorkflowID, err)
		}
		other := again
		other.Owner, other.WorkflowID, other.RootWorkflowID = "o4", "wf-9", "root-9"
		if o, rec, err := s.Begin(ctx, other); err != nil || o != store.OutcomeClaimed || rec.RootWorkflowID != "root-9" {
			t.Fatalf("version %d: another root past the window = %s (root %q), %v; want a new write", from, o, rec.RootWorkflowID, err)
		}
		s.Close()
	}
}

// A schema of every earlier version opens under version 11 with its data: the
// identity is kept, the records' expiry index holds the closed records only, the
// expired records of both kinds (a completion; an idempotent claim long gone) are
// swept and the live one kept, and the receipts stay append-only.
func TestMigrateToVersion11(t *testing.T) {
	ctx := context.Background()
	at := func(d time.Duration) string {
		return "'" + time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).Add(d).Format(time.RFC3339Nano) + "'"
	}
	now := time.Date(2026, 11, 1, 14, 0, 0, 0, time.UTC)
	for from := 1; from <= 10; from++ {
		cols := strings.TrimSuffix(recordColumnsV7, ", may_have_sent")
		extra := ""
		if from >= 4 {
			cols, extra = recordColumnsV7, ", false"
		}
		row := func(key, state, expires string) string {
			return fmt.Sprintf(`INSERT INTO idemgate_records (%s) VALUES ('%s', 'Sync', 'idempotent-write', 'h', '\x5b315d', '%s', 'o-%s', %s, NULL, false,
				'wf', 'run', 1, 1, %s, %s, %s%s)`, cols, key, state, key, at(0), at(0), at(0), expires, extra)
		}
		sd, conn, name := oldSchema(t, from, row("done", "completed", at(time.Hour)), row("gone", "claimed", at(10*time.Minute)),
			row("live", "completed", at(1000*time.Hour)),
			`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, workflow_id, run_id, attempt, result_ref, error, actor, reason)
				VALUES (`+at(0)+`, 'done', 'Sync', 'idempotent-write', 'ran', 'h', 'wf', 'run', 1, '', '', '', '')`)
		var identity string
		if from >= 8 {
			if err := conn.QueryRow(ctx, "SELECT value FROM "+name+".idemgate_meta WHERE name = 'identity'").Scan(&identity); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open(ctx, sd)
		if err != nil {
			t.Fatalf("open a version %d schema: %v", from, err)
		}
		if identity != "" && s.Identity() != identity {
			t.Fatalf("version %d: identity %q after the migration; want %q kept", from, s.Identity(), identity)
		}
		var v int
		if err := conn.QueryRow(ctx, "SELECT max(version) FROM "+name+".idemgate_schema_version").Scan(&v); err != nil || v != SchemaVersion {
			t.Fatalf("version %d: schema version = %d, %v; want %d", from, v, err, SchemaVersion)
		}
		var def string
		if err := conn.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'idemgate_records_closed'`, name).Scan(&def); err != nil ||
			!strings.Contains(def, "(expires_at, key) WHERE (state = ANY (ARRAY['completed'::text, 'released'::text]))") {
			t.Fatalf("version %d: the closed records' expiry index: %q, %v", from, def, err)
		}
		if err := conn.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'idemgate_receipts_decision_rare'`, name).Scan(&def); err != nil ||
			!strings.Contains(def, "(decision, id) WHERE (decision <> ALL (ARRAY['claimed'::text, 'ran'::text]))") {
			t.Fatalf("version %d: the rare decisions' index: %q, %v", from, def, err)
		}
		if err := conn.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'idemgate_receipts_refusals'`, name).Scan(&def); err != nil ||
			!strings.Contains(def, "(key) WHERE (decision = 'refused-in-flight'::text)") {
			t.Fatalf("version %d: the refusals' index: %q, %v", from, def, err)
		}
		var old int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'idemgate_records_expires'`, name).Scan(&old); err != nil || old != 0 {
			t.Fatalf("version %d: the expiry index of every record is still there (%d, %v)", from, old, err)
		}
		if n, err := s.Sweep(ctx, now, 0); err != nil || n != 2 {
			t.Errorf("version %d: Sweep = %d, %v; want the expired completion and the long-gone claim", from, n, err)
		}
		if _, err := s.Get(ctx, "live"); err != nil {
			t.Errorf("version %d: the live record after the sweep: %v", from, err)
		}
		for _, q := range []string{"UPDATE " + name + ".idemgate_receipts SET reason = 'x'", "DELETE FROM " + name + ".idemgate_receipts"} {
			if _, err := conn.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("version %d: %s: %v; want the append-only trigger to refuse it", from, q, err)
			}
		}
		s.Close()
	}
}

// A schema of version 11 opens under version 12 with its evidence as it was: an
// unknown record's untagged evidence (stored before the claim tag) is its current
// claim's, so its re-send window still stands; a takeover by the new idemgate_begin
// keeps it, tagged with the owner it takes over from, and the new owner's own
// evidence joins it, once per claim; a second takeover keeps both and leaves a blank
// for a claim that recorded nothing, so no re-send rests on the record after it.
func TestMigrateToVersion12(t *testing.T) {
	ctx := context.Background()
	at := func(sec int) time.Time { return time.Date(2026, 11, 29, 12, 0, sec, 0, time.UTC) }
	sd, _, _ := oldSchema(t, 11, `INSERT INTO idemgate_records (`+recordColumnsV7+`, sent) VALUES
		('k1', 'ChargeCard', 'destructive', 'h', '\x5b315d', 'unknown', 'o1', '2026-11-29 12:00:01Z', NULL, false,
		 'wf', 'run', 1, 1, '2026-11-29 12:00:01Z', '2026-11-29 12:00:02Z', '2099-01-01 00:00:00Z', true,
		 '[{"via":"idemhttp:p","host":"p.example","window":86400000000000},{"via":"mcp:q","host":"q","window":3600000000000}]')`)
	s, err := Open(ctx, sd)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := store.Sent{Via: "idemhttp:p", Host: "p.example", Window: 24 * time.Hour}
	q := store.Sent{Via: "mcp:q", Host: "q", Window: time.Hour}
	r, err := s.Get(ctx, "k1")
	if err != nil || !reflect.DeepEqual(r.Sent, []store.Sent{p, q}) {
		t.Fatalf("the old record's evidence = %+v, %v; want it untagged as stored", r.Sent, err)
	}
	if w, ok := store.ResendWindow(r, 48*time.Hour); !ok || w != time.Hour {
		t.Fatalf("ResendWindow of the old record = %s, %v; want q's hour (its current claim's evidence)", w, ok)
	}
	tag := func(e store.Sent, owner string) store.Sent { e.Owner = owner; return e }
	c := store.Claim{Key: "k1", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Owner: "o2", Now: at(10),
		Lease: at(70), Window: time.Hour, TakeOver: true}
	want := []store.Sent{tag(p, "o1"), tag(q, "o1")}
	if o, rec, err := s.Begin(ctx, c); err != nil || o != store.OutcomeTakenOver || !reflect.DeepEqual(rec.Sent, want) {
		t.Fatalf("takeover = %s, %+v, %v; want the evidence kept, tagged o1: %+v", o, rec.Sent, err, want)
	}
	for range 2 {
		if err := s.RecordSent(ctx, "k1", "o2", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Abandon(ctx, store.Transition{Key: "k1", Owner: "o2", Now: at(11)}); err != nil {
		t.Fatal(err)
	}
	want = append(want, tag(p, "o2"))
	r, err = s.Get(ctx, "k1")
	if err != nil || !reflect.DeepEqual(r.Sent, want) {
		t.Fatalf("evidence = %+v, %v; want %+v", r.Sent, err, want)
	}
	if w, ok := store.ResendWindow(r, 48*time.Hour); !ok || w != time.Hour {
		t.Fatalf("ResendWindow after o2 re-sent through p only = %s, %v; want q's hour: o1 reached q", w, ok)
	}
	c.Owner, c.Now, c.Lease = "o3", at(20), at(80)
	if _, _, err := s.Begin(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.Abandon(ctx, store.Transition{Key: "k1", Owner: "o3", Now: at(21)}); err != nil {
		t.Fatal(err)
	}
	c.Owner, c.Now, c.Lease = "o4", at(30), at(90)
	if _, rec, err := s.Begin(ctx, c); err != nil || !reflect.DeepEqual(rec.Sent, append(want, store.Sent{Owner: "o3"})) {
		t.Fatalf("the takeover of a claim without evidence keeps %+v, %v; want a blank for o3 after %+v", rec.Sent, err, want)
	}
	if err := s.RecordSent(ctx, "k1", "o4", p); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(ctx, "k1"); err != nil {
		t.Fatal(err)
	} else if w, ok := store.ResendWindow(r, 48*time.Hour); ok {
		t.Fatalf("ResendWindow = %s past o3's blank; want none", w)
	}
}
