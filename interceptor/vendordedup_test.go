package interceptor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// resentFails is a store whose Append of a re-send's receipt fails as if the store
// were down.
type resentFails struct {
	*hookedStore
}

func (s resentFails) Append(ctx context.Context, r store.Receipt) error {
	if r.Decision == store.DecisionResent {
		return errOutage
	}
	return s.hookedStore.Append(ctx, r)
}

// TestVendorDedupResendIsAWitness: a re-send that relies on the vendor's
// deduplication (Options.VendorWindows) is receipted beside its takeover as
// settled by the witness "vendor-dedup", with the evidence; without that receipt
// nothing is re-sent: the claim goes back to unknown and the attempt fails as when
// the store is down (issue 19).
func TestVendorDedupResendIsAWitness(t *testing.T) {
	t.Run("the receipt names the witness and its evidence", func(t *testing.T) {
		h := newHarness(t)
		h.opts.VendorWindows = map[string]time.Duration{"ChargeCard": time.Hour}
		h.tools.fail = func(ctx context.Context) (error, bool) {
			if ctxAttempt(ctx) == 1 {
				return errors.New("connection reset by peer"), true
			}
			return nil, false
		}
		if _, err := h.run("wf-vendor-dedup", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		rs := h.receipts(store.ReceiptFilter{Activity: "ChargeCard"})
		if d := decisionsOf(rs); d != "claimed unknown taken-over resent ran" {
			t.Fatalf("receipts = %s", d)
		}
		r := rs[3]
		if r.Actor != "witness:vendor-dedup" || r.Attempt != 2 || r.Key != rs[0].Key || r.EffectSource == "" ||
			!strings.Contains(r.Reason, "test:vendor to vendor.test") || !strings.Contains(r.Reason, "1h0m0s") {
			t.Fatalf("re-send receipt %+v, want actor witness:vendor-dedup, attempt 2, the evidence and the window", r)
		}
	})
	t.Run("no receipt, no re-send", func(t *testing.T) {
		h := newHarness(t)
		h.opts.Store = resentFails{&hookedStore{Store: h.store}}
		h.opts.VendorWindows = map[string]time.Duration{"ChargeCard": time.Hour}
		h.tools.fail = func(ctx context.Context) (error, bool) {
			return errors.New("connection reset by peer"), true
		}
		_, err := h.run("wf-vendor-dedup-down", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 2})
		if app := appErr(t, err); app.Type() != interceptor.ErrTypeStoreUnavailable || h.v.count() != 1 {
			t.Fatalf("workflow saw %s, vendor %d; want %s and one charge: re-sent without its receipt",
				app.Type(), h.v.count(), interceptor.ErrTypeStoreUnavailable)
		}
		rs := h.receipts(store.ReceiptFilter{Activity: "ChargeCard"})
		waitState(t, h.store, rs[0].Key, store.StateUnknown)
	})
}

// TestWitnessesGetTheEvidence: a destructive write the gate has witnesses for
// records that its key left through a keyed transport, as one named in
// VendorWindows does — a witness that asks the vendor by key (idemhttp's lookup)
// answers only on that evidence. Before, only VendorWindows turned it on, and the
// lookup witness could never tell.
func TestWitnessesGetTheEvidence(t *testing.T) {
	for name, set := range map[string]func(h *harness, w witness.Witness){
		"by activity": func(h *harness, w witness.Witness) {
			h.opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {w}}
		},
		"for every write": func(h *harness, w witness.Witness) { h.opts.Witnesses = map[string][]witness.Witness{"": {w}} },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			var seen []store.Sent
			set(h, witness.Func("evidence", func(_ context.Context, q witness.Query) (witness.Answer, error) {
				seen = q.Record.Sent
				return witness.Answer{}, nil
			}))
			h.tools.fail = func(ctx context.Context) (error, bool) { return errors.New("connection reset by peer"), true }
			if _, err := h.run("wf-evidence", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 2}); err == nil {
				t.Fatal("the unknown outcome was not refused")
			}
			if len(seen) != 1 || seen[0].Owner == "" ||
				seen[0] != (attempt.Sent{Via: "test:vendor", Host: "vendor.test", Window: 24 * time.Hour, Owner: seen[0].Owner}) {
				t.Fatalf("the witness saw evidence %+v, want the keyed transport's", seen)
			}
		})
	}
}
