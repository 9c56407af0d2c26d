package store_test

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// A claim whose lease (plus LeaseMargin) has not passed is never expired, even when
// its record says it expired long ago (as records written before schema version 4
// may: their expiry was the claim time plus the window, whatever the lease).
func TestExpiredNeverEndsALiveClaim(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	lease := t0.Add(48 * time.Hour)
	old := store.Record{State: store.StateClaimed, Lease: lease, CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}
	for _, tc := range []struct {
		name string
		r    store.Record
		now  time.Time
		want bool
	}{
		{"claim past its window, lease running", old, t0.Add(25 * time.Hour), false},
		{"claim past its lease, inside the margin", old, lease.Add(store.LeaseMargin - time.Nanosecond), false},
		{"claim past lease+LeaseMargin and its window", old, lease.Add(store.LeaseMargin), true},
		{"unknown past its window", store.Record{State: store.StateUnknown, Lease: lease, ExpiresAt: t0.Add(24 * time.Hour)}, t0.Add(24 * time.Hour), true},
		{"completed inside its window", store.Record{State: store.StateCompleted, ExpiresAt: t0.Add(time.Hour)}, t0, false},
	} {
		if got := store.Expired(tc.r, tc.now); got != tc.want {
			t.Errorf("%s: Expired = %v, want %v", tc.name, got, tc.want)
		}
		if tc.r.State == store.StateClaimed {
			c := store.Claim{Key: "k", ArgsHash: "h", Owner: "b", Lease: tc.now.Add(time.Minute), Window: time.Hour, Now: tc.now, TakeOver: true}
			o, _, _ := store.Decide(tc.r, true, c)
			if (o == store.OutcomeClaimed) != tc.want {
				t.Errorf("%s: Decide = %q; a claim may be taken anew only when expired (%v)", tc.name, o, tc.want)
			}
		}
	}
}

func TestClaimExpires(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	short := store.Claim{Now: t0, Lease: t0.Add(time.Minute), Window: time.Hour}
	if got := short.Expires(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("lease inside the window: Expires = %v, want now+window", got)
	}
	long := store.Claim{Now: t0, Lease: t0.Add(48 * time.Hour), Window: 24 * time.Hour}
	if got := long.Expires(); !got.Equal(long.Lease.Add(store.LeaseMargin)) {
		t.Errorf("lease past the window: Expires = %v, want lease+LeaseMargin", got)
	}
}

// Pending's rule (store.Listed): a record whose owner is gone is listed from its
// lease on, without LeaseMargin, while a person may resolve it only from
// ResolvableFrom; a live destructive claim is listed once an attempt was refused on
// it since its claim, by append order.
func TestListedAtOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	lease := t0.Add(time.Minute)
	claimed := store.Record{Effect: store.EffectDestructive, State: store.StateClaimed, Lease: lease, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	idem := claimed
	idem.Effect = "idempotent-write"
	unknown := claimed
	unknown.State = store.StateUnknown
	for _, tc := range []struct {
		name                    string
		r                       store.Record
		now                     time.Time
		refused                 bool
		listed, ownerGone, open bool
	}{
		{"live claim", claimed, lease.Add(-time.Microsecond), false, false, false, false},
		{"live claim, refused", claimed, lease.Add(-time.Microsecond), true, true, false, false},
		{"live idempotent claim, refused", idem, lease.Add(-time.Microsecond), true, false, false, false},
		{"lease passed", claimed, lease, false, true, true, false},
		{"inside the margin", claimed, lease.Add(store.LeaseMargin - time.Microsecond), false, true, true, false},
		{"margin passed", claimed, lease.Add(store.LeaseMargin), false, true, true, true},
		{"unknown", unknown, t0, false, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := store.Listed(tc.r, tc.now, tc.refused); got != tc.listed {
				t.Errorf("Listed = %v, want %v", got, tc.listed)
			}
			if got := store.OwnerGone(tc.r, tc.now); got != tc.ownerGone {
				t.Errorf("OwnerGone = %v, want %v", got, tc.ownerGone)
			}
			if got := store.Resolvable(tc.r, tc.now); got != tc.open {
				t.Errorf("Resolvable = %v, want %v", got, tc.open)
			}
		})
	}
	if got := store.ResolvableFrom(claimed); !got.Equal(lease.Add(store.LeaseMargin)) {
		t.Errorf("ResolvableFrom(claim) = %v, want lease+LeaseMargin", got)
	}
	if got := store.ResolvableFrom(unknown); !got.IsZero() {
		t.Errorf("ResolvableFrom(unknown) = %v, want at once (zero)", got)
	}
	d := func(ds ...store.Decision) []store.Receipt {
		rs := make([]store.Receipt, len(ds))
		for i, x := range ds {
			rs[i] = store.Receipt{Decision: x}
		}
		return rs
	}
	for _, tc := range []struct {
		rs   []store.Receipt
		want bool
	}{
		{d(store.DecisionClaimed), false},
		{d(store.DecisionClaimed, store.DecisionRefusedInFlight), true},
		{d(store.DecisionClaimed, store.DecisionRefusedInFlight, store.DecisionRan), true},
		{d(store.DecisionRefusedInFlight, store.DecisionReleased, store.DecisionClaimed), false},
		{d(store.DecisionClaimed, store.DecisionRefusedInFlight, store.DecisionTakenOver), false},
		{d(store.DecisionGated), false},
	} {
		if got := store.RefusedSinceClaim(tc.rs); got != tc.want {
			t.Errorf("RefusedSinceClaim(%v) = %v, want %v", tc.rs, got, tc.want)
		}
	}
}
