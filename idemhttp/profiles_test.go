package idemhttp_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
)

// arrived extracts the key as the vendor received it.
type arrived func(t *testing.T, s seen) string

func header(name string) arrived {
	return func(t *testing.T, s seen) string {
		if n := len(s.Header.Values(name)); n != 1 {
			t.Fatalf("header %s has %d values (%q), want exactly one", name, n, s.Header.Values(name))
		}
		return s.Header.Get(name)
	}
}

func query(name string) arrived {
	return func(t *testing.T, s seen) string {
		if n := len(s.Query[name]); n != 1 {
			t.Fatalf("query %s has %d values, want one", name, n)
		}
		return s.Query.Get(name)
	}
}

func bodyField(name string) arrived {
	return func(t *testing.T, s seen) string {
		var m map[string]any
		if err := json.Unmarshal(s.Body, &m); err != nil {
			t.Fatalf("body %q is not JSON: %v", s.Body, err)
		}
		if m["amount"] != 100.0 {
			t.Fatalf("body %q lost the caller's fields", s.Body)
		}
		v, _ := m[name].(string)
		return v
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestBuiltinProfiles sends one write per built-in profile and checks where and how the
// key arrived: for the minted UUID key and for a long business key with characters no
// vendor accepts, on two attempts of the same activity.
func TestBuiltinProfiles(t *testing.T) {
	const businessKey = "order-4217/charge card #1 for Zoë — a business key well past thirty-six characters"
	cases := []struct {
		p        idemhttp.Profile
		got      arrived
		uuidOK   bool   // the minted UUID key arrives as it is
		rule     string // a regexp every arrived key must match
		quoted   bool
		noHeader bool
	}{
		{p: idemhttp.Stripe, got: header("Idempotency-Key"), uuidOK: true, rule: `^[!-~]{1,255}$`},
		{p: idemhttp.Adyen, got: header("Idempotency-Key"), uuidOK: true, rule: uuidRE.String()},
		{p: idemhttp.CheckoutCom, got: header("Cko-Idempotency-Key"), uuidOK: true, rule: uuidRE.String()},
		{p: idemhttp.PayPal, got: header("PayPal-Request-Id"), uuidOK: true, rule: `^[!-~]{1,108}$`},
		{p: idemhttp.Square, got: bodyField("idempotency_key"), uuidOK: true, rule: `^[!-~]{1,45}$`},
		{p: idemhttp.Plaid, got: bodyField("idempotency_key"), uuidOK: true, rule: `^[!-~]{1,50}$`},
		{p: idemhttp.RazorpayX, got: header("X-Payout-Idempotency"), uuidOK: true, rule: `^[A-Za-z0-9_ -]{4,36}$`},
		{p: idemhttp.AmazonPay, got: header("X-Amz-Pay-Idempotency-Key"), rule: `^[A-Za-z0-9_-]{1,32}$`},
		{p: idemhttp.Increase, got: header("Idempotency-Key"), uuidOK: true, rule: `^[!-~]{1,200}$`},
		{p: idemhttp.ModernTreasury, got: header("Idempotency-Key"), uuidOK: true, rule: `^[!-~]+$`},
		{p: idemhttp.Lithic, got: header("Idempotency-Key"), uuidOK: true, rule: uuidRE.String()},
		{p: idemhttp.GoCardless, got: header("Idempotency-Key"), uuidOK: true, rule: `^[!-~]+$`},
		{p: idemhttp.Zendesk, got: header("Idempotency-Key"), uuidOK: true, rule: `^[!-~]+$`},
		{p: idemhttp.Telnyx, got: header("Idempotency-Key"), uuidOK: true, rule: `^[A-Za-z0-9_:-]{1,255}$`},
		{p: idemhttp.Worldline, got: header("X-GCS-Idempotence-Key"), uuidOK: true, rule: `^[!-~]{1,40}$`},
		{p: idemhttp.Moov, got: header("X-Idempotency-Key"), uuidOK: true, rule: `^[!-~]{1,36}$`},
		{p: idemhttp.IETF, got: header("Idempotency-Key"), uuidOK: true, rule: `^"[ !#-\[\]-~]*"$`, quoted: true},
		{p: idemhttp.Google, got: query("requestId"), uuidOK: true, rule: uuidRE.String()},
		{p: idemhttp.Azure, got: header("Repeatability-Request-ID"), uuidOK: true, rule: uuidRE.String()},
		{p: idemhttp.NoKey, noHeader: true},
	}
	for _, tc := range cases {
		t.Run(tc.p.Name, func(t *testing.T) {
			if err := tc.p.Validate(); err != nil {
				t.Fatal(err)
			}
			v := newVendor(t, nil)
			c := idemhttp.Client(tc.p)
			for _, key := range []string{activityKey, businessKey} {
				var keys []string
				for try := 1; try <= 2; try++ {
					ctx, st := gated(key, "idempotent-write", try > 1)
					if _, err := post(t, ctx, c, v.URL+"/v1/charges?expand=x", `{"amount":100}`); err != nil {
						t.Fatal(err)
					}
					if o := onlyObservation(t, st); o.Outcome != attempt.Committed || o.Vendor != tc.p.Name || o.Status != 200 {
						t.Fatalf("observation %+v, want committed 200 from %s", o, tc.p.Name)
					}
					reqs := v.requests()
					s := reqs[len(reqs)-1]
					if s.Query.Get("expand") != "x" {
						t.Fatalf("query %v lost the caller's parameter", s.Query)
					}
					if tc.noHeader {
						for name := range s.Header {
							if strings.Contains(strings.ToLower(name), "idempot") || strings.Contains(strings.ToLower(name), "request-id") {
								t.Fatalf("no-key profile sent %s: %q", name, s.Header[name])
							}
						}
						continue
					}
					keys = append(keys, tc.got(t, s))
					if tc.p.Where == idemhttp.InAzureHeaders {
						if got, want := s.Header.Get("Repeatability-First-Sent"), "Sun, 29 Nov 2026 09:30:00 GMT"; got != want {
							t.Fatalf("Repeatability-First-Sent = %q, want %q (the first attempt's time, on every attempt)", got, want)
						}
					}
				}
				if tc.noHeader {
					continue
				}
				if keys[0] != keys[1] {
					t.Fatalf("attempts 1 and 2 sent %q and %q, want the same key", keys[0], keys[1])
				}
				want, err := tc.p.VendorKey(key)
				if err != nil {
					t.Fatal(err)
				}
				if keys[0] != want {
					t.Fatalf("sent %q, VendorKey says %q", keys[0], want)
				}
				if !regexp.MustCompile(tc.rule).MatchString(keys[0]) {
					t.Fatalf("sent %q, which breaks the vendor's rule %s", keys[0], tc.rule)
				}
				bare := strings.Trim(keys[0], `"`)
				if key == activityKey && tc.uuidOK != (bare == activityKey) {
					t.Fatalf("minted key sent as %q; want it as is: %v", keys[0], tc.uuidOK)
				}
				if key == businessKey && bare == businessKey {
					t.Fatalf("business key with non-ASCII sent as is: %q", keys[0])
				}
				if tc.quoted && keys[0] != `"`+bare+`"` {
					t.Fatalf("IETF key %q is not a structured-field string", keys[0])
				}
			}
		})
	}
}
