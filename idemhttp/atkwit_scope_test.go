//go:build atkwit

package idemhttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// atk-wit finding 5 (open): a vendor scopes idempotency keys (and what a lookup
// finds) per account — Stripe per account, a connected account chosen per request
// with the Stripe-Account header; any multi-tenant API with a tenant header or a
// per-tenant token. The write went to account acct_2; Lookup.Request gets the
// vendor key alone (not the record, its Args or its workflow), so the lookup asks
// the default account, which holds nothing under the key, and an Authoritative
// lookup settles "not sent": the charge on acct_2 runs a second time. The evidence
// (store.Sent: profile and host) does not name the scope either, so the witness
// cannot see that it asks elsewhere.
func TestAtkWitLookupAsksAnotherAccount(t *testing.T) {
	var mu sync.Mutex
	held := map[[2]string]string{} // (account, key) → charge ID
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acct := r.Header.Get("Stripe-Account")
		mu.Lock()
		defer mu.Unlock()
		data := []map[string]any{}
		if id, ok := held[[2]string{acct, r.URL.Query().Get("idempotency_key")}]; ok {
			data = append(data, map[string]any{"id": id})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	defer srv.Close()
	const key = "wf-9/run-1/ChargeConnected/1"
	vkey, _ := idemhttp.Stripe.VendorKey(key)
	held[[2]string{"acct_2", vkey}] = "ch_on_acct_2" // the lost attempt's charge, on the connected account

	l := idemhttp.Lookup{
		Request: func(ctx context.Context, vendorKey string) (*http.Request, error) {
			// All the lookup knows is the key: which account the write used is not here.
			return http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/charges?idempotency_key="+url.QueryEscape(vendorKey), nil)
		},
		Read: func(body []byte) (*idemhttp.Resource, error) {
			var list struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 {
				return nil, err
			}
			return &idemhttp.Resource{ID: list.Data[0].ID, NoResult: true}, nil
		},
		Authoritative: true,
	}
	lw := mustLookup(t, idemhttp.Stripe, l)
	rec := unknownRecord(key, store.Sent{Via: lw.Name(), Host: hostOf(t, srv.URL), Window: idemhttp.Stripe.Window})
	rec.Activity, rec.Args = "ChargeConnected", []byte(`[{"account":"acct_2","amount":2000}]`)
	a, err := lw.Ask(context.Background(), witness.Query{Record: rec, Now: time.Now()})
	if err == nil && a.Verdict == witness.NotSent {
		t.Fatalf("the write went to account acct_2; the lookup asked the default account and settles not sent: %s", a.Evidence)
	}
}
