package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// TestWitnessesGetSentEvidence: a destructive write with witnesses (and no
// VendorWindows) has its keyed transport record that the key left, so a vendor's
// witness, which answers only for keys that left to it, finds the evidence: here it
// settles the charge whose answer was lost as sent, and the retry returns its
// result without charging again; registered for the activity or for every write ("").
func TestWitnessesGetSentEvidence(t *testing.T) {
	for _, name := range []string{"ChargeCard", ""} {
		t.Run(fmt.Sprintf("witnesses[%q]", name), func(t *testing.T) {
			h := newHarness(t)
			h.tools.fail = func(ctx context.Context) (error, bool) {
				if ctxAttempt(ctx) == 1 {
					return errors.New("connection reset after the vendor answered"), true
				}
				return nil, false
			}
			var saw [][]store.Sent
			h.opts.Witnesses = map[string][]witness.Witness{name: {witness.Func("vendor", func(_ context.Context, q witness.Query) (witness.Answer, error) {
				saw = append(saw, q.Record.Sent)
				for _, s := range q.Record.Sent {
					if s.Via == "test:vendor" {
						return witness.Answer{Verdict: witness.Sent, Result: "charge done (by the vendor's records)", Evidence: "vendor lookup"}, nil
					}
				}
				return witness.Answer{Evidence: "no evidence the key left to the vendor"}, nil
			})}}
			out, err := h.run("wf-evidence-"+name, call{Activity: "ChargeCard", Charge: Charge{Customer: "c1", Amount: 5}, MaxAttempts: 3})
			if err != nil || len(out) != 1 || out[0] != "charge done (by the vendor's records)" {
				t.Fatalf("result %q, error %v; want the witness's result (the witness saw %v)", out, err, saw)
			}
			if n := h.v.count(); n != 1 {
				t.Errorf("the vendor was reached %d times; want 1", n)
			}
		})
	}
}
