package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func lookupReq(key, args string, since time.Time, user string) *mcp.ServerRequest[*LookupParams] {
	p := &LookupParams{Tool: "gift_card", Key: key, Arguments: json.RawMessage(args)}
	if !since.IsZero() {
		p.Since = since.UTC().Format(time.RFC3339Nano)
	}
	r := &mcp.ServerRequest[*LookupParams]{Params: p}
	if user != "" {
		r.Extra = &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: user}}
	}
	return r
}

// TestDedupLookupAnswers: what a Dedup answers a lookup, on its own clock, without
// running anything: the stored answer of a call that acted (arguments compared as a
// repeat's are), a running call, a call that failed after it may have acted, other
// arguments; and for a key it holds nothing for, "not called" only while it can
// prove it would have kept the call (it started before since, since's window has not
// passed); past the window, with no since, or from a Dedup started after since, it
// cannot tell.
func TestDedupLookupAnswers(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := &dedupClock{t: start}
	d := NewDedup(time.Hour)
	d.now, d.started = clock.now, start
	runs := 0
	release, started := make(chan struct{}), make(chan struct{})
	h := d.Middleware(func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		runs++
		switch req.GetParams().(*mcp.CallToolParamsRaw).Meta[MetaKey] {
		case "slow":
			close(started)
			<-release
		case "fails":
			return nil, errors.New("the card was issued, then the ledger failed")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "GC-1"}}}, nil
	})
	ctx := context.Background()
	since := start.Add(time.Minute)
	clock.advance(2 * time.Minute)
	if _, err := h(ctx, "tools/call", callReq("k1", `{"amount":5,"to":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := h(ctx, "tools/call", callReq("fails", `{"amount":5}`)); err == nil {
		t.Fatal("the failing call succeeded")
	}
	done := make(chan error, 1)
	go func() { _, err := h(ctx, "tools/call", callReq("slow", `{"amount":5}`)); done <- err }()
	<-started
	defer func() { close(release); <-done }()

	ask := func(key, args string, since time.Time) *LookupResult {
		t.Helper()
		res, err := h(ctx, MethodLookup, lookupReq(key, args, since, ""))
		if err != nil {
			t.Fatalf("lookup of %s: %v", key, err)
		}
		return res.(*LookupResult)
	}
	cases := []struct {
		name, key, args string
		since           time.Time
		want            LookupState
	}{
		{"acted", "k1", `{"to":"a", "amount":5}`, since, LookupActed},
		{"acted-other-arguments", "k1", `{"amount":6,"to":"a"}`, since, LookupOtherArguments},
		{"running", "slow", `{"amount":5}`, since, LookupRunning},
		{"failed-after-acting", "fails", `{"amount":5}`, since, LookupUnknown},
		{"never-seen", "k2", `{"amount":5}`, since, LookupNotCalled},
		{"never-seen-no-since", "k2", `{"amount":5}`, time.Time{}, LookupCannotTell},
		{"never-seen-dedup-started-after-since", "k2", `{"amount":5}`, start.Add(-time.Second), LookupCannotTell},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ask(c.key, c.args, c.since)
			if r.State != c.want {
				t.Fatalf("state %s (%s); want %s", r.State, r.Reason, c.want)
			}
			if c.want == LookupActed && (r.Result == nil || r.Result.Content[0].(*mcp.TextContent).Text != "GC-1") {
				t.Errorf("acted without the stored answer: %+v", r.Result)
			}
			if c.want != LookupActed && r.Result != nil {
				t.Errorf("%s with a result: %+v", r.State, r.Result)
			}
		})
	}
	clock.advance(time.Hour - time.Minute) // since's window passed; k1's has not (it finished later)
	if r := ask("k2", `{"amount":5}`, since); r.State != LookupCannotTell || !strings.Contains(r.Reason, "or more ago") {
		t.Errorf("a key never seen, since's window passed: %s (%s); want cannot tell", r.State, r.Reason)
	}
	if r := ask("k1", `{"amount":5,"to":"a"}`, since); r.State != LookupActed {
		t.Errorf("k1 inside its own window: %s (%s); want acted", r.State, r.Reason)
	}
	if runs != 3 {
		t.Errorf("the tool ran %d times; want 3 (lookups run nothing)", runs)
	}
}

// TestDedupLookupFullAndScoped: a Dedup past its bounds refuses a new key before
// the tool runs, so "not called" stays true of it; a key kept in another caller's
// scope is never "not called" (nor shown) to this caller; a token without a user is
// refused.
func TestDedupLookupFullAndScoped(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := &dedupClock{t: start.Add(time.Minute)}
	d := NewDedupWith(DedupOptions{Window: time.Hour, MaxEntries: 1})
	d.now, d.started = clock.now, start
	runs := 0
	h := d.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		runs++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "GC-1"}}}, nil
	})
	ctx := context.Background()
	alice := callReq("k1", `{"amount":5}`)
	alice.Extra = &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: "alice"}}
	if _, err := h(ctx, "tools/call", alice); err != nil {
		t.Fatal(err)
	}
	var werr *jsonrpc.Error
	if _, err := h(ctx, "tools/call", callReq("k2", `{"amount":5}`)); !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidRequest {
		t.Fatalf("a new key past the bound: %v; want refused", err)
	}
	ask := func(key, user string) (*LookupResult, error) {
		res, err := h(ctx, MethodLookup, lookupReq(key, `{"amount":5}`, start, user))
		r, _ := res.(*LookupResult)
		return r, err
	}
	if r, err := ask("k2", ""); err != nil || r.State != LookupNotCalled {
		t.Errorf("the key refused for the bound: %+v, %v; want not called", r, err)
	}
	if r, err := ask("k1", "bob"); err != nil || r.State != LookupCannotTell || r.Result != nil {
		t.Errorf("alice's key asked by bob: %+v, %v; want cannot tell, no result", r, err)
	}
	if r, err := ask("k1", ""); err != nil || r.State != LookupCannotTell {
		t.Errorf("alice's key asked without a token: %+v, %v; want cannot tell", r, err)
	}
	if r, err := ask("k1", "alice"); err != nil || r.State != LookupActed {
		t.Errorf("alice's key asked by alice: %+v, %v; want acted", r, err)
	}
	noUser := lookupReq("k1", `{"amount":5}`, start, "")
	noUser.Extra = &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{}}
	if _, err := h(ctx, MethodLookup, noUser); !errors.As(err, &werr) || !strings.Contains(werr.Message, "names no user") {
		t.Errorf("a token without a user: %v; want refused", err)
	}
	if runs != 1 {
		t.Errorf("the tool ran %d times; want 1", runs)
	}
}
