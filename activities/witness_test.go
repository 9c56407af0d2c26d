package activities_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/witness"
)

// The processor's lookup tells what a forwarded key did: a charge (sent, with the
// charge as ChargeCard's result), a rejection or nothing (not sent), a request still
// in progress or a key older than the processor's window (cannot tell), and a lookup
// that fails is an error.
func TestChargeLookupWitness(t *testing.T) {
	w, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	lookup := httptest.NewServer(w.Payments.LookupHandler())
	defer lookup.Close()
	wit := activities.ChargeLookupWitness(lookup.URL, nil)
	ctx := context.Background()
	now := time.Now()
	charge := func(key, body string) {
		t.Helper()
		vk, err := idemhttp.Stripe.VendorKey(key)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, w.Payments.URL+"/v1/charges", bytes.NewBufferString(body))
		req.Header.Set("Idempotency-Key", vk)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	ask := func(key string, created time.Time) (witness.Answer, error) {
		return wit.Ask(ctx, witness.Query{Record: store.Record{Key: key, Activity: "ChargeCard", CreatedAt: created}, Now: now})
	}
	charge("order-1/charge", `{"customer":"cus_1","amount":1999,"currency":"usd"}`)
	charge("order-2/charge", `{"customer":"cus_2","amount":2000000,"currency":"usd"}`) // declined (402)

	a, err := ask("order-1/charge", now)
	ch, ok := a.Result.(activities.Charge)
	if err != nil || a.Verdict != witness.Sent || !ok || ch.ID == "" || ch.Amount != 1999 || ch.Customer != "cus_1" ||
		!strings.Contains(a.Evidence, ch.ID) {
		t.Fatalf("a charged key: %+v, %v; want sent with the charge", a, err)
	}
	if a, err := ask("order-2/charge", now); err != nil || a.Verdict != witness.NotSent || !strings.Contains(a.Evidence, "402") {
		t.Fatalf("a declined key: %+v, %v; want not sent", a, err)
	}
	if a, err := ask("order-3/charge", now); err != nil || a.Verdict != witness.NotSent {
		t.Fatalf("a key the processor never saw: %+v, %v; want not sent", a, err)
	}
	if a, err := ask("order-1/charge", now.Add(-25*time.Hour)); err != nil || a.Verdict != witness.CannotTell {
		t.Fatalf("a key older than the processor's window: %+v, %v; want cannot tell", a, err)
	}

	// In progress: the processor holds the key while it charges.
	entered, release := make(chan struct{}), make(chan struct{})
	w.Payments.SetBeforeEffect(func(string) { close(entered); <-release })
	done := make(chan struct{})
	go func() {
		defer close(done)
		charge("order-4/charge", `{"customer":"cus_4","amount":100,"currency":"usd"}`)
	}()
	<-entered
	a, err = ask("order-4/charge", now)
	close(release)
	<-done
	w.Payments.SetBeforeEffect(nil)
	if err != nil || a.Verdict != witness.CannotTell {
		t.Fatalf("a key in progress: %+v, %v; want cannot tell", a, err)
	}

	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) }))
	defer broken.Close()
	a, err = activities.ChargeLookupWitness(broken.URL, nil).Ask(ctx, witness.Query{Record: store.Record{Key: "order-1/charge"}, Now: now})
	if err == nil || !strings.HasPrefix(err.Error(), "idemgate/activities: ChargeCard key order-1/charge: the payments lookup: answered 503") {
		t.Fatalf("a lookup answering 503: %+v, %v; want an error naming the activity and key, which settles nothing", a, err)
	}
}
