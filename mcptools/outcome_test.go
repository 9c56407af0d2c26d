package mcptools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store/memory"
)

// failAfterActing returns a go-sdk tool handler answer: the tool acted (it was
// counted), then failed with err.
func failAfterActing(err error) func(context.Context, *mcp.CallToolRequest, int) (*mcp.CallToolResult, error) {
	return func(context.Context, *mcp.CallToolRequest, int) (*mcp.CallToolResult, error) { return nil, err }
}

// typedOutputServer is a go-sdk server whose typed tool send_payment acts (counts)
// and returns an output that fails its output schema, which the SDK checks after
// the handler ran.
func typedOutputServer(dedup *mcptools.Dedup) (*mcp.Server, func() int) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "typed", Version: "v1"}, nil)
	if dedup != nil {
		srv.AddReceivingMiddleware(dedup.Middleware)
	}
	type in struct {
		Amount int `json:"amount"`
	}
	type receipt struct {
		ID string `json:"id"`
	}
	var mu = make(chan struct{}, 1)
	runs := 0
	out := &jsonschema.Schema{Type: "object", Required: []string{"id"},
		Properties: map[string]*jsonschema.Schema{"id": {Type: "integer"}}} // the tool returns a string
	mcp.AddTool(srv, &mcp.Tool{Name: "send_payment", OutputSchema: out},
		func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, receipt, error) {
			mu <- struct{}{}
			runs++
			<-mu
			return nil, receipt{ID: "pay_1"}, nil
		})
	return srv, func() int { mu <- struct{}{}; defer func() { <-mu }(); return runs }
}

func goSDKTransports(t *testing.T, srv *mcp.Server, f func(t *testing.T, tr mcp.Transport)) {
	t.Run("go-sdk-in-memory", func(t *testing.T) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		f(t, ct)
	})
	t.Run("go-sdk-streamable-http", func(t *testing.T) {
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		f(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1})
	})
}

// sendThroughGate calls mcp.pay.send_payment (destructive) through the gate with
// Temporal's retries (3 attempts) and returns the workflow's error.
func sendThroughGate(t *testing.T, tr mcp.Transport, opts mcptools.Options) error {
	t.Helper()
	b, err := mcptools.Dial(context.Background(), "pay", tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Session().Close()
	o := interceptor.Options{Store: memory.New()}
	b.Apply(&o)
	_, err = runCall(t, o, b.Register, "mcp.pay.send_payment", map[string]any{"amount": 5})
	return err
}

// TestProtocolErrorAfterActing: a tool that acts and then fails with an error its
// server turns into a JSON-RPC error (a raw handler's error, -32603, a handler's
// own -32602 or server-defined code, a typed tool whose output fails its schema) is
// an unknown outcome: the destructive call is not sent again on Temporal's retries.
// Served by the go-sdk (in memory, streamable HTTP) and by mcp-go (stdio,
// streamable HTTP).
func TestProtocolErrorAfterActing(t *testing.T) {
	check := func(t *testing.T, err error, runs func() int) {
		t.Helper()
		if n := runs(); n != 1 {
			t.Fatalf("the tool acted %d times; want 1 (the error came after it acted: the outcome is unknown)", n)
		}
		if err == nil || !strings.Contains(err.Error(), "refused destructive mcp.pay.send_payment") {
			t.Fatalf("want the retry refused as an unknown destructive outcome, got %v", err)
		}
	}
	goErrs := map[string]error{
		"raw-handler-error":      errors.New("ledger write failed after the transfer"),
		"internal-error":         &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "ledger down"},
		"handler-invalid-params": &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "amount over the daily limit"},
		"server-defined-code":    &jsonrpc.Error{Code: -32000, Message: "upstream timeout"},
	}
	for name, herr := range goErrs {
		t.Run(name, func(t *testing.T) {
			s := newTestServer(t, nil, toolSpec{name: "send_payment", handle: failAfterActing(herr)})
			goSDKTransports(t, s.srv, func(t *testing.T, tr mcp.Transport) {
				_, before := s.seen()
				err := sendThroughGate(t, tr, mcptools.Options{})
				check(t, err, func() int { _, after := s.seen(); return after["send_payment"] - before["send_payment"] })
			})
		})
	}
	t.Run("typed-output-fails-schema", func(t *testing.T) {
		srv, runs := typedOutputServer(nil)
		goSDKTransports(t, srv, func(t *testing.T, tr mcp.Transport) {
			before := runs()
			err := sendThroughGate(t, tr, mcptools.Options{})
			check(t, err, func() int { return runs() - before })
		})
	})
	t.Run("mcp-go-handler-error", func(t *testing.T) {
		p := newPeerServer(peerTool{tool: mgo.NewTool("send_payment"),
			handle: func(context.Context, mgo.CallToolRequest, int) (*mgo.CallToolResult, error) {
				return nil, errors.New("ledger write failed after the transfer")
			}})
		peerTransports(t, p, func(t *testing.T, tr mcp.Transport) {
			before := p.runs("send_payment")
			err := sendThroughGate(t, tr, mcptools.Options{})
			check(t, err, func() int { return p.runs("send_payment") - before })
		})
	})
}

// observed calls activity through b with an attempt in the context and returns
// what the call told the gate.
func observed(t *testing.T, b *mcptools.Bridge, activity string) (attempt.Outcome, error) {
	t.Helper()
	st := &attempt.State{Key: "k-" + t.Name()}
	_, err := b.Call(attempt.NewContext(context.Background(), st), activity, map[string]any{"amount": 5})
	obs := st.Observations()
	if len(obs) != 1 {
		t.Fatalf("%d observations, want 1: %+v (error %v)", len(obs), obs, err)
	}
	return obs[0].Outcome, err
}

// TestProtocolErrorOutcomes: what each JSON-RPC error answer tells the gate. Only
// errors that prove no handler ran are definite.
func TestProtocolErrorOutcomes(t *testing.T) {
	cases := []struct {
		err  *jsonrpc.Error
		want attempt.Outcome
	}{
		{&jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error"}, attempt.Rejected},
		{&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}, attempt.Rejected},
		{&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}, attempt.Rejected},
		{&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "amount over the daily limit"}, attempt.Unknown},
		{&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}, attempt.Unknown},
		{&jsonrpc.Error{Code: 0, Message: "boom"}, attempt.Unknown},
		{&jsonrpc.Error{Code: -32000, Message: "server error"}, attempt.Unknown},
		{&jsonrpc.Error{Code: -32005, Message: "rejected by transport"}, attempt.Unknown},
		{&jsonrpc.Error{Code: mcptools.CodeInFlight, Message: "running"}, attempt.InFlight},
		{&jsonrpc.Error{Code: mcptools.CodeConflict, Message: "other arguments"}, attempt.Conflict},
		{&jsonrpc.Error{Code: mcptools.CodeOutcomeUnknown, Message: "failed after acting"}, attempt.Unknown},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.err.Code, " ", c.err.Message), func(t *testing.T) {
			s := newTestServer(t, nil, toolSpec{name: "send_payment", handle: failAfterActing(c.err)})
			// Dedup's codes are read as Dedup's answers only from a server that
			// announces Dedup (TestDedupCodesFromAServerWithoutDedup); this one claims it
			// without running it, so its handler's errors reach the bridge as given.
			s.srv.AddReceivingMiddleware(claimsDedup(time.Hour))
			b, err := mcptools.Dial(context.Background(), "pay", s.inMemory(t), mcptools.Options{DedupWindow: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			if got, err := observed(t, b, "mcp.pay.send_payment"); got != c.want {
				t.Errorf("outcome %s, want %s (error: %v)", got, c.want, err)
			}
		})
	}
	// The SDKs' own refusals before dispatch are definite: a tool the server no
	// longer has.
	t.Run("unknown-tool", func(t *testing.T) {
		s := newTestServer(t, nil, toolSpec{name: "send_payment"})
		goSDKTransports(t, s.srv, func(t *testing.T, tr mcp.Transport) {
			b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			s.srv.RemoveTools("send_payment")
			defer s.srv.AddTool(&mcp.Tool{Name: "send_payment", InputSchema: &jsonschema.Schema{Type: "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
			if got, err := observed(t, b, "mcp.pay.send_payment"); got != attempt.Rejected {
				t.Errorf("go-sdk unknown tool: outcome %s, want rejected (error: %v)", got, err)
			}
		})
	})
	t.Run("mcp-go-unknown-tool", func(t *testing.T) {
		p := newPeerServer(peerTool{tool: mgo.NewTool("send_payment")})
		peerTransports(t, p, func(t *testing.T, tr mcp.Transport) {
			b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			p.srv.DeleteTools("send_payment")
			defer p.srv.AddTool(mgo.NewTool("send_payment"), func(context.Context, mgo.CallToolRequest) (*mgo.CallToolResult, error) {
				return mgo.NewToolResultText("ok"), nil
			})
			if got, err := observed(t, b, "mcp.pay.send_payment"); got != attempt.Rejected {
				t.Errorf("mcp-go unknown tool: outcome %s, want rejected (error: %v)", got, err)
			}
		})
	})
}

// TestUnreadableAnswerIsUnknown: the server acted and answered with an error whose
// id is null; the go-sdk client cannot match it and retires the pending call with
// its own parse/invalid-request value. Made on this side after the request left, it
// proves nothing: unknown, not rejected.
func TestUnreadableAnswerIsUnknown(t *testing.T) {
	p := newPeerServer(peerTool{tool: mgo.NewTool("send_payment"),
		handle: func(context.Context, mgo.CallToolRequest, int) (*mgo.CallToolResult, error) {
			return nil, errors.New("ledger write failed")
		}})
	b, err := mcptools.Dial(context.Background(), "pay", p.stdio(t, nullErrorIDs), mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Session().Close()
	got, err := observed(t, b, "mcp.pay.send_payment")
	if got != attempt.Unknown || p.runs("send_payment") != 1 {
		t.Fatalf("outcome %s after the tool ran %d times; want unknown after 1 (error: %v)", got, p.runs("send_payment"), err)
	}
}

// TestDedupKeepsUnknownOutcome: behind Dedup, a tool that acts and then fails with a
// protocol error keeps its key: a repeat is answered CodeOutcomeUnknown and does not
// run, and the gate, re-sending inside the server's window, gets that answer — the
// tool acts once.
func TestDedupKeepsUnknownOutcome(t *testing.T) {
	s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "send_payment",
		handle: failAfterActing(errors.New("ledger write failed after the transfer"))})
	goSDKTransports(t, s.srv, func(t *testing.T, tr mcp.Transport) {
		_, before := s.seen()
		err := sendThroughGate(t, tr, mcptools.Options{DedupWindow: time.Hour})
		if _, after := s.seen(); after["send_payment"]-before["send_payment"] != 1 {
			t.Fatalf("the tool acted %d times; want 1", after["send_payment"]-before["send_payment"])
		}
		if err == nil || !strings.Contains(err.Error(), "may have acted") {
			t.Fatalf("want the server's unknown-outcome answer, got %v", err)
		}
	})
	t.Run("typed-output-fails-schema", func(t *testing.T) {
		srv, runs := typedOutputServer(mcptools.NewDedup(time.Hour))
		goSDKTransports(t, srv, func(t *testing.T, tr mcp.Transport) {
			before := runs()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			call := func() error {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment",
					Arguments: map[string]any{"amount": 5}, Meta: mcp.Meta{mcptools.MetaKey: "k-" + t.Name()}})
				return err
			}
			if err := call(); err == nil {
				t.Fatal("want the output-schema error")
			}
			err = call()
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != mcptools.CodeOutcomeUnknown || runs()-before != 1 {
				t.Fatalf("repeat: %v after %d runs; want CodeOutcomeUnknown after 1", err, runs()-before)
			}
		})
	})
}

// TestDedupComparesExactly: the same key with account 12345678901234568 and then
// 12345678901234567 (one float64 apart from nothing) is a conflict, not the first
// call's answer; the same arguments with keys in another order are a repeat.
func TestDedupComparesExactly(t *testing.T) {
	s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "send_payment"})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), s.inMemory(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(args any) (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment", Arguments: args,
			Meta: mcp.Meta{mcptools.MetaKey: "k1"}})
	}
	if _, err := call(map[string]any{"to_account": json.Number("12345678901234568"), "amount": 5}); err != nil {
		t.Fatal(err)
	}
	_, err = call(map[string]any{"to_account": json.Number("12345678901234567"), "amount": 5})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != mcptools.CodeConflict {
		t.Errorf("same key, another account: %v; want CodeConflict", err)
	}
	r, err := call(json.RawMessage(`{"amount":5,   "to_account":12345678901234568}`))
	if err != nil || r.Meta[mcptools.MetaReplayed] != true {
		t.Errorf("same arguments written otherwise: %+v, %v; want the stored answer", r, err)
	}
	if _, effects := s.seen(); effects["send_payment"] != 1 {
		t.Errorf("the tool ran %d times, want 1", effects["send_payment"])
	}
}

// TestDedupForgetsNotPerformed: an answer that says the tool did nothing (isError
// with MetaNotPerformed: busy, rate-limited, cancelled before acting) is not stored:
// the gate releases the key and its retry, with the same key, runs the tool.
func TestDedupForgetsNotPerformed(t *testing.T) {
	s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "send_payment",
		handle: func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
			if n%2 == 1 { // every first attempt is rate-limited, certainly without acting
				r := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "rate limited"}}}
				r.Meta = mcp.Meta{mcptools.MetaNotPerformed: true}
				return r, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
		}})
	transports(t, s, func(t *testing.T, tr mcp.Transport) {
		_, before := s.seen()
		b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{DedupWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		o := interceptor.Options{Store: memory.New()}
		b.Apply(&o)
		r, err := runCall(t, o, b.Register, "mcp.pay.send_payment", map[string]any{"amount": 5})
		if err != nil || r.Text != "sent" || r.Replayed {
			t.Fatalf("want the retry run by the tool: %+v, %v", r, err)
		}
		if _, after := s.seen(); after["send_payment"]-before["send_payment"] != 2 {
			t.Errorf("the tool was called %d times; want 2 (the rate-limited call, then the real one)",
				after["send_payment"]-before["send_payment"])
		}
	})
}

// bearer sends a bearer token on every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestDedupScopedByPrincipal: with the go-sdk's bearer-token auth over streamable
// HTTP, another user who sends the same key gets their own gift card, never the
// first user's; each user's repeat gets their own stored answer; a token that names
// no user is refused without running.
func TestDedupScopedByPrincipal(t *testing.T) {
	s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "gift_card",
		handle: func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("GC-%d", n)}}}, nil
		}})
	users := map[string]string{"alice-token": "alice", "bob-token": "bob", "service-token": ""}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		u, ok := users[token]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: u, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil))
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close) // after the sessions close (cleanups run last first)
	connect := func(token string) *mcp.ClientSession {
		tr := &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	card := func(cs *mcp.ClientSession) (string, error) {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "gift_card",
			Arguments: map[string]any{"amount": 50}, Meta: mcp.Meta{mcptools.MetaKey: "order-4217/gift"}})
		if err != nil {
			return "", err
		}
		return r.Content[0].(*mcp.TextContent).Text, nil
	}
	alice, bob := connect("alice-token"), connect("bob-token")
	a1, err := card(alice)
	if err != nil {
		t.Fatal(err)
	}
	b1, err := card(bob)
	if err != nil {
		t.Fatal(err)
	}
	if b1 == a1 {
		t.Fatalf("bob got alice's gift card %s with the same key", a1)
	}
	if a2, err := card(alice); err != nil || a2 != a1 {
		t.Errorf("alice's repeat: %q, %v; want her stored %q", a2, err, a1)
	}
	if b2, err := card(bob); err != nil || b2 != b1 {
		t.Errorf("bob's repeat: %q, %v; want his stored %q", b2, err, b1)
	}
	if _, err := card(connect("service-token")); err == nil || !strings.Contains(err.Error(), "names no user") {
		t.Errorf("a token without a user: %v; want it refused", err)
	}
	if _, effects := s.seen(); effects["gift_card"] != 2 {
		t.Errorf("gift_card ran %d times; want 2 (one per user)", effects["gift_card"])
	}
}

// TestEmptyAnnotationsClaimNothing: mcp-go sends "annotations": {} for a tool
// defined without them, and a go-sdk server sends readOnlyHint and idempotentHint
// false for any annotated tool: neither is a claim, so get_alpha stays a read by its
// name. Fields present still are: destructiveHint tightens.
func TestEmptyAnnotationsClaimNothing(t *testing.T) {
	input := mgo.ToolInputSchema{Type: "object"}
	p := newPeerServer(
		peerTool{tool: mgo.Tool{Name: "get_alpha", InputSchema: input}},
		peerTool{tool: mgo.Tool{Name: "get_beta", InputSchema: input, Annotations: mgo.ToolAnnotation{Title: "Beta", OpenWorldHint: mgo.ToBoolPtr(true)}}},
		peerTool{tool: mgo.Tool{Name: "get_gamma", InputSchema: input, Annotations: mgo.ToolAnnotation{DestructiveHint: mgo.ToBoolPtr(true)}}},
		peerTool{tool: mgo.Tool{Name: "frobnicate", InputSchema: input}},
		// mcp-go's NewTool writes every hint out, destructiveHint true included: a claim.
		peerTool{tool: mgo.NewTool("get_zeta")},
	)
	g := newTestServer(t, nil,
		toolSpec{name: "get_delta", ann: &mcp.ToolAnnotations{Title: "Delta"}},
		toolSpec{name: "get_epsilon", ann: &mcp.ToolAnnotations{}})
	want := map[string]struct {
		effect interceptor.Effect
		source interceptor.Source
	}{
		"get_alpha":   {interceptor.Read, interceptor.SourceVerb},
		"get_beta":    {interceptor.Read, interceptor.SourceVerb},
		"get_gamma":   {interceptor.Destructive, interceptor.SourceHint},
		"frobnicate":  {interceptor.Destructive, interceptor.SourceNone},
		"get_zeta":    {interceptor.Destructive, interceptor.SourceHint},
		"get_delta":   {interceptor.Read, interceptor.SourceVerb},
		"get_epsilon": {interceptor.Read, interceptor.SourceVerb},
	}
	check := func(t *testing.T, tr mcp.Transport) {
		b, err := mcptools.Dial(context.Background(), "srv", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		rep := b.Census(interceptor.Options{})
		for n := range b.Tools() {
			tool := strings.TrimPrefix(n, "mcp.srv.")
			c, w := rep.Effects[n], want[tool]
			if c.Effect != w.effect || c.Source != w.source || c.Contradicts {
				t.Errorf("%s: %s from %s (%s); want %s from %s", tool, c.Effect, c.Source, c.Reason(), w.effect, w.source)
			}
		}
	}
	peerTransports(t, p, check)
	t.Run("go-sdk", func(t *testing.T) { check(t, g.inMemory(t)) })
}

// keyedCall calls one tool activity under a business key with arguments as JSON, as
// the agent loop passes a planner's step.
func keyedCall(ctx workflow.Context, activity, key string, args json.RawMessage) (*mcptools.Result, error) {
	ctx = workflow.WithActivityOptions(interceptor.WithKey(ctx, key), workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	var r mcptools.Result
	err := workflow.ExecuteActivity(ctx, activity, args).Get(ctx, &r)
	return &r, err
}

// TestToolArgumentsStayExact: a tool activity's arguments reach the tool exactly as
// the workflow wrote them (12345678901234567 is not 12345678901234568 through
// float64), and the gate compares them exactly: the same business key with the other
// account is a conflict, not the first call's stored result.
func TestToolArgumentsStayExact(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	schema := &jsonschema.Schema{Type: "object", Required: []string{"to_account"},
		Properties: map[string]*jsonschema.Schema{"to_account": {Type: "integer"}, "amount": {Type: "integer"}}}
	s := newTestServer(t, nil, toolSpec{name: "send_payment", schema: schema,
		handle: func(_ context.Context, req *mcp.CallToolRequest, _ int) (*mcp.CallToolResult, error) {
			mu.Lock()
			seen = append(seen, string(req.Params.Arguments))
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
		}})
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
	run := func(id, account string) error {
		env := patient.Env(quietSuite().NewTestWorkflowEnvironment())
		env.SetWorkerOptions(patient.WorkerOptions(gate))
		env.RegisterWorkflowWithOptions(keyedCall, workflow.RegisterOptions{Name: "keyed"})
		b.Register(env)
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id, TaskQueue: "q"})
		env.ExecuteWorkflow("keyed", "mcp.pay.send_payment", "order-4217/payment",
			json.RawMessage(`{"to_account":`+account+`,"amount":5}`))
		return env.GetWorkflowError()
	}
	if err := run("first", "12345678901234567"); err != nil {
		t.Fatal(err)
	}
	err = run("second", "12345678901234568")
	if err == nil || !strings.Contains(err.Error(), interceptor.ErrTypeConflict) {
		t.Errorf("the same business key with another account: %v; want %s", err, interceptor.ErrTypeConflict)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || !strings.Contains(seen[0], `"to_account":12345678901234567`) {
		t.Errorf("the tool saw %q; want one call with to_account 12345678901234567", seen)
	}
}

// TestRateLimitedBeforeTheServer: a rate limiter in front of a streamable HTTP server
// answers tools/call with 429 before the server sees it: not performed (as idemhttp
// reads a 4xx), so the gate's retry sends it. A 5xx from the same place may come after
// the tool ran: unknown.
func TestRateLimitedBeforeTheServer(t *testing.T) {
	s := newTestServer(t, nil, toolSpec{name: "send_payment"})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil)
	for _, c := range []struct {
		status int
		want   attempt.Outcome
	}{{http.StatusTooManyRequests, attempt.Rejected}, {http.StatusServiceUnavailable, attempt.Unknown},
		{http.StatusBadGateway, attempt.Unknown}} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
					if bytes.Contains(body, []byte(`"tools/call"`)) {
						http.Error(w, http.StatusText(c.status), c.status)
						return
					}
				}
				mcpHandler.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			b, err := mcptools.Dial(context.Background(), "pay", &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, mcptools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			if got, err := observed(t, b, "mcp.pay.send_payment"); got != c.want {
				t.Errorf("HTTP %d: outcome %s, want %s (error: %v)", c.status, got, c.want, err)
			}
		})
	}
}
