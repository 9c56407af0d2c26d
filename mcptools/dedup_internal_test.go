package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// dedupClock drives a Dedup's clock by hand.
type dedupClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *dedupClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *dedupClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func callReq(key, args string) *mcp.CallToolRequest {
	return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "gift_card", Meta: mcp.Meta{MetaKey: key},
		Arguments: json.RawMessage(args)}}
}

// TestDedupClock moves Dedup's clock: a finished call is answered from the store up
// to its window and runs again after it; a running call is never expired, however
// long it runs, and a later expiry (on each new call, oldest first) does not drop it.
func TestDedupClock(t *testing.T) {
	clock := &dedupClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	d := NewDedup(time.Hour)
	d.now = clock.now
	runs := 0
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := d.Middleware(func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		runs++
		if req.GetParams().(*mcp.CallToolParamsRaw).Name == "slow" {
			started <- struct{}{}
			<-release
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	ctx := context.Background()
	call := func(key string) (mcp.Result, error) { return h(ctx, "tools/call", callReq(key, `{"amount":5}`)) }

	if _, err := call("k1"); err != nil || runs != 1 {
		t.Fatalf("first call: err %v, runs %d", err, runs)
	}
	clock.advance(time.Hour - time.Nanosecond)
	res, err := call("k1")
	if err != nil || runs != 1 {
		t.Fatalf("repeat inside the window: err %v, runs %d; want the stored result, 1 run", err, runs)
	}
	if v, _ := res.(*mcp.CallToolResult).Meta[MetaReplayed].(bool); !v {
		t.Fatalf("repeat inside the window is not marked %s: %+v", MetaReplayed, res)
	}
	clock.advance(time.Nanosecond)
	if _, err := call("k1"); err != nil || runs != 2 {
		t.Fatalf("repeat at the window's end: err %v, runs %d; want it run again (2 runs)", err, runs)
	}

	// A call that runs far longer than the window is never forgotten while it runs.
	slow := make(chan error, 1)
	go func() {
		_, err := h(ctx, "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "slow",
			Meta: mcp.Meta{MetaKey: "k2"}, Arguments: json.RawMessage(`{}`)}})
		slow <- err
	}()
	<-started
	clock.advance(48 * time.Hour)
	if _, err := call("k3"); err != nil { // a new key expires what finished before the window
		t.Fatal(err)
	}
	_, err = h(ctx, "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "slow",
		Meta: mcp.Meta{MetaKey: "k2"}, Arguments: json.RawMessage(`{}`)}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != CodeInFlight {
		t.Fatalf("repeat of a call running for 48h with a 1h window: err %v; want CodeInFlight", err)
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	// Finished now: its window starts at the finish, not at the start.
	clock.advance(59 * time.Minute)
	before := runs
	if _, err := h(ctx, "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "slow",
		Meta: mcp.Meta{MetaKey: "k2"}, Arguments: json.RawMessage(`{}`)}}); err != nil || runs != before {
		t.Fatalf("repeat 59 min after a long call finished: err %v, runs %d→%d; want the stored result", err, before, runs)
	}
}

// TestDedupSettles: how each way a call ends leaves its key. A refusal that proves no
// handler ran (an unknown tool) and a not-performed answer forget it, so the next call
// with the key runs; a panic, an error after the tool may have acted, and a nil result
// keep it as unknown, answered CodeOutcomeUnknown without running.
func TestDedupSettles(t *testing.T) {
	notPerformed := &mcp.CallToolResult{IsError: true, Meta: mcp.Meta{MetaNotPerformed: true}}
	cases := []struct {
		name   string
		first  func() (mcp.Result, error) // panics when nil result and error are both nil and panic is set
		panics bool
		forget bool
	}{
		{"unknown-tool", func() (mcp.Result, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "gift_card"`}
		}, false, true},
		{"not-performed", func() (mcp.Result, error) { return notPerformed, nil }, false, true},
		{"invalid-params-from-handler", func() (mcp.Result, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "amount over the limit"}
		}, false, false},
		{"internal-error", func() (mcp.Result, error) { return nil, errors.New("ledger down") }, false, false},
		{"nil-result", func() (mcp.Result, error) { return nil, nil }, false, false},
		{"panic", nil, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := NewDedup(time.Hour)
			runs := 0
			h := d.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
				runs++
				if runs == 1 {
					if c.panics {
						panic("tool bug")
					}
					return c.first()
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
			func() {
				defer func() { _ = recover() }()
				_, _ = h(context.Background(), "tools/call", callReq("k1", `{"amount":5}`))
			}()
			_, err := h(context.Background(), "tools/call", callReq("k1", `{"amount":5}`))
			var werr *jsonrpc.Error
			switch {
			case c.forget && (err != nil || runs != 2):
				t.Errorf("repeat: err %v after %d runs; want it run (2 runs)", err, runs)
			case !c.forget && (!errors.As(err, &werr) || werr.Code != CodeOutcomeUnknown || runs != 1):
				t.Errorf("repeat: err %v after %d runs; want CodeOutcomeUnknown after 1 run", err, runs)
			}
		})
	}
}

// TestDedupScopes: calls without a token form their own scope, apart from every
// user's; a token without a user is refused before anything runs.
func TestDedupScopes(t *testing.T) {
	d := NewDedup(time.Hour)
	runs := 0
	h := d.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		runs++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(runs)}}}, nil
	})
	as := func(ti *auth.TokenInfo) *mcp.CallToolRequest {
		r := callReq("k1", `{"amount":5}`)
		if ti != nil {
			r.Extra = &mcp.RequestExtra{TokenInfo: ti}
		}
		return r
	}
	text := func(res mcp.Result) string { return res.(*mcp.CallToolResult).Content[0].(*mcp.TextContent).Text }
	anon, err := h(context.Background(), "tools/call", as(nil))
	if err != nil {
		t.Fatal(err)
	}
	user, err := h(context.Background(), "tools/call", as(&auth.TokenInfo{UserID: "alice"}))
	if err != nil || text(user) == text(anon) {
		t.Fatalf("alice after an unauthenticated call with the same key: %v, %v; want her own run", user, err)
	}
	if again, err := h(context.Background(), "tools/call", as(nil)); err != nil || text(again) != text(anon) {
		t.Errorf("unauthenticated repeat: %v, %v; want its stored answer %q", again, err, text(anon))
	}
	_, err = h(context.Background(), "tools/call", as(&auth.TokenInfo{}))
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidRequest || runs != 2 {
		t.Errorf("a token without a user: %v after %d runs; want CodeInvalidRequest, not run", err, runs)
	}
}

// TestLocalSentinels: the go-sdk values a client makes when it cannot read an answer
// are found, and are never read as proof that no handler ran.
func TestLocalSentinels(t *testing.T) {
	if len(localSentinels) != 2 || localSentinels[0].Code != jsonrpc.CodeParseError || localSentinels[1].Code != jsonrpc.CodeInvalidRequest {
		t.Fatalf("local sentinels: %+v; want the go-sdk's parse error and invalid request", localSentinels)
	}
	for _, w := range localSentinels {
		if notRun(w) {
			t.Errorf("%v read as not run", w)
		}
		if copied := *w; !notRun(&copied) {
			t.Errorf("the same code from the server (%v) must read as not run", &copied)
		}
	}
}

// TestDedupCancelledBeforeStart: a keyed call whose caller gave up before it started
// is not run and not remembered, so the next call with the key runs.
func TestDedupCancelledBeforeStart(t *testing.T) {
	d := NewDedup(time.Hour)
	runs := 0
	h := d.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		runs++
		return &mcp.CallToolResult{}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h(ctx, "tools/call", callReq("k1", `{}`)); !errors.Is(err, context.Canceled) || runs != 0 {
		t.Fatalf("cancelled before start: err %v, %d runs; want context.Canceled, not run", err, runs)
	}
	if _, err := h(context.Background(), "tools/call", callReq("k1", `{}`)); err != nil || runs != 1 {
		t.Fatalf("next call with the key: err %v, %d runs; want it run", err, runs)
	}
}
