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
