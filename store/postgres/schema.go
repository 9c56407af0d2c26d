package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the schema version this package creates and understands.
const SchemaVersion = 12

// migrateLock is the advisory lock key every opener takes while it checks and
// migrates the schema: "idemgate" in ASCII.
const migrateLock int64 = 0x6964656d67617465

// migrations[i] takes the schema from version i to i+1. Append new steps; never
// edit a released one.
var migrations = []string{
	// 1: records, receipts, their indexes, the append-only trigger, and
	// idemgate_begin, the claim rule (store.Decide) in one statement.
	`CREATE TABLE idemgate_records (
		key            text        NOT NULL PRIMARY KEY,
		activity       text        NOT NULL,
		effect         text        NOT NULL,
		args_hash      text        NOT NULL,
		args           bytea,
		state          text        NOT NULL,
		owner          text        NOT NULL,
		lease          timestamptz NOT NULL,
		result         bytea,
		result_omitted boolean     NOT NULL,
		workflow_id    text        NOT NULL,
		run_id         text        NOT NULL,
		attempt        integer     NOT NULL,
		claims         integer     NOT NULL,
		created_at     timestamptz NOT NULL,
		updated_at     timestamptz NOT NULL,
		expires_at     timestamptz NOT NULL
	);
	CREATE INDEX idemgate_records_expires ON idemgate_records (expires_at);

	CREATE TABLE idemgate_receipts (
		id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		time        timestamptz NOT NULL,
		key         text        NOT NULL,
		activity    text        NOT NULL,
		effect      text        NOT NULL,
		decision    text        NOT NULL,
		args_hash   text        NOT NULL,
		call        bytea,
		workflow_id text        NOT NULL,
		run_id      text        NOT NULL,
		attempt     integer     NOT NULL,
		result_ref  text        NOT NULL,
		error       text        NOT NULL,
		actor       text        NOT NULL,
		reason      text        NOT NULL
	);
	CREATE INDEX idemgate_receipts_key      ON idemgate_receipts (key, id);
	CREATE INDEX idemgate_receipts_workflow ON idemgate_receipts (workflow_id, id);
	CREATE INDEX idemgate_receipts_activity ON idemgate_receipts (activity, id);
	CREATE INDEX idemgate_receipts_decision ON idemgate_receipts (decision, id);
	CREATE INDEX idemgate_receipts_time     ON idemgate_receipts (time);

	CREATE FUNCTION idemgate_receipts_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		RAISE EXCEPTION 'idemgate: receipts are append-only: % on % refused', TG_OP, TG_TABLE_NAME
			USING ERRCODE = 'insufficient_privilege';
	END $$;
	CREATE TRIGGER idemgate_receipts_no_change BEFORE UPDATE OR DELETE ON idemgate_receipts
		FOR EACH ROW EXECUTE FUNCTION idemgate_receipts_append_only();
	CREATE TRIGGER idemgate_receipts_no_truncate BEFORE TRUNCATE ON idemgate_receipts
		FOR EACH STATEMENT EXECUTE FUNCTION idemgate_receipts_append_only();

	-- store.Decide, cell by cell, and the claim receipt in the same transaction.
	CREATE FUNCTION idemgate_begin(
		p_key text, p_activity text, p_effect text, p_args_hash text, p_args bytea, p_owner text,
		p_lease timestamptz, p_expires timestamptz, p_take_over boolean,
		p_workflow_id text, p_run_id text, p_attempt integer, p_now timestamptz,
		OUT o_outcome text, OUT o_rec idemgate_records)
	LANGUAGE plpgsql AS $$
	DECLARE
		r idemgate_records;
	BEGIN
		-- Only a concurrent Sweep deleting the row between the insert and the
		-- select makes this loop go round again.
		FOR i IN 1..100 LOOP
			-- No record: the atomic claim is a primary-key insert.
			INSERT INTO idemgate_records AS t (key, activity, effect, args_hash, args, state, owner, lease,
				result, result_omitted, workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at)
			VALUES (p_key, p_activity, p_effect, p_args_hash, p_args, 'claimed', p_owner, p_lease,
				NULL, false, p_workflow_id, p_run_id, p_attempt, 1, p_now, p_now, p_expires)
			ON CONFLICT (key) DO NOTHING
			RETURNING t.* INTO r;
			IF FOUND THEN
				o_outcome := 'claimed';
				EXIT;
			END IF;
			SELECT t.* INTO r FROM idemgate_records t WHERE t.key = p_key FOR UPDATE;
			CONTINUE WHEN NOT FOUND;
			-- Past its window, or released after a definite failure: a new claim.
			IF p_now >= r.expires_at OR r.state = 'released' THEN
				UPDATE idemgate_records t SET activity = p_activity, effect = p_effect,
					args_hash = p_args_hash, args = p_args, state = 'claimed', owner = p_owner,
					lease = p_lease, result = NULL, result_omitted = false, workflow_id = p_workflow_id,
					run_id = p_run_id, attempt = p_attempt,
					-- A re-claim after a release inside the window counts the claims but starts
					-- the clock anew: the released attempts reached nobody (store.Decide).
					claims = CASE WHEN p_now < r.expires_at THEN r.claims + 1 ELSE 1 END,
					created_at = p_now,
					updated_at = p_now, expires_at = p_expires
				WHERE t.key = p_key
				RETURNING t.* INTO r;
				o_outcome := 'claimed';
				EXIT;
			END IF;
			o_rec := r;
			IF r.args_hash <> p_args_hash THEN
				o_outcome := 'conflict';
				RETURN;
			END IF;
			IF r.state = 'completed' THEN
				o_outcome := 'completed';
				RETURN;
			END IF;
			IF r.state = 'claimed' AND p_now < r.lease THEN
				o_outcome := 'in-flight';
				RETURN;
			END IF;
			-- The owner is gone with the outcome unknown.
			IF NOT p_take_over THEN
				o_outcome := 'unknown';
				RETURN;
			END IF;
			UPDATE idemgate_records t SET state = 'claimed', owner = p_owner, lease = p_lease,
				workflow_id = p_workflow_id, run_id = p_run_id, attempt = p_attempt,
				claims = r.claims + 1, updated_at = p_now
			WHERE t.key = p_key
			RETURNING t.* INTO r;
			o_outcome := 'taken-over';
			EXIT;
		END LOOP;
		IF o_outcome IS NULL THEN
			RAISE EXCEPTION 'idemgate_begin: the record of key % kept vanishing under a concurrent sweep', p_key;
		END IF;
		INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call,
			workflow_id, run_id, attempt, result_ref, error, actor, reason)
		VALUES (p_now, p_key, p_activity, p_effect, o_outcome, p_args_hash, NULL,
			p_workflow_id, p_run_id, p_attempt, '', '', '', '');
		o_rec := r;
	END $$;`,

	// 2: the resolution of a resolved receipt, the pauses (kill switches), and an
	// index for Pending over the records that may block.
	`ALTER TABLE idemgate_receipts ADD COLUMN resolution text NOT NULL DEFAULT '';
	CREATE INDEX idemgate_records_open ON idemgate_records (created_at, key) WHERE state IN ('claimed', 'unknown');
	CREATE TABLE idemgate_pauses (
		activity text        NOT NULL,
		effect   text        NOT NULL,
		actor    text        NOT NULL,
		reason   text        NOT NULL,
		time     timestamptz NOT NULL,
		PRIMARY KEY (activity, effect)
	);`,

	// 3: fewer index entries per step. Receipts keep the key, workflow ID and
	// time indexes; the activity and decision filters are served by a scan, or
	// ride on a kept index when combined with one of its filters.
	`DROP INDEX idemgate_receipts_activity;
	DROP INDEX idemgate_receipts_decision;`,

	// 4: may_have_sent (store.Record.MayHaveSent), the records of version 3 brought
	// under the rules of version 4, and idemgate_begin with store.Expired (a claim
	// is not expired before its lease plus p_lease_margin) and store.Decide's
	// takeover (may_have_sent, an expiry never lowered).
	`DROP FUNCTION idemgate_begin(text, text, text, text, bytea, text, timestamptz, timestamptz, boolean,
		text, text, integer, timestamptz);
	ALTER TABLE idemgate_records ADD COLUMN may_have_sent boolean NOT NULL DEFAULT false;
	-- An unknown record may have reached the vendor; so may a claim taken over (a
	-- takeover kept created_at and moved updated_at, a claim set both to its time).
	UPDATE idemgate_records SET may_have_sent = true
		WHERE state = 'unknown' OR (state = 'claimed' AND created_at <> updated_at);
	-- A takeover's definite failure released the key although the attempt it took
	-- over may have sent: unknown again, unless a person resolved it since.
	UPDATE idemgate_records t SET state = 'unknown', may_have_sent = true
		WHERE t.state = 'released'
		AND EXISTS (SELECT 1 FROM idemgate_receipts r WHERE r.key = t.key
			AND r.decision = 'taken-over' AND r.time >= t.created_at)
		AND NOT EXISTS (SELECT 1 FROM idemgate_receipts r WHERE r.key = t.key
			AND r.decision = 'resolved' AND r.time >= t.created_at);
	-- A claim is kept at least until its lease plus store.LeaseMargin (five minutes).
	UPDATE idemgate_records SET expires_at = lease + interval '5 minutes'
		WHERE state = 'claimed' AND expires_at < lease + interval '5 minutes';

	-- store.Decide, cell by cell, and the claim receipt in the same transaction.
	-- p_expires is store.Claim.Expires; p_lease_margin is store.LeaseMargin.
	CREATE FUNCTION idemgate_begin(
		p_key text, p_activity text, p_effect text, p_args_hash text, p_args bytea, p_owner text,
		p_lease timestamptz, p_expires timestamptz, p_take_over boolean,
		p_workflow_id text, p_run_id text, p_attempt integer, p_now timestamptz, p_lease_margin interval,
		OUT o_outcome text, OUT o_rec idemgate_records)
	LANGUAGE plpgsql AS $$
	DECLARE
		r idemgate_records;
		expired boolean;
	BEGIN
		-- Only a concurrent Sweep deleting the row between the insert and the
		-- select makes this loop go round again.
		FOR i IN 1..100 LOOP
			-- No record: the atomic claim is a primary-key insert.
			INSERT INTO idemgate_records AS t (key, activity, effect, args_hash, args, state, owner, lease,
				result, result_omitted, workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at,
				may_have_sent)
			VALUES (p_key, p_activity, p_effect, p_args_hash, p_args, 'claimed', p_owner, p_lease,
				NULL, false, p_workflow_id, p_run_id, p_attempt, 1, p_now, p_now, p_expires, false)
			ON CONFLICT (key) DO NOTHING
			RETURNING t.* INTO r;
			IF FOUND THEN
				o_outcome := 'claimed';
				EXIT;
			END IF;
			SELECT t.* INTO r FROM idemgate_records t WHERE t.key = p_key FOR UPDATE;
			CONTINUE WHEN NOT FOUND;
			-- store.Expired: past its expiry, unless a claim whose lease (plus the
			-- margin) has not passed.
			expired := p_now >= r.expires_at AND NOT (r.state = 'claimed' AND p_now < r.lease + p_lease_margin);
			-- Expired, or released after a definite failure: a new claim.
			IF expired OR r.state = 'released' THEN
				UPDATE idemgate_records t SET activity = p_activity, effect = p_effect,
					args_hash = p_args_hash, args = p_args, state = 'claimed', owner = p_owner,
					lease = p_lease, result = NULL, result_omitted = false, workflow_id = p_workflow_id,
					run_id = p_run_id, attempt = p_attempt,
					-- A re-claim after a release inside the window counts the claims but starts
					-- the clock anew: the released attempts reached nobody (store.Decide).
					claims = CASE WHEN expired THEN 1 ELSE r.claims + 1 END,
					created_at = p_now,
					updated_at = p_now, expires_at = p_expires, may_have_sent = false
				WHERE t.key = p_key
				RETURNING t.* INTO r;
				o_outcome := 'claimed';
				EXIT;
			END IF;
			o_rec := r;
			IF r.args_hash <> p_args_hash THEN
				o_outcome := 'conflict';
				RETURN;
			END IF;
			IF r.state = 'completed' THEN
				o_outcome := 'completed';
				RETURN;
			END IF;
			IF r.state = 'claimed' AND p_now < r.lease THEN
				o_outcome := 'in-flight';
				RETURN;
			END IF;
			-- The owner is gone with the outcome unknown.
			IF NOT p_take_over THEN
				o_outcome := 'unknown';
				RETURN;
			END IF;
			-- The owner before may have sent: remember it, keep created_at, and keep the
			-- record while this attempt may run.
			UPDATE idemgate_records t SET state = 'claimed', owner = p_owner, lease = p_lease,
				workflow_id = p_workflow_id, run_id = p_run_id, attempt = p_attempt,
				claims = r.claims + 1, updated_at = p_now, may_have_sent = true,
				expires_at = GREATEST(r.expires_at, p_expires)
			WHERE t.key = p_key
			RETURNING t.* INTO r;
			o_outcome := 'taken-over';
			EXIT;
		END LOOP;
		IF o_outcome IS NULL THEN
			RAISE EXCEPTION 'idemgate_begin: the record of key % kept vanishing under a concurrent sweep', p_key;
		END IF;
		INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call,
			workflow_id, run_id, attempt, result_ref, error, actor, reason)
		VALUES (p_now, p_key, p_activity, p_effect, o_outcome, p_args_hash, NULL,
			p_workflow_id, p_run_id, p_attempt, '', '', '', '');
		o_rec := r;
	END $$;`,

	// 5: retention (Store.Prune). Receipts stay append-only for the gate: a DELETE
	// passes only in a transaction that holds a row of idemgate_prune_token with
	// its own transaction ID (a prune inserts and removes it inside that
	// transaction), and never for a pruned receipt or a receipt of a key that
	// still has a record. UPDATE and TRUNCATE stay refused.
	`CREATE TABLE idemgate_prune_token (txid bigint NOT NULL PRIMARY KEY);
	-- SET search_path FROM CURRENT: the trigger finds this schema's tables whatever
	-- the search_path of the session that deletes.
	CREATE OR REPLACE FUNCTION idemgate_receipts_append_only() RETURNS trigger LANGUAGE plpgsql
	SET search_path FROM CURRENT AS $$
	BEGIN
		IF TG_OP = 'DELETE' THEN
			IF OLD.decision <> 'pruned'
				AND EXISTS (SELECT 1 FROM idemgate_prune_token WHERE txid = txid_current())
				AND NOT EXISTS (SELECT 1 FROM idemgate_records k WHERE k.key = OLD.key) THEN
				RETURN OLD;
			END IF;
			RAISE EXCEPTION 'idemgate: receipts are append-only: DELETE on % refused (only a prune removes receipts: old ones of keys without a record)', TG_TABLE_NAME
				USING ERRCODE = 'insufficient_privilege';
		END IF;
		RAISE EXCEPTION 'idemgate: receipts are append-only: % on % refused', TG_OP, TG_TABLE_NAME
			USING ERRCODE = 'insufficient_privilege';
	END $$;`,
}

// Migrations 6 and 7 replace idemgate_begin; each is built from the function's
// text in the migration before it, so the body is written once (init panics if
// that text changes shape).
//
// 6: what decided a receipt's effect (store.Receipt.EffectSource; older receipts
// say nothing, ”), and idemgate_begin of version 4 with one more parameter,
// p_effect_source (store.Claim.EffectSource), which the claim receipt it appends
// carries.
//
// 7: a destructive record whose outcome nobody knows (unknown, or claimed with its
// owner gone) never expires (store.Expired): idemgate_begin of version 6, with its
// expiry test extended, replaced in place.
//
// 8: the evidence that a key left through a keyed transport (store.Record.Sent as
// store.EncodeSent's text; older records have none, so their unknown destructive
// outcomes are refused rather than re-sent), cleared by a fresh claim and by a
// takeover (idemgate_begin of version 7 with both updates extended, replaced in
// place); and the store's identity (Store.Identity) in idemgate_meta, created once.
//
// 9: a finished destructive write of a workflow is kept past its window for a claim
// of its own workflow ID, which a reset of that workflow makes (store.ResetHeld,
// store.PastWindowForOther): idemgate_begin of version 8 with its expiry test
// extended, replaced in place.
//
// 10: the root workflow ID of the claiming workflow's chain
// (store.Record.RootWorkflowID; older records have the empty one), and idemgate_begin of
// version 9 with one more parameter, p_root_workflow_id (store.Claim.RootWorkflowID),
// which a fresh claim and a takeover store, and with its expiry test comparing
// roots (store.PastWindowForOther, store.Root).
//
// 11: one index entry fewer per claim (issue 21): the records' expiry index holds
// only the records that left the claim (completed, released), so a claim does
// not write it, and carries the key, Held's order (a page of held records was a
// sort of every one past its window); Sweep finds the open records (claimed, unknown) through the open
// index, whose rows are the claims in flight and the unknown outcomes. The
// receipts of the rarer decisions (every one but claimed and ran, the two a claim
// and a completion append) are indexed by decision, so --decision finds them
// without a scan; the steps' own receipts are not written into it. The refusals
// of claims in flight are indexed by key, so Pending asks the receipts about a
// destructive claim within its lease only when one was refused.
//
// 12: a takeover keeps the evidence of the claims before it (atk-wit finding 1):
// idemgate_begin of version 10 with the takeover's emptying of sent replaced by
// keptSentSQL, replaced in place. Evidence stored before has no claim tag and
// counts as its record's current claim's (store.Exits), so no record is rewritten.
func init() {
	migrations = append(migrations, beginV6())
	migrations = append(migrations, beginV7())
	migrations = append(migrations, beginV8())
	migrations = append(migrations, beginV9())
	migrations = append(migrations, beginV10())
	migrations = append(migrations, `DROP INDEX idemgate_records_expires;
	CREATE INDEX idemgate_records_closed ON idemgate_records (expires_at, key) WHERE state IN ('completed', 'released');
	CREATE INDEX idemgate_receipts_decision_rare ON idemgate_receipts (decision, id) WHERE decision NOT IN ('claimed', 'ran');
	CREATE INDEX idemgate_receipts_refusals ON idemgate_receipts (key) WHERE decision = 'refused-in-flight';`)
	migrations = append(migrations, beginV12())
}

// keptSentSQL is store.Decide's takeover of the evidence (keptSent) in SQL, over
// the record r it takes over: every evidence in its order, an untagged one (stored
// before version 12) tagged with r's owner, and a blank for r's owner when its claim
// recorded none (store.ClaimSent).
const keptSentSQL = `(SELECT jsonb_agg(k.e ORDER BY k.n)::text FROM (
					SELECT s.n, CASE WHEN coalesce(s.e->>'owner', '') = '' THEN s.e || jsonb_build_object('owner', r.owner)
						ELSE s.e END
					FROM jsonb_array_elements(coalesce(nullif(r.sent, '')::jsonb, '[]'::jsonb)) WITH ORDINALITY AS s(e, n)
					UNION ALL
					SELECT 9223372036854775807, jsonb_build_object('via', '', 'host', '', 'window', 0, 'owner', r.owner)
					WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(nullif(r.sent, '')::jsonb, '[]'::jsonb)) AS c(e)
						WHERE coalesce(c.e->>'owner', '') IN ('', r.owner) AND coalesce(c.e->>'via', '') <> '')
				) AS k(n, e))`

// beginV12 is migration 12, built from migration 10's idemgate_begin.
func beginV12() string {
	v10 := migrations[9]
	i := strings.Index(v10, "CREATE FUNCTION idemgate_begin(")
	takeOver := takeOverV7 + " sent = '',"
	if i < 0 || strings.Count(v10[i:], takeOver) != 1 || len(migrations) != 11 {
		panic("idemgate/store/postgres: migration 10 changed shape; migration 12 is built from it")
	}
	fn := "CREATE OR REPLACE FUNCTION" + v10[i+len("CREATE FUNCTION"):]
	return strings.Replace(fn, takeOver, takeOverV7+"\n\t\t\t\tsent = "+keptSentSQL+",", 1)
}

// beginV6 is migration 6, built from migration 4's idemgate_begin.
func beginV6() string {
	v4 := migrations[3]
	i := strings.Index(v4, "CREATE FUNCTION idemgate_begin(")
	j := strings.Index(v4[max(i, 0):], "END $$;")
	if i < 0 || j < 0 || len(migrations) != 5 {
		panic("idemgate/store/postgres: migration 4 changed shape; migration 6 is built from it")
	}
	fn := v4[i : i+j+len("END $$;")]
	for _, r := range [][2]string{
		{"p_lease_margin interval,\n\t\tOUT o_outcome", "p_lease_margin interval,\n\t\tp_effect_source text,\n\t\tOUT o_outcome"},
		{"workflow_id, run_id, attempt, result_ref, error, actor, reason)", "workflow_id, run_id, attempt, result_ref, error, actor, reason, effect_source)"},
		{"p_workflow_id, p_run_id, p_attempt, '', '', '', '');", "p_workflow_id, p_run_id, p_attempt, '', '', '', '', p_effect_source);"},
	} {
		if strings.Count(fn, r[0]) != 1 {
			panic("idemgate/store/postgres: migration 4's idemgate_begin changed shape; migration 6 is built from it")
		}
		fn = strings.Replace(fn, r[0], r[1], 1)
	}
	return `DROP FUNCTION idemgate_begin(text, text, text, text, bytea, text, timestamptz, timestamptz, boolean,
		text, text, integer, timestamptz, interval);
	ALTER TABLE idemgate_receipts ADD COLUMN effect_source text NOT NULL DEFAULT '';
	` + fn
}

const (
	expiredV6 = `expired := p_now >= r.expires_at AND NOT (r.state = 'claimed' AND p_now < r.lease + p_lease_margin);`
	expiredV7 = `expired := p_now >= r.expires_at AND NOT (r.state = 'claimed' AND p_now < r.lease + p_lease_margin)
				AND NOT (r.effect = 'destructive' AND r.state IN ('claimed', 'unknown'));`
)

// expiredResetHeld is expiredV7 and store.PastWindowForOther's converse: a
// completed destructive record of a workflow is not expired for a claim of the same
// workflow ID.
const expiredResetHeld = `expired := p_now >= r.expires_at AND NOT (r.state = 'claimed' AND p_now < r.lease + p_lease_margin)
				AND NOT (r.effect = 'destructive' AND r.state IN ('claimed', 'unknown'))
				AND NOT (r.effect = 'destructive' AND r.state = 'completed' AND r.workflow_id <> ''
					AND r.workflow_id = p_workflow_id);`

// beginV9 is migration 9, built from migration 8's idemgate_begin.
func beginV9() string {
	v8 := migrations[7]
	i := strings.Index(v8, "CREATE OR REPLACE FUNCTION idemgate_begin(")
	if i < 0 || strings.Count(v8[i:], expiredV7) != 1 || len(migrations) != 8 {
		panic("idemgate/store/postgres: migration 8 changed shape; migration 9 is built from it")
	}
	return strings.Replace(v8[i:], expiredV7, expiredResetHeld, 1)
}

// expiredRoot is expiredResetHeld comparing roots: a claim is another workflow's
// only when both its workflow ID and its root (the workflow ID when it has none)
// differ from the record's.
const expiredRoot = `expired := p_now >= r.expires_at AND NOT (r.state = 'claimed' AND p_now < r.lease + p_lease_margin)
				AND NOT (r.effect = 'destructive' AND r.state IN ('claimed', 'unknown'))
				AND NOT (r.effect = 'destructive' AND r.state = 'completed' AND r.workflow_id <> ''
					AND (r.workflow_id = p_workflow_id
						OR coalesce(nullif(r.root_workflow_id, ''), r.workflow_id) =
							coalesce(nullif(p_root_workflow_id, ''), p_workflow_id)));`

// beginV10 is migration 10, built from migration 9's idemgate_begin.
func beginV10() string {
	v9 := migrations[8]
	if !strings.HasPrefix(v9, "CREATE OR REPLACE FUNCTION idemgate_begin(") || len(migrations) != 9 {
		panic("idemgate/store/postgres: migration 9 changed shape; migration 10 is built from it")
	}
	fn := "CREATE FUNCTION" + v9[len("CREATE OR REPLACE FUNCTION"):]
	for _, r := range [][2]string{
		{"p_effect_source text,\n\t\tOUT o_outcome", "p_effect_source text,\n\t\tp_root_workflow_id text,\n\t\tOUT o_outcome"},
		{"expires_at,\n\t\t\t\tmay_have_sent)", "expires_at,\n\t\t\t\tmay_have_sent, root_workflow_id)"},
		{"p_now, p_now, p_expires, false)", "p_now, p_now, p_expires, false, p_root_workflow_id)"},
		{freshV7 + ", sent = ''", freshV7 + ", sent = '', root_workflow_id = p_root_workflow_id"},
		{takeOverV7 + " sent = '',", takeOverV7 + " sent = '', root_workflow_id = p_root_workflow_id,"},
		{expiredResetHeld, expiredRoot},
	} {
		if strings.Count(fn, r[0]) != 1 {
			panic("idemgate/store/postgres: migration 9's idemgate_begin changed shape; migration 10 is built from it: " + r[0])
		}
		fn = strings.Replace(fn, r[0], r[1], 1)
	}
	return `DROP FUNCTION idemgate_begin(text, text, text, text, bytea, text, timestamptz, timestamptz, boolean,
		text, text, integer, timestamptz, interval, text);
	ALTER TABLE idemgate_records ADD COLUMN root_workflow_id text NOT NULL DEFAULT '';
	` + fn
}

func beginV7() string {
	v6 := migrations[5]
	i := strings.Index(v6, "CREATE FUNCTION idemgate_begin(")
	if i < 0 || strings.Count(v6, expiredV6) != 1 || len(migrations) != 6 {
		panic("idemgate/store/postgres: migration 6 changed shape; migration 7 is built from it")
	}
	return "CREATE OR REPLACE FUNCTION" + strings.Replace(v6[i+len("CREATE FUNCTION"):], expiredV6, expiredV7, 1)
}

const (
	freshV7    = `updated_at = p_now, expires_at = p_expires, may_have_sent = false`
	takeOverV7 = `claims = r.claims + 1, updated_at = p_now, may_have_sent = true,`
)

func beginV8() string {
	v7 := migrations[6]
	if !strings.HasPrefix(v7, "CREATE OR REPLACE FUNCTION idemgate_begin(") || strings.Count(v7, freshV7) != 1 ||
		strings.Count(v7, takeOverV7) != 1 || len(migrations) != 7 {
		panic("idemgate/store/postgres: migration 7 changed shape; migration 8 is built from it")
	}
	fn := strings.Replace(v7, freshV7, freshV7+", sent = ''", 1)
	fn = strings.Replace(fn, takeOverV7, takeOverV7+" sent = '',", 1)
	return `ALTER TABLE idemgate_records ADD COLUMN sent text NOT NULL DEFAULT '';
	CREATE TABLE idemgate_meta (
		name  text NOT NULL PRIMARY KEY,
		value text NOT NULL
	);
	INSERT INTO idemgate_meta (name, value)
		VALUES ('identity', 'postgres-' || md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text));
	` + fn
}

// selectIdentity reads the store's identity (migration 8).
const selectIdentity = `SELECT value FROM idemgate_meta WHERE name = 'identity'`

// migrate creates or upgrades the schema. Every opener takes the same advisory
// lock first, so many workers starting at once migrate exactly once.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS idemgate_schema_version (
			version integer NOT NULL PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM idemgate_schema_version").Scan(&v); err != nil {
			return err
		}
		if v > len(migrations) {
			return fmt.Errorf("schema version %d is newer than this idemgate understands (%d); upgrade idemgate on this worker", v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.Exec(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", i+1, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO idemgate_schema_version (version) VALUES ($1)", i+1); err != nil {
				return err
			}
		}
		return nil
	})
}
