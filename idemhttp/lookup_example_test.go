package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/witness"
)

// A vendor that lists what an idempotency key produced is a witness: when a
// charge's answer was lost, the gate asks it before refusing the retry. Found, the
// charge is the activity's result and the retry returns it without charging again;
// nothing under the key (from a lookup that sees every keyed request at once) is
// "not sent", which counts only after the lost attempt's lease.
func ExampleLookupWitness() {
	sim, _ := vendorsim.Start() // a card processor that deduplicates on Idempotency-Key
	defer sim.Close()

	type Charge struct {
		ID     string  `json:"id"`
		Amount float64 `json:"amount"`
	}
	charges, err := idemhttp.LookupWitness(idemhttp.Stripe, nil, idemhttp.Lookup{
		Request: func(ctx context.Context, vendorKey string) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet,
				sim.Payments.URL+"/v1/charges?idempotency_key="+url.QueryEscape(vendorKey), nil)
		},
		Read: func(body []byte) (*idemhttp.Resource, error) {
			var list struct{ Data []Charge }
			if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 {
				return nil, err
			}
			return &idemhttp.Resource{ID: list.Data[0].ID, Result: list.Data[0]}, nil
		},
		Authoritative: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Register it for the activities that charge through idemhttp.Stripe.
	_ = interceptor.Options{Witnesses: map[string][]witness.Witness{"ChargeCard": {charges}}}

	// Here it is asked by hand, as the gate would: key K left through the transport
	// (the record's evidence), and the processor charged, but its answer was lost.
	const key = "5f0c8a4e-3b1d-4c2e-9f6a-7b8c9d0e1f2a"
	req, _ := http.NewRequest(http.MethodPost, sim.Payments.URL+"/v1/charges",
		strings.NewReader(`{"customer":"cus_1","amount":2000,"currency":"usd"}`))
	req.Header.Set("Idempotency-Key", key)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	host := strings.TrimPrefix(sim.Payments.URL, "http://")
	for _, k := range []string{key, "a key that never reached the processor"} {
		rec := store.Record{Key: k, Activity: "ChargeCard", State: store.StateUnknown, CreatedAt: time.Now().Add(-time.Minute),
			Sent: []store.Sent{{Via: "idemhttp:stripe", Host: host, Window: 24 * time.Hour}}}
		a, err := charges.Ask(context.Background(), witness.Query{Record: rec, Now: time.Now()})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: %s %+v\n", charges.Name(), a.Verdict, a.Result)
	}
	// Output:
	// idemhttp:stripe: sent {ID:ch_000001 Amount:2000}
	// idemhttp:stripe: not sent <nil>
}
