package postgres

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/store"
)

var (
	_ store.ReceiptBatcher     = (*Store)(nil)
	_ store.DurabilityReporter = (*Store)(nil)
)

// appendBatchSQL appends receipts given column by column as arrays, in array order
// (their IDs increase in it): one statement, so all of them or none, in one round
// trip.
const appendBatchSQL = receiptInsert + ` SELECT t, k, a, e, d, h, c, w, r, n, rr, er, ac, re, rs, es
	FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[],
		$8::text[], $9::text[], $10::integer[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
		$16::text[]) WITH ORDINALITY AS u(t, k, a, e, d, h, c, w, r, n, rr, er, ac, re, rs, es, i)
	ORDER BY i`

// AppendReceipts appends rs in order in one statement: all of them or none. It
// waits for the WAL flush only under store.DurabilityStrict.
func (s *Store) AppendReceipts(ctx context.Context, rs []store.Receipt) error {
	if len(rs) == 0 {
		return nil
	}
	n := len(rs)
	times, attempts, calls := make([]time.Time, n), make([]int32, n), make([][]byte, n)
	// The text columns, in receiptInsert's order around time, call and attempt.
	text := make([][]string, 13)
	for c := range text {
		text[c] = make([]string, n)
	}
	for i, r := range rs {
		times[i], calls[i], attempts[i] = micro(r.Time), r.Call, r.Attempt
		for c, v := range []string{r.Key, r.Activity, r.Effect, string(r.Decision), r.ArgsHash, r.WorkflowID, r.RunID,
			r.ResultRef, r.Error, r.Actor, r.Reason, r.Resolution, r.EffectSource} {
			text[c][i] = v
		}
	}
	if _, err := s.pool.Exec(ctx, appendBatchSQL, times, text[0], text[1], text[2], text[3], text[4], calls, text[5],
		text[6], attempts, text[7], text[8], text[9], text[10], text[11], text[12]); err != nil {
		return s.fail("append receipts to", err)
	}
	return nil
}

// Durability is the store's Options.Durability.
func (s *Store) Durability() store.Durability { return s.durability }
