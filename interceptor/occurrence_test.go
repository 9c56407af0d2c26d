package interceptor_test

import (
	"testing"

	"github.com/idemgate/idemgate/interceptor"
)

// A WithKey call takes no occurrence number: the minted key of the next call of the
// same activity does not depend on it. Run 1 charges a tip under WithKey, then the
// order; run 2 of the same workflow ID (ScopeWorkflowID) charges only the order and
// must get run 1's stored result. (When the WithKey call took number 1, the order
// was number 2 in run 1 and number 1 in run 2: charged twice.)
func TestWithKeyCallTakesNoOccurrenceNumber(t *testing.T) {
	h := newHarness(t)
	h.opts.Scope = interceptor.ScopeWorkflowID
	tip := call{Activity: "ChargeCard", Key: "order-4217/tip-charge", Charge: Charge{Customer: "c1", Amount: 7}, MaxAttempts: 1}
	order := call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1}
	first, err := h.run("order-4217", tip, order)
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.run("order-4217", order)
	if err != nil || h.v.count() != 2 || again[0] != first[1] {
		t.Fatalf("re-run without the tip: vendor %d calls (want 2), result %q vs %q, err %v", h.v.count(), again, first, err)
	}
}
