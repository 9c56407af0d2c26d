package mcptools_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// TestCensusTightenOnly: every annotation × name-class combination, served by a real
// SDK server, classifies as the tighten-only rule says.
func TestCensusTightenOnly(t *testing.T) {
	anns := []struct {
		label string
		ann   *mcp.ToolAnnotations
		says  interceptor.Effect // 0: no annotations
	}{
		{"none", nil, 0},
		{"readonly", &mcp.ToolAnnotations{ReadOnlyHint: true}, interceptor.Read},
		{"idempotent", &mcp.ToolAnnotations{DestructiveHint: bptr(false), IdempotentHint: true}, interceptor.IdempotentWrite},
		{"additive", &mcp.ToolAnnotations{DestructiveHint: bptr(false)}, interceptor.Destructive},
		{"destructive", &mcp.ToolAnnotations{DestructiveHint: bptr(true), IdempotentHint: true}, interceptor.Destructive},
	}
	names := []struct {
		verb  string
		reads interceptor.Effect // 0: no known verb
	}{{"get", interceptor.Read}, {"update", interceptor.IdempotentWrite}, {"delete", interceptor.Destructive}, {"frobnicate", 0}}
	var specs []toolSpec
	type want struct {
		effect              interceptor.Effect
		source              interceptor.Source
		review, contradicts bool
	}
	wants := map[string]want{}
	for _, n := range names {
		for _, a := range anns {
			tool := n.verb + "_" + a.label
			specs = append(specs, toolSpec{name: tool, ann: a.ann})
			var w want
			switch {
			case n.reads == 0 && a.says == 0:
				w = want{interceptor.Destructive, interceptor.SourceNone, true, false}
			case n.reads == 0:
				w = want{a.says, interceptor.SourceHint, false, false}
			case a.says > n.reads:
				w = want{a.says, interceptor.SourceHint, false, false}
			default:
				w = want{n.reads, interceptor.SourceVerb, false, a.says != 0 && a.says < n.reads}
			}
			wants[mcptools.ActivityName("crm", tool)] = w
		}
	}
	s := newTestServer(t, nil, specs...)
	b, err := mcptools.Dial(context.Background(), "crm", s.inMemory(t), mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Session().Close()
	rep := b.Census(interceptor.Options{})
	if len(rep.Effects) != 20 {
		t.Fatalf("census has %d tools, want 20: %v", len(rep.Effects), rep)
	}
	for name, w := range wants {
		c := rep.Effects[name]
		if c.Effect != w.effect || c.Source != w.source || c.Review != w.review || c.Contradicts != w.contradicts {
			t.Errorf("%s: got %s source=%s review=%v contradicts=%v (%s); want %s source=%s review=%v contradicts=%v",
				name, c.Effect, c.Source, c.Review, c.Contradicts, c.Reason(), w.effect, w.source, w.review, w.contradicts)
		}
	}
	// Options.Effects in code overrides the annotations.
	rep = b.Census(interceptor.Options{Effects: map[string]interceptor.Effect{"mcp.crm.get_destructive": interceptor.Read}})
	if c := rep.Effects["mcp.crm.get_destructive"]; c.Effect != interceptor.Read || c.Source != interceptor.SourceOverride {
		t.Errorf("override: %s %s", c.Effect, c.Source)
	}
}

// callWorkflow calls one tool activity with args and returns its result.
func callWorkflow(ctx workflow.Context, activity string, args map[string]any) (*mcptools.Result, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	var r mcptools.Result
	err := workflow.ExecuteActivity(ctx, activity, args).Get(ctx, &r)
	return &r, err
}

var runs int

func runCall(t *testing.T, opts interceptor.Options, register func(r mcptools.Registry), activity string, args map[string]any) (*mcptools.Result, error) {
	t.Helper()
	gate, err := interceptor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	env := patient.Env(quietSuite().NewTestWorkflowEnvironment())
	env.SetWorkerOptions(patient.WorkerOptions(gate))
	env.RegisterWorkflowWithOptions(callWorkflow, workflow.RegisterOptions{Name: "call"})
	register(env)
	runs++
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%d", t.Name(), runs), TaskQueue: "q"})
	env.ExecuteWorkflow("call", activity, args)
	if err := env.GetWorkflowError(); err != nil {
		return nil, err
	}
	var r mcptools.Result
	if err := env.GetWorkflowResult(&r); err != nil {
		t.Fatal(err)
	}
	return &r, nil
}

// TestKeyTravelsInMeta: the key arrives in _meta, the same on attempts 1 and 2 and
// different across executions, in-process and over streamable HTTP.
func TestKeyTravelsInMeta(t *testing.T) {
	s := newTestServer(t, nil, toolSpec{name: "create_contact",
		handle: func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
			if n%2 == 1 { // every first attempt fails, certainly without acting
				r := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "busy"}}}
				r.Meta = mcp.Meta{mcptools.MetaNotPerformed: true}
				return r, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created"}},
				StructuredContent: map[string]any{"id": n}}, nil
		}})
	transports(t, s, func(t *testing.T, tr mcp.Transport) {
		before, _ := s.seen()
		b, err := mcptools.Dial(context.Background(), "crm", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		st := memory.New()
		opts := interceptor.Options{Store: st}
		b.Apply(&opts)
		for range 2 {
			r, err := runCall(t, opts, b.Register, "mcp.crm.create_contact", map[string]any{"email": "a@example.com"})
			if err != nil {
				t.Fatal(err)
			}
			if r.Text != "created" || !strings.Contains(string(r.Structured), `"id"`) {
				t.Errorf("result: %+v", r)
			}
		}
		keys, _ := s.seen()
		keys = keys[len(before):]
		if len(keys) != 4 || keys[0] == "" || keys[0] != keys[1] || keys[2] != keys[3] || keys[0] == keys[2] {
			t.Fatalf("keys seen by the server: %q; want attempts 1 and 2 equal, executions different", keys)
		}
		rs, _ := st.Receipts(context.Background(), store.ReceiptFilter{Activity: "mcp.crm.create_contact", Decision: store.DecisionRan})
		if len(rs) != 2 || rs[0].Key != keys[1] || rs[1].Key != keys[3] {
			t.Errorf("receipts carry other keys than the server saw: %+v", rs)
		}
	})
}

// TestDedupAnswersTheRetry: the worker stops after the tool acted (its answer is
// lost); the gate re-sends with the same key inside the server's window, and Dedup
// answers from its store: one effect.
func TestDedupAnswersTheRetry(t *testing.T) {
	s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "refund_payment"})
	transports(t, s, func(t *testing.T, tr mcp.Transport) {
		_, before := s.seen()
		b, err := mcptools.Dial(context.Background(), "billing", tr, mcptools.Options{DedupWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		const name = "mcp.billing.refund_payment"
		stopAfterActing := func(r mcptools.Registry) {
			r.RegisterActivityWithOptions(func(ctx context.Context, args map[string]any) (*mcptools.Result, error) {
				res, err := b.Call(ctx, name, args)
				if err == nil && activityAttempt(ctx) == 1 {
					return nil, errors.New("worker stopped: the answer was lost")
				}
				return res, err
			}, activityRegisterOptions(name))
		}
		opts := interceptor.Options{Store: memory.New()}
		b.Apply(&opts)
		r, err := runCall(t, opts, stopAfterActing, name, map[string]any{"payment": "py_1", "amount": 500})
		if err != nil {
			t.Fatal(err)
		}
		_, after := s.seen()
		if n := after["refund_payment"] - before["refund_payment"]; n != 1 || !r.Replayed {
			t.Errorf("refund ran %d times (want 1), replayed=%v (want the retry answered by Dedup)", n, r.Replayed)
		}
		// Without the server's window the gate does not re-send: refused, still one effect.
		opts = interceptor.Options{Store: memory.New()}
		b2, _ := mcptools.New(context.Background(), "billing", b.Session(), mcptools.Options{})
		b2.Apply(&opts)
		_, err = runCall(t, opts, stopAfterActing, name, map[string]any{"payment": "py_2", "amount": 500})
		if err == nil || !strings.Contains(err.Error(), "refused destructive "+name) {
			t.Errorf("without DedupWindow the retry must be refused: %v", err)
		}
	})
}

func activityAttempt(ctx context.Context) int32 { return activity.GetInfo(ctx).Attempt }

func activityRegisterOptions(name string) activity.RegisterOptions {
	return activity.RegisterOptions{Name: name}
}

// TestDedupOutcomes: other arguments under the same key are an error, a running call
// is in flight, and a call without a key runs as usual.
func TestDedupOutcomes(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	s := newTestServer(t, mcptools.NewDedup(time.Hour),
		toolSpec{name: "send_email"},
		toolSpec{name: "slow_send", handle: func(ctx context.Context, _ *mcp.CallToolRequest, _ int) (*mcp.CallToolResult, error) {
			started <- struct{}{}
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
		}})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), s.inMemory(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(tool, key string, args map[string]any) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: tool, Arguments: args}
		if key != "" {
			p.Meta = mcp.Meta{mcptools.MetaKey: key}
		}
		return cs.CallTool(context.Background(), p)
	}
	if _, err := call("send_email", "k1", map[string]any{"to": "a"}); err != nil {
		t.Fatal(err)
	}
	r, err := call("send_email", "k1", map[string]any{"to": "a"})
	if err != nil || r.Meta[mcptools.MetaReplayed] != true {
		t.Errorf("same key, same arguments: want the stored result, got %+v, %v", r, err)
	}
	if _, err := call("send_email", "k1", map[string]any{"to": "b"}); err == nil || !strings.Contains(err.Error(), "other arguments") {
		t.Errorf("same key, other arguments: want a conflict, got %v", err)
	}
	if _, err := call("send_email", "", map[string]any{"to": "a"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := call("slow_send", "k2", nil); done <- err }()
	<-started
	if _, err := call("slow_send", "k2", nil); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("in progress: want in-flight, got %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, effects := s.seen(); effects["send_email"] != 2 || effects["slow_send"] != 1 {
		t.Errorf("effects %v: want send_email 2 (one keyed, one without a key), slow_send 1", effects)
	}
}

// TestBadInput: arguments against the schema are refused naming the field before
// anything is sent; a tool name that cannot be an activity name, an unreachable
// server and an oversized result are clear errors.
func TestBadInput(t *testing.T) {
	schema := &jsonschema.Schema{Type: "object", Required: []string{"email"},
		Properties: map[string]*jsonschema.Schema{"email": {Type: "string"}}}
	big := strings.Repeat("x", 2048)
	s := newTestServer(t, nil, toolSpec{name: "create_contact", schema: schema},
		toolSpec{name: "export_all", handle: func(context.Context, *mcp.CallToolRequest, int) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil
		}})
	b, err := mcptools.Dial(context.Background(), "crm", s.inMemory(t), mcptools.Options{MaxResultSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Session().Close()
	_, err = b.Call(context.Background(), "mcp.crm.create_contact", map[string]any{"email": 42})
	if err == nil || !strings.Contains(err.Error(), "email") || !strings.Contains(err.Error(), "Nothing was sent") {
		t.Errorf("schema: %v", err)
	}
	_, err = b.Call(context.Background(), "mcp.crm.create_contact", map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "email") {
		t.Errorf("missing field: %v", err)
	}
	if _, effects := s.seen(); effects["create_contact"] != 0 {
		t.Errorf("a refused call reached the server: %v", effects)
	}
	_, err = b.Call(context.Background(), "mcp.crm.export_all", nil)
	if err == nil || !strings.Contains(err.Error(), "over MaxResultSize") {
		t.Errorf("oversize: %v", err)
	}

	bad := newTestServer(t, nil, toolSpec{name: "send email"})
	_, err = mcptools.Dial(context.Background(), "crm", bad.inMemory(t), mcptools.Options{})
	if err == nil || !strings.Contains(err.Error(), `tool "send email"`) || !strings.Contains(err.Error(), "Nothing was registered") {
		t.Errorf("invalid tool name: %v", err)
	}
	_, err = mcptools.Dial(context.Background(), "down", &mcp.StreamableClientTransport{Endpoint: "http://127.0.0.1:1/mcp", MaxRetries: -1}, mcptools.Options{})
	if err == nil || !strings.Contains(err.Error(), "server down cannot be reached") {
		t.Errorf("unreachable: %v", err)
	}
}

// TestDialErrorHidesCredentials: an MCP server URL may carry credentials; the
// errors of net/http quote the URL, and Dial's error must not repeat them.
func TestDialErrorHidesCredentials(t *testing.T) {
	const pw = "Zq7-PW"
	for _, u := range []string{"http://u:" + pw + "@127.0.0.1:1/mcp", "http://127.0.0.1:1/mcp?access_token=" + pw,
		"http://127.0.0.1:1/mcp?token=" + pw, "http://127.0.0.1:1/mcp?api_key=" + pw} {
		tr, err := mcptools.Transport(u)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err = mcptools.Dial(ctx, "crm", tr, mcptools.Options{})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "server crm cannot be reached") || strings.Contains(err.Error(), pw) {
			t.Errorf("Dial(%s) = %v; want an unreachable error without the credentials", u, err)
		}
	}
}

// Issue 18 item 12, over MCP: a re-send relying on the server's deduplication rests
// on the evidence the bridge records before the key leaves, naming the server and
// its DedupWindow. A tool named in VendorWindows by hand while the bridge says the
// server does not deduplicate (no DedupWindow; this server has no Dedup) is refused
// after an unknown outcome, not sent again: before, the configuration alone
// re-sent it and the refund ran twice. With DedupWindow the record names the server.
func TestBridgeResendRestsOnEvidence(t *testing.T) {
	s := newTestServer(t, nil, toolSpec{name: "refund_payment"})
	transports(t, s, func(t *testing.T, tr mcp.Transport) {
		_, before := s.seen()
		b, err := mcptools.Dial(context.Background(), "billing", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		const name = "mcp.billing.refund_payment"
		stopAfterActing := func(r mcptools.Registry) {
			r.RegisterActivityWithOptions(func(ctx context.Context, args map[string]any) (*mcptools.Result, error) {
				res, err := b.Call(ctx, name, args)
				if err == nil && activityAttempt(ctx) == 1 {
					return nil, errors.New("worker stopped: the answer was lost")
				}
				return res, err
			}, activityRegisterOptions(name))
		}
		st := memory.New()
		opts := interceptor.Options{Store: st, VendorWindows: map[string]time.Duration{name: time.Hour}}
		b.Apply(&opts)
		_, err = runCall(t, opts, stopAfterActing, name, map[string]any{"payment": "py_1", "amount": 500})
		if err == nil || !strings.Contains(err.Error(), "refused destructive "+name) || !strings.Contains(err.Error(), "mcp:billing") {
			t.Errorf("a server without deduplication: the retry must be refused, naming the evidence: %v", err)
		}
		_, after := s.seen()
		if n := after["refund_payment"] - before["refund_payment"]; n != 1 {
			t.Fatalf("refund ran %d times, want 1", n)
		}

	})
	// The bridge with DedupWindow (accepted from a server that runs Dedup) records the
	// evidence before the key leaves.
	s2 := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "refund_payment"})
	transports(t, s2, func(t *testing.T, tr mcp.Transport) {
		const name = "mcp.billing.refund_payment"
		b2, err := mcptools.Dial(context.Background(), "billing", tr, mcptools.Options{DedupWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer b2.Session().Close()
		st := memory.New()
		opts := interceptor.Options{Store: st}
		b2.Apply(&opts)
		ok := func(r mcptools.Registry) {
			r.RegisterActivityWithOptions(func(ctx context.Context, args map[string]any) (*mcptools.Result, error) {
				key, _ := interceptor.KeyFromContext(ctx)
				res, err := b2.Call(ctx, name, args)
				if err == nil {
					rec, gerr := st.Get(ctx, key)
					want := []store.Sent{{Via: "mcp:billing", Host: "billing", Window: time.Hour, Owner: rec.Owner}}
					if gerr != nil || !reflect.DeepEqual(rec.Sent, want) {
						t.Errorf("evidence in the claim after the call: %+v, %v; want %+v", rec.Sent, gerr, want)
					}
				}
				return res, err
			}, activityRegisterOptions(name))
		}
		if _, err := runCall(t, opts, ok, name, map[string]any{"payment": "py_2", "amount": 500}); err != nil {
			t.Fatal(err)
		}
	})
}

// Item 21's family: a call whose server went away after Dial fails with net/http's
// error, which quotes the endpoint; a secret in its query must not reach the
// activity's error (and so Temporal's history and the worker's log).
func TestDroppedCallErrorHidesCredentials(t *testing.T) {
	const pw = "Zq7-CALL-PW"
	s := newTestServer(t, nil, toolSpec{name: "get_contact"})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil)
	var dead atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dead.Load() && r.Method == http.MethodPost {
			// The server dies under the call: the connection drops without an answer.
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	tr := &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp?access_token=" + pw, MaxRetries: -1}
	b, err := mcptools.Dial(context.Background(), "crm", tr, mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Session().Close()
	dead.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = b.Call(ctx, "mcp.crm.get_contact", map[string]any{"id": "c1"})
	if err == nil {
		t.Fatal("a call whose connection dropped succeeded")
	}
	if !strings.Contains(err.Error(), "outcome is unknown") {
		t.Errorf("a dropped call must be an unknown outcome: %v", err)
	}
	if strings.Contains(err.Error(), pw) {
		t.Errorf("the call's error prints the endpoint's secret: %v", err)
	}
}
