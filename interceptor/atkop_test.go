package interceptor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// The gate's refusal of a key whose owner's lease passed only just told the person
// to "check with the vendor, then `idemgate resolve`", and only afterwards that
// resolve accepts the key from the lease plus store.LeaseMargin: a look at the
// vendor before then can miss the attempt's late request (claimmodel's
// TestPersonWhoLookedEarlySettlesWrong). It must say to look from then on.
func TestAtkOpRefusalSaysWhenToLook(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	h.opts.Now = func() time.Time { return now }
	args, hash := hashOf(t, charge)
	key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
	lease := now.Add(-time.Minute)
	if o, _, err := h.store.Begin(context.Background(), store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive",
		ArgsHash: hash, Args: args, Owner: "earlier", Lease: lease, Window: 24 * time.Hour, WorkflowID: "wf-earlier",
		Attempt: 1, Now: now.Add(-time.Hour)}); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("seed: %v %v", o, err)
	}
	_, err := h.run("wf-look", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
	app := appErr(t, err)
	from := lease.Add(store.LeaseMargin).Format(time.RFC3339)
	if app.Type() != interceptor.ErrTypeInFlight || !strings.Contains(app.Error(), "look the write up at the vendor at or after "+from) {
		t.Fatalf("refusal must send the person to the vendor only at or after %s: %v", from, err)
	}
}
