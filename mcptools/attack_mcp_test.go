package mcptools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mgo "github.com/mark3labs/mcp-go/mcp"
	mgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store/memory"
)

// refusedPosts sends, once on, every POST to a closed loopback port (the dial is
// refused: nothing leaves), the rest (the session's GET stream) to the server.
type refusedPosts struct{ on atomic.Bool }

func (r *refusedPosts) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.on.Load() && req.Method == http.MethodPost {
		c := req.Clone(req.Context())
		c.URL.Host, c.Host = "127.0.0.1:1", ""
		return http.DefaultTransport.RoundTrip(c)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// dialRefusedCall dials s over streamable HTTP at its URL plus suffix, makes the
// next tools/call's dial be refused, and calls send_payment.
func dialRefusedCall(t *testing.T, s *testServer, suffix string) (*attempt.State, error) {
	t.Helper()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil))
	t.Cleanup(hs.Close)
	rt := &refusedPosts{}
	tr := &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp" + suffix, MaxRetries: -1, HTTPClient: &http.Client{Transport: rt}}
	b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Session().Close() })
	rt.on.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := &attempt.State{Key: "k-" + t.Name()}
	_, err = b.Call(attempt.NewContext(ctx, st), "mcp.pay.send_payment", map[string]any{"amount": 5})
	if err == nil {
		t.Fatal("the call succeeded with its dial refused")
	}
	return st, err
}

// TestCallErrorHidesCredentials: the URL's credentials must not reach a tool
// activity's error (stored in Temporal's history, printed by the worker) or the
// gate's observation (in the receipt) when a call fails after Dial.
func TestCallErrorHidesCredentials(t *testing.T) {
	const pw = "Zq7-CALLPW"
	s := newTestServer(t, nil, toolSpec{name: "send_payment"})
	for _, suffix := range []string{"?access_token=" + pw, "?api_key=" + pw, "?sig=" + pw} {
		st, err := dialRefusedCall(t, s, suffix)
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: the call's error shows the credential: %v", suffix, err)
		}
		for _, o := range st.Observations() {
			if strings.Contains(o.Detail, pw) {
				t.Errorf("%s: the observation shows the credential: %q", suffix, o.Detail)
			}
		}
	}
	if _, n := s.seen(); n["send_payment"] != 0 {
		t.Errorf("the tool ran %d times with every dial refused", n["send_payment"])
	}
}

// TestRefusedDialIsNotSent: a tools/call whose connection was refused never left
// this process. Read as unknown, a destructive tool called while its server
// restarts is refused for good (idemgate resolve) although nothing happened.
func TestRefusedDialIsNotSent(t *testing.T) {
	s := newTestServer(t, nil, toolSpec{name: "send_payment"})
	st, err := dialRefusedCall(t, s, "")
	obs := st.Observations()
	if len(obs) != 1 || !obs[0].Outcome.Definite() {
		t.Errorf("observations %+v (error %v); want one definite (not sent)", obs, err)
	}
	if _, n := s.seen(); n["send_payment"] != 0 {
		t.Errorf("the tool ran %d times with its dial refused", n["send_payment"])
	}
}

// TestDedupCodesFromAServerWithoutDedup: CodeConflict and CodeInFlight are Dedup's
// answers, but -32041 and -32040 are implementation-defined codes any server may use
// for its own errors. A bridge whose server does not run Dedup (no DedupWindow)
// read a handler's -32041 after it acted as "key used with other arguments", a
// definite outcome: the gate released the key and the same write (the same business
// key, a workflow that tries again) was sent a second time.
func TestDedupCodesFromAServerWithoutDedup(t *testing.T) {
	for _, code := range []int64{mcptools.CodeConflict, mcptools.CodeInFlight} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			s := newTestServer(t, nil, toolSpec{name: "send_payment",
				handle: failAfterActing(&jsonrpc.Error{Code: code, Message: "ledger replica lagging"})})
			b, err := mcptools.Dial(context.Background(), "pay", s.inMemory(t), mcptools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			o := interceptor.Options{Store: memory.New()}
			b.Apply(&o)
			gate, err := interceptor.New(o)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				env := patient.Env(quietSuite().NewTestWorkflowEnvironment())
				env.SetWorkerOptions(patient.WorkerOptions(gate))
				env.RegisterWorkflowWithOptions(keyedCall, workflow.RegisterOptions{Name: "keyed"})
				b.Register(env)
				env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: fmt.Sprint("run-", i), TaskQueue: "q"})
				env.ExecuteWorkflow("keyed", "mcp.pay.send_payment", "order-4217/payment", json.RawMessage(`{"amount":5}`))
				if env.GetWorkflowError() == nil {
					t.Fatalf("run %d succeeded", i)
				}
			}
			if _, n := s.seen(); n["send_payment"] != 1 {
				t.Errorf("the tool acted %d times under one key; want 1 (its error came after it acted)", n["send_payment"])
			}
		})
	}
}

// TestServerInputValidationIsNotPerformed: the go-sdk validates a typed tool's
// arguments against its input schema before the handler runs and answers a failure
// as a tool error ("validating \"arguments\": …"). The bridge checks the schema it
// listed, but the server may have changed it since (a rollout that adds a required
// field): that refusal proves the tool did nothing. Read as an unknown outcome, the
// destructive call was refused for good (idemgate resolve), and Dedup replayed the
// refusal for its whole window.
func TestServerInputValidationIsNotPerformed(t *testing.T) {
	type in struct {
		Amount   int    `json:"amount"`
		Currency string `json:"currency"`
	}
	for _, dedup := range []*mcptools.Dedup{nil, mcptools.NewDedup(time.Hour)} {
		t.Run(fmt.Sprint("dedup=", dedup != nil), func(t *testing.T) {
			s := newTestServer(t, dedup, toolSpec{name: "send_payment"}) // v1: any object
			b, err := mcptools.Dial(context.Background(), "pay", s.inMemory(t), mcptools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			ran := 0
			// v2 requires a currency (the go-sdk infers it from the struct: no omitempty).
			mcp.AddTool(s.srv, &mcp.Tool{Name: "send_payment"}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
				ran++
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil, nil
			})
			for i := range 2 {
				got, err := observed(t, b, "mcp.pay.send_payment")
				if !got.Definite() {
					t.Errorf("call %d: outcome %s (error %v); want a definite one: the server refused the arguments before its handler", i, got, err)
				}
			}
			if ran != 0 {
				t.Errorf("the handler ran %d times", ran)
			}
		})
	}
}

// TestPeerInputValidationIsNotPerformed: the same over mcp-go with
// WithInputSchemaValidation ("input schema validation failed: …"), over stdio and
// streamable HTTP.
func TestPeerInputValidationIsNotPerformed(t *testing.T) {
	p := &peerServer{srv: mgoserver.NewMCPServer("peer", "v1", mgoserver.WithToolCapabilities(false),
		mgoserver.WithInputSchemaValidation()), effects: map[string]int{}}
	ok := func(context.Context, mgo.CallToolRequest) (*mgo.CallToolResult, error) {
		p.mu.Lock()
		p.effects["send_payment"]++
		p.mu.Unlock()
		return mgo.NewToolResultText("sent"), nil
	}
	peerTransports(t, p, func(t *testing.T, tr mcp.Transport) {
		p.srv.AddTool(mgo.NewTool("send_payment", mgo.WithNumber("amount")), ok) // v1
		b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		p.srv.AddTool(mgo.NewTool("send_payment", mgo.WithNumber("amount"), mgo.WithString("currency", mgo.Required())), ok) // v2
		before := p.runs("send_payment")
		if got, err := observed(t, b, "mcp.pay.send_payment"); !got.Definite() {
			t.Errorf("outcome %s (error %v); want a definite one: the server refused the arguments before its handler", got, err)
		}
		if n := p.runs("send_payment") - before; n != 0 {
			t.Errorf("the handler ran %d times", n)
		}
	})
}

// logSink collects log records' messages.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSink) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
	l.msgs = append(l.msgs, s)
	return nil
}
func (l *logSink) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logSink) WithGroup(string) slog.Handler      { return l }
func (l *logSink) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// TestToolListChangedKeepsCalling: a server that adds a tool after Dial notifies the
// client; the bridge lists the tools again from the notification handler and warns.
// The session must keep answering calls, over both SDKs' servers and transports.
func TestToolListChangedKeepsCalling(t *testing.T) {
	check := func(t *testing.T, tr mcp.Transport, add func()) {
		sink := &logSink{}
		b, err := mcptools.Dial(context.Background(), "crm", tr, mcptools.Options{Logger: slog.New(sink)})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		add()
		deadline := time.Now().Add(time.Minute)
		for {
			warned := false
			for _, m := range sink.all() {
				warned = warned || strings.Contains(m, "changed its tool list") && strings.Contains(m, "mcp.crm.delete_contact")
			}
			if warned {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no warning naming the added tool; logged %q", sink.all())
			}
			time.Sleep(10 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := b.Call(ctx, "mcp.crm.get_contact", map[string]any{"id": "c-1"}); err != nil {
			t.Fatalf("a call after the list changed: %v", err)
		}
	}
	t.Run("go-sdk", func(t *testing.T) {
		s := newTestServer(t, nil, toolSpec{name: "get_contact"})
		goSDKTransports(t, s.srv, func(t *testing.T, tr mcp.Transport) {
			check(t, tr, func() {
				s.srv.AddTool(&mcp.Tool{Name: "delete_contact", InputSchema: &jsonschema.Schema{Type: "object"}},
					func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						return &mcp.CallToolResult{}, nil
					})
			})
			s.srv.RemoveTools("delete_contact")
		})
	})
	t.Run("mcp-go", func(t *testing.T) {
		p := &peerServer{srv: mgoserver.NewMCPServer("peer", "v1", mgoserver.WithToolCapabilities(true)), effects: map[string]int{}}
		p.srv.AddTool(mgo.NewTool("get_contact"), func(context.Context, mgo.CallToolRequest) (*mgo.CallToolResult, error) {
			return mgo.NewToolResultText("ok"), nil
		})
		peerTransports(t, p, func(t *testing.T, tr mcp.Transport) {
			check(t, tr, func() {
				p.srv.AddTool(mgo.NewTool("delete_contact"), func(context.Context, mgo.CallToolRequest) (*mgo.CallToolResult, error) {
					return mgo.NewToolResultText("ok"), nil
				})
			})
			p.srv.DeleteTools("delete_contact")
		})
	})
}

// TestToolListChangedLogHidesCredentials: when the server changes its tool list and
// listing it again fails, the warning quotes the go-sdk's error, which quotes the
// server's URL: its credentials must not be logged.
func TestToolListChangedLogHidesCredentials(t *testing.T) {
	const pw = "Zq7-LISTPW"
	s := newTestServer(t, nil, toolSpec{name: "get_contact"})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil))
	t.Cleanup(hs.Close)
	rt := &refusedPosts{}
	tr := &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp?access_token=" + pw, MaxRetries: -1, HTTPClient: &http.Client{Transport: rt}}
	sink := &logSink{}
	b, err := mcptools.Dial(context.Background(), "crm", tr, mcptools.Options{Logger: slog.New(sink)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Session().Close()
	rt.on.Store(true) // the list is read again with a POST: refused
	s.srv.AddTool(&mcp.Tool{Name: "delete_contact", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	deadline := time.Now().Add(time.Minute)
	for {
		msgs := sink.all()
		if len(msgs) > 0 {
			for _, m := range msgs {
				if strings.Contains(m, pw) {
					t.Errorf("logged the credential: %s", m)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing was logged after the tool list changed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// swapHandler serves through a handler that can be replaced (a server restart).
type swapHandler struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func (s *swapHandler) set(h http.Handler) { s.mu.Lock(); s.h = h; s.mu.Unlock() }

// callTwice calls send_payment twice through b and returns each call's observations.
func callTwice(t *testing.T, b *mcptools.Bridge) [][]attempt.Observation {
	t.Helper()
	var out [][]attempt.Observation
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		st := &attempt.State{Key: fmt.Sprint("k-", t.Name(), i)}
		_, err := b.Call(attempt.NewContext(ctx, st), "mcp.pay.send_payment", map[string]any{"amount": 5})
		cancel()
		if err == nil {
			t.Fatalf("call %d succeeded", i)
		}
		out = append(out, st.Observations())
	}
	return out
}

// TestStreamableRefusalsAreNotPerformed: over streamable HTTP the go-sdk's client
// reports answers the server gave before any tool ran — HTTP 401 (a token that
// expired or was revoked), 404 for a session the server no longer has (the MCP server
// restarted) — as plain errors, and then closes the session, so every later call
// fails before it is written. The bridge read all of them as unknown outcomes: after
// an MCP server restart or a token expiry every destructive tool call was refused for
// good (one `idemgate resolve` per call) although none reached a tool.
func TestStreamableRefusalsAreNotPerformed(t *testing.T) {
	check := func(t *testing.T, obs [][]attempt.Observation, ran int) {
		t.Helper()
		for i, o := range obs {
			if len(o) != 1 || !o[0].Outcome.Definite() {
				t.Errorf("call %d: observations %+v; want one definite (the server refused it, or it was never sent)", i, o)
			}
		}
		if ran != 0 {
			t.Errorf("the tool ran %d times", ran)
		}
	}
	t.Run("server-restarted", func(t *testing.T) {
		s := newTestServer(t, nil, toolSpec{name: "send_payment"})
		sw := &swapHandler{h: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil)}
		hs := httptest.NewServer(sw)
		t.Cleanup(hs.Close)
		b, err := mcptools.Dial(context.Background(), "pay", &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		sw.set(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil)) // its sessions are gone
		obs := callTwice(t, b)
		_, n := s.seen()
		check(t, obs, n["send_payment"])
	})
	t.Run("token-revoked", func(t *testing.T) {
		s := newTestServer(t, nil, toolSpec{name: "send_payment"})
		var revoked atomic.Bool
		verify := func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
			if revoked.Load() {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: "alice", Expiration: time.Now().Add(time.Hour)}, nil
		}
		hs := httptest.NewServer(auth.RequireBearerToken(verify, nil)(
			mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil)))
		t.Cleanup(hs.Close)
		tr := &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{"alice-token", http.DefaultTransport}}}
		b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		revoked.Store(true)
		obs := callTwice(t, b)
		_, n := s.seen()
		check(t, obs, n["send_payment"])
	})
}

// TestReadsSendNoKey: the gate does not store reads, and idemhttp sends no key with
// one: a read runs again on a reset or a re-run. The bridge sent the key with read
// tools too, so a server running Dedup stored their answers and replayed them: with
// ScopeWorkflowID a re-run of the workflow (the same ID, the same minted read key)
// got the balance of the run before, although it had changed.
func TestReadsSendNoKey(t *testing.T) {
	var mu sync.Mutex
	balance := 100
	s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "get_balance",
		ann: &mcp.ToolAnnotations{ReadOnlyHint: true},
		handle: func(context.Context, *mcp.CallToolRequest, int) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(balance)}}}, nil
		}})
	b, err := mcptools.Dial(context.Background(), "bank", s.inMemory(t), mcptools.Options{DedupWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Session().Close()
	o := interceptor.Options{Store: memory.New(), Scope: interceptor.ScopeWorkflowID}
	b.Apply(&o)
	gate, err := interceptor.New(o)
	if err != nil {
		t.Fatal(err)
	}
	run := func() string {
		env := patient.Env(quietSuite().NewTestWorkflowEnvironment())
		env.SetWorkerOptions(patient.WorkerOptions(gate))
		env.RegisterWorkflowWithOptions(callWorkflow, workflow.RegisterOptions{Name: "call"})
		b.Register(env)
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "report-acct-7", TaskQueue: "q"})
		env.ExecuteWorkflow("call", "mcp.bank.get_balance", map[string]any{"account": "acct-7"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var r mcptools.Result
		if err := env.GetWorkflowResult(&r); err != nil {
			t.Fatal(err)
		}
		return r.Text
	}
	if got := run(); got != "100" {
		t.Fatalf("first run: balance %s", got)
	}
	mu.Lock()
	balance = 40
	mu.Unlock()
	if got := run(); got != "40" {
		t.Errorf("the re-run read balance %s; want the current 40 (a read is not answered from a store)", got)
	}
	if keys, _ := s.seen(); len(keys) != 2 || keys[0] != "" || keys[1] != "" {
		t.Errorf("the read tool saw keys %q; want none", keys)
	}
}

type connKey struct{}

// TestRefusedReconnectIsUnknown: the go-sdk's streamable client resumes a tool call's
// stream that broke after the server sent an event with an ID (the server has an
// EventStore; here the tool pings the client before it acts): it GETs the stream
// again, and a 4xx answer to that GET — a 429 from a rate limiter, a 401 for a token
// that expired meanwhile, a 404 from a server that restarted, a 400 with a JSON-RPC
// error body — fails the call with the same error a refused POST gives. The POST was taken and the tool acted: the
// outcome is unknown, never "not performed".
func TestRefusedReconnectIsUnknown(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string // a JSON-RPC error body, as some servers answer a GET they refuse
	}{{http.StatusTooManyRequests, ""}, {http.StatusUnauthorized, ""}, {http.StatusNotFound, ""},
		{http.StatusBadRequest, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Bad Request: no such stream"}}`}} {
		status := c.status
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var callConn atomic.Pointer[net.Conn]
			var cut atomic.Bool
			var ran atomic.Int32
			s := newTestServer(t, nil, toolSpec{name: "send_payment",
				handle: func(ctx context.Context, req *mcp.CallToolRequest, _ int) (*mcp.CallToolResult, error) {
					_ = req.Session.Ping(ctx, nil) // an event with an ID on the call's stream
					ran.Add(1)                     // the tool acts
					cut.Store(true)
					if c := callConn.Load(); c != nil {
						(*c).Close() // the connection drops before the result
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
				}})
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
				&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
			hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" && cut.Load() {
					if c.body != "" {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(status)
						io.WriteString(w, c.body)
						return
					}
					http.Error(w, http.StatusText(status), status) // the resumption is refused
					return
				}
				if r.Method == http.MethodPost {
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
					if bytes.Contains(body, []byte(`"tools/call"`)) {
						c := r.Context().Value(connKey{}).(net.Conn)
						callConn.Store(&c)
					}
				}
				h.ServeHTTP(w, r)
			}))
			hs.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }
			hs.Start()
			t.Cleanup(hs.Close)
			b, err := mcptools.Dial(context.Background(), "pay", &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: 1}, mcptools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st := &attempt.State{Key: "k-" + t.Name()}
			_, err = b.Call(attempt.NewContext(ctx, st), "mcp.pay.send_payment", map[string]any{"amount": 5})
			if ran.Load() != 1 || err == nil || ctx.Err() != nil {
				t.Fatalf("the tool ran %d times, error %v; want once, and the call failed by the refused resumption", ran.Load(), err)
			}
			for _, o := range st.Observations() {
				if o.Outcome.Definite() {
					t.Errorf("outcome %s after the tool acted (error %v); want unknown", o.Outcome, err)
				}
			}
		})
	}
}
