// Package sqlite is the embedded, default store.Store: one SQLite file, pure Go
// (modernc.org/sqlite, no cgo).
//
// # Durability
//
// The file runs in WAL mode with synchronous=NORMAL, and each step's receipt is
// written in the same commit as the step. Every commit is visible and safe against
// a crash of the process at once. Under store.DurabilityClaim (the default) a
// claim (Begin), a claim's second and later evidence (RecordSent,
// store.SentMustSync), a re-send's receipt (store.ReceiptMustSync) and a pause or
// resume are also on disk before they return: after
// their commit, the store syncs the WAL file (an fsync) and only then answers. The
// later steps are on disk with the next synced commit, a checkpoint, or the sync of
// the WAL at most Options.FlushInterval (100 ms) later, the window an
// operating-system crash can lose them in. Close syncs. Under
// store.DurabilityStrict every commit is synced before it returns.
//
// A sync of the WAL that fails at the disk fails the writes it was to sync, and
// every write after it until the store has rewritten the WAL into the database
// file and synced that file (a TRUNCATE checkpoint, tried again at each write and
// at Close): the kernel reports a failed write-back once and keeps serving the
// pages it could not write, so a later sync succeeds over frames that may never
// reach the disk, and a commit synced after them would be lost with them in an
// operating-system crash. Only this process learns of the failure: another
// process on the same file does not, so after a disk error stop the workers that
// share the file until the disk is checked. A sync that could not open the WAL
// file lost nothing; every later commit is synced.
//
// Writes of one process queue for one connection and commit in groups: whoever
// finds no commit running takes up to 128 queued writes into one transaction and
// commits once (when one of them fails, the batch runs again with each write under
// its own SAVEPOINT, so a failing write is rolled back alone);
// a group that holds a claim is synced, so concurrent claims share one sync, and
// the next group runs its statements while that sync waits for the disk.
// Store.Begin applies
// store.Decide, and Complete, Release and Abandon apply store.Apply, inside one
// BEGIN IMMEDIATE transaction, so every backend agrees rule for rule.
//
// # Processes
//
// Within one process every write goes through one connection (more writers on one
// file add no throughput and only lengthen the tail). Several worker processes on
// one machine may open the same file: a write waits up to Options.BusyTimeout for
// another process's lock. Past it, and when the file cannot be written, methods
// return errors that wrap store.ErrUnavailable, so the gate fails writes closed;
// nothing committed is lost. Do not put the file on a network filesystem.
//
// # Schema
//
// Open creates the schema, or migrates it, and records its version in PRAGMA
// user_version. Receipts are append-only in fact: triggers abort any UPDATE,
// DELETE or INSERT OR REPLACE on the receipts table, except a DELETE inside
// Prune's own transaction (schema version 5), and never of a pruned receipt or of
// a receipt whose key still has a record. Sweep removes expired records and Prune
// old receipts, both in short batches.
//
// Every B-tree a step touches is one more page written to the WAL and synced, so
// the schema keeps them few (version 10): a claim writes five B-trees, a
// completion six. Records are a WITHOUT ROWID table keyed by key, indexed
// partially by the open claims Pending lists (claimed, unknown) and by the expiry
// of the closed ones (completed, released), which a claim does not write; Sweep
// finds the expired open records through the open index, which carries what
// Sweep and Pending read of them (state, effect, lease, expiry). Receipts are
// indexed by key and workflow ID, and partially by decision (every decision but
// claimed and ran, the two a step appends) and by the key of a refused-in-flight
// receipt (what Pending asks about a destructive claim within its lease); their IDs are time-ordered (a receipt's ID is the greater
// of its time in microseconds and the last ID plus one, and a trigger refuses any
// other), so a time filter (--since) walks the ID range from its start instead
// of a time index. The receipts written before version 10 keep their IDs and a
// time index of their own, which no new receipt is written into. The activity and
// decision filters are applied to the rows the other filters find, or by a scan
// when they are the only filters: Receipts walks every receipt then, and
// ReceiptPage (store.ReceiptPager, what the operator's listings read) a window of
// at most ReceiptFilter.Scan IDs after its cursor. ReceiptHorizon is the last
// receipt ID, and Prune.ThroughID bounds a prune by it. Begin on a new key is one INSERT of the record
// and one of the receipt; Complete, Release and Abandon each one UPDATE of the
// columns that change (store.Apply's checks in its WHERE clause) and one receipt
// INSERT.
package sqlite
