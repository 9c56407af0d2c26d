package idemhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// TestAtkWitRedirectedAbsentIsNotNotSent: a lookup of a resource under a
// client-chosen ID (GET /v1/things/{key}, AbsentStatus 404, Authoritative) that
// the vendor redirects on the same host — an API version moved, a trailing slash,
// a gateway's rewrite — to a route that does not know the key (404). The 404 is
// the answer of another URL than the lookup the user wrote and declared
// authoritative; it must not read as "nothing under the key" (a "not sent" makes
// the write run again while the vendor holds it under the old route).
func TestAtkWitRedirectedAbsentIsNotNotSent(t *testing.T) {
	const key = "wf-1/run-1/ChargeCard/1"
	held := map[string]bool{} // the vendor's v1 store
	vkey, err := idemhttp.Stripe.VendorKey(key)
	if err != nil {
		t.Fatal(err)
	}
	held[vkey] = true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/things/"):
			// The vendor moved its API: every v1 read is redirected to v2, which
			// keeps things under its own IDs and knows no client-chosen key.
			http.Redirect(w, r, "/v2/things/"+strings.TrimPrefix(r.URL.Path, "/v1/things/"), http.StatusMovedPermanently)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	l := idemhttp.Lookup{
		Request: func(ctx context.Context, vendorKey string) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/things/"+vendorKey, nil)
		},
		Read:          func([]byte) (*idemhttp.Resource, error) { return &idemhttp.Resource{ID: "thing"}, nil },
		AbsentStatus:  http.StatusNotFound,
		Authoritative: true,
	}
	w, err := idemhttp.LookupWitness(idemhttp.Stripe, srv.Client(), l)
	if err != nil {
		t.Fatal(err)
	}
	rec := unknownRecord(key, store.Sent{Via: w.Name(), Host: hostOf(t, srv.URL), Window: 24 * time.Hour})
	ans, err := w.Ask(context.Background(), witness.Query{Record: rec, Now: time.Now()})
	if err == nil && ans.Verdict == witness.NotSent {
		t.Fatalf("a 404 from the route the vendor redirected the lookup to settles the key not sent (%s); the vendor "+
			"holds the key under the lookup's own route", ans.Evidence)
	}
}

// TestAtkWitAuthoritativeNothingAfterTheVendorsWindow: the simulated processor's
// lookup reads its idempotency store (GET /v1/charges?idempotency_key=K), as a
// vendor's lookup by key does; a real vendor forgets a key after its window
// (Profile.Window: 24 h for Stripe). A key left pending for a day (nobody resolved
// it) and then asked about — by the gate's next attempt, the plugin's background
// reconciler or `idemgate reconcile` — finds nothing under the key, and the
// witness's authoritative "not sent" releases it: the charge runs a second time.
// The transport refuses to re-send past the same window (attempt.InVendorWindow);
// the lookup must not tell "not sent" past it either.
func TestAtkWitAuthoritativeNothingAfterTheVendorsWindow(t *testing.T) {
	w := startWorld(t)
	lw := mustLookup(t, idemhttp.Stripe, chargeLookup(w.Payments.URL)) // the processor forgot the key: it holds nothing
	rec := unknownRecord("order-77/charge", store.Sent{Via: lw.Name(), Host: hostOf(t, w.Payments.URL), Window: idemhttp.Stripe.Window})
	now := time.Now()
	rec.CreatedAt, rec.Lease = now.Add(-25*time.Hour), now.Add(-25*time.Hour+time.Minute)
	a, err := lw.Ask(context.Background(), witness.Query{Record: rec, Now: now})
	if err == nil && a.Verdict == witness.NotSent {
		t.Fatalf("a key claimed 25 h ago, past the vendor's %s window, settles not sent on an empty lookup: %s",
			idemhttp.Stripe.Window, a.Evidence)
	}
	// Inside the window the answer stands.
	rec.CreatedAt, rec.Lease = now.Add(-time.Hour), now.Add(-time.Hour+time.Minute)
	if a, err := lw.Ask(context.Background(), witness.Query{Record: rec, Now: now}); err != nil || a.Verdict != witness.NotSent {
		t.Fatalf("inside the window: %+v, %v; want not sent", a, err)
	}
	// A lookup of resources kept for ever says so (Lookup.Remembers).
	l := chargeLookup(w.Payments.URL)
	l.Remembers = idemhttp.NoExpiry
	rec.CreatedAt = now.Add(-25 * time.Hour)
	if a, err := mustLookup(t, idemhttp.Stripe, l).Ask(context.Background(), witness.Query{Record: rec, Now: now}); err != nil ||
		a.Verdict != witness.NotSent {
		t.Fatalf("a lookup that remembers for ever, 25 h on: %+v, %v; want not sent", a, err)
	}
}
