package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
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
			('k3', 'UpsertContact', 'idempotent-write', 'h3', NULL, 'claimed', 'o3', 7, NULL, 1, 'wf3', 'run3', 1, 1, 7, 7, 8)`,
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
	// k3's claim is kept until its lease plus store.LeaseMargin (version 4); it is an
	// idempotent write, so it expires then (a destructive one with no known outcome
	// never does: testUnknownOutlivesWindow in storetest).
	if n, err := s.Sweep(ctx, fromMicro(7).Add(store.LeaseMargin-time.Microsecond), 0); err != nil || n != 0 {
		t.Fatalf("Sweep inside k3's lease margin = %d, %v; want nothing removed", n, err)
	}
	if n, err := s.Sweep(ctx, fromMicro(7).Add(store.LeaseMargin), 0); err != nil || n != 1 {
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
	// The indexes of the latest version (10: the expiry index holds the closed
	// records only, the time index the receipts written before version 10).
	wantIdx := []string{"idemgate_receipts_decision_rare", "idemgate_receipts_key", "idemgate_receipts_refusals", "idemgate_receipts_time_before_v10", "idemgate_receipts_workflow", "idemgate_records_closed", "idemgate_records_open"}
	if !reflect.DeepEqual(idx, wantIdx) {
		t.Fatalf("indexes after the migration = %v; want %v", idx, wantIdx)
	}
	if _, err := db.Exec("DELETE FROM idemgate_receipts"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("DELETE of receipts after the migration: %v; want the append-only trigger to abort it", err)
	}
}

// A file written by schema version 3 opens under version 4 with its records under
// the rules of version 4: what may have reached the vendor says so (unknown
// records, claims taken over, and keys a takeover's definite failure released
// without a person's word), and a live claim is kept past its window.
func TestMigrateFromVersion3(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	const hour = int64(time.Hour / time.Microsecond)
	// Times are in hours: 25h is 25 hours in Unix microseconds.
	hours := regexp.MustCompile(`\b(\d+)h\b`)
	for _, q := range []string{migrations[0], migrations[1], migrations[2], "PRAGMA user_version = 3",
		// Receipts: k-takeover-released was claimed at 1h, taken over at 2h, released;
		// k-resolved likewise but a person resolved it not-sent at 4h; k-reclaimed
		// was taken over at 2h and re-claimed after a person's release at 5h.
		`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
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
			(6h, 'k-reclaimed', 'ChargeCard', 'destructive', 'released', 'h', NULL, 'wf', 'run', 3, '', '', '', '', '')`,
		// Records: state, lease, claims, created_at, updated_at, expires_at (in hours).
		`INSERT INTO idemgate_records (` + v3RecordColumns + `) VALUES
			('k-unknown', 'ChargeCard', 'destructive', 'h', '[1]', 'unknown', 'o1', 1h, NULL, 0, 'wf', 'run', 1, 1, 1h, 1h, 25h),
			('k-fresh', 'ChargeCard', 'destructive', 'h', '[1]', 'claimed', 'o2', 48h, NULL, 0, 'wf', 'run', 1, 1, 1h, 1h, 25h),
			('k-taken', 'ChargeCard', 'destructive', 'h', '[1]', 'claimed', 'o3', 3h, NULL, 0, 'wf', 'run', 2, 2, 1h, 2h, 25h),
			('k-takeover-released', 'ChargeCard', 'destructive', 'h', '[1]', 'released', 'o4', 3h, NULL, 0, 'wf', 'run', 2, 2, 1h, 3h, 25h),
			('k-resolved', 'ChargeCard', 'destructive', 'h', '[1]', 'released', 'o5', 3h, NULL, 0, 'wf', 'run', 2, 2, 1h, 4h, 25h),
			('k-reclaimed', 'ChargeCard', 'destructive', 'h', '[1]', 'released', 'o6', 6h, NULL, 0, 'wf', 'run', 3, 3, 5h, 6h, 29h),
			('k-completed', 'ChargeCard', 'destructive', 'h', '[1]', 'completed', 'o7', 1h, X'7b7d', 0, 'wf', 'run', 1, 1, 1h, 1h, 25h)`,
	} {
		q = hours.ReplaceAllString(q, fmt.Sprintf("($1*%d)", hour))
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a version 3 file: %v", err)
	}
	defer s.Close()
	h := func(n int64) time.Time { return fromMicro(n * hour) }
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
		if err != nil || r.State != w.state || r.MayHaveSent != w.may || !r.ExpiresAt.Equal(w.expires) || r.Args == nil {
			t.Errorf("%s after the migration = state %q MayHaveSent %v ExpiresAt %v (%v); want %q %v %v",
				w.key, r.State, r.MayHaveSent, r.ExpiresAt, err, w.state, w.may, w.expires)
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
	// NORMAL: the commit queue syncs the WAL itself after the commits that must be
	// on disk (TestSyncedWritesSyncTheWALAfterTheirCommit).
	if err := s.w.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 1 {
		t.Fatalf("synchronous = %d, %v; want 1 (NORMAL)", sync, err)
	}
}

// A file written by schema version 4 with 25,000 receipts opens under version 5:
// receipts stay append-only outside a prune (and inside one for a live key's
// receipt and a pruned receipt), and a prune in three batches removes the old
// receipts of keys without a record, keeps the rest, and records itself once.
func TestMigrateFromVersion4Prune(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	const n, live = 25000, 100
	stmts := append(slices.Clone(migrations[:4]), "PRAGMA user_version = 4",
		// Receipts of old-0 … old-24999 at times 1000…; then ten new ones.
		fmt.Sprintf(`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason, resolution)
			WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < %d)
			SELECT 1000 + i, 'old-' || i, 'ChargeCard', 'destructive', 'ran', 'h', NULL, 'wf', 'run', 1, '', '', '', '', '' FROM s`, n-1),
		`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason, resolution)
			WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 9)
			SELECT 9000000000 + i, 'new-' || i, 'ChargeCard', 'destructive', 'ran', 'h', NULL, 'wf', 'run', 1, '', '', '', '', '' FROM s`,
		// old-0 … old-99 still have a record.
		fmt.Sprintf(`INSERT INTO idemgate_records (`+recordColumnsV7+`)
			WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < %d)
			SELECT 'old-' || i, 'ChargeCard', 'destructive', 'h', NULL, 'completed', 'o', 1, NULL, 0, 'wf', 'run', 1, 1, 1, 1,
				9999999999999999, 0 FROM s`, live-1))
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a version 4 file: %v", err)
	}
	defer s.Close()
	var v int
	if err := s.r.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, SchemaVersion)
	}
	// Outside a prune every DELETE is refused; inside one, a live key's receipt
	// and a pruned receipt are refused too.
	direct, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.Exec("DELETE FROM idemgate_receipts WHERE key = 'old-500'"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("DELETE outside a prune: %v; want the append-only trigger to abort it", err)
	}
	for _, q := range []string{"DELETE FROM idemgate_receipts WHERE key = 'old-5'",
		"INSERT INTO idemgate_receipts (id, time, key, activity, effect, decision, args_hash, workflow_id, run_id, attempt, result_ref, error, actor, reason) VALUES ((SELECT max(id) + 1 FROM idemgate_receipts), 1, '', '', '', 'pruned', '', '', '', 0, '', '', '', ''); DELETE FROM idemgate_receipts WHERE decision = 'pruned'"} {
		tx, err := direct.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT INTO idemgate_prune_token (id) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s inside a prune's transaction: %v; want the trigger to abort it", q, err)
		}
		tx.Rollback()
	}

	now := fromMicro(9000000000)
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

// A file written by schema version 5 opens under version 6: its receipts stay
// whole and say nothing of what decided their effect (""), and new receipts —
// the claim and takeover receipts Begin appends, a transition's, an appended
// one — keep theirs.
func TestMigrateFromVersion5(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v5.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	stmts := append(slices.Clone(migrations[:5]), "PRAGMA user_version = 5",
		`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id, run_id,
			attempt, result_ref, error, actor, reason, resolution) VALUES
			(1, 'k1', 'ChargeCard', 'destructive', 'claimed', 'h', NULL, 'wf', 'run', 1, '', '', '', '', ''),
			(2, 'k1', 'ChargeCard', 'destructive', 'unknown', 'h', NULL, 'wf', 'run', 1, '', 'reset', '', '', '')`,
		`INSERT INTO idemgate_records (`+recordColumnsV7+`) VALUES
			('k1', 'ChargeCard', 'destructive', 'h', '[1]', 'unknown', 'o1', 1, NULL, 0, 'wf', 'run', 1, 1, 1, 2, 9999999999999999, 1)`)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a version 5 file: %v", err)
	}
	defer s.Close()
	var v int
	if err := s.r.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, SchemaVersion)
	}
	old, err := s.Receipts(ctx, store.ReceiptFilter{Key: "k1"})
	want := []store.Receipt{
		{ID: 1, Time: fromMicro(1), Key: "k1", Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionClaimed,
			ArgsHash: "h", WorkflowID: "wf", RunID: "run", Attempt: 1},
		{ID: 2, Time: fromMicro(2), Key: "k1", Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionUnknown,
			ArgsHash: "h", WorkflowID: "wf", RunID: "run", Attempt: 1, Error: "reset"},
	}
	if err != nil || !reflect.DeepEqual(old, want) {
		t.Fatalf("receipts of version 5 after the migration = %+v, %v; want %+v", old, err, want)
	}
	now := time.Now()
	c := store.Claim{Key: "k1", Activity: "ChargeCard", Effect: "destructive", EffectSource: store.EffectByHint, ArgsHash: "h",
		Owner: "o2", Now: now, Lease: now.Add(time.Minute), Window: time.Hour, TakeOver: true}
	if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeTakenOver {
		t.Fatalf("Begin(k1, take over) = %s, %v", o, err)
	}
	if err := s.Complete(ctx, store.Transition{Key: "k1", Owner: "o2", Now: now, Window: time.Hour,
		Receipt: store.Receipt{Key: "k1", Decision: store.DecisionRan, EffectSource: store.EffectByHint}}); err != nil {
		t.Fatal(err)
	}
	c = store.Claim{Key: "k2", Activity: "ChargeCard", Effect: "destructive", EffectSource: store.EffectByOverride, ArgsHash: "h",
		Owner: "o3", Now: now, Lease: now.Add(time.Minute), Window: time.Hour}
	if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("Begin(k2) = %s, %v", o, err)
	}
	if err := s.Append(ctx, store.Receipt{Time: now, Key: "k2", Decision: store.DecisionRefusedInFlight, EffectSource: store.EffectByName}); err != nil {
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
// of older files write.
const recordColumnsV7 = `key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
	workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at, may_have_sent`

// A file of every earlier version opens under version 8: its records carry no
// evidence that a key left through a keyed transport (so an unknown destructive
// outcome is refused, not re-sent), evidence can be recorded, and the file gets an
// identity, created once: the same after a reopen, another in another file.
func TestMigrateToVersion8(t *testing.T) {
	ctx := context.Background()
	ids := map[string]bool{}
	for from := 1; from <= 7; from++ {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", from))
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		stmts := append(slices.Clone(migrations[:from]), fmt.Sprintf("PRAGMA user_version = %d", from))
		cols, vals := v3RecordColumns, `'k1', 'ChargeCard', 'destructive', 'h', '[1]', 'unknown', 'o1', 1, NULL, 0, 'wf', 'run', 1, 1, 1, 2, 9999999999999999`
		if from >= 4 {
			cols, vals = recordColumnsV7, vals+", 1"
		}
		stmts = append(stmts, `INSERT INTO idemgate_records (`+cols+`) VALUES (`+vals+`)`)
		for _, q := range stmts {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("version %d: %s: %v", from, q, err)
			}
		}
		db.Close()
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("open a version %d file: %v", from, err)
		}
		r, err := s.Get(ctx, "k1")
		if err != nil || r.State != store.StateUnknown || len(r.Sent) != 0 {
			t.Fatalf("version %d: the old record after the migration = %+v, %v; want unknown without evidence", from, r, err)
		}
		if _, ok := store.ResendWindow(r, time.Hour); ok {
			t.Fatalf("version %d: an old record allows a re-send", from)
		}
		id := s.Identity()
		if id == "" || ids[id] {
			t.Fatalf("version %d: identity %q (seen: %v); want a new one per file", from, id, ids)
		}
		ids[id] = true
		now := time.Now()
		c := store.Claim{Key: "k2", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Owner: "o2", Now: now,
			Lease: now.Add(time.Minute), Window: time.Hour}
		if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("version %d: Begin(k2) = %s, %v", from, o, err)
		}
		e := store.Sent{Via: "idemhttp:stripe", Host: "api.stripe.com", Window: 24 * time.Hour}
		if err := s.RecordSent(ctx, "k2", "o2", e); err != nil {
			t.Fatalf("version %d: RecordSent: %v", from, err)
		}
		s.Close()
		s, err = Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if s.Identity() != id {
			t.Fatalf("version %d: identity after a reopen %q, want %q", from, s.Identity(), id)
		}
		e.Owner = "o2" // tagged with its claim (store.ApplySent)
		if r, err := s.Get(ctx, "k2"); err != nil || !reflect.DeepEqual(r.Sent, []store.Sent{e}) {
			t.Fatalf("version %d: evidence after a reopen: %+v, %v", from, r.Sent, err)
		}
		s.Close()
	}
}

// A file of every earlier version opens under version 9: its records have no root
// workflow ID (store.Root falls back to the workflow ID, so a finished charge past
// its window still answers its own workflow's reset), and a claim's root is stored.
func TestMigrateToVersion9(t *testing.T) {
	ctx := context.Background()
	for from := 1; from <= 8; from++ {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", from))
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		stmts := append(slices.Clone(migrations[:from]), fmt.Sprintf("PRAGMA user_version = %d", from))
		cols, vals := v3RecordColumns, `'k1', 'ChargeCard', 'destructive', 'h', '[1]', 'completed', 'o1', 1, X'7b7d', 0, 'wf', 'run', 1, 1, 1, 2, 3`
		if from >= 4 {
			cols, vals = recordColumnsV7, vals+", 0"
		}
		stmts = append(stmts, `INSERT INTO idemgate_records (`+cols+`) VALUES (`+vals+`)`)
		for _, q := range stmts {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("version %d: %s: %v", from, q, err)
			}
		}
		db.Close()
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("open a version %d file: %v", from, err)
		}
		r, err := s.Get(ctx, "k1")
		if err != nil || r.RootWorkflowID != "" || store.Root(r) != "wf" {
			t.Fatalf("version %d: the old record after the migration = %+v, %v; want no root", from, r, err)
		}
		now := time.Now()
		reset := store.Claim{Key: "k1", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Owner: "o2", Now: now,
			Lease: now.Add(time.Minute), Window: time.Hour, WorkflowID: "wf", RunID: "run-2", RootWorkflowID: "root"}
		if o, _, err := s.Begin(ctx, reset); err != nil || o != store.OutcomeCompleted {
			t.Fatalf("version %d: its workflow's reset past the window = %s, %v; want the stored result", from, o, err)
		}
		c := reset
		c.Key, c.WorkflowID = "k2", "child"
		if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("version %d: Begin(k2) = %s, %v", from, o, err)
		}
		s.Close()
		if s, err = Open(ctx, path); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Get(ctx, "k2"); err != nil || r.RootWorkflowID != "root" || r.WorkflowID != "child" {
			t.Fatalf("version %d: a new claim's record after a reopen: root %q workflow %q, %v", from, r.RootWorkflowID, r.WorkflowID, err)
		}
		s.Close()
	}
}

// A file of every earlier version opens under version 10 with its data: its
// receipts keep their IDs and are still found by time (their own time index),
// new receipts get time-ordered IDs and are found by time after them, the
// receipts stay append-only, the identity is kept, and the expired records of
// both kinds (completed; an idempotent claim long gone) are swept.
func TestMigrateToVersion10(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	us := func(d time.Duration) int64 { return t0.Add(d).UnixMicro() }
	for from := 1; from <= 9; from++ {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", from))
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		stmts := append(slices.Clone(migrations[:from]), fmt.Sprintf("PRAGMA user_version = %d", from))
		cols := v3RecordColumns
		extra := ""
		if from >= 4 {
			cols, extra = recordColumnsV7, ", 0"
		}
		// done: completed, expired at t0+1h; gone: an idempotent claim whose lease
		// passed at t0 (kept until lease + LeaseMargin); live: completed, kept.
		stmts = append(stmts,
			fmt.Sprintf(`INSERT INTO idemgate_records (%s) VALUES ('done', 'Sync', 'idempotent-write', 'h', '[1]', 'completed', 'o1', %d, X'7b7d', 0, 'wf', 'run', 1, 1, %d, %d, %d%s)`,
				cols, us(0), us(0), us(0), us(time.Hour), extra),
			fmt.Sprintf(`INSERT INTO idemgate_records (%s) VALUES ('gone', 'Sync', 'idempotent-write', 'h', '[1]', 'claimed', 'o2', %d, NULL, 0, 'wf', 'run', 1, 1, %d, %d, %d%s)`,
				cols, us(0), us(0), us(0), us(10*time.Minute), extra),
			fmt.Sprintf(`INSERT INTO idemgate_records (%s) VALUES ('live', 'Sync', 'idempotent-write', 'h', '[1]', 'completed', 'o3', %d, X'7b7d', 0, 'wf', 'run', 1, 1, %d, %d, %d%s)`,
				cols, us(0), us(0), us(0), us(1000*time.Hour), extra))
		for i, d := range []time.Duration{0, time.Hour, 2 * time.Hour} {
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash,
				workflow_id, run_id, attempt, result_ref, error, actor, reason) VALUES (%d, 'old%d', 'Sync', 'idempotent-write', 'ran', 'h', 'wf', 'run', 1, '', '', '', '')`, us(d), i))
		}
		for _, q := range stmts {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("version %d: %s: %v", from, q, err)
			}
		}
		var identity string
		if from >= 8 {
			if err := db.QueryRow(selectIdentity).Scan(&identity); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("open a version %d file: %v", from, err)
		}
		if identity != "" && s.Identity() != identity {
			t.Fatalf("version %d: identity %q after the migration, want %q kept", from, s.Identity(), identity)
		}
		if s.timeIDsFrom != 4 {
			t.Fatalf("version %d: time-ordered IDs from %d; want 4 (after the 3 old receipts)", from, s.timeIDsFrom)
		}
		// A new receipt, older by its time than the newest old one.
		if err := s.Append(ctx, store.Receipt{Time: t0.Add(90 * time.Minute), Key: "new", Activity: "Sync", Effect: "idempotent-write", Decision: store.DecisionRan}); err != nil {
			t.Fatal(err)
		}
		keys := func(f store.ReceiptFilter) string {
			rs, err := s.Receipts(ctx, f)
			if err != nil {
				t.Fatalf("version %d: Receipts(%+v): %v", from, f, err)
			}
			var out []string
			for _, r := range rs {
				out = append(out, fmt.Sprintf("%s@%d", r.Key, r.ID))
			}
			return fmt.Sprint(out)
		}
		newID := us(90 * time.Minute)
		for _, c := range []struct {
			f    store.ReceiptFilter
			want string
		}{
			{store.ReceiptFilter{}, fmt.Sprintf("[old0@1 old1@2 old2@3 new@%d]", newID)},
			{store.ReceiptFilter{Since: t0.Add(time.Minute)}, fmt.Sprintf("[old1@2 old2@3 new@%d]", newID)},
			{store.ReceiptFilter{Since: t0.Add(time.Minute), Limit: 1}, "[old1@2]"},
			{store.ReceiptFilter{Since: t0.Add(time.Minute), AfterID: 2, Limit: 2}, fmt.Sprintf("[old2@3 new@%d]", newID)},
			{store.ReceiptFilter{Since: t0.Add(100 * time.Minute)}, "[old2@3]"},
			{store.ReceiptFilter{Since: t0.Add(80 * time.Minute), Until: t0.Add(100 * time.Minute)}, fmt.Sprintf("[new@%d]", newID)},
			{store.ReceiptFilter{Since: t0.Add(3 * time.Hour)}, "[]"},
		} {
			if got := keys(c.f); got != c.want {
				t.Errorf("version %d: receipts %+v = %s; want %s", from, c.f, got, c.want)
			}
		}
		// Append-only, old and new receipts alike; and no receipt below its time.
		for _, q := range []string{
			`UPDATE idemgate_receipts SET reason = 'x' WHERE id = 1`,
			fmt.Sprintf(`UPDATE idemgate_receipts SET reason = 'x' WHERE id = %d`, newID),
			`DELETE FROM idemgate_receipts WHERE id = 2`,
			fmt.Sprintf(`DELETE FROM idemgate_receipts WHERE id = %d`, newID),
			fmt.Sprintf(`INSERT OR REPLACE INTO idemgate_receipts (id, time, key, activity, effect, decision, args_hash, workflow_id, run_id, attempt, result_ref, error, actor, reason) VALUES (%d, %d, 'x', 'a', 'e', 'ran', 'h', 'w', 'r', 1, '', '', '', '')`, newID, newID),
			fmt.Sprintf(`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, workflow_id, run_id, attempt, result_ref, error, actor, reason) VALUES (%d, 'x', 'a', 'e', 'ran', 'h', 'w', 'r', 1, '', '', '', '')`, us(200*time.Hour)),
		} {
			if _, err := s.w.ExecContext(ctx, q); err == nil {
				t.Errorf("version %d: %s passed; want it refused", from, q)
			}
		}
		if n, err := s.Sweep(ctx, t0.Add(2*time.Hour), 0); err != nil || n != 2 {
			t.Errorf("version %d: Sweep = %d, %v; want the expired completion and the long-gone claim", from, n, err)
		}
		if _, err := s.Get(ctx, "live"); err != nil {
			t.Errorf("version %d: the live record after the sweep: %v", from, err)
		}
		var idx []string
		rows, err := s.r.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'idemgate_%' ORDER BY name`)
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
		rows.Close()
		if w := "[idemgate_receipts_decision_rare idemgate_receipts_key idemgate_receipts_refusals idemgate_receipts_time_before_v10 idemgate_receipts_workflow idemgate_records_closed idemgate_records_open]"; fmt.Sprint(idx) != w {
			t.Errorf("version %d: indexes %v; want %s", from, idx, w)
		}
		s.Close()
	}
}
