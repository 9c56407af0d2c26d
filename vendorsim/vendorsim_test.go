package vendorsim_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/vendorsim"
)

func post(t *testing.T, url, key, body string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestKeyedVendorsDeduplicate(t *testing.T) {
	w, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	charge := `{"customer":"cus_1","amount":100,"currency":"eur"}`
	cases := []struct {
		name, url, key, body, other string
		reuseStatus                 int
		reuseBody                   string
		v                           *vendorsim.Vendor
	}{
		{"stripe-style", w.Payments.URL + "/v1/charges", "k-1", charge, `{"customer":"cus_1","amount":999,"currency":"eur"}`,
			400, `"idempotency_error"`, w.Payments},
		{"ietf", w.Tickets.URL + "/tickets", `"k-2"`, `{"subject":"s","requester":"a@b.c"}`, `{"subject":"other","requester":"a@b.c"}`,
			422, "idempotency-reused", w.Tickets},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s1, b1, h1 := post(t, c.url, c.key, c.body)
			s2, b2, h2 := post(t, c.url, c.key, c.body)
			if s1 >= 300 || s2 != s1 || b2 != b1 || h1.Get("Idempotent-Replayed") != "" || h2.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("repeat: %d %s / %d %s replayed=%q", s1, b1, s2, b2, h2.Get("Idempotent-Replayed"))
			}
			if c.v.Total() != 1 || c.v.Replays() != 1 {
				t.Fatalf("effects %d replays %d, want 1 and 1", c.v.Total(), c.v.Replays())
			}
			if s, b, _ := post(t, c.url, c.key, c.other); s != c.reuseStatus || !strings.Contains(b, c.reuseBody) {
				t.Fatalf("same key, other payload: %d %s", s, b)
			}
			if s, _, _ := post(t, c.url, "", c.body); s != 400 {
				t.Fatalf("missing key: %d, want 400", s)
			}
			if c.v.Total() != 1 {
				t.Fatalf("refused requests performed effects: %d", c.v.Total())
			}
		})
	}
}

func TestKeyedVendorAnswers409WhileInProgress(t *testing.T) {
	w, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	hold, held := make(chan struct{}), make(chan struct{})
	w.Payments.SetBeforeEffect(func(string) { close(held); <-hold })
	body := `{"customer":"cus_1","amount":100,"currency":"eur"}`
	first := make(chan int, 1)
	go func() { s, _, _ := post(t, w.Payments.URL+"/v1/charges", "k-held", body); first <- s }()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("first request never reached the vendor")
	}
	// The first request holds the key and has not performed its effect yet: a second
	// request with the key is told to wait.
	w.Payments.SetBeforeEffect(nil)
	s, b, _ := post(t, w.Payments.URL+"/v1/charges", "k-held", body)
	close(hold)
	if s != 409 || !strings.Contains(b, "idempotency_key_in_use") {
		t.Fatalf("in progress: %d %s", s, b)
	}
	if s := <-first; s != 200 || w.Payments.Effects("k-held") != 1 {
		t.Fatalf("first answered %d, effects %d", s, w.Payments.Effects("k-held"))
	}
}

func TestUnkeyedVendorsPerformEveryRequest(t *testing.T) {
	w, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	mail := `{"to":"a@example.com","subject":"hi","body":"x"}`
	for range 2 {
		if s, _, _ := post(t, w.Email.URL+"/v3/mail/send", "ignored-key", mail); s != 202 {
			t.Fatalf("send: %d", s)
		}
	}
	if w.Email.Total() != 2 || len(w.Email.Duplicates()) != 1 {
		t.Fatalf("email effects %d duplicates %v: an unkeyed vendor sends twice", w.Email.Total(), w.Email.Duplicates())
	}
	if s, _, _ := post(t, w.Email.URL+"/v3/mail/send", "", `{"to":"nobody"}`); s != 400 || w.Email.Total() != 2 {
		t.Fatalf("bad recipient: %d, effects %d", s, w.Email.Total())
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestKeyedVendorsAnswerALookupByKey: the keyed vendors say truthfully what a key
// produced — the record, or nothing (never received, or rejected) — and "in
// progress" while its first request is being processed; a lookup performs nothing.
func TestKeyedVendorsAnswerALookupByKey(t *testing.T) {
	w, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	lookup := w.Payments.URL + "/v1/charges?idempotency_key="
	if s, b := get(t, lookup+"k-never"); s != 200 || !strings.Contains(b, `"data":[]`) {
		t.Fatalf("a key never received: %d %s, want 200 and no charge", s, b)
	}
	_, charged, _ := post(t, w.Payments.URL+"/v1/charges", "k-1", `{"customer":"cus_1","amount":100,"currency":"eur"}`)
	s, b := get(t, lookup+"k-1")
	if s != 200 || !strings.Contains(b, `"id":"ch_000001"`) || !strings.Contains(charged, `"id":"ch_000001"`) {
		t.Fatalf("a key that charged (%s): %d %s, want the charge ch_000001", charged, s, b)
	}
	if st, _, _ := post(t, w.Payments.URL+"/v1/charges", "k-declined", `{"customer":"cus_1","amount":2000000,"currency":"eur"}`); st != 402 {
		t.Fatalf("a declined charge answered %d", st)
	}
	if s, b := get(t, lookup+"k-declined"); s != 200 || !strings.Contains(b, `"data":[]`) {
		t.Fatalf("a key whose charge was declined: %d %s, want no charge", s, b)
	}
	if s, _ := get(t, w.Payments.URL+"/v1/charges"); s != 400 {
		t.Fatalf("a lookup without a key: %d, want 400", s)
	}

	hold, held := make(chan struct{}), make(chan struct{})
	w.Payments.SetBeforeEffect(func(string) { close(held); <-hold })
	first := make(chan int, 1)
	go func() {
		s, _, _ := post(t, w.Payments.URL+"/v1/charges", "k-held", `{"customer":"cus_1","amount":5,"currency":"eur"}`)
		first <- s
	}()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the charge never reached the vendor")
	}
	s, b = get(t, lookup+"k-held")
	close(hold)
	if s != 409 || !strings.Contains(b, "idempotency_key_in_use") {
		t.Fatalf("a key in progress: %d %s, want 409", s, b)
	}
	if s := <-first; s != 200 {
		t.Fatalf("the held charge answered %d", s)
	}
	if s, b := get(t, lookup+"k-held"); s != 200 || !strings.Contains(b, `"amount":5`) {
		t.Fatalf("the held charge once done: %d %s", s, b)
	}
	if w.Payments.Total() != 2 || w.Payments.Lookups() != 5 {
		t.Fatalf("effects %d lookups %d, want 2 and 5 (the one without a key is refused): a lookup performs nothing", w.Payments.Total(), w.Payments.Lookups())
	}

	// The ticket desk (IETF: the key is sent quoted) is looked up by the bare key.
	post(t, w.Tickets.URL+"/tickets", `"t-1"`, `{"subject":"s","requester":"a@b.c"}`)
	if s, b := get(t, w.Tickets.URL+"/tickets?idempotency_key=t-1"); s != 200 || !strings.Contains(b, `"id":"T-1001"`) {
		t.Fatalf("ticket lookup: %d %s", s, b)
	}
}

// The ledger holds one line per side effect, with the key it is counted under and
// the body as received; a replay and a refused request add none.
func TestLedgerLinesPerEffect(t *testing.T) {
	w, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	charge := `{"customer":"cus_L","amount":100,"currency":"eur"}`
	post(t, w.Payments.URL+"/v1/charges", "k-L", charge)
	post(t, w.Payments.URL+"/v1/charges", "k-L", charge) // replayed
	post(t, w.Payments.URL+"/v1/charges", "", charge)    // refused: no key
	mail := `{"to":"a@example.com","subject":"s","body":"b"}`
	post(t, w.Email.URL+"/v3/mail/send", "", mail)
	post(t, w.Email.URL+"/v3/mail/send", "", mail)
	pl, el := w.Payments.Ledger(), w.Email.Ledger()
	if len(pl) != 1 || pl[0].Key != "k-L" || !pl[0].Keyed || string(pl[0].Body) != charge || pl[0].RecordID == "" || pl[0].Seq != 1 {
		t.Fatalf("payments ledger: %+v", pl)
	}
	if len(el) != 2 || el[0].Key != el[1].Key || el[0].Keyed || string(el[1].Body) != mail || el[1].Seq != 2 ||
		el[0].RecordID == el[1].RecordID || w.Email.Effects(el[0].Key) != 2 {
		t.Fatalf("email ledger: %+v", el)
	}
}
