package idemhttp_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
)

// TestCrossHostRedirectWithheld: http.Client follows a 307/308 with the method,
// headers and body; the transport must not let the key (or the write) reach a host
// the request was not made to. A redirect on the same host is followed as before.
func TestCrossHostRedirectWithheld(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		for _, p := range []idemhttp.Profile{idemhttp.Stripe, idemhttp.Square, idemhttp.Google} {
			t.Run(http.StatusText(code)+"/"+p.Name, func(t *testing.T) {
				other := newVendor(t, nil)
				v := newVendor(t, func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, other.URL+"/v1/charges", code)
				})
				ctx, st := gated(activityKey, "destructive", false)
				_, err := post(t, ctx, idemhttp.Client(p), v.URL+"/v1/charges", `{"amount":100}`)
				if !errors.Is(err, idemhttp.ErrCrossHostRedirect) {
					t.Fatalf("err = %v, want ErrCrossHostRedirect", err)
				}
				if errors.Is(err, idemhttp.ErrNotSent) {
					t.Fatalf("err = %v wraps ErrNotSent, but the first request reached the vendor", err)
				}
				if n := len(other.requests()); n != 0 {
					t.Fatalf("the other host received %d requests: %+v", n, other.requests())
				}
				if n := len(v.requests()); n != 1 {
					t.Fatalf("the vendor received %d requests, want 1", n)
				}
				obs := st.Observations()
				if len(obs) != 2 || obs[0].Outcome != attempt.Unknown || obs[1].Outcome != attempt.NotSent {
					t.Fatalf("observations = %+v, want the redirect unknown and the withheld request not sent", obs)
				}
			})
		}
	}

	t.Run("same host is followed", func(t *testing.T) {
		v := newVendor(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/old" {
				http.Redirect(w, r, "/v1/new", http.StatusPermanentRedirect)
				return
			}
			w.Write([]byte(`{"id":"ch_1"}`))
		})
		ctx, st := gated(activityKey, "destructive", false)
		resp, err := post(t, ctx, idemhttp.Client(idemhttp.Stripe), v.URL+"/v1/old", `{"amount":100}`)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("same-host redirect: %v %v", resp, err)
		}
		reqs := v.requests()
		if len(reqs) != 2 || reqs[1].Path != "/v1/new" || string(reqs[1].Body) != `{"amount":100}` {
			t.Fatalf("requests = %+v", reqs)
		}
		for _, r := range reqs {
			if r.Header.Get("Idempotency-Key") != activityKey {
				t.Fatalf("request to %s carries key %q, want %q", r.Path, r.Header.Get("Idempotency-Key"), activityKey)
			}
		}
		if obs := st.Observations(); len(obs) != 2 || obs[1].Outcome != attempt.Committed {
			t.Fatalf("observations = %+v", obs)
		}
	})
}
