// Package postgres is a store.Store in PostgreSQL, for a fleet of workers on many
// machines. It uses github.com/jackc/pgx/v5 with a pgxpool.
//
// # Round trips
//
// On PostgreSQL every extra round trip costs about as much as the commit's flush,
// so each step is one statement in its own implicit transaction: Begin calls
// idemgate_begin, a PL/pgSQL function the migration installs, which applies
// store.Decide rule for rule and appends the claim receipt in the same
// transaction; Complete, Release and Abandon are each one UPDATE … RETURNING that
// checks the owner and state (store.Apply), chained to the INSERT of the receipt.
// The claim itself is a primary-key INSERT … ON CONFLICT DO NOTHING: of concurrent
// Begins on one key, exactly one inserts.
//
// # Durability
//
// Under store.DurabilityClaim (the default) the sessions run with
// synchronous_commit=off, set in the startup message, and the statements of every
// step of a write (Begin, Complete, Release, Abandon, Resolve), a claim's second
// and later evidence (RecordSent, store.SentMustSync), Pause and Resume turn it on
// for their own transaction: each is flushed before it returns, and so is every
// receipt Append stores but a read's (store.IsReadReceipt: a replay, a refusal with
// its withheld call, a hand-off, a re-send). What is left unsynced is the read
// receipts (AppendReceipts, Append) and the first evidence of a claim (lost, the record has none and a re-send is refused): they are committed
// and visible at once and flushed by the WAL writer within three times
// wal_writer_delay (600 ms by default). The PostgreSQL server is a process of its
// own: a commit made with synchronous_commit=off is lost when it crashes (an
// immediate shutdown, a backend's crash that restarts them all, the OOM killer) or
// fails over, not only when its machine does, so a write's outcome is synced here
// although store/sqlite leaves it to the next sync (TestServerCrashKeepsWriteOutcomes).
// Under store.DurabilityStrict every
// session runs with synchronous_commit=on. Every step is one statement, one round
// trip (pgx prepares and caches it per connection). Commits of concurrent
// workers share the server's WAL flushes; the client adds no serialisation as
// long as the pool has a connection for each step in flight: 32 by default
// (DefaultMaxConns; Options.MaxConns or the DSN's pool_max_conns change it).
//
// # Schema
//
// Open creates the tables and the function, or migrates them, under an advisory
// lock, so many workers may start at once; idemgate_schema_version records the
// version. Receipts are append-only in fact: a trigger rejects UPDATE, DELETE and
// TRUNCATE on idemgate_receipts, except a DELETE inside Prune's own transaction
// (schema version 5), and never of a pruned receipt or of a receipt whose key
// still has a record. They are indexed by key, workflow ID and time
// (schema version 3); the activity and decision filters are applied to the rows
// those indexes find, or by a scan when they are the only filters (Receipts;
// ReceiptPage, what the operator's listings read, examines a window of at most
// ReceiptFilter.Scan receipts after its cursor, and with Since and no key,
// workflow or rare decision walks the time index in (time, id) order: IDs come
// from a sequence and do not follow time, and the planner, walking the primary
// key filtered by time, read 9.6 million rows to find the last hour's first 100).
// ReceiptHorizon reads the sequence's last ID and waits (without a lock) for the
// transactions that hold the receipts' insert lock then, so that no transaction
// with an ID from the sequence is still open below the ID it returns. Records are
// indexed partially by the open claims Pending lists (claimed, unknown) and by
// the expiry of the closed ones (completed, released; schema version 11), which a
// claim does not write; receipts partially by decision (every decision but
// claimed and ran, the two a step appends) and by the key of a refused-in-flight
// receipt (what Pending asks about a destructive claim within its lease). Sweep
// deletes expired records in bounded batches, the
// open ones found through the open index, and skips rows a Begin holds. The server's
// default isolation (READ COMMITTED) is assumed. A takeover keeps the evidence of
// the claims before it (schema version 12: store.Decide's keptSent in
// idemgate_begin, over the sent column's JSON).
//
// # Outages
//
// When the server cannot be reached, or answers that it is shutting down or out of
// resources, methods return errors that wrap store.ErrUnavailable; the gate fails
// writes closed. A step that fails this way either committed whole or not at all.
package postgres
