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
