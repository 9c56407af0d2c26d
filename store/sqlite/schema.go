package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// migrations[i] takes the schema from version i to i+1. PRAGMA user_version holds
// the version. Append new steps; never edit a released one.
var migrations = []string{
	// 1: records, receipts, their indexes, and the append-only triggers.
	`CREATE TABLE idemgate_records (
		key            TEXT    NOT NULL PRIMARY KEY,
		activity       TEXT    NOT NULL,
		effect         TEXT    NOT NULL,
		args_hash      TEXT    NOT NULL,
		args           BLOB,
		state          TEXT    NOT NULL,
		owner          TEXT    NOT NULL,
		lease          INTEGER NOT NULL, -- Unix microseconds, UTC, like every time here
		result         BLOB,
		result_omitted INTEGER NOT NULL,
		workflow_id    TEXT    NOT NULL,
		run_id         TEXT    NOT NULL,
		attempt        INTEGER NOT NULL,
		claims         INTEGER NOT NULL,
		created_at     INTEGER NOT NULL,
		updated_at     INTEGER NOT NULL,
		expires_at     INTEGER NOT NULL
	);
	CREATE INDEX idemgate_records_expires ON idemgate_records (expires_at);

	CREATE TABLE idemgate_receipts (
		id          INTEGER PRIMARY KEY, -- rows are never deleted, so ids only grow
		time        INTEGER NOT NULL,
		key         TEXT    NOT NULL,
		activity    TEXT    NOT NULL,
		effect      TEXT    NOT NULL,
		decision    TEXT    NOT NULL,
		args_hash   TEXT    NOT NULL,
		call        BLOB,
		workflow_id TEXT    NOT NULL,
		run_id      TEXT    NOT NULL,
		attempt     INTEGER NOT NULL,
		result_ref  TEXT    NOT NULL,
		error       TEXT    NOT NULL,
		actor       TEXT    NOT NULL,
		reason      TEXT    NOT NULL
	);
	CREATE INDEX idemgate_receipts_key      ON idemgate_receipts (key);
	CREATE INDEX idemgate_receipts_workflow ON idemgate_receipts (workflow_id);
	CREATE INDEX idemgate_receipts_activity ON idemgate_receipts (activity);
	CREATE INDEX idemgate_receipts_decision ON idemgate_receipts (decision);
	CREATE INDEX idemgate_receipts_time     ON idemgate_receipts (time);
	CREATE TRIGGER idemgate_receipts_no_update BEFORE UPDATE ON idemgate_receipts
	BEGIN SELECT RAISE(ABORT, 'idemgate: receipts are append-only: UPDATE refused'); END;
	CREATE TRIGGER idemgate_receipts_no_delete BEFORE DELETE ON idemgate_receipts
	BEGIN SELECT RAISE(ABORT, 'idemgate: receipts are append-only: DELETE refused'); END;
	-- INSERT OR REPLACE deletes the row it replaces without firing DELETE triggers.
	CREATE TRIGGER idemgate_receipts_no_replace BEFORE INSERT ON idemgate_receipts
	WHEN NEW.id IS NOT NULL AND EXISTS (SELECT 1 FROM idemgate_receipts WHERE id = NEW.id)
	BEGIN SELECT RAISE(ABORT, 'idemgate: receipts are append-only: REPLACE refused'); END;`,

	// 2: the resolution of a resolved receipt, the pauses (kill switches), and an
	// index for Pending over the records that may block.
	`ALTER TABLE idemgate_receipts ADD COLUMN resolution TEXT NOT NULL DEFAULT '';
	CREATE INDEX idemgate_records_open ON idemgate_records (created_at, key) WHERE state IN ('claimed', 'unknown');
	CREATE TABLE idemgate_pauses (
		activity TEXT    NOT NULL,
		effect   TEXT    NOT NULL,
		actor    TEXT    NOT NULL,
		reason   TEXT    NOT NULL,
		time     INTEGER NOT NULL,
		PRIMARY KEY (activity, effect)
	);`,

	// 3: fewer B-trees per commit (each one is a page, i.e. a WAL frame, written
	// and synced at every step). Records are clustered on their key (WITHOUT
	// ROWID: one B-tree instead of a table plus its primary-key index); receipts
	// keep the key, workflow ID and time indexes and drop the activity and
	// decision ones (those filters are served by a scan, or ride on one of the
	// kept indexes when combined with it).
	`CREATE TABLE idemgate_records_v3 (
		key            TEXT    NOT NULL PRIMARY KEY,
		activity       TEXT    NOT NULL,
		effect         TEXT    NOT NULL,
		args_hash      TEXT    NOT NULL,
		args           BLOB,
		state          TEXT    NOT NULL,
		owner          TEXT    NOT NULL,
		lease          INTEGER NOT NULL,
		result         BLOB,
		result_omitted INTEGER NOT NULL,
		workflow_id    TEXT    NOT NULL,
		run_id         TEXT    NOT NULL,
		attempt        INTEGER NOT NULL,
		claims         INTEGER NOT NULL,
		created_at     INTEGER NOT NULL,
		updated_at     INTEGER NOT NULL,
		expires_at     INTEGER NOT NULL
	) WITHOUT ROWID;
	INSERT INTO idemgate_records_v3 (` + v3RecordColumns + `)
		SELECT ` + v3RecordColumns + ` FROM idemgate_records;
	DROP TABLE idemgate_records;
	ALTER TABLE idemgate_records_v3 RENAME TO idemgate_records;
	CREATE INDEX idemgate_records_expires ON idemgate_records (expires_at);
	CREATE INDEX idemgate_records_open ON idemgate_records (created_at, key) WHERE state IN ('claimed', 'unknown');
	DROP INDEX idemgate_receipts_activity;
	DROP INDEX idemgate_receipts_decision;`,

	// 4: may_have_sent (store.Record.MayHaveSent), and the records of version 3
	// brought under the rules of version 4. 300000000 is store.LeaseMargin (five
	// minutes) in microseconds.
	`ALTER TABLE idemgate_records ADD COLUMN may_have_sent INTEGER NOT NULL DEFAULT 0;
	-- An unknown record may have reached the vendor; so may a claim taken over (a
	-- takeover kept created_at and moved updated_at, a claim set both to its time).
	UPDATE idemgate_records SET may_have_sent = 1
		WHERE state = 'unknown' OR (state = 'claimed' AND created_at <> updated_at);
	-- A takeover's definite failure released the key although the attempt it took
	-- over may have sent: unknown again, unless a person resolved it since.
	UPDATE idemgate_records SET state = 'unknown', may_have_sent = 1
		WHERE state = 'released'
		AND EXISTS (SELECT 1 FROM idemgate_receipts r WHERE r.key = idemgate_records.key
			AND r.decision = 'taken-over' AND r.time >= idemgate_records.created_at)
		AND NOT EXISTS (SELECT 1 FROM idemgate_receipts r WHERE r.key = idemgate_records.key
			AND r.decision = 'resolved' AND r.time >= idemgate_records.created_at);
	-- A claim is kept at least until its lease plus the margin.
	UPDATE idemgate_records SET expires_at = lease + 300000000
		WHERE state = 'claimed' AND expires_at < lease + 300000000;`,

	// 5: retention (Store.Prune). Receipts stay append-only for the gate: a DELETE
	// passes only while a row of idemgate_prune_token exists, which a prune inserts
	// and removes inside its own transaction (it is never committed), and never for
	// a pruned receipt or a receipt of a key that still has a record.
	`CREATE TABLE idemgate_prune_token (id INTEGER PRIMARY KEY);
	DROP TRIGGER idemgate_receipts_no_delete;
	CREATE TRIGGER idemgate_receipts_no_delete BEFORE DELETE ON idemgate_receipts
	WHEN NOT EXISTS (SELECT 1 FROM idemgate_prune_token) OR OLD.decision = 'pruned'
		OR EXISTS (SELECT 1 FROM idemgate_records WHERE key = OLD.key)
	BEGIN SELECT RAISE(ABORT, 'idemgate: receipts are append-only: DELETE refused (only a prune removes receipts: old ones of keys without a record)'); END;`,

	// 6: what decided a receipt's effect (store.Receipt.EffectSource); older
	// receipts say nothing ('').
	`ALTER TABLE idemgate_receipts ADD COLUMN effect_source TEXT NOT NULL DEFAULT '';`,

	// 7: nothing. PostgreSQL's version 7 put a rule of store.Expired into its SQL;
	// here the rules run in Go. Kept so both backends number their versions alike.
	`SELECT 1;`,

	// 8: the evidence that a key left through a keyed transport (store.Record.Sent,
	// store.EncodeSent; older records have none, so their unknown destructive
	// outcomes are refused rather than re-sent), and the store's identity
	// (Store.Identity), created once: 128 random bits.
	`ALTER TABLE idemgate_records ADD COLUMN sent TEXT NOT NULL DEFAULT '';
	CREATE TABLE idemgate_meta (
		name  TEXT NOT NULL PRIMARY KEY,
		value TEXT NOT NULL
	) WITHOUT ROWID;
	INSERT INTO idemgate_meta (name, value) VALUES ('identity', 'sqlite-' || lower(hex(randomblob(16))));`,

	// 9: the root workflow ID of the claiming workflow's chain
	// (store.Record.RootWorkflowID), compared by store.PastWindowForOther and asked
	// about by a sweep. Older records have none ('': store.Root falls back to the
	// workflow ID).
	`ALTER TABLE idemgate_records ADD COLUMN root_workflow_id TEXT NOT NULL DEFAULT '';`,

	// 10: fewer B-trees per step (issue 21): a claim writes 5 (the record, the open
	// index; the receipt, its key and workflow indexes), a completion 6, where
	// version 9 wrote 7 and 7.
	//   - The records' expiry index holds only the records that left the claim
	//     (completed, released): a claim does not write it. Sweep finds the open
	//     records (claimed, unknown) through the open index, whose rows are the
	//     claims in flight and the unknown outcomes; the open index carries what
	//     store.Expired and store.Blocking read of them (state, effect, lease,
	//     expiry), so Sweep and Pending read a record only when it is listed or
	//     removed.
	//   - The refusals of claims in flight are indexed by key, so Pending asks
	//     the receipts about a destructive claim within its lease only when one
	//     was refused (store.RefusedSinceClaim); a step's own receipts are not
	//     written into it.
	//   - Receipt IDs are time-ordered: a new receipt's ID is the greater of its
	//     time in microseconds and the last ID plus one (insertReceipt), so a receipt
	//     of time t has an ID of at least t, and --since t is the ID range from t
	//     on; the time index goes. The receipts written before this version keep
	//     their IDs, below {{B}} (idemgate_meta 'time_ids_from'), and a time
	//     index of their own that no new receipt is written into.
	//   - A trigger refuses a receipt whose ID is below its time: the ID range
	//     stays exact whoever inserts.
	//   - The receipts of the rarer decisions (every one but claimed and ran, the
	//     two a claim and a completion append) are indexed by decision, so
	//     --decision finds them without a scan; the steps' own receipts are not
	//     written into it.
	`DROP INDEX idemgate_records_expires;
	CREATE INDEX idemgate_records_closed ON idemgate_records (expires_at) WHERE state IN ('completed', 'released');
	DROP INDEX idemgate_records_open;
	CREATE INDEX idemgate_records_open ON idemgate_records (created_at, key, state, effect, lease, expires_at)
		WHERE state IN ('claimed', 'unknown');
	CREATE INDEX idemgate_receipts_refusals ON idemgate_receipts (key) WHERE decision = 'refused-in-flight';
	DROP INDEX idemgate_receipts_time;
	CREATE INDEX idemgate_receipts_time_before_v10 ON idemgate_receipts (time) WHERE id < {{B}};
	INSERT INTO idemgate_meta (name, value) VALUES ('time_ids_from', '{{B}}');
	CREATE INDEX idemgate_receipts_decision_rare ON idemgate_receipts (decision) WHERE decision NOT IN ('claimed', 'ran');
	CREATE TRIGGER idemgate_receipts_time_ids BEFORE INSERT ON idemgate_receipts
	WHEN NEW.id IS NULL OR NEW.id < NEW.time
	BEGIN SELECT RAISE(ABORT, 'idemgate: receipt IDs are time-ordered: an ID below its time (in microseconds) refused'); END;`,
}

// SchemaVersion is the schema version this package creates and understands.
const SchemaVersion = 10

// timeIDsVersion is the version whose migration gives receipts time-ordered IDs;
// its "{{B}}" is the first ID it may give (one past the last ID of the file).
const timeIDsVersion = 10

// rareDecisions is the condition of the partial decision index (migration 10), in
// the words a query must use for SQLite to pick it.
const rareDecisions = `decision NOT IN ('claimed', 'ran')`

// selectTimeIDsFrom reads the first time-ordered receipt ID (migration 10).
const selectTimeIDsFrom = `SELECT CAST(value AS INTEGER) FROM idemgate_meta WHERE name = 'time_ids_from'`

// selectIdentity reads the store's identity (migration 8).
const selectIdentity = `SELECT value FROM idemgate_meta WHERE name = 'identity'`

func migrate(ctx context.Context, w *sql.DB) error {
	// The write pool begins IMMEDIATE: concurrent openers in other processes wait
	// on busy_timeout, and the second one finds the schema in place.
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this idemgate understands (%d); upgrade idemgate on this worker", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		q := migrations[i]
		if i+1 == timeIDsVersion {
			var b int64
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) + 1 FROM idemgate_receipts`).Scan(&b); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", i+1, err)
			}
			q = strings.ReplaceAll(q, "{{B}}", strconv.FormatInt(b, 10))
		}
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("migrate schema to version %d: %w", i+1, err)
		}
	}
	// Written even when unchanged: it proves at Open that the file can be written,
	// rather than at the first claim.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return err
	}
	return tx.Commit()
}

const recordColumns = `key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
	workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at, may_have_sent, sent, root_workflow_id`

// v3RecordColumns are the record columns of schema version 3, which its migration copies.
const v3RecordColumns = `key, activity, effect, args_hash, args, state, owner, lease, result, result_omitted,
	workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at`

const selectRecord = `SELECT ` + recordColumns + ` FROM idemgate_records WHERE key = ?`

// upsertRecord is an insert on the primary key; an existing row (expired,
// released or taken over, as store.Decide decided under the write lock) is
// replaced in place.
const upsertRecord = `INSERT INTO idemgate_records (` + recordColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (key) DO UPDATE SET activity = excluded.activity, effect = excluded.effect,
	args_hash = excluded.args_hash, args = excluded.args, state = excluded.state, owner = excluded.owner,
	lease = excluded.lease, result = excluded.result, result_omitted = excluded.result_omitted,
	workflow_id = excluded.workflow_id, run_id = excluded.run_id, attempt = excluded.attempt,
	claims = excluded.claims, created_at = excluded.created_at, updated_at = excluded.updated_at,
	expires_at = excluded.expires_at, may_have_sent = excluded.may_have_sent, sent = excluded.sent,
	root_workflow_id = excluded.root_workflow_id`

// setSent writes the evidence of store.ApplySent, for the claim's owner only.
const setSent = `UPDATE idemgate_records SET sent = ? WHERE key = ? AND owner = ? AND state = 'claimed'`

const receiptColumns = `id, time, key, activity, effect, decision, args_hash, call, workflow_id, run_id, attempt,
	result_ref, error, actor, reason, resolution, effect_source`

// insertReceipt gives the receipt a time-ordered ID (migration 10): the greater
// of its time ?1 and the last ID plus one. The last ID is the rowid tree's
// rightmost entry, on pages the append writes anyway.
const insertReceipt = `INSERT INTO idemgate_receipts (id, time, key, activity, effect, decision, args_hash, call,
	workflow_id, run_id, attempt, result_ref, error, actor, reason, resolution, effect_source)
	VALUES (max(?1, coalesce((SELECT max(id) FROM idemgate_receipts), 0) + 1),
	?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)`

// insertNew is the claim of a key with no record, the common case: Begin tries it
// first and reads the record only when the key is taken.
const insertNew = `INSERT INTO idemgate_records (` + recordColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (key) DO NOTHING`

// completeRecord, releaseRecord and abandonRecord are store.Apply in SQL: they
// change only a claimed record of this owner. A Release of a record that may have
// reached the vendor leaves it unknown (store.ReleasedState); an Abandon marks it.
const (
	completeRecord = `UPDATE idemgate_records SET state = 'completed', updated_at = ?, result = ?, result_omitted = ?,
	expires_at = max(expires_at, ?) WHERE key = ? AND owner = ? AND state = 'claimed'`
	releaseRecord = `UPDATE idemgate_records SET state = CASE WHEN may_have_sent THEN 'unknown' ELSE 'released' END,
	updated_at = ? WHERE key = ? AND owner = ? AND state = 'claimed'`
	abandonRecord = `UPDATE idemgate_records SET state = 'unknown', may_have_sent = 1, updated_at = ?
	WHERE key = ? AND owner = ? AND state = 'claimed'`
)

// notExpired is store.Expired negated, in SQL; its first parameter is now and its
// second now-LeaseMargin.
const notExpired = `(expires_at > ? OR (state = 'claimed' AND lease > ?)
	OR (effect = 'destructive' AND state IN ('claimed', 'unknown'))
	OR (effect = 'destructive' AND state = 'completed' AND workflow_id <> ''))`

// notExpiredOpen is notExpired for a record that is claimed or unknown (of its
// clauses, the last can hold only for a completed record): the columns it reads
// are all in the open index. Its first parameter is now and its second
// now-LeaseMargin.
const notExpiredOpen = `(expires_at > ? OR (state = 'claimed' AND lease > ?) OR effect = 'destructive')`

// selectPending is store.Listed in SQL: store.Blocking (unknown, or claimed with its
// lease at or before now; and not expired), or store.RefusedWhileRunning (a
// destructive claim whose lease is after now, and the latest of the key's claim,
// takeover and in-flight refusal receipts is a refusal: store.RefusedSinceClaim; the
// receipts' key index, which SQLite orders by id within a key, finds it; the
// refusals' index first tells whether the key has a refusal at all). Parameters:
// now, now, now-LeaseMargin, now.
const selectPending = `SELECT ` + recordColumns + ` FROM idemgate_records
	WHERE state IN ('claimed', 'unknown') AND (
		((state = 'unknown' OR lease <= ?) AND ` + notExpiredOpen + `)
		OR (effect = 'destructive' AND state = 'claimed' AND lease > ? AND
			EXISTS (SELECT 1 FROM idemgate_receipts f WHERE f.decision = 'refused-in-flight' AND f.key = idemgate_records.key) AND
			(SELECT x.decision FROM idemgate_receipts x WHERE x.key = idemgate_records.key
				AND x.decision IN ('claimed', 'taken-over', 'refused-in-flight') ORDER BY x.id DESC LIMIT 1) = 'refused-in-flight'))
	ORDER BY created_at, key`

// resetHeld is store.ResetHeld in SQL.
const resetHeld = `(effect = 'destructive' AND state = 'completed' AND workflow_id <> '')`

// closedRecords and openRecords name the records the two partial indexes hold
// (migrations 2 and 10), in the words a query must use for SQLite to pick them.
const (
	closedRecords = `state IN ('completed', 'released')`
	openRecords   = `state IN ('claimed', 'unknown')`
)

// selectHeld lists store.ResetHeld records past their window, through the closed
// records' expiry index. Parameter: now.
const selectHeld = `SELECT ` + recordColumns + ` FROM idemgate_records
	WHERE ` + closedRecords + ` AND ` + resetHeld + ` AND expires_at <= ? ORDER BY expires_at, key`

// forgetHeld deletes a store.ResetHeld record past its window if it is still the
// listed one. Parameters: key, owner, now.
const forgetHeld = `DELETE FROM idemgate_records WHERE key = ? AND owner = ? AND ` + resetHeld + ` AND expires_at <= ?`

// sweepClosed and sweepOpen delete at most a batch of store.Expired records: the
// completed and released ones through their expiry index, the claimed and unknown
// ones through the open index (its rows are the claims in flight and the unknown
// outcomes, not the store's history). Parameters: now, now, now-LeaseMargin,
// batch.
const (
	sweepClosed = `DELETE FROM idemgate_records WHERE key IN
	(SELECT key FROM idemgate_records WHERE ` + closedRecords + ` AND expires_at <= ? AND NOT ` + notExpired + ` LIMIT ?)`
	sweepOpen = `DELETE FROM idemgate_records WHERE key IN
	(SELECT key FROM idemgate_records WHERE ` + openRecords + ` AND expires_at <= ? AND NOT ` + notExpiredOpen + ` LIMIT ?)`
)

// The prune's statements (Store.Prune). "+time" keeps SQLite from choosing the
// time index: each batch walks the primary key from its cursor.
const (
	// pruneTally is the prune's snapshot in one statement: the last receipt ID at
	// or below the prune's bound (parameter 2: Prune.ThroughID, else the largest
	// ID) and how many receipts up to it before the cut-off (parameter 1) may go.
	pruneTally = `SELECT coalesce((SELECT max(id) FROM idemgate_receipts WHERE id <= ?2), 0), (SELECT count(*) FROM idemgate_receipts r
		WHERE time < ?1 AND id <= ?2 AND decision <> 'pruned' AND NOT EXISTS (SELECT 1 FROM idemgate_records k WHERE k.key = r.key))`
	// pruneNext is the next batch's window, read outside the write lock: how many
	// receipts (at most ?4) follow the cursor ?1 up to the snapshot's last ID ?2,
	// the last of them, and how many of them are candidates (before the cut-off
	// ?3, not a prune's). A window is bounded by the receipts it examines, not by
	// the candidates it finds: a batch that looked for ?4 candidates walked every
	// receipt after the last one (all the newer receipts) under the write lock.
	pruneNext = `SELECT count(*), coalesce(max(id), 0), coalesce(sum(+time < ?3 AND decision <> 'pruned'), 0)
		FROM (SELECT id, time, decision FROM idemgate_receipts WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ?4)`
	// pruneBatch removes the candidates in (?1, ?2] before the cut-off ?3 whose key has no record.
	pruneBatch = `DELETE FROM idemgate_receipts WHERE id > ?1 AND id <= ?2 AND +time < ?3 AND decision <> 'pruned'
		AND NOT EXISTS (SELECT 1 FROM idemgate_records k WHERE k.key = idemgate_receipts.key)`
)
