package claimmodel

import (
	"time"

	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/store"
)

// Rules are the claim rules the model explores, as function values so a test can
// swap in another version (the old rules, to show the model finds their holes).
type Rules struct {
	Decide       func(existing store.Record, found bool, c store.Claim) (store.Outcome, store.Record, bool)
	Apply        func(existing store.Record, to store.State, t store.Transition) (store.Record, error)
	ApplyResolve func(existing store.Record, to store.State, t store.Transition) (store.Record, error)
	Blocking     func(r store.Record, now time.Time) bool
	// Expired: Begin treats r as absent and Sweep removes it.
	Expired func(r store.Record, now time.Time) bool
	// Forgettable: a sweep that asked Temporal whether r's workflow can still be
	// reset (resettable) removes r.
	Forgettable func(r store.Record, now time.Time, resettable bool) bool
	// SweepAsks are the workflow IDs a sweep asks Temporal about for r (idemgate
	// sweep --temporal-address): the workflows whose reset can re-create r's call.
	// r is resettable when Temporal knows any of them.
	SweepAsks func(r store.Record) []string
	// Resend is the vendor-window rule of the gate (Options.VendorWindows) and of
	// idemhttp: may a destructive write whose key was first claimed at first be
	// re-sent at now to a vendor that remembers keys for window, when clocks differ
	// by at most skew (Options.ClockSkew: the model passes its largest skew)?
	Resend func(first, now time.Time, window, skew time.Duration) bool
	// ResendMargin is how long before first+window Resend turns false under skew
	// (for the model's choice of time points).
	ResendMargin func(skew time.Duration) time.Duration
	// MayHaveSent reads the record's "an earlier attempt may have sent" mark (false
	// for rules without one).
	MayHaveSent func(r store.Record) bool
	// ApplySent is Gate.RecordSent's rule: a keyed transport records, just before
	// the key leaves, that it left through it.
	ApplySent func(existing store.Record, owner string, s store.Sent) (store.Record, bool, error)
	// ResendWindow is the gate's evidence rule: the window inside which a re-send
	// that relies on the vendor's deduplication may happen, and whether the record's
	// evidence allows one at all.
	ResendWindow func(r store.Record, window time.Duration) (time.Duration, bool)
	// Exits is how a witness that answers "through this exit and nothing else"
	// (idemhttp.LookupWitness) reads the record's evidence: every exit recorded, and
	// the claims that recorded none (store.Exits). nil means store.Exits.
	Exits func(r store.Record) (exits []store.Sent, silent []string)
}

// Current returns the rules of package store as they are.
func Current() Rules {
	return Rules{
		Decide:       store.Decide,
		Apply:        store.Apply,
		ApplyResolve: store.ApplyResolve,
		Blocking:     store.Blocking,
		Expired:      store.Expired,
		Forgettable:  store.Forgettable,
		SweepAsks:    store.ResetBy,
		Resend:       attempt.InVendorWindow,
		ResendMargin: func(skew time.Duration) time.Duration { return 2 * skew },
		MayHaveSent:  func(r store.Record) bool { return r.MayHaveSent },
		ApplySent:    store.ApplySent,
		ResendWindow: store.ResendWindow,
		Exits:        store.Exits,
	}
}
