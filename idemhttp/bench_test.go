package idemhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
)

// BenchmarkTransport measures what the transport adds to a write, side by side with the
// bare net/http transport, against a loopback server. Each iteration builds the attempt
// context in both cases, as the gate does once per attempt.
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"pi_1","object":"payment_intent"}`)
	}))
	defer srv.Close()

	for _, bc := range []struct {
		name string
		wrap func(http.RoundTripper) http.RoundTripper
	}{
		{"bare", func(rt http.RoundTripper) http.RoundTripper { return rt }},
		{"idemhttp", func(rt http.RoundTripper) http.RoundTripper { return idemhttp.NewTransport(rt, idemhttp.Stripe) }},
		{"idemhttp-hashed-key", func(rt http.RoundTripper) http.RoundTripper { return idemhttp.NewTransport(rt, idemhttp.AmazonPay) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			base := &http.Transport{MaxIdleConnsPerHost: 4}
			defer base.CloseIdleConnections()
			c := &http.Client{Transport: bc.wrap(base)}
			b.ReportAllocs()
			for b.Loop() {
				st := &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive", FirstClaimed: firstClaimed}
				ctx := attempt.NewContext(context.Background(), st)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/payment_intents", strings.NewReader("amount=2000&currency=usd"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkOverhead isolates the transport's own work: the base answers at once, with no
// network, so the difference between the two is what idemhttp adds per write.
func BenchmarkOverhead(b *testing.B) {
	stub := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			r.Body.Close()
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", stub},
		{"idemhttp", idemhttp.NewTransport(stub, idemhttp.Stripe)},
		{"idemhttp-hashed-key", idemhttp.NewTransport(stub, idemhttp.AmazonPay)},
		{"idemhttp-body-field", idemhttp.NewTransport(stub, idemhttp.Square)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				st := &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive", FirstClaimed: firstClaimed}
				ctx := attempt.NewContext(context.Background(), st)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://vendor.test/v2/payments", strings.NewReader(`{"amount_money":{"amount":2000,"currency":"USD"}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer sk_test_123")
				if _, err := bc.rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
