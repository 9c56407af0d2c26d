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
