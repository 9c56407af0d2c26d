package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Attack atk2: a re-send that says its key may first have left more than the
// server's window ago, to a Dedup that holds nothing for the key, may follow a call
// this Dedup ran and has since forgotten (its window passed): running it could run
// the tool twice. The bridge checks the window the server announced only when it
// dials; a server restarted with a shorter window behind the same session (a
// stateless streamable HTTP server, a redeploy) would otherwise run such a re-send
// again. Inside the window a re-send the Dedup holds nothing for (the first send
// never arrived) still runs.
func TestDedupResendOlderThanItsWindow(t *testing.T) {
	clock := &dedupClock{t: time.Now().Add(time.Minute)} // after the Dedup started
	d := NewDedup(time.Hour)
	d.now = clock.now
	runs := 0
	h := d.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		runs++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil
	})
	ctx := context.Background()
	resend := func(key string, since time.Time) error {
		_, err := h(ctx, "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "refund",
			Meta:      mcp.Meta{MetaKey: key, MetaSentSince: since.UTC().Format(time.RFC3339Nano)},
			Arguments: json.RawMessage(`{"amount":5}`)}})
		return err
	}
	t0 := clock.now()
	if _, err := h(ctx, "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "refund",
		Meta: mcp.Meta{MetaKey: "k1"}, Arguments: json.RawMessage(`{"amount":5}`)}}); err != nil || runs != 1 {
		t.Fatalf("first call: err %v, runs %d", err, runs)
	}
	clock.advance(30 * time.Minute)
	if err := resend("k2", t0); err != nil || runs != 2 {
		t.Fatalf("re-send inside the window of a key never seen: err %v, runs %d; want it run (2 runs)", err, runs)
	}
	clock.advance(90 * time.Minute) // k1's window passed: the Dedup forgot it
	err := resend("k1", t0)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != CodeOutcomeUnknown || runs != 2 {
		t.Fatalf("re-send of a key that left 2h ago to a Dedup with a 1h window: err %v, runs %d; "+
			"want CodeOutcomeUnknown and no run (it may have run here and been forgotten)", err, runs)
	}
}
