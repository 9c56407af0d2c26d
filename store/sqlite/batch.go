package sqlite

import (
	"context"
	"database/sql"

	"github.com/idemgate/idemgate/store"
)

var (
	_ store.ReceiptBatcher     = (*Store)(nil)
	_ store.DurabilityReporter = (*Store)(nil)
)

// AppendReceipts appends rs in order in one write of the commit queue: one
// transaction (shared with the writes queued beside it), all of rs or none. It is
// not synced under store.DurabilityClaim, unless one of rs must be
// (store.ReceiptMustSync).
func (s *Store) AppendReceipts(ctx context.Context, rs []store.Receipt) error {
	if len(rs) == 0 {
		return nil
	}
	sync := false
	for _, r := range rs {
		sync = sync || store.ReceiptMustSync(r)
	}
	return s.write(ctx, "append receipts to", sync, func(ctx context.Context, tx *sql.Tx) error {
		for _, r := range rs {
			if err := s.appendTx(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// Durability is the store's Options.Durability.
func (s *Store) Durability() store.Durability {
	if s.strict {
		return store.DurabilityStrict
	}
	return store.DurabilityClaim
}
