package store

import "context"

// ReceiptBatcher is a store that appends many receipts in one atomic step: all of
// them, in order (their IDs increase in the order given), or none. The gate's read
// receipt queue appends its batches through it (store/memory, store/sqlite and
// store/postgres implement it: one transaction, one round trip); AppendReceipts
// falls back to one Append per receipt for a store without it.
type ReceiptBatcher interface {
	AppendReceipts(ctx context.Context, rs []Receipt) error
}

// DurabilityReporter is a store that says which of its commits are synced (see
// Durability): store/sqlite and store/postgres. The gate takes a store that does
// not say as DurabilityStrict (read receipts appended on the activity's path).
type DurabilityReporter interface {
	Durability() Durability
}

// DurabilityOf is g's Durability, or DurabilityStrict when g does not say.
func DurabilityOf(g Gate) Durability {
	if d, ok := g.(DurabilityReporter); ok {
		return d.Durability()
	}
	return DurabilityStrict
}

// AppendReceipts appends rs to g in order: in one atomic step through
// ReceiptBatcher when g has it, else one Append at a time (stopping at the first
// error: the receipts before it stay appended).
func AppendReceipts(ctx context.Context, g Gate, rs []Receipt) error {
	if len(rs) == 0 {
		return nil
	}
	if b, ok := g.(ReceiptBatcher); ok {
		return b.AppendReceipts(ctx, rs)
	}
	for _, r := range rs {
		if err := g.Append(ctx, r); err != nil {
			return err
		}
	}
	return nil
}
