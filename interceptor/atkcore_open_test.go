//go:build atkcore

package interceptor_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/witness"
)

// atk-core finding 6 (open): the common unknown outcome — an attempt that ends
// with an unmarked error (a connection reset) long before its lease — meets a
// witness that can tell ("not sent"), but only after the lease. Without
// Options.HoldUnknown the retry a second later hears the early answer and is
// refused for good (non-retryable): the witness never gets to settle the key and a
// person is needed for a write the witness would have settled a minute later.
// Want: when a witness answered and only the lease stands in its way, the refusal
// is retried at the lease (benign), and the workflow goes on by itself.
func TestAtkCoreEarlyNotSentIsNotRefusedForGood(t *testing.T) {
	h := newHarness(t)
	lostAnswer(h, false)
	h.opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {witness.Func("ledger", func(context.Context, witness.Query) (witness.Answer, error) {
		return witness.Answer{Verdict: witness.NotSent, Evidence: "no entry for the key"}, nil
	})}}
	out, err := h.run("wf-atk-early", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 10})
	if err != nil {
		t.Fatalf("refused although the witness can settle the key at the lease: %v", err)
	}
	if len(out) != 1 || h.v.count() != 1 {
		t.Fatalf("result %q, vendor %d; want one charge", out, h.v.count())
	}
}
