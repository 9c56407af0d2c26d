// Package sqlite is the embedded, default store.Store: one SQLite file, pure Go
// (modernc.org/sqlite, no cgo).
//
// # Durability
//
// The file runs in WAL mode with synchronous=FULL, so a claim is on disk before
// Begin returns, and each step's receipt is written in the same commit as the step:
// a claim costs one commit, claim then complete two. Store.Begin applies
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
// the schema keeps them few (version 3): records are a WITHOUT ROWID table keyed
// by key, indexed by expiry and, partially, by the open claims Pending lists;
// receipts are indexed by key, workflow ID and time, and the activity and
// decision filters are applied to the rows those find, or by a scan when they are
// the only filters. Begin on a new key is one INSERT of the record and one of the
// receipt; Complete, Release and Abandon each one UPDATE of the columns that
// change (store.Apply's checks in its WHERE clause) and one receipt INSERT.
package sqlite
