package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/sqlq"
)

// Options tunes a Store. The zero value is the documented default for every field.
type Options struct {
	// BusyTimeout is how long a write waits for another process that holds the
	// file's write lock before it fails with an error wrapping store.ErrUnavailable.
	// Optional: zero means 5 seconds. Negative is invalid.
	BusyTimeout time.Duration
	// MaxReaders caps the connections used by Get and Receipts (writes always go
	// through one connection). Optional: zero means 4. Negative is invalid.
	MaxReaders int
	// Durability says which commits are synced before they return. Optional: the
	// zero value is store.DurabilityClaim (only claims, a claim's second and later evidence, and pauses are synced).
	Durability store.Durability
	// FlushInterval bounds how long a commit that was not synced (a completion, a
	// release, an unknown outcome, a resolution, a receipt under
	// store.DurabilityClaim) waits for the sync of the WAL when no synced commit
	// comes first: the window in which an operating-system crash can lose it.
	// Optional: zero means 100 ms. Negative is invalid.
	FlushInterval time.Duration
}

const (
	defaultBusyTimeout = 5 * time.Second
	defaultMaxReaders  = 4
	// defaultFlushInterval bounds the time an unsynced commit stays unsynced.
	defaultFlushInterval = 100 * time.Millisecond
	// pruneYield is the pause between two batches of a prune: longer than the
	// longest sleep of SQLite's busy handler (100 ms).
	pruneYield = 150 * time.Millisecond
	// sweepBatch bounds one Sweep transaction when the caller passes no limit, so
	// the write lock is never held for long and new claims are not blocked.
	sweepBatch = 1000
)

// Store is a store.Store in one SQLite file. It is safe for concurrent use by many
// goroutines and by several processes that open the same file.
type Store struct {
	path string
	w    *sql.DB // exactly one connection; every transaction is BEGIN IMMEDIATE
	r    *sql.DB // readers; WAL lets them run beside the writer

	strict  bool         // Options.Durability is store.DurabilityStrict
	syncWAL func() error // the flusher's sync; a test replaces it
	// seeQuery, when set by a test, sees each receipt query before it runs.
	seeQuery func(q string, args []any)
	// seeLocked, when set by a test, sees each receipt query a prune runs under
	// the write lock (its first two arguments bound the IDs it reads).
	seeLocked func(q string, args []any)
	// beforeCommit, when set by a test, sees each batch's transaction before
	// its commit, with the number of writes in it.
	beforeCommit func(tx *sql.Tx, writes int)
	kick         chan struct{} // a commit was not synced
	stop         chan struct{} // Close stops the flusher
	flushed      chan struct{} // the flusher has stopped

	syncMu     sync.Mutex // held by each sync of the WAL with its bookkeeping (syncTo, flush, heal)
	mu         sync.Mutex
	idle       *sync.Cond // committing turned false
	queue      []*job
	committing bool // a goroutine leads a batch; the queue waits for it
	closed     bool
	syncing    int   // batches whose commit is being synced (lead); Close waits for them
	commits    int64 // committed batches
	synced     int64 // commits known to be on disk
	flushes    int64 // syncs by the flusher that succeeded
	syncFailed bool  // a sync failed: every later commit is synced
	// lost is set when a sync of the WAL failed at the disk (not at the open):
	// every write fails with it until heal rewrote the WAL into the database file.
	lost     error
	identity string // read at Open (schema version 8)
	// timeIDsFrom is the first time-ordered receipt ID (schema version 10): the
	// receipts below it were written before and keep a time index of their own.
	timeIDsFrom int64
	retried     int64 // batches run again with a savepoint per write, after one write failed

	getW, upsert, insertNew, complete, release, abandon, insertReceipt *sql.Stmt
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Pruner = (*Store)(nil)
)

// Open opens (creating it when missing) the store at path with default Options.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith opens (creating it when missing) the store at path. It sets WAL (with
// synchronous=NORMAL: the commit queue syncs the WAL itself after the commits
// that must be on disk), creates or migrates the schema, and fails when the file
// cannot be written.
func OpenWith(ctx context.Context, path string, o Options) (*Store, error) {
	if o.BusyTimeout < 0 || o.MaxReaders < 0 || o.FlushInterval < 0 {
		return nil, fmt.Errorf("idemgate/store/sqlite: open %s: negative Options (BusyTimeout %v, MaxReaders %d, FlushInterval %v); use zero for the defaults", path, o.BusyTimeout, o.MaxReaders, o.FlushInterval)
	}
	if err := o.Durability.Valid(); err != nil {
		return nil, fmt.Errorf("idemgate/store/sqlite: open %s: %w", path, err)
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = defaultFlushInterval
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = defaultBusyTimeout
	}
	if o.MaxReaders == 0 {
		o.MaxReaders = defaultMaxReaders
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("idemgate/store/sqlite: open %q: want a plain file path (no \":memory:\", \"file:\" URI, '?' or '#'); a claim must survive the process", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("idemgate/store/sqlite: open %s: %w; pick another store path", path, err)
	}
	dir := filepath.Dir(abs)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("idemgate/store/sqlite: open %s: directory %s does not exist (%v); create it or pick another store path", abs, dir, err)
	}
	// The file holds every write's arguments and results: create it owner-only
	// before SQLite opens it. SQLite gives the -wal and -shm files the main file's
	// mode. An existing file keeps its mode.
	if f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("idemgate/store/sqlite: create %s: %w; pick a writable store path", abs, err)
	}

	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// NORMAL: a commit writes its frames to the WAL and does not sync them. The
	// commit queue syncs the WAL file after each batch that must be on disk before
	// it returns (a claim, a pause; every batch under DurabilityStrict), and the
	// flusher after the others; SQLite syncs it before every checkpoint.
	q.Add("_pragma", "synchronous(NORMAL)")
	w, err := sql.Open("sqlite", abs+"?"+q.Encode()+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("idemgate/store/sqlite: open %s: %w", abs, err)
	}
	// One write connection per process: several writers on one file add no
	// throughput and make the tail latency far worse; other processes wait on
	// busy_timeout instead.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	q.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", abs+"?"+q.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("idemgate/store/sqlite: open %s: %w", abs, err)
	}
	r.SetMaxOpenConns(o.MaxReaders)
	r.SetMaxIdleConns(o.MaxReaders)
	s := &Store{path: abs, w: w, r: r, strict: o.Durability == store.DurabilityStrict,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), flushed: make(chan struct{})}
	s.idle = sync.NewCond(&s.mu)
	s.syncWAL = func() error { return syncWAL(abs) }
	go s.flusher(o.FlushInterval)
	if err := s.init(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) init(ctx context.Context) error {
	var mode string
	if err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return s.fail("open", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("idemgate/store/sqlite: open %s: journal_mode is %q, not WAL (a network or read-only filesystem?); put the store on a local, writable disk", s.path, mode)
	}
	if err := migrate(ctx, s.w); err != nil {
		return s.fail("create schema in", err)
	}
	// The schema (and the identity made with it) is on disk before the first claim.
	if err := s.syncWAL(); err != nil {
		return s.fail("sync the schema of", err)
	}
	if err := s.w.QueryRowContext(ctx, selectIdentity).Scan(&s.identity); err != nil {
		return s.fail("read the identity of", err)
	}
	if err := s.w.QueryRowContext(ctx, selectTimeIDsFrom).Scan(&s.timeIDsFrom); err != nil {
		return s.fail("read the schema of", err)
	}
	var err error
	if s.getW, err = s.w.PrepareContext(ctx, selectRecord); err != nil {
		return s.fail("open", err)
	}
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{{&s.upsert, upsertRecord}, {&s.insertNew, insertNew}, {&s.complete, completeRecord}, {&s.release, releaseRecord}, {&s.abandon, abandonRecord},
		{&s.insertReceipt, insertReceipt}} {
		if *p.st, err = s.w.PrepareContext(ctx, p.q); err != nil {
			return s.fail("open", err)
		}
	}
	if err := s.r.PingContext(ctx); err != nil {
		return s.fail("open", err)
	}
	return nil
}

// Close waits for the queued writes to commit, syncs the WAL and closes the
// store's connections. Later calls fail.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for s.committing || s.syncing > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
	close(s.stop)
	<-s.flushed
	var errs []error
	s.mu.Lock()
	lost := s.lost
	s.mu.Unlock()
	if lost != nil {
		// A failed sync left commits that may not be on disk: rewrite them (heal).
		errs = append(errs, s.heal())
	}
	errs = append(errs, s.flush())
	for _, st := range []*sql.Stmt{s.getW, s.upsert, s.insertNew, s.complete, s.release, s.abandon, s.insertReceipt} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.r.Close(), s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("idemgate/store/sqlite: close %s: %w", s.path, err)
	}
	return nil
}

// Begin claims c.Key atomically (store.Decide inside one IMMEDIATE transaction)
// and appends the claim's receipt in the same commit.
func (s *Store) Begin(ctx context.Context, c store.Claim) (store.Outcome, store.Record, error) {
	// The lease is rounded up to the microsecond kept, never down: until it has
	// passed, its owner may still be sending (a lease moved earlier would let a
	// takeover or a witness's not-sent in up to a microsecond too soon).
	c.Now, c.Lease = micro(c.Now), ceilMicro(c.Lease)
	var (
		outcome store.Outcome
		next    store.Record
	)
	err := s.write(ctx, "begin", true, func(ctx context.Context, tx *sql.Tx) error {
		// No record: store.Decide claims anew. Try that first; a taken key falls
		// through to the read and the full rule.
		outcome, next, _ = store.Decide(store.Record{}, false, c)
		next.ExpiresAt = micro(next.ExpiresAt)
		res, err := tx.StmtContext(ctx, s.insertNew).ExecContext(ctx, recordArgs(next)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 1 {
			return s.appendTx(ctx, tx, store.ClaimReceipt(c, outcome))
		}
		existing, found, err := scanRecord(tx.StmtContext(ctx, s.getW).QueryRowContext(ctx, c.Key))
		if err != nil {
			return err
		}
		var write bool
		outcome, next, write = store.Decide(existing, found, c)
		if !write {
			return nil
		}
		next.ExpiresAt = micro(next.ExpiresAt)
		if err := s.put(ctx, tx, next); err != nil {
			return err
		}
		return s.appendTx(ctx, tx, store.ClaimReceipt(c, outcome))
	})
	if err != nil {
		return "", store.Record{}, err
	}
	return outcome, next, nil
}

// Complete stores the owner's result.
func (s *Store) Complete(ctx context.Context, t store.Transition) error {
	return s.transition(ctx, "complete", store.StateCompleted, t)
}

// Release records a definite failure.
func (s *Store) Release(ctx context.Context, t store.Transition) error {
	return s.transition(ctx, "release", store.StateReleased, t)
}

// Abandon records an unknown outcome.
func (s *Store) Abandon(ctx context.Context, t store.Transition) error {
	return s.transition(ctx, "abandon", store.StateUnknown, t)
}

func (s *Store) transition(ctx context.Context, op string, to store.State, t store.Transition) error {
	// store.Apply in one UPDATE: only a claimed record of this owner moves, and
	// only the fields Apply changes are written.
	t.Now = micro(t.Now)
	return s.write(ctx, op, false, func(ctx context.Context, tx *sql.Tx) error {
		var (
			res sql.Result
			err error
		)
		switch to {
		case store.StateCompleted:
			res, err = tx.StmtContext(ctx, s.complete).ExecContext(ctx, t.Now.UnixMicro(), t.Result, t.ResultOmitted,
				t.Now.Add(t.Window).UnixMicro(), t.Key, t.Owner)
		case store.StateReleased:
			res, err = tx.StmtContext(ctx, s.release).ExecContext(ctx, t.Now.UnixMicro(), t.Key, t.Owner)
		default:
			res, err = tx.StmtContext(ctx, s.abandon).ExecContext(ctx, t.Now.UnixMicro(), t.Key, t.Owner)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			// No record, another owner, or not claimed: store.Apply says ErrNotOwner.
			return store.ErrNotOwner
		}
		return s.appendTx(ctx, tx, t.ReceiptWithTime())
	})
}

// Identity names the store: created once in the file (schema version 8).
func (s *Store) Identity() string { return s.identity }

// RecordSent adds evidence to the record of key for its owner (store.ApplySent), in a
// commit that is not synced (store.DurabilityStrict syncs it).
func (s *Store) RecordSent(ctx context.Context, key, owner string, e store.Sent) error {
	return s.write(ctx, "record the sent evidence in", false, func(ctx context.Context, tx *sql.Tx) error {
		existing, found, err := scanRecord(tx.StmtContext(ctx, s.getW).QueryRowContext(ctx, key))
		if err != nil {
			return err
		}
		if !found {
			return store.ErrNotOwner
		}
		next, changed, err := store.ApplySent(existing, owner, e)
		if err != nil || !changed {
			return err
		}
		if store.SentMustSync(next) {
			mustSync(ctx)
		}
		_, err = tx.ExecContext(ctx, setSent, store.EncodeSent(next.Sent), key, owner)
		return err
	})
}

// Get returns the record for key, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	rec, found, err := scanRecord(s.r.QueryRowContext(ctx, selectRecord, key))
	if err != nil {
		return store.Record{}, s.fail("get", err)
	}
	if !found {
		return store.Record{}, store.ErrNotFound
	}
	return rec, nil
}

// Append adds a receipt in its own commit, synced when store.ReceiptMustSync
// says so (a re-send's receipt).
func (s *Store) Append(ctx context.Context, r store.Receipt) error {
	return s.write(ctx, "append receipt to", store.ReceiptMustSync(r), func(ctx context.Context, tx *sql.Tx) error { return s.appendTx(ctx, tx, r) })
}

// Receipts lists matching receipts, oldest first. A receipt's ID is at least its
// time in microseconds (schema version 10), so f.Since bounds the IDs to read: the
// query walks the ID range from Since on, not a time index. The receipts written
// before version 10 (IDs below timeIDsFrom) are read first, by their own time
// index.
func (s *Store) Receipts(ctx context.Context, f store.ReceiptFilter) ([]store.Receipt, error) {
	var cond []string
	if f.Decision != "" && f.Decision != store.DecisionClaimed && f.Decision != store.DecisionRan {
		cond = append(cond, rareDecisions) // the partial decision index holds them
	}
	if f.Since.IsZero() {
		return s.receipts(ctx, f, cond...)
	}
	var out []store.Receipt
	if f.AfterID < s.timeIDsFrom-1 {
		// The literal bound lets SQLite use the partial index of those receipts.
		old, err := s.receipts(ctx, f, append(cond, "id < "+strconv.FormatInt(s.timeIDsFrom, 10))...)
		if err != nil {
			return nil, err
		}
		if f.Limit > 0 && len(old) >= f.Limit {
			return old, nil
		}
		if f.Limit > 0 {
			f.Limit -= len(old)
		}
		out = old
	}
	f.AfterID = max(f.AfterID, f.Since.UnixMicro()-1, s.timeIDsFrom-1)
	rest, err := s.receipts(ctx, f, cond...)
	if err != nil {
		return nil, err
	}
	return append(out, rest...), nil
}

// ReceiptPage lists one bounded page of f (store.ReceiptPager), in ID order. The
// page walks the receipts of f's key, workflow or rare decision through their
// index when f names one, else the ID range (from Since on: IDs are time-ordered),
// and examines at most f.ScanLimit() of them: a window of IDs found first through
// the index or the primary key alone, whose receipts the page's query then
// filters. The receipts written before schema version 10 are read first, by
// their own time index, as Receipts reads them.
func (s *Store) ReceiptPage(ctx context.Context, f store.ReceiptFilter) (store.ReceiptPage, error) {
	limit, scan := f.PageLimit(), f.ScanLimit()
	f.AfterTime = time.Time{} // IDs are time-ordered here: a listing by ID is the listing by time
	var (
		cond []string // the partial decision index's condition, when its decision drives the page
		out  []store.Receipt
	)
	if f.Key == "" && f.WorkflowID == "" && f.Decision != "" && f.Decision != store.DecisionClaimed && f.Decision != store.DecisionRan {
		cond = append(cond, rareDecisions)
	}
	if !f.Since.IsZero() {
		if f.AfterID < s.timeIDsFrom-1 {
			g := f
			g.Limit = limit
			old, err := s.receipts(ctx, g, append(cond, "id < "+strconv.FormatInt(s.timeIDsFrom, 10))...)
			if err != nil {
				return store.ReceiptPage{}, err
			}
			if len(old) == limit {
				next := f
				next.AfterID = old[len(old)-1].ID
				return store.ReceiptPage{Receipts: old, Next: next}, nil
			}
			out = old
		}
		f.AfterID = max(f.AfterID, f.Since.UnixMicro()-1, s.timeIDsFrom-1)
	}
	// The window: at most scan receipts after the cursor, read through the driving
	// index (or the primary key). The page's query filters the window as it reads
	// it and stops at the page's limit (SQLite reads the window lazily, in ID
	// order): a filter most receipts match reads little more than its page.
	drive := store.ReceiptFilter{AfterID: f.AfterID, ThroughID: f.ThroughID}
	switch {
	case f.Key != "":
		drive.Key = f.Key
	case f.WorkflowID != "":
		drive.WorkflowID = f.WorkflowID
	case len(cond) > 0:
		drive.Decision = f.Decision
	}
	at := func(t time.Time) any { return t.UnixMicro() }
	window, wargs := sqlq.ReceiptWhere(drive, sqlq.Question, at, strings.Join(cond, " AND "))
	inner := "SELECT " + receiptColumns + " FROM idemgate_receipts"
	if len(window) > 0 {
		inner += " WHERE " + strings.Join(window, " AND ")
	}
	inner += " ORDER BY id LIMIT ?"
	wargs = append(wargs, scan)
	g := f
	g.Limit = limit - len(out)
	where, args := sqlq.ReceiptWhere(g, sqlq.Question, at, "")
	q := "SELECT " + receiptColumns + " FROM (" + inner + ")"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id LIMIT ?"
	args = append(append(slices.Clone(wargs), args...), g.Limit)
	// One read transaction: the window's end is read from the snapshot the page
	// was read from, so a receipt appended between the two is never passed over.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.ReceiptPage{}, s.fail("list receipts in", err)
	}
	defer tx.Rollback()
	rs, err := s.receiptQueryOn(ctx, tx, q, args)
	if err != nil {
		return store.ReceiptPage{}, err
	}
	out = append(out, rs...)
	next := f
	if len(rs) == g.Limit {
		next.AfterID = rs[len(rs)-1].ID
		return store.ReceiptPage{Receipts: out, Next: next}, nil
	}
	// Fewer than the limit: the window was read to its end. Where it ended, and
	// whether it was the store's end.
	q = `SELECT count(*), coalesce(max(id), 0) FROM (SELECT id FROM idemgate_receipts`
	if len(window) > 0 {
		q += " WHERE " + strings.Join(window, " AND ")
	}
	q += " ORDER BY id LIMIT ?)"
	if s.seeQuery != nil {
		s.seeQuery(q, wargs)
	}
	var n, end int64
	if err := tx.QueryRowContext(ctx, q, wargs...).Scan(&n, &end); err != nil {
		return store.ReceiptPage{}, s.fail("list receipts in", err)
	}
	next.AfterID = max(end, f.AfterID)
	return store.ReceiptPage{Receipts: out, Done: n < int64(scan), Next: next}, nil
}

// ReceiptHorizon is the last receipt ID (store.ReceiptHorizoner): writes are
// serialised and a new receipt's ID is above every stored one, so every receipt
// at or below it is stored.
func (s *Store) ReceiptHorizon(ctx context.Context) (int64, error) {
	var id int64
	if err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM idemgate_receipts`).Scan(&id); err != nil {
		return 0, s.fail("read the receipts of", err)
	}
	return id, nil
}

// receipts runs one receipt query, with the conditions cond as well.
func (s *Store) receipts(ctx context.Context, f store.ReceiptFilter, cond ...string) ([]store.Receipt, error) {
	q, args := receiptSQL(f, cond...)
	return s.receiptQuery(ctx, q, args)
}

// receiptQuery runs receipt query q (receiptColumns) on the read pool.
func (s *Store) receiptQuery(ctx context.Context, q string, args []any) ([]store.Receipt, error) {
	return s.receiptQueryOn(ctx, s.r, q, args)
}

// queryer is a read pool or a transaction.
type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// receiptQueryOn runs receipt query q (receiptColumns) on db.
func (s *Store) receiptQueryOn(ctx context.Context, db queryer, q string, args []any) ([]store.Receipt, error) {
	if s.seeQuery != nil {
		s.seeQuery(q, args)
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail("list receipts in", err)
	}
	defer rows.Close()
	var out []store.Receipt
	for rows.Next() {
		var (
			r  store.Receipt
			ts int64
			d  string
		)
		if err := rows.Scan(&r.ID, &ts, &r.Key, &r.Activity, &r.Effect, &d, &r.ArgsHash, &r.Call,
			&r.WorkflowID, &r.RunID, &r.Attempt, &r.ResultRef, &r.Error, &r.Actor, &r.Reason, &r.Resolution,
			&r.EffectSource); err != nil {
			return nil, s.fail("list receipts in", err)
		}
		r.Time, r.Decision = fromMicro(ts), store.Decision(d)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list receipts in", err)
	}
	return out, nil
}

// receiptSQL is the receipt query of f with the conditions cond as well.
func receiptSQL(f store.ReceiptFilter, cond ...string) (string, []any) {
	tail, args := sqlq.ReceiptQueryWhere(f, sqlq.Question, func(t time.Time) any { return t.UnixMicro() }, strings.Join(cond, " AND "))
	return "SELECT " + receiptColumns + " FROM idemgate_receipts" + tail, args
}

// Sweep removes at most limit expired records (store.Expired; limit <= 0: all of them), in
// transactions of at most 1000 rows so that claims from this and other processes
// wait for no more than one short batch. Receipts are kept.
func (s *Store) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	return sqlq.SweepBatches(limit, sweepBatch, func(batch int) (n int64, err error) {
		err = s.write(ctx, "sweep", false, func(ctx context.Context, tx *sql.Tx) error {
			n = 0
			for _, q := range []string{sweepClosed, sweepOpen} {
				res, err := tx.ExecContext(ctx, q, now.UnixMicro(), now.UnixMicro(),
					now.Add(-store.LeaseMargin).UnixMicro(), int64(batch)-n)
				if err != nil {
					return err
				}
				m, err := res.RowsAffected()
				if err != nil {
					return err
				}
				if n += m; n >= int64(batch) {
					break
				}
			}
			return nil
		})
		return n, err
	})
}

// Held lists the finished destructive writes kept past their window while their
// workflow can be reset (store.HeldSweeper).
func (s *Store) Held(ctx context.Context, now time.Time, limit int) ([]store.Record, error) {
	q, args := selectHeld, []any{now.UnixMicro()}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail("list held records in", err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		r, _, err := scanRecord(rows)
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
	var n int64
	err := s.write(ctx, "forget", false, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, forgetHeld, r.Key, r.Owner, now.UnixMicro())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

// Prune removes old receipts (store.Pruner) in transactions of at most p.Batch
// rows, each walking the primary key on from where the one before stopped; the
// prune's receipt goes into the first one's commit.
func (s *Store) Prune(ctx context.Context, p store.Prune) (int, error) {
	if err := p.Valid(); err != nil {
		return 0, err
	}
	before := p.Before.UnixMicro()
	var last, count int64
	if err := s.r.QueryRowContext(ctx, pruneTally, before, p.Through()).Scan(&last, &count); err != nil {
		return 0, s.fail("prune receipts in", err)
	}
	p.Now = micro(p.Now)
	var (
		total  int
		cursor int64
	)
	for first := true; ; first = false {
		// The window, read without the write lock.
		var rows, end, candidates int64
		if err := s.r.QueryRowContext(ctx, pruneNext, cursor, last, before, p.BatchSize()).Scan(&rows, &end, &candidates); err != nil {
			return total, s.fail("prune receipts in", err)
		}
		var n int64
		if first || candidates > 0 {
			err := s.write(ctx, "prune receipts in", true, func(ctx context.Context, tx *sql.Tx) error {
				if first {
					if err := s.appendTx(ctx, tx, store.PruneReceipt(p, count)); err != nil {
						return err
					}
				}
				if candidates == 0 {
					return nil
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO idemgate_prune_token (id) VALUES (1)`); err != nil {
					return err
				}
				if s.seeLocked != nil {
					s.seeLocked(pruneBatch, []any{cursor, end, before})
				}
				res, err := tx.ExecContext(ctx, pruneBatch, cursor, end, before)
				if err != nil {
					return err
				}
				if n, err = res.RowsAffected(); err != nil {
					return err
				}
				_, err = tx.ExecContext(ctx, `DELETE FROM idemgate_prune_token`)
				return err
			})
			if err != nil {
				return total, err
			}
		}
		total += int(n)
		if rows < int64(p.BatchSize()) {
			return total, nil
		}
		cursor = end
		if candidates == 0 {
			continue // no write: nobody to let in
		}
		// Let the writers of other processes in: SQLite's busy handler polls a
		// locked file at most every 100 ms, and a prune that began its next batch
		// at once would hold them off batch after batch, past their busy timeout.
		select {
		case <-ctx.Done():
			return total, s.fail("prune receipts in", ctx.Err())
		case <-time.After(pruneYield):
		}
	}
}

func (s *Store) put(ctx context.Context, tx *sql.Tx, r store.Record) error {
	_, err := tx.StmtContext(ctx, s.upsert).ExecContext(ctx, recordArgs(r)...)
	return err
}

// recordArgs are r's values in recordColumns order.
func recordArgs(r store.Record) []any {
	return []any{r.Key, r.Activity, r.Effect, r.ArgsHash, r.Args, string(r.State), r.Owner, r.Lease.UnixMicro(),
		r.Result, r.ResultOmitted, r.WorkflowID, r.RunID, r.Attempt, r.Claims, r.CreatedAt.UnixMicro(),
		r.UpdatedAt.UnixMicro(), r.ExpiresAt.UnixMicro(), r.MayHaveSent, store.EncodeSent(r.Sent), r.RootWorkflowID}
}

func (s *Store) appendTx(ctx context.Context, tx *sql.Tx, r store.Receipt) error {
	_, err := tx.StmtContext(ctx, s.insertReceipt).ExecContext(ctx, r.Time.UnixMicro(), r.Key, r.Activity, r.Effect,
		string(r.Decision), r.ArgsHash, r.Call, r.WorkflowID, r.RunID, r.Attempt, r.ResultRef, r.Error, r.Actor, r.Reason,
		r.Resolution, r.EffectSource)
	return err
}

// Pending lists the records store.Listed names, oldest first.
func (s *Store) Pending(ctx context.Context, now time.Time, limit int) ([]store.Record, error) {
	n := now.UnixMicro()
	q, args := selectPending, []any{n, n, now.Add(-store.LeaseMargin).UnixMicro(), n}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail("list pending records in", err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		r, _, err := scanRecord(rows)
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

// Resolve settles a blocking record (store.ApplyResolve) and appends the receipt
// in the same commit.
func (s *Store) Resolve(ctx context.Context, t store.Transition, to store.State) error {
	t.Now = micro(t.Now)
	return s.write(ctx, "resolve", false, func(ctx context.Context, tx *sql.Tx) error {
		existing, found, err := scanRecord(tx.StmtContext(ctx, s.getW).QueryRowContext(ctx, t.Key))
		if err != nil {
			return err
		}
		if !found {
			return store.ErrNotFound
		}
		next, err := store.ApplyResolve(existing, to, t)
		if err != nil {
			return err
		}
		next.ExpiresAt = micro(next.ExpiresAt)
		if err := s.put(ctx, tx, next); err != nil {
			return err
		}
		return s.appendTx(ctx, tx, t.ReceiptWithTime())
	})
}

// Pause stores p, replacing a pause of the same scope, with its receipt.
func (s *Store) Pause(ctx context.Context, p store.Pause) error {
	if err := p.Valid(); err != nil {
		return err
	}
	return s.write(ctx, "pause in", true, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO idemgate_pauses (activity, effect, actor, reason, time)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (activity, effect) DO UPDATE SET actor = excluded.actor,
			reason = excluded.reason, time = excluded.time`, p.Activity, p.Effect, p.Actor, p.Reason, p.Time.UnixMicro()); err != nil {
			return err
		}
		return s.appendTx(ctx, tx, store.PauseReceipt(p, store.DecisionPaused))
	})
}

// Resume removes the pause of p's scope, with its receipt; store.ErrNotFound when
// it is not paused.
func (s *Store) Resume(ctx context.Context, p store.Pause) error {
	if err := p.Valid(); err != nil {
		return err
	}
	return s.write(ctx, "resume in", true, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idemgate_pauses WHERE activity = ? AND effect = ?`, p.Activity, p.Effect)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNotFound
		}
		return s.appendTx(ctx, tx, store.PauseReceipt(p, store.DecisionResumed))
	})
}

// Pauses lists the pauses in force, oldest first.
func (s *Store) Pauses(ctx context.Context) ([]store.Pause, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT activity, effect, actor, reason, time FROM idemgate_pauses ORDER BY time, activity, effect`)
	if err != nil {
		return nil, s.fail("list pauses in", err)
	}
	defer rows.Close()
	var out []store.Pause
	for rows.Next() {
		var (
			p  store.Pause
			ts int64
		)
		if err := rows.Scan(&p.Activity, &p.Effect, &p.Actor, &p.Reason, &ts); err != nil {
			return nil, s.fail("list pauses in", err)
		}
		p.Time = fromMicro(ts)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list pauses in", err)
	}
	return out, nil
}

func scanRecord(row interface{ Scan(...any) error }) (store.Record, bool, error) {
	var (
		r                                store.Record
		state                            string
		lease, created, updated, expires int64
		sent                             string
	)
	err := row.Scan(&r.Key, &r.Activity, &r.Effect, &r.ArgsHash, &r.Args, &state, &r.Owner, &lease, &r.Result,
		&r.ResultOmitted, &r.WorkflowID, &r.RunID, &r.Attempt, &r.Claims, &created, &updated, &expires, &r.MayHaveSent, &sent,
		&r.RootWorkflowID)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, false, nil
	}
	if err != nil {
		return store.Record{}, false, err
	}
	if r.Sent, err = store.DecodeSent(sent); err != nil {
		return store.Record{}, false, err
	}
	r.State = store.State(state)
	r.Lease, r.CreatedAt, r.UpdatedAt, r.ExpiresAt = fromMicro(lease), fromMicro(created), fromMicro(updated), fromMicro(expires)
	return r, true, nil
}

// micro is t as the store keeps it: UTC, microsecond precision.
func micro(t time.Time) time.Time { return fromMicro(t.UnixMicro()) }

func fromMicro(us int64) time.Time { return time.UnixMicro(us).UTC() }

// ceilMicro is t rounded up to the microsecond.
func ceilMicro(t time.Time) time.Time {
	m := micro(t)
	if m.Before(t) {
		m = m.Add(time.Microsecond)
	}
	return m
}

// fail describes err and marks the outage kinds with store.ErrUnavailable.
func (s *Store) fail(op string, err error) error {
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("idemgate/store/sqlite: %s %s: %w: another connection or process held the file's lock past the busy timeout: %w; look for a stuck process holding the file, or raise Options.BusyTimeout", op, s.path, store.ErrUnavailable, err)
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_AUTH:
			return fmt.Errorf("idemgate/store/sqlite: %s %s: %w: the file, its -wal/-shm files or its directory is not writable: %w; fix the permissions or pick a writable store path", op, s.path, store.ErrUnavailable, err)
		case sqlite3.SQLITE_FULL:
			return fmt.Errorf("idemgate/store/sqlite: %s %s: %w: the disk is full: %w; free space on the store's disk", op, s.path, store.ErrUnavailable, err)
		case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOLFS:
			return fmt.Errorf("idemgate/store/sqlite: %s %s: %w: I/O error: %w; check the disk and the filesystem", op, s.path, store.ErrUnavailable, err)
		}
		return fmt.Errorf("idemgate/store/sqlite: %s %s: %w", op, s.path, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("idemgate/store/sqlite: %s %s: %w: %w", op, s.path, store.ErrUnavailable, err)
	}
	return fmt.Errorf("idemgate/store/sqlite: %s %s: %w", op, s.path, err)
}
