package store

import "fmt"

// Durability says which of a durable store's commits wait for the disk before
// they return.
//
// Only the claim must be on disk before the activity body runs: lost after the
// vendor acted, it would let a retry send again. Everything after the body
// (completion, release, unknown outcome, resolution) is committed before the call
// returns, so it survives a crash of the process that holds the store, but under
// DurabilityClaim it need not wait for its own sync. Where the store is a process
// of its own, its crash must not lose them either: store/postgres syncs every step
// of a write (a commit with synchronous_commit=off is lost when the PostgreSQL
// server crashes, not only when its machine does), and every receipt but a read's
// (IsReadReceipt); only read receipts wait for no sync there. Evidence that a key left through a keyed transport (RecordSent)
// is synced from a claim's second evidence on, whatever the Durability
// (SentMustSync). Under DurabilityClaim the gate also takes read
// receipts off the read's path: it queues them and appends them in batches
// (ReceiptBatcher) within 100 ms, so a crash of the process can lose the receipts
// of its last reads, never a claim or a write's receipt; a store tells the gate its
// durability through DurabilityReporter. An operating-system crash or
// power loss can then lose such a step; that leaves the record claimed with its
// owner gone, the state a worker killed between the vendor's answer and the store
// leaves, which the gate already handles without a second send (destructive
// refused with the withheld call, idempotent re-run with the same key).
type Durability int

const (
	// DurabilityClaim, the default, syncs the commits that claim or take over a
	// key (Begin), a claim's second and later evidence (RecordSent, SentMustSync),
	// a re-send's receipt (ReceiptMustSync) and the pauses (Pause, Resume); on SQLite every later step is committed, and
	// synced by the next synced commit or within the store's flush interval; on
	// PostgreSQL every step of a write is synced, and only the read receipts are
	// not.
	DurabilityClaim Durability = iota
	// DurabilityStrict syncs every commit before it returns, for an audit rule
	// that demands a synced result before the activity succeeds.
	DurabilityStrict
)

// String returns "claim" or "strict".
func (d Durability) String() string {
	switch d {
	case DurabilityClaim:
		return "claim"
	case DurabilityStrict:
		return "strict"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// Valid reports an error for a value that is neither DurabilityClaim nor
// DurabilityStrict.
func (d Durability) Valid() error {
	if d != DurabilityClaim && d != DurabilityStrict {
		return fmt.Errorf("idemgate/store: durability %d: want store.DurabilityClaim or store.DurabilityStrict", int(d))
	}
	return nil
}

// ParseDurability reads "claim" or "strict" ("" means claim), as a flag gives it.
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "", "claim":
		return DurabilityClaim, nil
	case "strict":
		return DurabilityStrict, nil
	}
	return 0, fmt.Errorf("idemgate/store: durability %q: want claim (only the claim is synced before the body runs) or strict (every step is synced)", s)
}
