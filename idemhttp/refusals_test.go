package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
)

// TestRefusals: bad input and withheld retries get a clear error naming the vendor, the
// activity, the key and the next step, and the vendor sees nothing.
func TestRefusals(t *testing.T) {
	verbatim := idemhttp.AmazonPay
	verbatim.Verbatim = true
	longAgo := time.Now().Add(-25 * time.Hour)
	recent := time.Now().Add(-time.Minute)
	almostForgotten := time.Now().Add(-idemhttp.Stripe.Window + attempt.DefaultClockSkew)
	// With the gate's Options.ClockSkew at 10 min, 15 min before the window ends is
	// inside the 2×skew margin (issue 18, item 11: the margin was a fixed 2 min).
	skewedFirst := time.Now().Add(-idemhttp.Stripe.Window + 15*time.Minute)

	cases := []struct {
		name      string
		p         idemhttp.Profile
		st        *attempt.State // nil: no attempt in the context
		body      string
		want      error
		notSent   bool     // the error wraps ErrNotSent and the gate is told not-sent
		observed  bool     // the gate is told anything at all
		mentions  []string // beyond the vendor name
		outcome   attempt.Outcome
		wantSends int
	}{
		{
			name: "no activity key", p: idemhttp.Stripe, body: `{}`,
			want: idemhttp.ErrNoKey, notSent: true,
			mentions: []string{"no activity", "Idempotency-Key", "AllowNoKey"},
		},
		{
			name: "empty activity key", p: idemhttp.Google, st: &attempt.State{Activity: "CreateVM"}, body: `{}`,
			want: idemhttp.ErrNoKey, notSent: true, mentions: []string{"requestId"},
		},
		{
			name: "body is not JSON", p: idemhttp.Square, body: `amount=100&currency=USD`,
			st:   &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive", FirstClaimed: recent},
			want: idemhttp.ErrBadBody, notSent: true, observed: true, outcome: attempt.NotSent,
			mentions: []string{"ChargeCard", activityKey, "idempotency_key", "JSON object"},
		},
		{
			name: "body is a JSON array", p: idemhttp.Plaid, body: `[{"amount":1}]`,
			st:   &attempt.State{Key: activityKey, Activity: "CreateTransfer", Effect: "idempotent-write"},
			want: idemhttp.ErrBadBody, notSent: true, observed: true, outcome: attempt.NotSent,
			mentions: []string{"plaid", "CreateTransfer", "not an object"},
		},
		{
			name: "verbatim key does not fit", p: verbatim, body: `{}`,
			st:   &attempt.State{Key: activityKey, Activity: "Charge", Effect: "idempotent-write"},
			want: idemhttp.ErrBadKey, notSent: true, observed: true, outcome: attempt.NotSent,
			mentions: []string{"Charge", activityKey, "Verbatim"},
		},
		{
			name: "azure without first-claimed time", p: idemhttp.Azure, body: `{}`,
			st:   &attempt.State{Key: activityKey, Activity: "CreateBlob", Effect: "idempotent-write"},
			want: idemhttp.ErrNoKey, notSent: true, observed: true, outcome: attempt.NotSent,
			mentions: []string{"CreateBlob", "Repeatability-First-Sent"},
		},
		{
			name: "destructive retry past the window", p: idemhttp.Stripe, body: `{}`,
			st:   &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive", Retry: true, FirstClaimed: longAgo},
			want: idemhttp.ErrWindowPassed, observed: true, outcome: attempt.Unknown,
			mentions: []string{"ChargeCard", activityKey, "24h0m0s", "by hand"},
		},
		{
			// A worker whose clock runs behind would send it after Stripe forgot the key.
			name: "destructive retry in the window's last minutes", p: idemhttp.Stripe, body: `{}`,
			st:   &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive", Retry: true, FirstClaimed: almostForgotten},
			want: idemhttp.ErrWindowPassed, observed: true, outcome: attempt.Unknown,
			mentions: []string{"ChargeCard", activityKey, "24h0m0s", "clock skew"},
		},
		{
			// The margin is the gate's Options.ClockSkew, carried by the attempt.
			name: "destructive retry inside 2×the gate's clock skew of the window's end", p: idemhttp.Stripe, body: `{}`,
			st: &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive", Retry: true,
				FirstClaimed: skewedFirst, ClockSkew: 10 * time.Minute},
			want: idemhttp.ErrWindowPassed, observed: true, outcome: attempt.Unknown,
			mentions: []string{"ChargeCard", activityKey, "24h0m0s", "clock skew", "20m0s"},
		},
		{
			name: "destructive retry to a vendor that does not dedupe", p: idemhttp.NoKey, body: `{}`,
			st:   &attempt.State{Key: activityKey, Activity: "SendEmail", Effect: "destructive", Retry: true, FirstClaimed: recent},
			want: idemhttp.ErrWindowPassed, observed: true, outcome: attempt.Unknown,
			mentions: []string{"SendEmail", "does not deduplicate"},
		},
		{
			name: "destructive retry to a vendor with no published window", p: idemhttp.Square, body: `{}`,
			st:   &attempt.State{Key: activityKey, Activity: "CreatePayment", Effect: "destructive", Retry: true, FirstClaimed: recent},
			want: idemhttp.ErrWindowPassed, observed: true, outcome: attempt.Unknown,
			mentions: []string{"does not publish"},
		},
		{
			name: "destructive retry without first-claimed time", p: idemhttp.Stripe, body: `{}`,
			st:   &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive", Retry: true},
			want: idemhttp.ErrWindowPassed, observed: true, outcome: attempt.Unknown,
			mentions: []string{"first claimed"},
		},
		{
			name: "invalid profile", p: idemhttp.Profile{Name: "acme", Field: "Idempotency-Key"}, body: `{}`,
			st:   &attempt.State{Key: activityKey, Activity: "Charge", Effect: "destructive"},
			want: idemhttp.ErrBadProfile, notSent: true, mentions: []string{"Where"},
		},
		// Sent, for contrast: the same shapes that are fine.
		{
			name: "destructive retry inside the window", p: idemhttp.Stripe, body: `{}`,
			st:       &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive", Retry: true, FirstClaimed: recent},
			observed: true, outcome: attempt.Committed, wantSends: 1,
		},
		{
			name: "destructive retry inside the window, default skew", p: idemhttp.Stripe, body: `{}`,
			st:       &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive", Retry: true, FirstClaimed: skewedFirst},
			observed: true, outcome: attempt.Committed, wantSends: 1,
		},
		{
			name: "destructive retry to a vendor that never forgets", p: idemhttp.Moov, body: `{}`,
			st:       &attempt.State{Key: activityKey, Activity: "Transfer", Effect: "destructive", Retry: true, FirstClaimed: longAgo},
			observed: true, outcome: attempt.Committed, wantSends: 1,
		},
		{
			name: "idempotent-write retry past the window", p: idemhttp.Stripe, body: `{}`,
			st:       &attempt.State{Key: activityKey, Activity: "UpdateCustomer", Effect: "idempotent-write", Retry: true, FirstClaimed: longAgo},
			observed: true, outcome: attempt.Committed, wantSends: 1,
		},
		{
			name: "no activity key, no-key vendor", p: idemhttp.NoKey, body: `{}`, wantSends: 1,
		},
		{
			name: "square endpoint without a body", p: idemhttp.Square, body: ``,
			st:       &attempt.State{Key: activityKey, Activity: "CancelPayment", Effect: "destructive", FirstClaimed: recent},
			observed: true, outcome: attempt.Committed, wantSends: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := newVendor(t, nil)
			ctx := context.Background()
			if tc.st != nil {
				ctx = attempt.NewContext(ctx, tc.st)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, v.URL+"/v1/things", strings.NewReader(tc.body))
			if tc.body == "" {
				req, _ = http.NewRequestWithContext(ctx, http.MethodPost, v.URL+"/v1/things", nil)
			}
			closed := &closeRecorder{Reader: strings.NewReader(tc.body)}
			if tc.body != "" {
				req.Body = closed
			}
			resp, err := idemhttp.Client(tc.p).Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			if n := len(v.requests()); n != tc.wantSends {
				t.Fatalf("server saw %d requests, want %d", n, tc.wantSends)
			}
			if tc.body != "" && tc.wantSends == 0 && !closed.closed.Load() {
				t.Fatal("the refused request's body was not closed")
			}
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				if errors.Is(err, idemhttp.ErrNotSent) != tc.notSent {
					t.Fatalf("err = %v; wraps ErrNotSent: %v, want %v", err, errors.Is(err, idemhttp.ErrNotSent), tc.notSent)
				}
				for _, m := range append([]string{"idemgate/idemhttp: " + tc.p.Name + ":"}, tc.mentions...) {
					if !strings.Contains(err.Error(), m) {
						t.Fatalf("error %q does not mention %q", err, m)
					}
				}
			}
			if tc.st == nil {
				return
			}
			obs := tc.st.Observations()
			if !tc.observed {
				if len(obs) != 0 {
					t.Fatalf("observations %+v, want none", obs)
				}
				return
			}
			if o := onlyObservation(t, tc.st); o.Outcome != tc.outcome || o.Vendor != tc.p.Name {
				t.Fatalf("observation %+v, want %v from %s", o, tc.outcome, tc.p.Name)
			}
		})
	}
}

type closeRecorder struct {
	*strings.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    idemhttp.Profile
		ok   bool
	}{
		{"no name", idemhttp.Profile{Where: idemhttp.InHeader, Field: "Idempotency-Key"}, false},
		{"field without where", idemhttp.Profile{Name: "x", Field: "Idempotency-Key"}, false},
		{"where without field", idemhttp.Profile{Name: "x", Where: idemhttp.InQuery}, false},
		{"bad header name", idemhttp.Profile{Name: "x", Where: idemhttp.InHeader, Field: "Idempotency Key"}, false},
		{"max below a hash", idemhttp.Profile{Name: "x", Where: idemhttp.InHeader, Field: "K", MaxLen: 20}, false},
		{"charset without hex", idemhttp.Profile{Name: "x", Where: idemhttp.InHeader, Field: "K", Charset: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}, false},
		{"min above max", idemhttp.Profile{Name: "x", Where: idemhttp.InHeader, Field: "K", MinLen: 40, MaxLen: 36}, false},
		{"azure without uuid", idemhttp.Profile{Name: "x", Where: idemhttp.InAzureHeaders}, false},
		{"short max, verbatim", idemhttp.Profile{Name: "x", Where: idemhttp.InHeader, Field: "K", MaxLen: 20, Verbatim: true}, true},
		{"zero but named", idemhttp.Profile{Name: "x"}, true},
		{"hex-only 32", idemhttp.Profile{Name: "x", Where: idemhttp.InHeader, Field: "K", MaxLen: 32, Charset: "0123456789abcdef"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && (!errors.Is(err, idemhttp.ErrBadProfile) || !strings.HasPrefix(err.Error(), "idemgate/idemhttp: ")) {
				t.Fatalf("Validate() = %v, want ErrBadProfile with the package prefix", err)
			}
		})
	}
}

// VendorKey's errors carry the package prefix and the vendor, and wrap their sentinel.
func TestVendorKeyErrors(t *testing.T) {
	verbatim := idemhttp.AmazonPay
	verbatim.Verbatim = true
	if _, err := verbatim.VendorKey("order 4217/charge!"); !errors.Is(err, idemhttp.ErrBadKey) ||
		!strings.HasPrefix(err.Error(), "idemgate/idemhttp: "+verbatim.Name+": ") {
		t.Fatalf("VendorKey of a key that does not fit, Verbatim = %v, want ErrBadKey prefixed by the package and vendor", err)
	}
	if _, err := (idemhttp.Profile{Where: idemhttp.InHeader}).VendorKey("k"); !errors.Is(err, idemhttp.ErrBadProfile) ||
		!strings.HasPrefix(err.Error(), "idemgate/idemhttp: ") {
		t.Fatalf("VendorKey with an invalid profile = %v, want ErrBadProfile with the package prefix", err)
	}
}
