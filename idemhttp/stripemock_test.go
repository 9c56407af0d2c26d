package idemhttp_test

import (
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/internal/testutil/stripemock"
)

// newStripeClient is the stripe-go one-liner, pointed at stripe-mock.
func newStripeClient(url string) *stripe.Client {
	return stripe.NewClient("sk_test_123", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:    idemhttp.Client(idemhttp.Stripe),
		URL:           stripe.String(url),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})))
}

// TestStripeMock drives a real client (stripe-go) against a real server (stripe-mock):
// both attempts of one activity create the PaymentIntent with the activity's key, not the
// random key stripe-go mints per call.
func TestStripeMock(t *testing.T) {
	url := stripemock.Start(t)
	sc := newStripeClient(url)

	claimed := time.Now()
	for _, key := range []string{activityKey, "order-4217/charge for Zoë, a business key"} {
		want, err := idemhttp.Stripe.VendorKey(key)
		if err != nil {
			t.Fatal(err)
		}
		var sent []string
		for try := 1; try <= 2; try++ {
			ctx, st := gated(key, "destructive", try > 1)
			st.FirstClaimed = claimed // a destructive retry inside Stripe's window is sent
			pi, err := sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{
				Amount:   stripe.Int64(2000),
				Currency: stripe.String(string(stripe.CurrencyUSD)),
			})
			if err != nil {
				t.Fatalf("attempt %d: %v", try, err)
			}
			if pi.ID == "" || pi.LastResponse == nil {
				t.Fatalf("attempt %d: no PaymentIntent in %+v", try, pi)
			}
			sent = append(sent, pi.LastResponse.IdempotencyKey)
			if o := onlyObservation(t, st); o.Outcome != attempt.Committed || o.Status != 200 || o.Vendor != "stripe" {
				t.Fatalf("attempt %d: observation %+v, want committed 200", try, o)
			}
		}
		if sent[0] != want || sent[1] != want {
			t.Fatalf("stripe-mock reflected Idempotency-Key %q then %q, want %q both times", sent[0], sent[1], want)
		}
	}

	// A validation error from the real server is a definite rejection.
	ctx, st := gated(activityKey, "destructive", false)
	if _, err := sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{Currency: stripe.String("usd")}); err == nil {
		t.Fatal("stripe-mock accepted a PaymentIntent without an amount")
	}
	if o := onlyObservation(t, st); o.Outcome != attempt.Rejected || o.Status != 400 {
		t.Fatalf("observation %+v, want rejected 400", o)
	}
}
