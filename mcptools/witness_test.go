package mcptools_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// testSkew is the gate's clock bound in these tests: its Dedup starts just before
// the first call, closer to it than twice the default bound, which the witness
// would read as a Dedup that may have started after the key left.
const testSkew = time.Millisecond

// paymentServer is a go-sdk server whose send_payment acts (counts) and answers
// "paid N" with a structured receipt; its Dedup is installed with Dedup.Install,
// which offers the lookup.
func paymentServer(t *testing.T) *testServer {
	t.Helper()
	s := newTestServer(t, nil, toolSpec{name: "send_payment",
		handle: func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("paid %d", n)}},
				StructuredContent: map[string]any{"id": fmt.Sprintf("pay_%d", n)}}, nil
		}})
	if err := mcptools.NewDedup(time.Hour).Install(s.srv); err != nil {
		t.Fatal(err)
	}
	return s
}

// loseFirstAnswer is server middleware, outside Dedup, that lets the first
// tools/call run (the tool acts, Dedup keeps its answer) and then answers it with a
// protocol error: the answer is lost.
func loseFirstAnswer() mcp.Middleware {
	var lost atomic.Bool
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/call" && err == nil && lost.CompareAndSwap(false, true) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the proxy lost the answer"}
			}
			return res, err
		}
	}
}

// tapHTTP serves h, and the first tools/call POST as drop says: "before" cuts its
// connection before the server reads it (it never reaches the server), "after" lets
// the server run it to the end and then cuts the connection instead of answering.
// onDrop, when set, is called once the connection is cut.
func tapHTTP(t *testing.T, h http.Handler, drop string, onDrop func()) *httptest.Server {
	var dropped atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) && dropped.CompareAndSwap(false, true) {
				if drop == "after" {
					h.ServeHTTP(discard{header: http.Header{}}, r)
				}
				if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
					c.Close()
				}
				if onDrop != nil {
					onDrop()
				}
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// discard is a ResponseWriter whose answer goes nowhere.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
func (d discard) Flush()                      {}

// TestWitnessSettlesLostAnswer: send_payment acted, and its answer was lost (a
// protocol error after it acted; the connection dropped before the answer). The
// retry meets an unknown outcome; the bridge's witness asks the server's Dedup,
// which kept the answer: the key settles as sent, the workflow gets the tool's
// result, and the tool ran once. Without the witness, the retry is refused.
func TestWitnessSettlesLostAnswer(t *testing.T) {
	check := func(t *testing.T, s *testServer, tr mcp.Transport) {
		t.Helper()
		_, before := s.seen()
		b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		if !b.LookupOffered() {
			t.Fatal("a server whose Dedup was installed with Install does not offer the lookup")
		}
		st := memory.New()
		o := interceptor.Options{Store: st, ClockSkew: testSkew}
		b.Apply(&o)
		r, err := runCall(t, o, b.Register, "mcp.pay.send_payment", map[string]any{"amount": 5})
		if _, after := s.seen(); after["send_payment"]-before["send_payment"] != 1 {
			t.Fatalf("send_payment ran %d times; want 1", after["send_payment"]-before["send_payment"])
		}
		if err != nil {
			t.Fatalf("the workflow failed: %v; want the key settled by the witness and the tool's result", err)
		}
		n := before["send_payment"] + 1
		if r.Text != fmt.Sprintf("paid %d", n) || !strings.Contains(string(r.Structured), fmt.Sprintf(`"pay_%d"`, n)) ||
			!r.Replayed {
			t.Errorf("result %+v; want the tool's answer (paid %d, pay_%d), replayed", r, n, n)
		}
		rs, err := st.Receipts(context.Background(), store.ReceiptFilter{Decision: store.DecisionResolved})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Actor != "witness:mcp:pay" || rs[0].Resolution != store.ResolvedSent ||
			!strings.Contains(rs[0].Reason, "acted") {
			t.Errorf("settlement receipts %+v; want one, sent, by witness:mcp:pay", rs)
		}
	}
	t.Run("protocol-error-after-acting-in-memory", func(t *testing.T) {
		s := paymentServer(t)
		s.srv.AddReceivingMiddleware(loseFirstAnswer())
		check(t, s, s.inMemory(t))
	})
	t.Run("protocol-error-after-acting-streamable-http", func(t *testing.T) {
		s := paymentServer(t)
		s.srv.AddReceivingMiddleware(loseFirstAnswer())
		check(t, s, s.streamable(t))
	})
	t.Run("connection-dropped-streamable-http", func(t *testing.T) {
		s := paymentServer(t)
		hs := tapHTTP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil), "after", nil)
		check(t, s, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1})
	})
}

// fakeNow is the gate's clock: the wall clock plus an offset a test moves.
type fakeNow struct{ off atomic.Int64 }

func (f *fakeNow) now() time.Time          { return time.Now().Add(time.Duration(f.off.Load())) }
func (f *fakeNow) advance(d time.Duration) { f.off.Add(int64(d)) }

// TestWitnessNotSentOnlyAfterLease: the first call never reached the server (its
// connection was cut before the server read it). Asked before the attempt's lease
// passed, the server's "not called" does not count: the retry is refused, and the
// tool never ran. Asked after it, the key settles as not sent and the retry runs the
// tool, once.
func TestWitnessNotSentOnlyAfterLease(t *testing.T) {
	for _, afterLease := range []bool{false, true} {
		t.Run(fmt.Sprint("after-lease=", afterLease), func(t *testing.T) {
			s := paymentServer(t)
			var clock fakeNow
			onDrop := func() {}
			if afterLease {
				// The next attempt comes, and asks, after the first one's lease.
				onDrop = func() { clock.advance(2 * time.Hour) }
			}
			hs := tapHTTP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil), "before", onDrop)
			b, err := mcptools.Dial(context.Background(), "pay", &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1},
				mcptools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			st := memory.New()
			o := interceptor.Options{Store: st, Now: clock.now, ClockSkew: testSkew}
			b.Apply(&o)
			r, err := runCall(t, o, b.Register, "mcp.pay.send_payment", map[string]any{"amount": 5})
			_, effects := s.seen()
			if !afterLease {
				if err == nil || effects["send_payment"] != 0 {
					t.Fatalf("asked before the lease: error %v, the tool ran %d times; want refused, never run", err, effects["send_payment"])
				}
				if !strings.Contains(err.Error(), "not sent, but asked before the attempt's lease passed") {
					t.Errorf("the refusal does not say why the witness's answer did not count: %v", err)
				}
				return
			}
			if err != nil || effects["send_payment"] != 1 || r.Text != "paid 1" || r.Replayed {
				t.Fatalf("asked after the lease: result %+v, error %v, the tool ran %d times; want it settled not sent "+
					"and run once", r, err, effects["send_payment"])
			}
			rs := mustReceipts(t, st, store.DecisionResolved)
			if len(rs) != 1 || rs[0].Actor != "witness:mcp:pay" || rs[0].Resolution != store.ResolvedNotSent {
				t.Errorf("settlement receipts %+v; want one, not sent, by witness:mcp:pay", rs)
			}
		})
	}
}

func mustReceipts(t *testing.T, st store.Store, d store.Decision) []store.Receipt {
	rs, err := st.Receipts(context.Background(), store.ReceiptFilter{Decision: d})
	if err != nil {
		t.Error(err)
	}
	return rs
}
