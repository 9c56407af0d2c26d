package store_test

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// atk-core finding 5 (closed with the claim model on issue 19): a witness's "not sent" counted from the owner's lease,
// without store.LeaseMargin. LeaseMargin's own contract is that "until
// Lease+LeaseMargin by the store's callers' clocks, the owner may still be
// sending", and DESIGN.md (Time) says a claim is never "re-claimed or resolved
// before its lease plus a margin". A witness asked one second after the lease
// cannot know more about an attempt that is still sending (a body that ignores its
// ctx and calls the vendor without idemhttp, a worker whose clock is off by more
// than Options.ClockSkew) than a person can, yet it releases the key, and the
// retry that follows sends the write a second time when the late request lands.
func TestAtkCoreWitnessNotSentKeepsTheLeaseMargin(t *testing.T) {
	lease := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	for _, st := range []store.State{store.StateClaimed, store.StateUnknown} {
		r := store.Record{Key: "k", Effect: store.EffectDestructive, State: st, Owner: "a", Lease: lease}
		asked := lease.Add(time.Second)
		tr := store.Transition{Key: "k", Owner: "a", Now: asked, Witness: "ledger", AskedAt: asked}
		if store.Settleable(r, store.StateReleased, tr) {
			t.Errorf("%s: a witness's not-sent asked %s after the lease settles, inside LeaseMargin (%s) where the owner may still be sending",
				st, asked.Sub(lease), store.LeaseMargin)
		}
	}
}
