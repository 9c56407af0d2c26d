package idemhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
)

// The transport goes under any http.Client. Inside an activity gated by the idemgate
// interceptor, every write carries the activity's key where the vendor expects it, and the
// gate learns whether the write happened.
func ExampleNewTransport() {
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("vendor got Idempotency-Key:", r.Header.Get("Idempotency-Key"))
		io.WriteString(w, `{"id":"pi_1"}`)
	}))
	defer vendor.Close()

	client := &http.Client{Transport: idemhttp.NewTransport(nil, idemhttp.Stripe)}

	// The interceptor puts this in the activity's context; built by hand here.
	st := &attempt.State{Key: "5f0c8a4e-3b1d-4c2e-9f6a-7b8c9d0e1f2a", Activity: "ChargeCard", Effect: "destructive"}
	ctx := attempt.NewContext(context.Background(), st)

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, vendor.URL+"/v1/payment_intents", strings.NewReader("amount=2000"))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	o := st.Observations()[0]
	fmt.Println("the gate is told:", o.Vendor, o.Status, o.Outcome)
	// Output:
	// vendor got Idempotency-Key: 5f0c8a4e-3b1d-4c2e-9f6a-7b8c9d0e1f2a
	// the gate is told: stripe 200 committed
}

// The stripe-go one-liner: give the client idemhttp's *http.Client. The activity's key then
// replaces the random key stripe-go mints per call, so a Temporal retry is deduplicated by
// Stripe as well. Pass the activity's ctx to every call. (The URL points stripe-go at a
// stand-in for Stripe here; leave it out in production.)
func ExampleClient_stripe() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("Stripe got Idempotency-Key:", r.Header.Get("Idempotency-Key"))
		io.WriteString(w, `{"id":"pi_1","object":"payment_intent"}`)
	}))
	defer api.Close()
	sc := stripe.NewClient("sk_test_...", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient: idemhttp.Client(idemhttp.Stripe), URL: stripe.String(api.URL),
	})))

	createIntent := func(ctx context.Context, amount int64) (string, error) { // an activity
		pi, err := sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{
			Amount: stripe.Int64(amount), Currency: stripe.String("usd"),
		})
		if err != nil {
			return "", err
		}
		return pi.ID, nil
	}

	// The interceptor puts this in the activity's context; built by hand here.
	st := &attempt.State{Key: "5f0c8a4e-3b1d-4c2e-9f6a-7b8c9d0e1f2a", Activity: "CreatePaymentIntent", Effect: "destructive"}
	id, err := createIntent(attempt.NewContext(context.Background(), st), 2000)
	fmt.Println(id, err)
	// Output:
	// Stripe got Idempotency-Key: 5f0c8a4e-3b1d-4c2e-9f6a-7b8c9d0e1f2a
	// pi_1 <nil>
}

// A vendor that is not built in: copy the closest profile and change what differs.
func ExampleProfile() {
	acme := idemhttp.Profile{
		Name: "acme", Where: idemhttp.InHeader, Field: "Acme-Request-Key",
		MaxLen: 40, Charset: idemhttp.CharsetAlnumDashUnderscore,
		Dedupes: true, Window: 48 * time.Hour,
	}
	if err := acme.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	k1, _ := acme.VendorKey("5f0c8a4e-3b1d-4c2e-9f6a-7b8c9d0e1f2a")
	k2, _ := acme.VendorKey("order-4217/charge") // '/' is not in the charset: hashed
	fmt.Println(k1)
	fmt.Println(len(k2), k2 != "order-4217/charge")
	// Output:
	// 5f0c8a4e-3b1d-4c2e-9f6a-7b8c9d0e1f2a
	// 36 true
}
