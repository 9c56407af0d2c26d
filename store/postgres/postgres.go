package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/sqlq"
)

// Options tunes a Store. The zero value is the documented default for every field.
type Options struct {
	// MaxConns caps the connection pool. Optional: zero means pool_max_conns from
	// the DSN, else 32 (DefaultMaxConns). A step holds a connection while its
	// commit waits for the server's WAL flush, so the pool is what lets
	// concurrent activities share one flush: a worker running more writes at once
	// than it has connections queues them in the client, one flush per pool-full.
	// Connections open on demand. Lower it when many workers share a server with
	// few connection slots (max_connections). Negative is invalid.
	MaxConns int32
	// ConnectTimeout bounds one connection attempt, so an unreachable server turns
	// into store.ErrUnavailable instead of a hang. Optional: zero means
	// connect_timeout from the DSN, else 5 seconds. Negative is invalid.
	ConnectTimeout time.Duration
	// Durability says which commits wait for the WAL flush. Optional: the zero
	// value is store.DurabilityClaim: sessions run with synchronous_commit=off and
	// Begin, Pause and Resume turn it on for their own commit.
	// store.DurabilityStrict runs every session with synchronous_commit=on.
	Durability store.Durability
}

// DefaultMaxConns is Options.MaxConns's default when the DSN sets no
// pool_max_conns: 32 concurrent steps share the server's WAL flushes.
const DefaultMaxConns = 32

const (
	defaultConnectTimeout = 5 * time.Second
	// sweepBatch bounds one Sweep statement when the caller passes no limit.
	sweepBatch = 1000
)

// Store is a store.Store in PostgreSQL, shared by any number of workers on any
// number of machines. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	addr     string // host:port/database, for messages; never the password
	identity string // read at Open (schema version 8)
	closed   atomic.Bool
	// durability is Options.Durability (Durability, batch.go).
	durability store.Durability
	// seeQuery, when set by a test, sees each query of a ReceiptPage before it runs.
	seeQuery func(q string, args []any)
}

var (
	_ store.Store            = (*Store)(nil)
	_ store.Pruner           = (*Store)(nil)
	_ store.ReceiptPager     = (*Store)(nil)
	_ store.ReceiptHorizoner = (*Store)(nil)
)

// Open connects to dsn (a postgres:// URL or key=value string) with default
// Options, and creates or migrates the schema.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith connects to dsn and creates or migrates the schema under an advisory
// lock, so many workers may open at once.
func OpenWith(ctx context.Context, dsn string, o Options) (*Store, error) {
	if o.MaxConns < 0 || o.ConnectTimeout < 0 {
		return nil, fmt.Errorf("idemgate/store/postgres: negative Options (MaxConns %d, ConnectTimeout %v); use zero for the defaults", o.MaxConns, o.ConnectTimeout)
	}
	if err := o.Durability.Valid(); err != nil {
		return nil, fmt.Errorf("idemgate/store/postgres: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parse error may quote the DSN, password included: do not wrap it.
		return nil, errors.New("idemgate/store/postgres: cannot parse the DSN; want postgres://user:password@host:port/database or key=value pairs")
	}
	switch {
	case o.MaxConns > 0:
		cfg.MaxConns = o.MaxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		// pgxpool's own default (the greater of 4 and the number of CPUs) queues
		// concurrent claims in the client, each pool-full waiting for its own flush.
		cfg.MaxConns = DefaultMaxConns
	}
	if o.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	} else if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	// In the startup message: no round trip. The synced statements carry
	// syncedCommit.
	// Strict keeps a level the DSN names (remote_apply, say) and is on otherwise.
	if o.Durability == store.DurabilityStrict {
		if lvl := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; lvl == "" || lvl == "off" || lvl == "local" {
			cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
		}
	} else {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	s := &Store{addr: fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database),
		durability: o.Durability}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, s.fail("open", err)
	}
	if err := migrate(ctx, s.pool); err != nil {
		s.pool.Close()
		return nil, s.fail("create or migrate the schema in", err)
	}
	if err := s.pool.QueryRow(ctx, selectIdentity).Scan(&s.identity); err != nil {
		s.pool.Close()
		return nil, s.fail("read the identity of", err)
	}
	return s, nil
}

// Close closes the pool, waiting for acquired connections to be released.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.pool.Close()
	return nil
}

const recordColumns = `key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
	workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at, may_have_sent, sent, root_workflow_id`

// beginSQL is one round trip: idemgate_begin applies store.Decide and appends the
// claim receipt in the statement's own transaction.
const beginSQL = `SELECT b.o_outcome, (b.o_rec).key, (b.o_rec).activity, (b.o_rec).effect, (b.o_rec).args_hash,
	(b.o_rec).args, (b.o_rec).state, (b.o_rec).owner, (b.o_rec).lease, (b.o_rec).result, (b.o_rec).result_omitted,
	(b.o_rec).workflow_id, (b.o_rec).run_id, (b.o_rec).attempt, (b.o_rec).claims, (b.o_rec).created_at,
	(b.o_rec).updated_at, (b.o_rec).expires_at, (b.o_rec).may_have_sent, (b.o_rec).sent,
	(b.o_rec).root_workflow_id
	FROM idemgate_begin($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) b`

// syncedCommit, joined to a statement's FROM list, makes the commit of the
// statement's own transaction wait for the WAL flush (synchronous_commit=on for
// this transaction only) on a session that runs with it off. It must be in the
// statement: a SET clause on a function is undone when the function returns,
// before the commit.
const syncedCommit = `, set_config('synchronous_commit', 'on', true) synced`

// Begin claims c.Key atomically in one statement; see store.Decide. Its commit
// is synced whatever the Durability.
func (s *Store) Begin(ctx context.Context, c store.Claim) (store.Outcome, store.Record, error) {
	var outcome string
	// The lease is rounded up to the microsecond kept, never down: until it has
	// passed, its owner may still be sending (a lease moved earlier would let a
	// takeover or a witness's not-sent in up to a microsecond too soon).
	c.Lease = ceilMicro(c.Lease)
	row := s.pool.QueryRow(ctx, beginSQL+syncedCommit, c.Key, c.Activity, c.Effect, c.ArgsHash, c.Args, c.Owner,
		c.Lease, micro(c.Expires()), c.TakeOver, c.WorkflowID, c.RunID, c.Attempt, micro(c.Now), store.LeaseMargin,
		c.EffectSource, c.RootWorkflowID)
	rec, err := scanRecord(row, &outcome)
	if err != nil {
		return "", store.Record{}, s.fail("begin", err)
	}
	return store.Outcome(outcome), rec, nil
}

// receiptInsert takes receiptArgs (at receiptParams); appendSQL appends one receipt.
const receiptInsert = `INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call,
	workflow_id, run_id, attempt, result_ref, error, actor, reason, resolution, effect_source)`

var appendSQL = receiptInsert + ` VALUES (` + receiptParams(1) + `)`

// appendSyncedSQL appends one receipt in a synced commit (syncedCommit), for every
// receipt but a read's (store.IsReadReceipt): a re-send's, a replay's, a refusal's
// with its withheld call, a hand-off's. A server crash must not lose them any more
// than a write's outcome (TestAtkDurServerCrashKeepsWritePathReceipts).
var appendSyncedSQL = receiptInsert + ` SELECT ` + receiptParams(1) + ` FROM (SELECT 1` + syncedCommit + `) s`

// The transitions are store.Apply in SQL: one statement that updates only a
// claimed record of this owner and appends the receipt only when it did.
var (
	//
	// Every one of them is synced whatever the Durability (syncedCommit): the
	// PostgreSQL server is a process of its own, and a commit made with
	// synchronous_commit=off is lost when that process crashes (an immediate
	// shutdown, a backend's crash that restarts them all, the OOM killer) or fails
	// over, not only when its machine does. A write's outcome lost so would leave
	// a write that ran listed as pending and refused on a reset's re-run (the soak's
	// finding 1); Durability is the price of the read receipts only on PostgreSQL.
	completeSQL = `WITH u AS (
	UPDATE idemgate_records SET state = 'completed', updated_at = $3, result = $4, result_omitted = $5,
	expires_at = GREATEST(expires_at, $6)
	WHERE key = $1 AND owner = $2 AND state = 'claimed' RETURNING 1)
	` + receiptInsert + ` SELECT ` + receiptParams(7) + ` FROM u` + syncedCommit
	// A Release of a record that may have reached the vendor leaves it unknown
	// (store.ReleasedState); an Abandon marks it.
	releaseSQL = `WITH u AS (
	UPDATE idemgate_records SET state = CASE WHEN may_have_sent THEN 'unknown' ELSE 'released' END, updated_at = $3
	WHERE key = $1 AND owner = $2 AND state = 'claimed' RETURNING 1)
	` + receiptInsert + ` SELECT ` + receiptParams(4) + ` FROM u` + syncedCommit
	abandonSQL = `WITH u AS (
	UPDATE idemgate_records SET state = 'unknown', may_have_sent = true, updated_at = $3
	WHERE key = $1 AND owner = $2 AND state = 'claimed' RETURNING 1)
	` + receiptInsert + ` SELECT ` + receiptParams(4) + ` FROM u` + syncedCommit
	resolveCompleteSQL = `WITH u AS (
	UPDATE idemgate_records SET state = $3, updated_at = $4, result = $7, result_omitted = $8,
	expires_at = GREATEST(expires_at, $9)
	` + resolveWhere + ` RETURNING 1)
	` + receiptInsert + ` SELECT ` + receiptParams(10) + ` FROM u` + syncedCommit
	resolveReleaseSQL = `WITH u AS (
	UPDATE idemgate_records SET state = $3, updated_at = $4, may_have_sent = false
	` + resolveWhere + ` RETURNING 1)
	` + receiptInsert + ` SELECT ` + receiptParams(7) + ` FROM u` + syncedCommit
)

// store.ApplyResolve in SQL: a store.Settleable record of this owner (unknown, or
// claimed with its lease plus the margin $5 passed at $4; the margin is 0 for a
// witness), whose lease is at or before $6 (a witness's "not sent": when it was
// asked less LeaseMargin, store.NotSentFrom; a person's: now less LeaseMargin,
// store.NotSentResolvable; else far in the future). Only the release clears may_have_sent.
const resolveWhere = `WHERE key = $1 AND owner = $2 AND (state = 'unknown' OR (state = 'claimed' AND lease + $5::interval <= $4)) AND lease <= $6`

// settleBounds are the margin ($5) and the latest lease ($6) of resolveWhere for t
// settling to to: store.Settleable in parameters.
func settleBounds(t store.Transition, to store.State) (time.Duration, time.Time) {
	if t.Witness == "" {
		if to == store.StateReleased {
			// store.NotSentResolvable: lease + LeaseMargin <= Now, unknown records too.
			return store.LeaseMargin, micro(t.Now.Add(-store.LeaseMargin))
		}
		return store.LeaseMargin, farFuture
	}
	if to == store.StateReleased {
		if t.AskedAt.IsZero() {
			return 0, time.Time{}.Add(time.Microsecond) // no lease is this early: nothing moves
		}
		// store.NotSentFrom: lease + LeaseMargin <= AskedAt.
		return 0, micro(t.AskedAt.Add(-store.LeaseMargin))
	}
	return 0, farFuture
}

// farFuture is a time after every lease (PostgreSQL's timestamptz reaches 294276 AD;
// the conformance tests use leases tens of thousands of years ahead).
var farFuture = time.Date(200000, 1, 1, 0, 0, 0, 0, time.UTC)

// notExpired is store.Expired negated, in SQL, at $1 with the margin $2.
const notExpired = `(expires_at > $1 OR (state = 'claimed' AND $1 < lease + $2::interval)
	OR (effect = 'destructive' AND state IN ('claimed', 'unknown'))
	OR (effect = 'destructive' AND state = 'completed' AND workflow_id <> ''))`

// Identity names the store: created once in the database (schema version 8).
func (s *Store) Identity() string { return s.identity }

// recordSentSQL is store.ApplySent in SQL: the evidence ($3, a one-element JSON
// array) joins a claimed record of this owner once. The first evidence of a claim
// is not synced (the session's synchronous_commit=off, unless Durability is
// strict): lost with the server, the record has none and a re-send is refused
// (fail closed). Every later one is (store.SentMustSync): lost alone, the evidence
// left would let a re-send rely on the first vendor's window while it also reaches
// the vendor the lost one named. The commit that joins it is ordered after the
// first one's in the WAL, so syncing it syncs both.
const recordSentSQL = `UPDATE idemgate_records SET sent = CASE
	WHEN coalesce(nullif(sent, '')::jsonb, '[]'::jsonb) @> $3::jsonb THEN sent
	ELSE (coalesce(nullif(sent, '')::jsonb, '[]'::jsonb) || $3::jsonb)::text END
	WHERE key = $1 AND owner = $2 AND state = 'claimed'
	RETURNING CASE WHEN jsonb_array_length(sent::jsonb) > 1
		THEN set_config('synchronous_commit', 'on', true) END`

// RecordSent adds evidence to the record of key for its owner; see store.ApplySent.
func (s *Store) RecordSent(ctx context.Context, key, owner string, e store.Sent) error {
	e.Owner = owner // tagged with its claim, once per claim (store.ApplySent)
	var synced *string
	err := s.pool.QueryRow(ctx, recordSentSQL, key, owner, store.EncodeSent([]store.Sent{e})).Scan(&synced)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotOwner
	}
	if err != nil {
		return s.fail("record the sent evidence in", err)
	}
	return nil
}

// Complete stores the owner's result.
func (s *Store) Complete(ctx context.Context, t store.Transition) error {
	args := []any{t.Key, t.Owner, micro(t.Now), t.Result, t.ResultOmitted, micro(t.Now.Add(t.Window))}
	return s.transition(ctx, "complete", completeSQL, args, t)
}

// Release records a definite failure.
func (s *Store) Release(ctx context.Context, t store.Transition) error {
	return s.transition(ctx, "release", releaseSQL, []any{t.Key, t.Owner, micro(t.Now)}, t)
}

// Abandon records an unknown outcome.
func (s *Store) Abandon(ctx context.Context, t store.Transition) error {
	return s.transition(ctx, "abandon", abandonSQL, []any{t.Key, t.Owner, micro(t.Now)}, t)
}

func (s *Store) transition(ctx context.Context, op, sql string, args []any, t store.Transition) error {
	tag, err := s.pool.Exec(ctx, sql, append(args, receiptArgs(t.ReceiptWithTime())...)...)
	if err != nil {
		return s.fail(op, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotOwner
	}
	return nil
}

// receiptArgs are r's values in receiptInsert's column order.
func receiptArgs(r store.Receipt) []any {
	return []any{micro(r.Time), r.Key, r.Activity, r.Effect, string(r.Decision), r.ArgsHash, r.Call,
		r.WorkflowID, r.RunID, r.Attempt, r.ResultRef, r.Error, r.Actor, r.Reason, r.Resolution, r.EffectSource}
}

// receiptParams is the parameter list of receiptArgs in a statement where they
// start at $first: "$first, …, $(first+15)".
func receiptParams(first int) string {
	ps := make([]string, 16)
	for i := range ps {
		ps[i] = "$" + strconv.Itoa(first+i)
	}
	return strings.Join(ps, ", ")
}

// Resolve settles a blocking record (store.ApplyResolve) in one statement that
// appends the receipt only when it moved the record.
func (s *Store) Resolve(ctx context.Context, t store.Transition, to store.State) error {
	var (
		sql  string
		args = []any{t.Key, t.Owner, string(to), micro(t.Now)}
	)
	margin, latest := settleBounds(t, to)
	args = append(args, margin, latest)
	switch to {
	case store.StateCompleted:
		sql = resolveCompleteSQL
		args = append(args, t.Result, t.ResultOmitted, micro(t.Now.Add(t.Window)))
	case store.StateReleased:
		sql = resolveReleaseSQL
	default:
		_, err := store.ApplyResolve(store.Record{}, to, t)
		return err
	}
	tag, err := s.pool.Exec(ctx, sql, append(args, receiptArgs(t.ReceiptWithTime())...)...)
	if err != nil {
		return s.fail("resolve", err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	// Nothing moved: tell a missing record from one that does not block.
	if _, err := s.Get(ctx, t.Key); err != nil {
		return err
	}
	return store.ErrNotOwner
}

// Pending lists the records store.Listed names, oldest first.
func (s *Store) Pending(ctx context.Context, now time.Time, limit int) ([]store.Record, error) {
	// store.Blocking (the owner gone: unknown, or the lease at or before now; and not
	// store.Expired), or store.RefusedWhileRunning: a destructive claim within its
	// lease whose key's latest claim, takeover or in-flight refusal receipt is a
	// refusal (store.RefusedSinceClaim, by the receipts' (key, id) index), asked only
	// when the key has a refusal at all (the refusals' index, schema version 11).
	q := `SELECT ` + recordColumns + ` FROM idemgate_records
		WHERE state IN ('claimed', 'unknown') AND (
			((state = 'unknown' OR lease <= $1) AND ` + notExpired + `)
			OR (effect = 'destructive' AND state = 'claimed' AND lease > $1 AND
				EXISTS (SELECT 1 FROM idemgate_receipts f WHERE f.decision = 'refused-in-flight' AND f.key = idemgate_records.key) AND
				(SELECT x.decision FROM idemgate_receipts x WHERE x.key = idemgate_records.key
					AND x.decision IN ('claimed', 'taken-over', 'refused-in-flight') ORDER BY x.id DESC LIMIT 1) = 'refused-in-flight'))
		ORDER BY created_at, key`
	args := []any{micro(now), store.LeaseMargin}
	if limit > 0 {
		q += " LIMIT $3"
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.fail("list pending records in", err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		r, err := scanRecord(rows, nil)
		if err != nil {
			return nil, s.fail("list pending records in", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list pending records in", err)
	}
	return out, nil
}

// Pause and Resume change what every gate refuses: their commits are synced
// whatever the Durability.
var (
	pauseSQL = `WITH p AS (
		INSERT INTO idemgate_pauses (activity, effect, actor, reason, time) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (activity, effect) DO UPDATE SET actor = excluded.actor, reason = excluded.reason, time = excluded.time
		RETURNING 1)
		` + receiptInsert + ` SELECT ` + receiptParams(6) + ` FROM p` + syncedCommit
	resumeSQL = `WITH d AS (
		DELETE FROM idemgate_pauses WHERE activity = $1 AND effect = $2 RETURNING 1)
		` + receiptInsert + ` SELECT ` + receiptParams(3) + ` FROM d` + syncedCommit
)

// Pause stores p, replacing a pause of the same scope, and appends its receipt in
// the same statement.
func (s *Store) Pause(ctx context.Context, p store.Pause) error {
	if err := p.Valid(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, pauseSQL,
		append([]any{p.Activity, p.Effect, p.Actor, p.Reason, micro(p.Time)}, receiptArgs(store.PauseReceipt(p, store.DecisionPaused))...)...)
	if err != nil {
		return s.fail("pause in", err)
	}
	return nil
}

// Resume removes the pause of p's scope and appends its receipt in the same
// statement; store.ErrNotFound when it is not paused.
func (s *Store) Resume(ctx context.Context, p store.Pause) error {
	if err := p.Valid(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, resumeSQL,
		append([]any{p.Activity, p.Effect}, receiptArgs(store.PauseReceipt(p, store.DecisionResumed))...)...)
	if err != nil {
		return s.fail("resume in", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Pauses lists the pauses in force, oldest first.
func (s *Store) Pauses(ctx context.Context) ([]store.Pause, error) {
	rows, err := s.pool.Query(ctx, `SELECT activity, effect, actor, reason, time FROM idemgate_pauses ORDER BY time, activity, effect`)
	if err != nil {
		return nil, s.fail("list pauses in", err)
	}
	defer rows.Close()
	var out []store.Pause
	for rows.Next() {
		var p store.Pause
		if err := rows.Scan(&p.Activity, &p.Effect, &p.Actor, &p.Reason, &p.Time); err != nil {
			return nil, s.fail("list pauses in", err)
		}
		p.Time = p.Time.UTC()
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list pauses in", err)
	}
	return out, nil
}

// Get returns the record for key, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	rec, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM idemgate_records WHERE key = $1`, key), nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, s.fail("get", err)
	}
	return rec, nil
}

// Append adds a receipt in its own statement, synced whatever the Durability
// unless it is a read's (store.IsReadReceipt).
func (s *Store) Append(ctx context.Context, r store.Receipt) error {
	q := appendSyncedSQL
	if store.IsReadReceipt(r) {
		q = appendSQL
	}
	_, err := s.pool.Exec(ctx, q, receiptArgs(r)...)
	if err != nil {
		return s.fail("append receipt to", err)
	}
	return nil
}

// Receipts lists matching receipts, oldest first.
func (s *Store) Receipts(ctx context.Context, f store.ReceiptFilter) ([]store.Receipt, error) {
	cond := ""
	if f.Decision != "" && f.Decision != store.DecisionClaimed && f.Decision != store.DecisionRan {
		cond = rareDecisionsCond // the partial decision index holds them (schema version 11)
	}
	tail, args := sqlq.ReceiptQueryWhere(f, sqlq.Dollar, func(t time.Time) any { return micro(t) }, cond)
	return s.scanReceipts(ctx, `SELECT `+receiptColumns+` FROM idemgate_receipts`+tail, args)
}

// rareDecisionsCond is the condition of the partial decision index (schema
// version 11), in the words a query must use for the planner to pick it.
const rareDecisionsCond = `decision NOT IN ('claimed', 'ran')`

// scanReceipts runs receipt query q (receiptColumns).
func (s *Store) scanReceipts(ctx context.Context, q string, args []any) ([]store.Receipt, error) {
	rs, err := scanReceiptRows(s.pool.Query(ctx, q, args...))
	if err != nil {
		return nil, s.fail("list receipts in", err)
	}
	return rs, nil
}

// scanReceiptRows reads the rows of a receipt query (receiptColumns).
func scanReceiptRows(rows pgx.Rows, err error) ([]store.Receipt, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Receipt
	for rows.Next() {
		var (
			r store.Receipt
			d string
		)
		if err := rows.Scan(&r.ID, &r.Time, &r.Key, &r.Activity, &r.Effect, &d, &r.ArgsHash, &r.Call,
			&r.WorkflowID, &r.RunID, &r.Attempt, &r.ResultRef, &r.Error, &r.Actor, &r.Reason, &r.Resolution,
			&r.EffectSource); err != nil {
			return nil, err
		}
		r.Time, r.Decision = r.Time.UTC(), store.Decision(d)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// receiptColumns are the columns scanReceipts reads, in its order.
const receiptColumns = `id, time, key, activity, effect, decision, args_hash, call, workflow_id, run_id, attempt,
	result_ref, error, actor, reason, resolution, effect_source`

// ReceiptPage lists one bounded page of f (store.ReceiptPager), examining at most
// f.ScanLimit() receipts: a window found first through the driving index alone,
// whose receipts the page's query then filters. The driving index is that of
// f's key, workflow or rare decision when it names one (the page in ID order);
// else, with Since, the time index (the page in (Time, ID) order: IDs come from a
// sequence and do not follow time, and a walk of the primary key filtered by
// time finds the last hour only at the end of the table); else the primary key.
func (s *Store) ReceiptPage(ctx context.Context, f store.ReceiptFilter) (store.ReceiptPage, error) {
	limit, scan := f.PageLimit(), f.ScanLimit()
	rare := f.Decision != "" && f.Decision != store.DecisionClaimed && f.Decision != store.DecisionRan
	cond := "" // the partial decision index's condition, when its decision drives the page
	if rare && f.Key == "" && f.WorkflowID == "" {
		cond = rareDecisionsCond
	}
	at := func(t time.Time) any { return micro(t) }
	drive := store.ReceiptFilter{AfterID: f.AfterID, AfterTime: f.AfterTime, ThroughID: f.ThroughID}
	byTime := false
	switch {
	case f.Key != "":
		drive.Key = f.Key
	case f.WorkflowID != "":
		drive.WorkflowID = f.WorkflowID
	case rare:
		drive.Decision = f.Decision
	case !f.Since.IsZero():
		byTime = true
		drive.Since, drive.Until = f.Since, f.Until
	}
	if !byTime {
		// A listing in ID order has no time cursor.
		f.AfterTime, drive.AfterTime = time.Time{}, time.Time{}
	}
	order, desc := "id", "id DESC"
	if byTime {
		order, desc = "time, id", "time DESC, id DESC"
	}
	// The page's query reads the window (at most scan receipts after the cursor,
	// through the driving index) lazily and stops at the page's limit: a filter
	// most receipts match reads little more than its page. A page that ends short
	// read its window to the end; where that was is read in the same snapshot.
	window, wargs := sqlq.ReceiptWhere(drive, sqlq.Dollar, at, cond)
	wargs = append(wargs, scan)
	inner := `SELECT ` + receiptColumns + ` FROM idemgate_receipts`
	if len(window) > 0 {
		inner += " WHERE " + strings.Join(window, " AND ")
	}
	inner += " ORDER BY " + order + " LIMIT " + sqlq.Dollar.Mark(len(wargs))
	where, args := sqlq.ReceiptWhere(f, sqlq.Dollar, at, "")
	// f's placeholders follow the window's.
	for i := len(where) - 1; i >= 0; i-- {
		where[i] = renumber(where[i], len(wargs))
	}
	args = append(append(slices.Clone(wargs), args...), limit)
	q := `SELECT ` + receiptColumns + ` FROM (` + inner + `) w`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY " + order + " LIMIT " + sqlq.Dollar.Mark(len(args))
	var (
		result store.ReceiptPage
		n      int64
		endAt  time.Time
		endID  int64
	)
	next := f
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if s.seeQuery != nil {
			s.seeQuery(q, args)
		}
		rs, err := scanReceiptRows(tx.Query(ctx, q, args...))
		if err != nil {
			return err
		}
		result.Receipts = rs
		if len(rs) == limit {
			endAt, endID = rs[len(rs)-1].Time, rs[len(rs)-1].ID
			return nil
		}
		cols := "id" // an ID window reads the index alone
		if byTime {
			cols = "time, id"
		}
		wq := `SELECT count(*) OVER (), ` + cols + ` FROM (SELECT ` + cols + ` FROM idemgate_receipts`
		if len(window) > 0 {
			wq += " WHERE " + strings.Join(window, " AND ")
		}
		wq += " ORDER BY " + order + " LIMIT " + sqlq.Dollar.Mark(len(wargs)) + ") w ORDER BY " + desc + " LIMIT 1"
		if s.seeQuery != nil {
			s.seeQuery(wq, wargs)
		}
		dest := []any{&n, &endID}
		if byTime {
			dest = []any{&n, &endAt, &endID}
		}
		switch err := tx.QueryRow(ctx, wq, wargs...).Scan(dest...); {
		case errors.Is(err, pgx.ErrNoRows):
			endAt, endID = f.AfterTime, f.AfterID
		case err != nil:
			return err
		}
		result.Done = n < int64(scan)
		return nil
	})
	if err != nil {
		return store.ReceiptPage{}, s.fail("list receipts in", err)
	}
	next.AfterID = endID
	if byTime && !endAt.IsZero() {
		next.AfterTime = endAt.UTC()
	}
	result.Next = next
	return result, nil
}

// renumber shifts the placeholders $1, $2, … in cond by k.
func renumber(cond string, k int) string {
	var b strings.Builder
	for i := 0; i < len(cond); i++ {
		if cond[i] != '$' {
			b.WriteByte(cond[i])
			continue
		}
		j := i + 1
		for j < len(cond) && cond[j] >= '0' && cond[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(cond[i+1 : j])
		if err != nil {
			b.WriteByte(cond[i])
			continue
		}
		b.WriteString("$" + strconv.Itoa(n+k))
		i = j - 1
	}
	return b.String()
}

// ReceiptHorizon is an ID up to which every receipt is stored
// (store.ReceiptHorizoner). IDs come from a sequence when a transaction inserts
// its receipt, and it may commit after a later ID's: the sequence's last ID S
// is read, then the transactions holding the receipts table's insert lock (every
// one that took an ID up to S still holds it until it ends); the horizon is S
// once all of those have ended, committed or rolled back. It waits for them
// without a lock of its own, so claims never wait for it.
func (s *Store) ReceiptHorizon(ctx context.Context) (int64, error) {
	var (
		last   int64
		called bool
		vxids  []string
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT last_value, is_called FROM `+receiptSeq).Scan(&last, &called); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT DISTINCT virtualtransaction FROM pg_locks
			WHERE locktype = 'relation' AND relation = 'idemgate_receipts'::regclass AND mode = 'RowExclusiveLock'
			AND pid <> pg_backend_pid()`)
		if err != nil {
			return err
		}
		vxids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return 0, s.fail("read the receipt horizon of", err)
	}
	if !called {
		last = 0 // the sequence has handed out no ID yet
	}
	for wait := time.Millisecond; len(vxids) > 0; wait = min(2*wait, 100*time.Millisecond) {
		rows, err := s.pool.Query(ctx, `SELECT DISTINCT virtualtransaction FROM pg_locks
			WHERE locktype = 'relation' AND relation = 'idemgate_receipts'::regclass AND virtualtransaction = ANY($1)`, vxids)
		if err == nil {
			vxids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			return 0, s.fail("read the receipt horizon of", err)
		}
		if len(vxids) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return 0, s.fail("read the receipt horizon of", ctx.Err())
		case <-time.After(wait):
		}
	}
	return last, nil
}

// receiptSeq is the sequence of the receipts' IDs (an identity column: schema
// version 1).
const receiptSeq = `idemgate_receipts_id_seq`

// Sweep removes at most limit expired records (store.Expired; limit <= 0: all of them), at most
// 1000 per statement. Rows a Begin holds are skipped, never waited for, so a sweep
// does not block new claims. Receipts are kept.
func (s *Store) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	return sqlq.SweepBatches(limit, sweepBatch, func(batch int) (int64, error) {
		tag, err := s.pool.Exec(ctx, sweepSQL, micro(now), store.LeaseMargin, batch)
		if err != nil {
			return 0, s.fail("sweep", err)
		}
		return tag.RowsAffected(), nil
	})
}

// sweepSQL deletes at most a batch ($3) of store.Expired records at $1 (margin $2):
// the completed and released ones through their expiry index, the claimed and
// unknown ones through the open index (schema version 11).
const sweepSQL = `WITH closed AS (
	SELECT key FROM idemgate_records WHERE ` + closedRecords + ` AND expires_at <= $1 AND NOT ` + notExpired + `
	ORDER BY expires_at LIMIT $3 FOR UPDATE SKIP LOCKED),
	open AS (
	SELECT key FROM idemgate_records WHERE ` + openRecords + ` AND expires_at <= $1 AND NOT ` + notExpired + `
	LIMIT $3 FOR UPDATE SKIP LOCKED),
	doomed AS (SELECT key FROM closed UNION ALL SELECT key FROM open LIMIT $3)
	DELETE FROM idemgate_records r USING doomed WHERE r.key = doomed.key`

// closedRecords and openRecords name the records the two partial indexes hold
// (migrations 2 and 11), in the words a query must use for the planner to pick them.
const (
	closedRecords = `state IN ('completed', 'released')`
	openRecords   = `state IN ('claimed', 'unknown')`
)

// resetHeld is store.ResetHeld in SQL.
const resetHeld = `(effect = 'destructive' AND state = 'completed' AND workflow_id <> '')`

// heldSQL lists store.ResetHeld records past their window ($1) in the order of the
// closed records' expiry index, (expires_at, key): a page reads a page.
const heldSQL = `SELECT ` + recordColumns + ` FROM idemgate_records WHERE ` + closedRecords + ` AND ` + resetHeld + `
	AND expires_at <= $1 ORDER BY expires_at, key`

// Held lists the finished destructive writes kept past their window while their
// workflow can be reset (store.HeldSweeper).
func (s *Store) Held(ctx context.Context, now time.Time, limit int) ([]store.Record, error) {
	q := heldSQL
	args := []any{micro(now)}
	if limit > 0 {
		q += " LIMIT $2"
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.fail("list held records in", err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		r, err := scanRecord(rows, nil)
		if err != nil {
			return nil, s.fail("list held records in", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list held records in", err)
	}
	return out, nil
}

// Forget removes a held record Temporal says can no longer be reset (store.HeldSweeper).
func (s *Store) Forget(ctx context.Context, r store.Record, now time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idemgate_records WHERE key = $1 AND owner = $2 AND `+resetHeld+`
		AND expires_at <= $3`, r.Key, r.Owner, micro(now))
	if err != nil {
		return false, s.fail("forget a held record in", err)
	}
	return tag.RowsAffected() > 0, nil
}

// The prune's statements (Store.Prune).
const (
	// pruneTally is the prune's snapshot in one statement: the last receipt ID at
	// or below the prune's bound $2 (Prune.ThroughID, else the largest ID) and how
	// many receipts up to it before the cut-off $1 may go.
	pruneTally = `SELECT coalesce((SELECT max(id) FROM idemgate_receipts WHERE id <= $2), 0), (SELECT count(*) FROM idemgate_receipts r
		WHERE time < $1 AND id <= $2 AND decision <> 'pruned' AND NOT EXISTS (SELECT 1 FROM idemgate_records k WHERE k.key = r.key))`
	// pruneNext is the end of the next batch: the last of at most $4 candidates
	// after the cursor $1, up to the snapshot's last ID $2, before the cut-off $3.
	pruneNext = `SELECT max(id) FROM (SELECT id FROM idemgate_receipts
		WHERE id > $1 AND id <= $2 AND time < $3 AND decision <> 'pruned' ORDER BY id LIMIT $4) c`
	// pruneBatch removes the candidates in ($1, $2] before the cut-off $3 whose key has no record.
	pruneBatch = `DELETE FROM idemgate_receipts r WHERE id > $1 AND id <= $2 AND time < $3 AND decision <> 'pruned'
		AND NOT EXISTS (SELECT 1 FROM idemgate_records k WHERE k.key = r.key)`
)

// Prune removes old receipts (store.Pruner) in transactions of at most p.Batch
// rows, each walking the primary key on from where the one before stopped; the
// prune's receipt goes into the first one's commit.
//
// Not by dropping time partitions: the receipts of a key that still has a record
// must stay whatever their age, so a partition holding one of them cannot simply
// be dropped, and the table's primary key (id alone) would have to change to
// partition it by time.
func (s *Store) Prune(ctx context.Context, p store.Prune) (int, error) {
	if err := p.Valid(); err != nil {
		return 0, err
	}
	before := micro(p.Before)
	var last, count int64
	if err := s.pool.QueryRow(ctx, pruneTally, before, p.Through()).Scan(&last, &count); err != nil {
		return 0, s.fail("prune receipts in", err)
	}
	var (
		total  int
		cursor int64
	)
	for first := true; ; first = false {
		var (
			next *int64
			n    int64
		)
		batch := func(tx pgx.Tx) error {
			if first {
				if _, err := tx.Exec(ctx, appendSQL,
					receiptArgs(store.PruneReceipt(p, count))...); err != nil {
					return err
				}
			}
			if err := tx.QueryRow(ctx, pruneNext, cursor, last, before, p.BatchSize()).Scan(&next); err != nil || next == nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO idemgate_prune_token (txid) VALUES (txid_current())`); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, pruneBatch, cursor, *next, before)
			if err != nil {
				return err
			}
			n = tag.RowsAffected()
			_, err = tx.Exec(ctx, `DELETE FROM idemgate_prune_token WHERE txid = txid_current()`)
			return err
		}
		err := pgx.BeginFunc(ctx, s.pool, batch)
		// The batch chose its receipts (keys without a record) under its statement's
		// snapshot; a claim that committed a record for one of those keys meanwhile is
		// seen by the append-only trigger, which refuses the DELETE and rolls the batch
		// back. Run it again: the new statement sees the record and keeps that receipt.
		for try := 1; err != nil && raceRefused(err) && try < pruneTries; try++ {
			err = pgx.BeginFunc(ctx, s.pool, batch)
		}
		if err != nil {
			return total, s.fail("prune receipts in", err)
		}
		total += int(n)
		if next == nil {
			return total, nil
		}
		cursor = *next
	}
}

// pruneTries bounds the runs of one prune batch that the append-only trigger
// refused because a claim gave one of its keys a record meanwhile (raceRefused).
const pruneTries = 8

// raceRefused reports whether err is the append-only trigger refusing a prune's
// DELETE of a receipt (insufficient_privilege, raised by idemgate_receipts_append_only).
func raceRefused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501" && strings.Contains(pe.Message, "append-only")
}

// scanRecord scans a record, preceded by the outcome when outcome is not nil.
func scanRecord(row pgx.Row, outcome *string) (store.Record, error) {
	var (
		r     store.Record
		state string
		sent  string
	)
	dest := []any{&r.Key, &r.Activity, &r.Effect, &r.ArgsHash, &r.Args, &state, &r.Owner, &r.Lease, &r.Result,
		&r.ResultOmitted, &r.WorkflowID, &r.RunID, &r.Attempt, &r.Claims, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt,
		&r.MayHaveSent, &sent, &r.RootWorkflowID}
	if outcome != nil {
		dest = append([]any{outcome}, dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return store.Record{}, err
	}
	r.State = store.State(state)
	var err error
	if r.Sent, err = store.DecodeSent(sent); err != nil {
		return store.Record{}, err
	}
	r.Lease, r.CreatedAt, r.UpdatedAt, r.ExpiresAt = r.Lease.UTC(), r.CreatedAt.UTC(), r.UpdatedAt.UTC(), r.ExpiresAt.UTC()
	return r, nil
}

// micro is t as PostgreSQL keeps it: UTC, microseconds (truncated, where the
// server would round).
func micro(t time.Time) time.Time { return time.UnixMicro(t.UnixMicro()).UTC() }

// ceilMicro is t rounded up to the microsecond.
func ceilMicro(t time.Time) time.Time {
	m := micro(t)
	if m.Before(t) {
		m = m.Add(time.Microsecond)
	}
	return m
}

// fail describes err and marks an outage with store.ErrUnavailable: anything that
// is not an answer from the server (refused or dropped connection, timeout, closed
// pool) and the server's own connection, resource and shutdown errors.
func (s *Store) fail(op string, err error) error {
	var pe *pgconn.PgError
	switch {
	case s.closed.Load():
		return fmt.Errorf("idemgate/store/postgres: %s %s: %w: %w: %w", op, s.addr, store.ErrUnavailable, store.ErrClosed, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("idemgate/store/postgres: %s %s: %w", op, s.addr, err)
	case errors.As(err, &pe):
		switch pe.Code[:2] {
		case "08", "53", "57", "58": // connection, insufficient resources, operator intervention, system
			return fmt.Errorf("idemgate/store/postgres: %s %s: %w: the server cannot serve now: %w; check the server's health and logs (writes fail closed until it recovers)", op, s.addr, store.ErrUnavailable, err)
		}
		return fmt.Errorf("idemgate/store/postgres: %s %s: %w", op, s.addr, err)
	}
	var scan pgx.ScanArgError
	if errors.As(err, &scan) {
		return fmt.Errorf("idemgate/store/postgres: %s %s: unexpected column type (schema changed by hand?): %w", op, s.addr, err)
	}
	return fmt.Errorf("idemgate/store/postgres: %s %s: %w: cannot reach PostgreSQL: %w; check that the server is up and the DSN's host and port are right (writes fail closed until it is back)", op, s.addr, store.ErrUnavailable, err)
}
