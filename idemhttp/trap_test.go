package idemhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
)

// TestNetHTTPReplayTrap pins down net/http's silent re-send of a POST that carries an
// Idempotency-Key header, and that idemhttp lets it happen only where the vendor
// deduplicates. The server answers the first request, then drops the connection after
// reading the second one (on the reused connection) without answering.
func TestNetHTTPReplayTrap(t *testing.T) {
	cases := []struct {
		name      string
		transport func(base *http.Transport) http.RoundTripper
		header    string // set by the caller, as a client library would
		body      bool
		sends     int // requests the vendor sees for the second call
		wantErr   bool
		outcome   attempt.Outcome
		sentKey   string
	}{
		{
			name:      "bare net/http re-sends",
			transport: func(b *http.Transport) http.RoundTripper { return b },
			header:    "Idempotency-Key", body: true, sends: 2, sentKey: "sdk-key",
		},
		{
			name:      "bare net/http re-sends a bodyless POST too (GetBody nil does not help)",
			transport: func(b *http.Transport) http.RoundTripper { return b },
			header:    "X-Idempotency-Key", sends: 2, sentKey: "sdk-key",
		},
		{
			name:      "no-key vendor: the library's header goes out once",
			transport: func(b *http.Transport) http.RoundTripper { return idemhttp.NewTransport(b, idemhttp.NoKey) },
			header:    "Idempotency-Key", body: true, sends: 1, wantErr: true, outcome: attempt.Unknown, sentKey: "sdk-key",
		},
		{
			name:      "no-key vendor, bodyless POST",
			transport: func(b *http.Transport) http.RoundTripper { return idemhttp.NewTransport(b, idemhttp.NoKey) },
			header:    "X-Idempotency-Key", sends: 1, wantErr: true, outcome: attempt.Unknown, sentKey: "sdk-key",
		},
		{
			name: "vendor that takes the header but does not dedupe",
			transport: func(b *http.Transport) http.RoundTripper {
				return idemhttp.NewTransport(b, idemhttp.Profile{Name: "acme", Where: idemhttp.InHeader, Field: "X-Idempotency-Key"})
			},
			header: "X-Idempotency-Key", body: true, sends: 1, wantErr: true, outcome: attempt.Unknown, sentKey: activityKey,
		},
		{
			name:      "deduplicating vendor: the replay is left to the vendor's store",
			transport: func(b *http.Transport) http.RoundTripper { return idemhttp.NewTransport(b, idemhttp.Stripe) },
			header:    "Idempotency-Key", body: true, sends: 2, outcome: attempt.Committed, sentKey: activityKey,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			v := newVendor(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 2 {
					conn, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						conn.Close()
					}
					return
				}
				io.WriteString(w, `{"id":"obj"}`)
			})
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			c := &http.Client{Transport: tc.transport(base)}

			send := func(st *attempt.State) error {
				var body io.Reader
				if tc.body {
					body = strings.NewReader(`{"amount":100}`)
				}
				req, _ := http.NewRequestWithContext(attempt.NewContext(context.Background(), st), http.MethodPost, v.URL+"/v1/charges", body)
				req.Header.Set(tc.header, "sdk-key")
				resp, err := c.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				return err
			}
			warm := &attempt.State{Key: activityKey, Activity: "Warm", Effect: "idempotent-write"}
			if err := send(warm); err != nil {
				t.Fatalf("first call: %v", err)
			}
			st := &attempt.State{Key: activityKey, Activity: "ChargeCard", Effect: "destructive"}
			err := send(st)
			if (err != nil) != tc.wantErr {
				t.Fatalf("second call: err = %v, want error: %v", err, tc.wantErr)
			}
			if errors.Is(err, idemhttp.ErrNotSent) {
				t.Fatalf("second call: %v claims not sent, but the vendor read it", err)
			}
			reqs := v.requests()
			if got := len(reqs) - 1; got != tc.sends {
				t.Fatalf("the vendor saw the second call %d times, want %d", got, tc.sends)
			}
			for _, s := range reqs[1:] {
				if got := s.Header.Get(tc.header); got != tc.sentKey {
					t.Fatalf("vendor got %s %q, want %q", tc.header, got, tc.sentKey)
				}
			}
			if _, wrapped := c.Transport.(*http.Transport); !wrapped {
				if o := onlyObservation(t, st); o.Outcome != tc.outcome {
					t.Fatalf("observation %+v, want %v", o, tc.outcome)
				}
			}
		})
	}
}
