package idemhttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
)

// deadAddr is an address nothing listens on: a dial there is refused.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestNotSentNeedsNoWriteBegun: under a RoundTripper that is not *http.Transport, a
// failed dial is "not sent" only when no connection was had and no write hook fired —
// a wrapper may have returned while an earlier try of its own is still writing.
func TestNotSentNeedsNoWriteBegun(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	cases := []struct {
		name string
		fire func(*httptrace.ClientTrace)
		want attempt.Outcome
	}{
		{"nothing", func(*httptrace.ClientTrace) {}, attempt.NotSent},
		{"got a connection", func(tr *httptrace.ClientTrace) {
			if tr.GotConn != nil {
				tr.GotConn(httptrace.GotConnInfo{})
			}
		}, attempt.Unknown},
		{"wrote a header field", func(tr *httptrace.ClientTrace) {
			if tr.WroteHeaderField != nil {
				tr.WroteHeaderField("Host", []string{"vendor.example"})
			}
		}, attempt.Unknown},
		{"wrote the headers", func(tr *httptrace.ClientTrace) {
			if tr.WroteHeaders != nil {
				tr.WroteHeaders()
			}
		}, attempt.Unknown},
		{"waits for 100-continue", func(tr *httptrace.ClientTrace) {
			if tr.Wait100Continue != nil {
				tr.Wait100Continue()
			}
		}, attempt.Unknown},
		{"wrote the request", func(tr *httptrace.ClientTrace) {
			if tr.WroteRequest != nil {
				tr.WroteRequest(httptrace.WroteRequestInfo{})
			}
		}, attempt.Unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				tr := httptrace.ContextClientTrace(r.Context())
				if tr == nil {
					t.Fatal("the transport set no client trace")
				}
				tc.fire(tr)
				return nil, dial
			})
			ctx, st := gated(activityKey, "destructive", false)
			_, err := post(t, ctx, &http.Client{Transport: idemhttp.NewTransport(base, idemhttp.Stripe)}, "http://vendor.example/v1/charges", `{}`)
			if err == nil || errors.Is(err, idemhttp.ErrNotSent) != (tc.want == attempt.NotSent) {
				t.Fatalf("err = %v; wraps ErrNotSent: %v, want %v", err, errors.Is(err, idemhttp.ErrNotSent), tc.want == attempt.NotSent)
			}
			if o := onlyObservation(t, st); o.Outcome != tc.want {
				t.Fatalf("observation %+v, want %s", o, tc.want)
			}
		})
	}
}

// stallingBody yields head, then blocks until release is closed: a request body the
// round trip is still writing when it is cancelled.
type stallingBody struct {
	head    io.Reader
	release chan struct{}
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if n, err := b.head.Read(p); n > 0 || err != io.EOF {
		return n, err
	}
	<-b.release
	return 0, errors.New("body abandoned")
}

func (b *stallingBody) Close() error { return nil }

// giveUpWrapper is a retrying RoundTripper of a common shape: a try that stalls is
// abandoned (cancelled, not waited for) and the request goes to a fallback address.
type giveUpWrapper struct {
	base     http.RoundTripper
	stalled  <-chan struct{}
	fallback string
}

func (w giveUpWrapper) RoundTrip(req *http.Request) (*http.Response, error) {
	tryCtx, cancel := context.WithCancel(req.Context())
	done := make(chan struct{})
	var resp *http.Response
	var err error
	go func() {
		defer close(done)
		resp, err = w.base.RoundTrip(req.WithContext(tryCtx))
	}()
	select {
	case <-done:
		cancel()
		return resp, err
	case <-w.stalled:
		cancel() // the first try is left to finish on its own
	}
	again := req.Clone(req.Context())
	again.URL.Host = w.fallback
	again.Body = io.NopCloser(strings.NewReader(`{"amount":100}`))
	return w.base.RoundTrip(again)
}

// TestCancelMidWriteIsUnknown: a round trip cancelled while its request is being
// written is never "not sent", whichever layer returns first.
func TestCancelMidWriteIsUnknown(t *testing.T) {
	// arriving returns a vendor that signals when a request's headers arrived and
	// then reads its body until the client goes away.
	arriving := func(t *testing.T, h2 bool) (*httptest.Server, chan struct{}, *atomic.Int32) {
		arrived := make(chan struct{})
		var once sync.Once
		var proto atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			proto.Store(int32(r.ProtoMajor))
			once.Do(func() { close(arrived) })
			io.Copy(io.Discard, r.Body)
		}))
		if h2 {
			srv.EnableHTTP2 = true
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(srv.Close)
		return srv, arrived, &proto
	}
	stalling := func(t *testing.T) *stallingBody {
		b := &stallingBody{head: strings.NewReader(`{"amount":`), release: make(chan struct{})}
		t.Cleanup(func() { close(b.release) })
		return b
	}
	send := func(t *testing.T, ctx context.Context, rt http.RoundTripper, url string, body io.ReadCloser) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatal("the round trip succeeded")
		}
		return err
	}
	check := func(t *testing.T, err error, st *attempt.State) {
		t.Helper()
		if errors.Is(err, idemhttp.ErrNotSent) {
			t.Fatalf("err = %v wraps ErrNotSent, but part of the request was written", err)
		}
		for _, o := range st.Observations() {
			if o.Outcome != attempt.Unknown {
				t.Fatalf("observations = %+v, want unknown", st.Observations())
			}
		}
		if len(st.Observations()) != 1 {
			t.Fatalf("observations = %+v, want one", st.Observations())
		}
	}

	t.Run("a wrapper returns while its try is still writing", func(t *testing.T) {
		srv, arrived, _ := arriving(t, false)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		rt := idemhttp.NewTransport(giveUpWrapper{base: base, stalled: arrived, fallback: deadAddr(t)}, idemhttp.Stripe)
		ctx, st := gated(activityKey, "destructive", false)
		err := send(t, ctx, rt, srv.URL+"/v1/charges", stalling(t))
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			t.Fatalf("err = %v, want the fallback's failed dial", err)
		}
		check(t, err, st)
	})

	t.Run("net/http HTTP/1 cancelled mid-body", func(t *testing.T) {
		srv, arrived, _ := arriving(t, false)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		ctx, st := gated(activityKey, "destructive", false)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { <-arrived; cancel() }()
		// HTTP/1 waits for its writer, which waits for the body: the body ends with ctx.
		err := send(t, ctx, idemhttp.NewTransport(base, idemhttp.Stripe), srv.URL+"/v1/charges",
			&ctxBody{ctx: ctx, head: strings.NewReader(`{"amount":`)})
		check(t, err, st)
	})

	t.Run("net/http HTTP/2 cancelled mid-body", func(t *testing.T) {
		srv, arrived, proto := arriving(t, true)
		base := srv.Client().Transport.(*http.Transport).Clone()
		t.Cleanup(base.CloseIdleConnections)
		ctx, st := gated(activityKey, "destructive", false)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { <-arrived; cancel() }()
		err := send(t, ctx, idemhttp.NewTransport(base, idemhttp.Stripe), srv.URL+"/v1/charges", stalling(t))
		if p := proto.Load(); p != 2 {
			t.Fatalf("the request went over HTTP/%d, want HTTP/2", p)
		}
		check(t, err, st)
	})
}

// ctxBody is a body that stalls after its head until ctx is done.
type ctxBody struct {
	ctx  context.Context
	head io.Reader
}

func (c *ctxBody) Read(p []byte) (int, error) {
	if n, err := c.head.Read(p); n > 0 || err != io.EOF {
		return n, err
	}
	<-c.ctx.Done()
	return 0, c.ctx.Err()
}

func (c *ctxBody) Close() error { return nil }
