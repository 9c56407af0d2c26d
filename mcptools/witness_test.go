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

	mgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/witness"
)

// gateAhead is how far the gate's clock runs ahead of the server's in these tests,
// and the claims' CreatedAt with it: their Dedup starts just before the first call,
// closer to it than twice the gate's clock bound, which the witness reads as a Dedup
// that may have started after the key left (a restart). Ahead by more than that, the
// Dedup started before every claim, however fast the test runs.
const gateAhead = 10 * time.Second

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
// onDrop, when set, is called just before the connection is cut.
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
				if onDrop != nil {
					onDrop() // before the client can see the cut
				}
				if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
					c.Close()
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
		clock := fakeNow{}
		clock.advance(gateAhead)
		o := interceptor.Options{Store: st, Now: clock.now}
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

// dropFirstCall is server middleware, outside Dedup, that answers the first
// tools/call with a protocol error without passing it on (a proxy that failed
// before the server): the tool never runs, Dedup never sees the key.
func dropFirstCall(onDrop func()) mcp.Middleware {
	var dropped atomic.Bool
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" && dropped.CompareAndSwap(false, true) {
				onDrop()
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the proxy failed"}
			}
			return next(ctx, method, req)
		}
	}
}

// TestWitnessNotSentOnlyAfterLease: the first call never reached the server's
// Dedup (in memory: a proxy in front of it failed; over streamable HTTP: the
// connection was cut before the server read the request), and the gate recorded an
// unknown outcome. Asked before the attempt's lease passed, the server's "not
// called" does not count: the retry is refused, the tool never ran. Asked after it,
// the key settles as not sent and the retry runs the tool, once.
func TestWitnessNotSentOnlyAfterLease(t *testing.T) {
	for _, afterLease := range []bool{false, true} {
		for _, via := range []string{"in-memory", "streamable-http"} {
			t.Run(fmt.Sprintf("%s/after-lease=%v", via, afterLease), func(t *testing.T) {
				s := paymentServer(t)
				var clock fakeNow
				clock.advance(gateAhead)
				onDrop := func() {}
				if afterLease {
					// The next attempt comes, and asks, after the first one's lease.
					onDrop = func() { clock.advance(2 * time.Hour) }
				}
				var tr mcp.Transport
				if via == "in-memory" {
					s.srv.AddReceivingMiddleware(dropFirstCall(onDrop))
					tr = s.inMemory(t)
				} else {
					hs := tapHTTP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil), "before", onDrop)
					tr = &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}
				}
				b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Session().Close()
				st := memory.New()
				o := interceptor.Options{Store: st, Now: clock.now}
				b.Apply(&o)
				r, err := runCall(t, o, b.Register, "mcp.pay.send_payment", map[string]any{"amount": 5})
				_, effects := s.seen()
				if !afterLease {
					if err == nil || effects["send_payment"] != 0 {
						t.Fatalf("asked before the lease: error %v, the tool ran %d times; want refused, never run", err, effects["send_payment"])
					}
					if !strings.Contains(err.Error(), "not sent, but asked before ") {
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
}

func mustReceipts(t *testing.T, st store.Store, d store.Decision) []store.Receipt {
	rs, err := st.Receipts(context.Background(), store.ReceiptFilter{Decision: d})
	if err != nil {
		t.Error(err)
	}
	return rs
}

// unknownRecord stores a destructive claim of mcp.pay.send_payment ({"amount":5})
// with key, made at created with a lease that passed at created+1ms, whose key left
// through the bridge to server pay (its evidence), and returns it.
func unknownRecord(t *testing.T, st *memory.Store, key string, created time.Time) store.Record {
	t.Helper()
	ctx := context.Background()
	owner := "owner-" + key
	_, _, err := st.Begin(ctx, store.Claim{Key: key, Activity: "mcp.pay.send_payment", Effect: store.EffectDestructive,
		ArgsHash: "h", Args: []byte(`[{"amount":5}]`), Owner: owner, Lease: created.Add(time.Millisecond),
		Window: time.Hour, WorkflowID: "wf", RunID: "run", Attempt: 1, Now: created})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordSent(ctx, key, owner, store.Sent{Via: "mcp:pay", Host: "pay"}); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// askWitness asks b's witness about rec, an hour after its claim (after its lease),
// and settles rec by its answer in st.
func askWitness(t *testing.T, st *memory.Store, b *mcptools.Bridge, rec store.Record) witness.Report {
	t.Helper()
	later := func() time.Time { return rec.CreatedAt.Add(time.Hour) }
	a := witness.Asker{Store: st, Window: time.Hour, Timeout: time.Minute, Now: later, Encode: func(v any) ([]byte, error) {
		data, _, err := interceptor.EncodeResult(converter.GetDefaultDataConverter(), v)
		return data, err
	}}
	rep, err := a.Ask(context.Background(), rec, []witness.Witness{b.Witness(0)}, false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// cannotTell fails t unless rep settled nothing and its witness said CannotTell, or
// erred, mentioning want.
func cannotTell(t *testing.T, rep witness.Report, want string) {
	t.Helper()
	if rep.Settled || len(rep.Said) != 1 || rep.Said[0].Err == nil && rep.Said[0].Answer.Verdict != witness.CannotTell {
		t.Fatalf("report %+v; want the witness unable to tell, nothing settled", rep)
	}
	if s := rep.Said[0].String(); !strings.Contains(s, want) {
		t.Errorf("the witness said %q; want it to say %q", s, want)
	}
}

// TestWitnessAfterRestartCannotTell: a server whose Dedup started after the key
// may have left (it restarted, and forgot what it kept) holds nothing for the key
// and cannot tell, though the attempt's lease passed: never "not sent".
func TestWitnessAfterRestartCannotTell(t *testing.T) {
	created := time.Now().Add(-time.Minute) // the claim, before the server (re)started
	s := paymentServer(t)
	transports(t, s, func(t *testing.T, tr mcp.Transport) {
		b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		st := memory.New()
		cannotTell(t, askWitness(t, st, b, unknownRecord(t, st, "k-restart", created)), "after the key may have left")
	})
	if _, effects := s.seen(); effects["send_payment"] != 0 {
		t.Errorf("a lookup ran the tool %d times", effects["send_payment"])
	}
}

// TestWitnessOtherPrincipalCannotTell: with the go-sdk's bearer-token auth, alice's
// call acted with key K. Asked through bob's session, the witness cannot tell — not
// "not sent", which would make the payment run twice — and sees none of alice's
// answer; through alice's, it settles K sent with her result. A key nobody used is
// "not sent" for bob: only the other caller's hold stops it.
func TestWitnessOtherPrincipalCannotTell(t *testing.T) {
	s := paymentServer(t)
	users := map[string]string{"alice-token": "alice", "bob-token": "bob"}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		u, ok := users[token]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: u, Expiration: time.Now().Add(time.Hour)}, nil
	}
	hs := httptest.NewServer(auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(
		func(*http.Request) *mcp.Server { return s.srv }, nil)))
	t.Cleanup(hs.Close)
	dial := func(token string) *mcptools.Bridge {
		b, err := mcptools.Dial(context.Background(), "pay", &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Session().Close() })
		return b
	}
	alice, bob := dial("alice-token"), dial("bob-token")
	st := memory.New()
	created := time.Now().Add(gateAhead)
	rec := unknownRecord(t, st, "k-alice", created)
	if _, err := alice.Session().CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment",
		Arguments: map[string]any{"amount": 5}, Meta: mcp.Meta{mcptools.MetaKey: "k-alice"}}); err != nil {
		t.Fatal(err)
	}
	rep := askWitness(t, st, bob, rec)
	cannotTell(t, rep, "another caller's call with that key is kept here")
	if strings.Contains(rep.Summary(), "paid") {
		t.Errorf("bob's witness shows alice's answer: %s", rep.Summary())
	}
	if rep := askWitness(t, st, bob, unknownRecord(t, st, "k-nobody", created)); !rep.Settled || rep.Verdict != witness.NotSent {
		t.Errorf("bob asked about a key nobody used: %s; want it settled not sent", rep.Summary())
	}
	if rep := askWitness(t, st, alice, rec); !rep.Settled || rep.Verdict != witness.Sent {
		t.Fatalf("alice asked about her own key: %s; want it settled sent", rep.Summary())
	}
	got, err := st.Get(context.Background(), "k-alice")
	if err != nil {
		t.Fatal(err)
	}
	var r mcptools.Result
	if err := converter.GetDefaultDataConverter().FromPayloads(mustPayloads(t, got.Result), &r); err != nil {
		t.Fatal(err)
	}
	if got.State != store.StateCompleted || r.Text != "paid 1" {
		t.Errorf("k-alice settled as %s with result %+v; want completed with alice's answer (paid 1)", got.State, r)
	}
	if _, effects := s.seen(); effects["send_payment"] != 1 {
		t.Errorf("send_payment ran %d times; want 1 (alice's call; lookups run nothing)", effects["send_payment"])
	}
}

// TestWitnessWithoutLookupCannotTell: a server that does not offer Dedup's lookup —
// mcp-go (no Dedup), a go-sdk server whose Dedup was added as middleware only, or one
// that announces the lookup without having it — gets no witness from Apply, and the
// bridge's witness cannot tell; the tool never runs.
func TestWitnessWithoutLookupCannotTell(t *testing.T) {
	check := func(t *testing.T, tr mcp.Transport, offered bool, want string, runs func() int) {
		t.Helper()
		b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		if b.LookupOffered() != offered {
			t.Fatalf("LookupOffered = %v, want %v", b.LookupOffered(), offered)
		}
		var o interceptor.Options
		b.Apply(&o)
		if len(o.Witnesses) != 0 && !offered {
			t.Errorf("Apply registered witnesses %v for a server without the lookup", o.Witnesses)
		}
		st := memory.New()
		cannotTell(t, askWitness(t, st, b, unknownRecord(t, st, "k-"+t.Name(), time.Now().Add(gateAhead))), want)
		if n := runs(); n != 0 {
			t.Errorf("asking the witness ran the tool %d times", n)
		}
	}
	t.Run("mcp-go", func(t *testing.T) {
		p := newPeerServer(peerTool{tool: mgo.NewTool("send_payment")})
		peerTransports(t, p, func(t *testing.T, tr mcp.Transport) {
			check(t, tr, false, "does not offer Dedup's lookup", func() int { return p.runs("send_payment") })
		})
	})
	t.Run("go-sdk-dedup-middleware-only", func(t *testing.T) {
		s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "send_payment"})
		transports(t, s, func(t *testing.T, tr mcp.Transport) {
			check(t, tr, false, "does not offer Dedup's lookup", func() int { _, e := s.seen(); return e["send_payment"] })
		})
	})
	t.Run("go-sdk-announces-lookup-without-it", func(t *testing.T) {
		s := newTestServer(t, nil, toolSpec{name: "send_payment"})
		s.srv.AddReceivingMiddleware(claimsLookup())
		transports(t, s, func(t *testing.T, tr mcp.Transport) {
			check(t, tr, true, mcptools.MethodLookup, func() int { _, e := s.seen(); return e["send_payment"] })
		})
	})
}

// claimsLookup is middleware that announces Dedup with its lookup, as Dedup.Install
// does, without running either.
func claimsLookup() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			var caps **mcp.ServerCapabilities
			switch r := res.(type) {
			case *mcp.InitializeResult:
				caps = &r.Capabilities
			case *mcp.DiscoverResult:
				caps = &r.Capabilities
			default:
				return res, err
			}
			c := &mcp.ServerCapabilities{}
			if *caps != nil {
				cp := **caps
				c = &cp
			}
			c.Experimental = map[string]any{mcptools.CapabilityDedup: map[string]any{
				"windowSeconds": 3600.0, "lookup": mcptools.MethodLookup}}
			*caps = c
			return res, err
		}
	}
}

func mustPayloads(t *testing.T, data []byte) *commonpb.Payloads {
	t.Helper()
	var p commonpb.Payloads
	if err := proto.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// TestWitnessAcrossWorkerRestart: the worker that claimed the key died after the
// tool acted and before it heard the answer; a new worker (a new session to the
// same server) asks, once the claim's lease passed, and settles the key as sent
// with the tool's answer.
func TestWitnessAcrossWorkerRestart(t *testing.T) {
	s := paymentServer(t)
	transports(t, s, func(t *testing.T, tr mcp.Transport) {
		st := memory.New()
		key := "k-" + t.Name()
		rec := unknownRecord(t, st, key, time.Now().Add(gateAhead))
		var firstTr mcp.Transport
		if strings.HasSuffix(t.Name(), "in-memory") {
			firstTr = s.inMemory(t) // a connection of its own: the in-memory transport connects once
		} else {
			firstTr = s.streamable(t)
		}
		first, err := mcp.NewClient(&mcp.Implementation{Name: "worker-1"}, nil).Connect(context.Background(), firstTr, nil)
		if err != nil {
			t.Fatal(err)
		}
		callAndDie(t, first, key)
		b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		if rep := askWitness(t, st, b, rec); !rep.Settled || rep.Verdict != witness.Sent {
			t.Fatalf("%s; want the key settled sent", rep.Summary())
		}
		got, err := st.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		var r mcptools.Result
		if err := converter.GetDefaultDataConverter().FromPayloads(mustPayloads(t, got.Result), &r); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.Text, "paid ") || !r.Replayed {
			t.Errorf("stored result %+v; want the tool's answer, replayed", r)
		}
	})
	if _, effects := s.seen(); effects["send_payment"] != 2 {
		t.Errorf("send_payment ran %d times; want 2 (once per transport)", effects["send_payment"])
	}
}

// callAndDie calls send_payment with key over cs and closes cs: a worker that dies
// before it stores the outcome.
func callAndDie(t *testing.T, cs *mcp.ClientSession, key string) {
	t.Helper()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment",
		Arguments: map[string]any{"amount": 5}, Meta: mcp.Meta{mcptools.MetaKey: key}}); err != nil {
		t.Fatal(err)
	}
	cs.Close()
}

// TestWitnessOfNewNeedsEnableLookup: a bridge made with New over a session of the
// user's own client asks the lookup only when that client enabled it
// (EnableLookup); without it the witness cannot tell and says what to do.
func TestWitnessOfNewNeedsEnableLookup(t *testing.T) {
	s := paymentServer(t)
	for _, enable := range []bool{false, true} {
		t.Run(fmt.Sprint("enabled=", enable), func(t *testing.T) {
			st := memory.New()
			key := "k-" + t.Name()
			rec := unknownRecord(t, st, key, time.Now().Add(gateAhead))
			c := mcp.NewClient(&mcp.Implementation{Name: "user"}, nil)
			if enable {
				if err := mcptools.EnableLookup(c); err != nil {
					t.Fatal(err)
				}
			}
			cs, err := c.Connect(context.Background(), s.streamable(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			b, err := mcptools.New(context.Background(), "pay", cs, mcptools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rep := askWitness(t, st, b, rec)
			if !enable {
				cannotTell(t, rep, "mcptools.EnableLookup")
				return
			}
			if !rep.Settled || rep.Verdict != witness.NotSent {
				t.Errorf("%s; want the key settled not sent (the tool never ran with it)", rep.Summary())
			}
		})
	}
}

// TestApplyWitnessNeedsASettlingStore: Apply registers the witness only on options
// whose store can settle keys (a custom store without Resolve would make the gate
// refuse the witnesses).
func TestApplyWitnessNeedsASettlingStore(t *testing.T) {
	s := paymentServer(t)
	b, err := mcptools.Dial(context.Background(), "pay", s.inMemory(t), mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Session().Close()
	var bare interceptor.Options
	b.Apply(&bare)
	if len(bare.Witnesses) != 0 {
		t.Errorf("Apply without a store registered witnesses %v", bare.Witnesses)
	}
	o := interceptor.Options{Store: memory.New(), Witnesses: map[string][]witness.Witness{
		"mcp.pay.send_payment": {witness.Func("mine", func(context.Context, witness.Query) (witness.Answer, error) {
			return witness.Answer{}, nil
		})}}}
	b.Apply(&o)
	var names []string
	for _, w := range o.Witnesses["mcp.pay.send_payment"] {
		names = append(names, w.Name())
	}
	if strings.Join(names, ",") != "mine,mcp:pay" {
		t.Errorf("witnesses of send_payment: %v; want the user's first, then mcp:pay", names)
	}
}

// TestWitnessSeesEveryClaimsExits: attempt 1 of a tool call left through another
// keyed exit (an HTTP vendor) and through the bridge, and died; attempt 2 took over
// (a re-send inside the vendors' windows) and left through the bridge only, or
// recorded nothing at all (it may have called a vendor without a keyed transport),
// and died too. The server's Dedup never saw the key (the calls were lost on the
// way), so it says "not called" — true of this server only. Before (atk-wit
// finding 1), the takeover had emptied the record's evidence, the witness saw the
// bridge alone (or nothing) and settled the whole write "not sent", and the next
// attempt reached the HTTP vendor again. Now the record keeps attempt 1's exits
// and a claim that recorded none counts as another way out: the witness cannot
// tell.
func TestWitnessSeesEveryClaimsExits(t *testing.T) {
	s := paymentServer(t)
	crm := store.Sent{Via: "idemhttp:crm", Host: "crm.example", Window: time.Hour}
	pay := store.Sent{Via: "mcp:pay", Host: "pay"}
	for _, tc := range []struct {
		name   string
		second []store.Sent
		want   string
	}{
		{"the second attempt left through the bridge", []store.Sent{pay}, "may also have left through idemhttp:crm"},
		{"the second attempt recorded nothing", nil, "attempts that recorded no evidence sent it (claim owners owner-2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			transports(t, s, func(t *testing.T, tr mcp.Transport) {
				ctx := context.Background()
				b, err := mcptools.Dial(ctx, "pay", tr, mcptools.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Session().Close()
				st := memory.New()
				key := "k-every-exit"
				created := time.Now().Add(gateAhead)
				c := store.Claim{Key: key, Activity: "mcp.pay.send_payment", Effect: store.EffectDestructive, ArgsHash: "h",
					Args: []byte(`[{"amount":5}]`), Owner: "owner-1", Lease: created.Add(time.Millisecond), Window: time.Hour,
					WorkflowID: "wf", RunID: "run", Attempt: 1, Now: created}
				for i, exits := range [][]store.Sent{{crm, pay}, tc.second} {
					if i > 0 {
						c.Owner, c.Attempt, c.TakeOver = "owner-2", 2, true
						c.Now, c.Lease = created.Add(2*time.Millisecond), created.Add(3*time.Millisecond)
					}
					if o, _, err := st.Begin(ctx, c); err != nil || (i == 0) != (o == store.OutcomeClaimed) {
						t.Fatalf("attempt %d: Begin = %s, %v", i+1, o, err)
					}
					for _, e := range exits {
						if err := st.RecordSent(ctx, key, c.Owner, e); err != nil {
							t.Fatal(err)
						}
					}
					if err := st.Abandon(ctx, store.Transition{Key: key, Owner: c.Owner, Now: c.Now}); err != nil {
						t.Fatal(err)
					}
				}
				rec, err := st.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				cannotTell(t, askWitness(t, st, b, rec), tc.want)
			})
		})
	}
	if _, effects := s.seen(); effects["send_payment"] != 0 {
		t.Errorf("a lookup ran the tool %d times", effects["send_payment"])
	}
}
