package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

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
// long it runs, and a later sweep (which happens at most once a minute) does not drop it.
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
	if _, err := call("k3"); err != nil { // a new key after a minute sweeps the map
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
