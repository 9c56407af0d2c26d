package idemhttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/witness"
)

// simCharge is a charge as the simulated card processor stores it, and as the
// ChargeCard activities of these tests return it.
type simCharge struct {
	ID       string  `json:"id"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Customer string  `json:"customer"`
	Status   string  `json:"status"`
}

// chargeLookup is the lookup of the simulated card processor: its charges listed
// by the idempotency key they were created with, authoritative (it stores every
// keyed request, and the list reads that store).
func chargeLookup(baseURL string) idemhttp.Lookup {
	return idemhttp.Lookup{
		Request: func(ctx context.Context, vendorKey string) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet,
				baseURL+"/v1/charges?idempotency_key="+url.QueryEscape(vendorKey), nil)
		},
		Read: func(body []byte) (*idemhttp.Resource, error) {
			var list struct {
				Data []simCharge `json:"data"`
			}
			if err := json.Unmarshal(body, &list); err != nil {
				return nil, err
			}
			if len(list.Data) == 0 {
				return nil, nil
			}
			return &idemhttp.Resource{ID: list.Data[0].ID, Result: list.Data[0]}, nil
		},
		Authoritative: true,
	}
}

// charge posts a charge to the simulated card processor with the vendor key the
// Stripe profile makes of activityKey, as idemhttp would.
func simCharge1(t *testing.T, w *vendorsim.World, activityKey string) {
	t.Helper()
	vkey, err := idemhttp.Stripe.VendorKey(activityKey)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, w.Payments.URL+"/v1/charges",
		strings.NewReader(`{"customer":"cus_1","amount":2000,"currency":"usd"}`))
	req.Header.Set("Idempotency-Key", vkey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("charge answered %d", resp.StatusCode)
	}
}

func startWorld(t *testing.T) *vendorsim.World {
	t.Helper()
	w, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// unknownRecord is the record of a ChargeCard whose outcome is unknown, with the
// evidence sent.
func unknownRecord(key string, sent ...store.Sent) store.Record {
	return store.Record{Key: key, Activity: "ChargeCard", Effect: store.EffectDestructive, State: store.StateUnknown,
		Sent: sent, Lease: time.Now().Add(-time.Minute), CreatedAt: time.Now().Add(-2 * time.Minute)}
}

// TestLookupWitnessAnswers asks the simulated card processor's lookup about keys
// in every situation the witness distinguishes, without a gate.
func TestLookupWitnessAnswers(t *testing.T) {
	w := startWorld(t)
	host := hostOf(t, w.Payments.URL)
	viaStripe := store.Sent{Via: "idemhttp:stripe", Host: host, Window: idemhttp.Stripe.Window}
	lw := mustLookup(t, idemhttp.Stripe, chargeLookup(w.Payments.URL))
	if lw.Name() != "idemhttp:stripe" {
		t.Fatalf("Name() = %q", lw.Name())
	}
	// A business key that does not fit Stripe's header went out hashed: the lookup
	// must ask for the hashed form, not the activity key.
	const charged, never = "order-4217/charge for Zoë", "order-4218/charge for Zoë"
	simCharge1(t, w, charged)
	vkey, _ := idemhttp.Stripe.VendorKey(charged)

	ask := func(l idemhttp.Lookup, rec store.Record) (witness.Answer, error) {
		return mustLookup(t, idemhttp.Stripe, l).Ask(context.Background(), witness.Query{Record: rec, Now: time.Now()})
	}
	t.Run("found: sent, with the vendor's record as the result", func(t *testing.T) {
		a, err := lw.Ask(context.Background(), witness.Query{Record: unknownRecord(charged, viaStripe), Now: time.Now()})
		got, ok := a.Result.(simCharge)
		if err != nil || a.Verdict != witness.Sent || !ok || got.ID != "ch_000001" || got.Amount != 2000 || a.NoResult {
			t.Fatalf("answer %+v, %v; want sent with charge ch_000001", a, err)
		}
		if !strings.Contains(a.Evidence, "GET ") || !strings.Contains(a.Evidence, "ch_000001") || !strings.Contains(a.Evidence, vkey) {
			t.Errorf("evidence %q does not name the request, the vendor key and what it found", a.Evidence)
		}
	})
	t.Run("found, but created before this write was first claimed: cannot tell", func(t *testing.T) {
		// A business key used again after the window: the vendor's resource under it is
		// the earlier write's, and its result must not be handed to this one.
		l := chargeLookup(w.Payments.URL)
		read := l.Read
		created := time.Now().Add(-time.Hour)
		l.Read = func(body []byte) (*idemhttp.Resource, error) {
			r, err := read(body)
			if r != nil {
				r.Created = created
			}
			return r, err
		}
		a, err := ask(l, unknownRecord(charged, viaStripe))
		if err != nil || a.Verdict != witness.CannotTell || !strings.Contains(a.Evidence, "an earlier write of the same key") {
			t.Fatalf("answer %+v, %v; want cannot tell", a, err)
		}
		// Created within the skew of the first claim: this write's.
		created = unknownRecord(charged).CreatedAt.Add(-30 * time.Second)
		if a, err := ask(l, unknownRecord(charged, viaStripe)); err != nil || a.Verdict != witness.Sent {
			t.Fatalf("answer %+v, %v; want sent", a, err)
		}
	})
	t.Run("nothing, authoritative: not sent", func(t *testing.T) {
		a, err := lw.Ask(context.Background(), witness.Query{Record: unknownRecord(never, viaStripe), Now: time.Now()})
		if err != nil || a.Verdict != witness.NotSent || !strings.Contains(a.Evidence, "nothing under vendor key") {
			t.Fatalf("answer %+v, %v; want not sent", a, err)
		}
	})
	t.Run("nothing, not authoritative: cannot tell", func(t *testing.T) {
		l := chargeLookup(w.Payments.URL)
		l.Authoritative = false
		a, err := ask(l, unknownRecord(never, viaStripe))
		if err != nil || a.Verdict != witness.CannotTell || !strings.Contains(a.Evidence, "not authoritative") {
			t.Fatalf("answer %+v, %v; want cannot tell", a, err)
		}
		// What it finds is found all the same.
		if a, err := ask(l, unknownRecord(charged, viaStripe)); err != nil || a.Verdict != witness.Sent {
			t.Fatalf("answer %+v, %v; want sent", a, err)
		}
	})
	t.Run("evidence of another profile, another host, none, or two ways out: cannot tell", func(t *testing.T) {
		lookups := w.Payments.Lookups()
		for name, sent := range map[string][]store.Sent{
			"another profile":   {{Via: "idemhttp:payments-eu", Host: host, Window: time.Hour}},
			"another host":      {{Via: "idemhttp:stripe", Host: "api.stripe.com", Window: time.Hour}},
			"no evidence":       nil,
			"two vendors":       {viaStripe, {Via: "idemhttp:no-key", Host: "mail.example"}},
			"an MCP server too": {viaStripe, {Via: "mcp:shop", Host: host, Window: time.Hour}},
		} {
			for _, key := range []string{charged, never} {
				a, err := lw.Ask(context.Background(), witness.Query{Record: unknownRecord(key, sent...), Now: time.Now()})
				if err != nil || a.Verdict != witness.CannotTell || a.Evidence == "" {
					t.Errorf("%s, key %q: answer %+v, %v; want cannot tell, with why", name, key, a, err)
				}
			}
		}
		if n := w.Payments.Lookups() - lookups; n != 0 {
			t.Errorf("the vendor was asked %d times about keys whose evidence does not name it", n)
		}
	})
	t.Run("errors settle nothing", func(t *testing.T) {
		w.Payments.SetBeforeLookup(func(rw http.ResponseWriter, _ *http.Request) bool {
			rw.WriteHeader(http.StatusServiceUnavailable)
			return false
		})
		a, err := lw.Ask(context.Background(), witness.Query{Record: unknownRecord(charged, viaStripe), Now: time.Now()})
		if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "ChargeCard") ||
			!strings.Contains(err.Error(), "Next step") {
			t.Fatalf("a 503: answer %+v, error %v; want an error naming the status, the activity and the next step", a, err)
		}
		// A lookup that does not answer within the bound: the Asker's timeout.
		w.Payments.SetBeforeLookup(func(_ http.ResponseWriter, r *http.Request) bool {
			<-r.Context().Done()
			return false
		})
		st := newSettleStore(t, unknownRecord(charged, viaStripe))
		rep, err := witness.Asker{Store: st, Timeout: 50 * time.Millisecond, Encode: jsonEncode}.Ask(context.Background(),
			st.rec, []witness.Witness{lw}, false)
		if err != nil || rep.Settled || len(rep.Said) != 1 || rep.Said[0].Err == nil {
			t.Fatalf("a lookup past the timeout: report %+v, %v; want an error, nothing settled", rep, err)
		}
		if st.resolved != 0 {
			t.Fatalf("settled %d times", st.resolved)
		}
		w.Payments.SetBeforeLookup(nil)

		// A 404 is an error unless the Lookup says it means "nothing under the key".
		l := chargeLookup(w.Payments.URL + "/no-such-route")
		if _, err := ask(l, unknownRecord(never, viaStripe)); err == nil || !strings.Contains(err.Error(), "404") {
			t.Fatalf("a 404 of a mistyped route: %v, want an error", err)
		}
		l.AbsentStatus = http.StatusNotFound
		l.Read = func([]byte) (*idemhttp.Resource, error) { return nil, nil }
		if a, err := ask(l, unknownRecord(never, viaStripe)); err != nil || a.Verdict != witness.NotSent {
			t.Fatalf("a 404 that means absent: %+v, %v; want not sent", a, err)
		}
		// A lookup redirected to another host is not the vendor's answer.
		other := startWorld(t)
		w.Payments.SetBeforeLookup(func(rw http.ResponseWriter, r *http.Request) bool {
			http.Redirect(rw, r, other.Payments.URL+r.URL.RequestURI(), http.StatusFound)
			return false
		})
		if a, err := lw.Ask(context.Background(), witness.Query{Record: unknownRecord(never, viaStripe)}); err == nil ||
			!strings.Contains(err.Error(), "redirected") || other.Payments.Lookups() != 1 {
			t.Fatalf("a lookup redirected to another host: %+v, %v; want an error", a, err)
		}
		w.Payments.SetBeforeLookup(nil)
		// A lookup that would write is refused before anything is sent.
		l = chargeLookup(w.Payments.URL)
		l.Request = func(ctx context.Context, vendorKey string) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodPost, w.Payments.URL+"/v1/charges", strings.NewReader("{}"))
		}
		if _, err := ask(l, unknownRecord(never, viaStripe)); err == nil || !strings.Contains(err.Error(), "read") {
			t.Fatalf("a POST lookup: %v, want an error", err)
		}
	})
	t.Run("invalid lookups and profiles are refused", func(t *testing.T) {
		for name, c := range map[string]struct {
			p idemhttp.Profile
			l idemhttp.Lookup
		}{
			"no Request":       {idemhttp.Stripe, idemhttp.Lookup{Read: chargeLookup("").Read}},
			"no Read":          {idemhttp.Stripe, idemhttp.Lookup{Request: chargeLookup("").Request}},
			"a keyless vendor": {idemhttp.NoKey, chargeLookup(w.Payments.URL)},
			"a bad profile":    {idemhttp.Profile{Name: "x", Where: idemhttp.InHeader}, chargeLookup(w.Payments.URL)},
		} {
			if lw, err := idemhttp.LookupWitness(c.p, nil, c.l); err == nil || lw != nil || !strings.Contains(err.Error(), "Next step") {
				t.Errorf("%s: %v, %v; want an error with the next step", name, lw, err)
			}
		}
	})
}

func mustLookup(t *testing.T, p idemhttp.Profile, l idemhttp.Lookup) witness.Witness {
	t.Helper()
	lw, err := idemhttp.LookupWitness(p, nil, l)
	if err != nil {
		t.Fatal(err)
	}
	return lw
}

// TestLookupWitnessSecretsStayOut: a lookup URL that carries a credential is named
// in the evidence and errors with the credential masked.
func TestLookupWitnessSecretsStayOut(t *testing.T) {
	w := startWorld(t)
	const secret = "sk_live_S3cr3tV4lue"
	l := chargeLookup(w.Payments.URL)
	inner := l.Request
	l.Request = func(ctx context.Context, vendorKey string) (*http.Request, error) {
		req, err := inner(ctx, vendorKey)
		if err == nil {
			req.URL.RawQuery += "&api_key=" + secret
		}
		return req, err
	}
	sent := store.Sent{Via: "idemhttp:stripe", Host: hostOf(t, w.Payments.URL), Window: time.Hour}
	lw := mustLookup(t, idemhttp.Stripe, l)
	a, err := lw.Ask(context.Background(), witness.Query{Record: unknownRecord("k-never-sent", sent)})
	if err != nil || strings.Contains(a.Evidence, secret) {
		t.Fatalf("answer %+v, %v: the evidence shows the credential", a, err)
	}
	w.Payments.SetBeforeLookup(func(rw http.ResponseWriter, _ *http.Request) bool {
		rw.WriteHeader(http.StatusBadGateway)
		return false
	})
	if _, err := lw.Ask(context.Background(), witness.Query{Record: unknownRecord("k-never-sent", sent)}); err == nil ||
		strings.Contains(err.Error(), secret) {
		t.Fatalf("error %v shows the credential", err)
	}
}

// settleStore is a witness.Settler over one record that counts settlements.
type settleStore struct {
	rec      store.Record
	resolved int
}

func newSettleStore(_ *testing.T, rec store.Record) *settleStore { return &settleStore{rec: rec} }

func (s *settleStore) Get(context.Context, string) (store.Record, error) { return s.rec, nil }
func (s *settleStore) Resolve(context.Context, store.Transition, store.State) error {
	s.resolved++
	return nil
}

func jsonEncode(v any) ([]byte, error) { return json.Marshal(v) }

// TestLookupWitnessAsksForTheKeyTheVendorStores: a Quoted profile (the IETF
// draft) sends the key as a structured-field string; the vendor stores the key
// without its quotes, and the lookup asks for that.
func TestLookupWitnessAsksForTheKeyTheVendorStores(t *testing.T) {
	w := startWorld(t)
	const key = "order-4217/ticket"
	sent, _ := idemhttp.IETF.VendorKey(key)
	req, _ := http.NewRequest(http.MethodPost, w.Tickets.URL+"/tickets", strings.NewReader(`{"subject":"refund","requester":"a@b.c"}`))
	req.Header.Set("Idempotency-Key", sent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var asked string
	lw := mustLookup(t, idemhttp.IETF, idemhttp.Lookup{
		Request: func(ctx context.Context, vendorKey string) (*http.Request, error) {
			asked = vendorKey
			return http.NewRequestWithContext(ctx, http.MethodGet, w.Tickets.URL+"/tickets?idempotency_key="+url.QueryEscape(vendorKey), nil)
		},
		Read: func(body []byte) (*idemhttp.Resource, error) {
			var list struct{ Data []struct{ ID string } }
			if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 {
				return nil, err
			}
			return &idemhttp.Resource{ID: list.Data[0].ID, NoResult: true}, nil
		},
		Authoritative: true,
	})
	rec := unknownRecord(key, store.Sent{Via: "idemhttp:ietf", Host: hostOf(t, w.Tickets.URL)})
	a, err := lw.Ask(context.Background(), witness.Query{Record: rec})
	if err != nil || a.Verdict != witness.Sent || !a.NoResult || `"`+asked+`"` != sent {
		t.Fatalf("answer %+v, %v; asked for %q, sent %s: want sent, the key without its quotes", a, err, asked, sent)
	}
}
