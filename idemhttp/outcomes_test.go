package idemhttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
)

// TestAnswers maps each vendor answer to the observation the gate decides from, and
// checks the caller still reads the whole body after the transport looked into it.
func TestAnswers(t *testing.T) {
	pad := strings.Repeat(" ", 70<<10) // pushes the body past the 64 KiB the transport reads
	cases := []struct {
		name     string
		p        idemhttp.Profile
		status   int
		header   [2]string
		body     string
		want     attempt.Outcome
		replayed bool
	}{
		{"stripe created", idemhttp.Stripe, 200, [2]string{}, `{"id":"pi_1"}`, attempt.Committed, false},
		{"stripe replayed", idemhttp.Stripe, 200, [2]string{"Idempotent-Replayed", "true"}, `{"id":"pi_1"}`, attempt.Committed, true},
		{"stripe in use", idemhttp.Stripe, 409, [2]string{}, `{"error":{"code":"idempotency_key_in_use","type":"invalid_request_error"}}`, attempt.InFlight, false},
		{"stripe other payload", idemhttp.Stripe, 400, [2]string{}, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}}`, attempt.Conflict, false},
		{"stripe declined", idemhttp.Stripe, 402, [2]string{}, `{"error":{"code":"card_declined"}}`, attempt.Rejected, false},
		{"stripe bad request", idemhttp.Stripe, 400, [2]string{}, `{"error":{"type":"invalid_request_error","param":"amount"}}`, attempt.Rejected, false},
		{"stripe lock timeout 409 is not in use", idemhttp.Stripe, 409, [2]string{}, `{"error":{"code":"lock_timeout"}}`, attempt.Rejected, false},
		{"stripe 500", idemhttp.Stripe, 500, [2]string{}, `{"error":{"type":"api_error"}}`, attempt.Unknown, false},
		{"stripe 503", idemhttp.Stripe, 503, [2]string{}, ``, attempt.Unknown, false},
		{"no-key 500", idemhttp.NoKey, 500, [2]string{}, `oops`, attempt.Unknown, false},
		{"no-key 202", idemhttp.NoKey, 202, [2]string{}, ``, attempt.Committed, false},
		{"no-key 400", idemhttp.NoKey, 400, [2]string{}, `{"errors":[{"message":"bad"}]}`, attempt.Rejected, false},
		{"redirect", idemhttp.NoKey, 307, [2]string{"Location", "/elsewhere"}, ``, attempt.Unknown, false},
		{"checkout in flight", idemhttp.CheckoutCom, 409, [2]string{}, ``, attempt.InFlight, false},
		{"ietf in flight", idemhttp.IETF, 409, [2]string{}, ``, attempt.InFlight, false},
		{"ietf other payload", idemhttp.IETF, 422, [2]string{}, ``, attempt.Conflict, false},
		{"increase other payload", idemhttp.Increase, 409, [2]string{}, `{"type":"idempotency_key_already_used_error","status":409}`, attempt.Conflict, false},
		{"increase replayed", idemhttp.Increase, 200, [2]string{"Idempotent-Replayed", "true"}, `{}`, attempt.Committed, true},
		{"square reused", idemhttp.Square, 400, [2]string{}, `{"errors":[{"category":"INVALID_REQUEST_ERROR","code":"IDEMPOTENCY_KEY_REUSED"}]}`, attempt.Conflict, false},
		{"square code past 64 KiB is not seen", idemhttp.Square, 400, [2]string{}, `{"errors":[` + pad + `{"code":"IDEMPOTENCY_KEY_REUSED"}]}`, attempt.Rejected, false},
		{"gocardless replayed create", idemhttp.GoCardless, 409, [2]string{}, `{"error":{"errors":[{"reason":"idempotent_creation_conflict","links":{"conflicting_resource_id":"PM123"}}]}}`, attempt.Committed, true},
		{"gocardless other 409", idemhttp.GoCardless, 409, [2]string{}, `{"error":{"errors":[{"reason":"resource_already_confirmed"}]}}`, attempt.Rejected, false},
		{"zendesk lookup hit", idemhttp.Zendesk, 201, [2]string{"X-Idempotency-Lookup", "hit"}, `{"ticket":{}}`, attempt.Committed, true},
		{"zendesk lookup miss", idemhttp.Zendesk, 201, [2]string{"X-Idempotency-Lookup", "miss"}, `{"ticket":{}}`, attempt.Committed, false},
		{"zendesk other payload", idemhttp.Zendesk, 400, [2]string{}, `{"error":"IdempotentRequestError"}`, attempt.Conflict, false},
		{"amazon pay duplicate", idemhttp.AmazonPay, 400, [2]string{}, `{"reasonCode":"DuplicateIdempotencyKey"}`, attempt.Conflict, false},
		{"telnyx other payload", idemhttp.Telnyx, 422, [2]string{}, ``, attempt.Conflict, false},
		{"worldline in flight", idemhttp.Worldline, 409, [2]string{}, ``, attempt.InFlight, false},
		{"modern treasury in flight", idemhttp.ModernTreasury, 409, [2]string{}, ``, attempt.InFlight, false},
		{"moov reused", idemhttp.Moov, 409, [2]string{}, ``, attempt.Conflict, false},
		{"azure in flight", idemhttp.Azure, 409, [2]string{}, ``, attempt.InFlight, false},
		{"azure rejected repeat", idemhttp.Azure, 400, [2]string{"Repeatability-Result", "rejected"}, ``, attempt.Conflict, false},
		{"azure plain 400", idemhttp.Azure, 400, [2]string{}, ``, attempt.Rejected, false},
		{"azure first-sent too old", idemhttp.Azure, 412, [2]string{}, ``, attempt.Rejected, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := newVendor(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.header[0] != "" {
					w.Header().Set(tc.header[0], tc.header[1])
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			c := idemhttp.Client(tc.p)
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			ctx, st := gated(activityKey, "idempotent-write", false)
			resp, err := post(t, ctx, c, v.URL+"/v1/x", `{"amount":100}`)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != tc.body {
				t.Fatalf("caller read %d bytes (err %v), want the whole %d-byte body", len(got), err, len(tc.body))
			}
			o := onlyObservation(t, st)
			if o.Outcome != tc.want || o.Replayed != tc.replayed || o.Status != tc.status || o.Vendor != tc.p.Name {
				t.Fatalf("observation %+v, want %v replayed=%v status %d vendor %s", o, tc.want, tc.replayed, tc.status, tc.p.Name)
			}
		})
	}
}

// TestReadsPassUntouched: a GET inside a write activity is not the write: no key, no
// observation, and it needs no key outside an activity either.
func TestReadsPassUntouched(t *testing.T) {
	v := newVendor(t, nil)
	c := idemhttp.Client(idemhttp.Stripe)
	ctx, st := gated(activityKey, "destructive", true)
	for _, ctx := range []context.Context{ctx, context.Background()} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, v.URL+"/v1/charges/ch_1", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, s := range v.requests() {
		if s.Header.Get("Idempotency-Key") != "" {
			t.Fatalf("GET carried Idempotency-Key %q", s.Header.Get("Idempotency-Key"))
		}
	}
	if n := len(v.requests()); n != 2 {
		t.Fatalf("server saw %d requests, want 2", n)
	}
	if obs := st.Observations(); len(obs) != 0 {
		t.Fatalf("a GET was observed: %+v", obs)
	}
}

// TestExistingKeyIsReplaced: a client library's own per-call key never reaches the vendor.
func TestExistingKeyIsReplaced(t *testing.T) {
	v := newVendor(t, nil)
	c := idemhttp.Client(idemhttp.Stripe)
	ctx, _ := gated(activityKey, "idempotent-write", false)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, v.URL+"/v1/charges", strings.NewReader("amount=1"))
	req.Header.Set("Idempotency-Key", "1732872000000000000_random")
	req.Header["idempotency-key"] = []string{"another-spelling"}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := v.requests()[0]
	if got := s.Header.Values("Idempotency-Key"); len(got) != 1 || got[0] != activityKey {
		t.Fatalf("vendor got Idempotency-Key %q, want only the activity key %q", got, activityKey)
	}
	if req.Header.Get("Idempotency-Key") != "1732872000000000000_random" {
		t.Fatal("the transport changed the caller's request")
	}
}

// TestNotSent: failures before a byte was written are definite; after, unknown.
func TestNotSent(t *testing.T) {
	t.Run("dial refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		ctx, st := gated(activityKey, "destructive", false)
		_, err = post(t, ctx, idemhttp.Client(idemhttp.Stripe), "http://"+addr+"/v1/charges", `{}`)
		if !errors.Is(err, idemhttp.ErrNotSent) {
			t.Fatalf("err = %v, want ErrNotSent", err)
		}
		if o := onlyObservation(t, st); o.Outcome != attempt.NotSent {
			t.Fatalf("observation %+v, want not-sent", o)
		}
	})

	t.Run("context ends while dialling", func(t *testing.T) {
		dialing := make(chan struct{})
		base := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			close(dialing)
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		ctx, st := gated(activityKey, "destructive", false)
		ctx, cancel := context.WithCancel(ctx)
		go func() { <-dialing; cancel() }()
		_, err := post(t, ctx, &http.Client{Transport: idemhttp.NewTransport(base, idemhttp.Stripe)}, "http://vendor.invalid/v1/charges", `{}`)
		if !errors.Is(err, idemhttp.ErrNotSent) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want ErrNotSent and context.Canceled", err)
		}
		if o := onlyObservation(t, st); o.Outcome != attempt.NotSent {
			t.Fatalf("observation %+v, want not-sent", o)
		}
	})

	t.Run("context already done", func(t *testing.T) {
		v := newVendor(t, nil)
		ctx, st := gated(activityKey, "destructive", false)
		ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		_, err := post(t, ctx, idemhttp.Client(idemhttp.Stripe), v.URL+"/v1/charges", `{}`)
		if !errors.Is(err, idemhttp.ErrNotSent) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrNotSent and DeadlineExceeded", err)
		}
		for _, want := range []string{"stripe", "ChargeCard", activityKey, "zombie"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %q", err, want)
			}
		}
		if n := len(v.requests()); n != 0 {
			t.Fatalf("server saw %d requests, want 0", n)
		}
		if o := onlyObservation(t, st); o.Outcome != attempt.NotSent {
			t.Fatalf("observation %+v, want not-sent", o)
		}
	})

	t.Run("timeout after the request was written", func(t *testing.T) {
		arrived := make(chan struct{})
		v := newVendor(t, func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-r.Context().Done() // never answers
		})
		ctx, st := gated(activityKey, "destructive", false)
		ctx, cancel := context.WithCancel(ctx)
		go func() { <-arrived; cancel() }()
		_, err := post(t, ctx, idemhttp.Client(idemhttp.Stripe), v.URL+"/v1/charges", `{}`)
		if err == nil || errors.Is(err, idemhttp.ErrNotSent) {
			t.Fatalf("err = %v, want an error that is not ErrNotSent", err)
		}
		if o := onlyObservation(t, st); o.Outcome != attempt.Unknown {
			t.Fatalf("observation %+v, want unknown", o)
		}
	})

	t.Run("connection dropped after the request was read", func(t *testing.T) {
		v := newVendor(t, func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		})
		ctx, st := gated(activityKey, "destructive", false)
		_, err := post(t, ctx, idemhttp.Client(idemhttp.NoKey), v.URL+"/mail/send", `{}`)
		if err == nil || errors.Is(err, idemhttp.ErrNotSent) {
			t.Fatalf("err = %v, want an error that is not ErrNotSent", err)
		}
		if o := onlyObservation(t, st); o.Outcome != attempt.Unknown {
			t.Fatalf("observation %+v, want unknown", o)
		}
	})

	t.Run("unknown base transport: only a failed dial proves it", func(t *testing.T) {
		ctx, st := gated(activityKey, "destructive", false)
		base := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, io.ErrUnexpectedEOF })
		_, err := post(t, ctx, &http.Client{Transport: idemhttp.NewTransport(base, idemhttp.Stripe)}, "http://vendor.invalid/v1/charges", `{}`)
		if err == nil || errors.Is(err, idemhttp.ErrNotSent) {
			t.Fatalf("err = %v, want an error that is not ErrNotSent", err)
		}
		if o := onlyObservation(t, st); o.Outcome != attempt.Unknown {
			t.Fatalf("observation %+v, want unknown", o)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
