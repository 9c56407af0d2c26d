package mcptools_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store/memory"
)

// A re-send relying on the server's Dedup is decided when the attempt claims the
// key, but the tool call leaves when the body makes it — later, after the body's
// own work. idemhttp checks the vendor's window again when the request leaves; the
// bridge must too: a destructive retry whose key was first claimed longer ago than
// DedupWindow (less twice the skew) reaches a server that forgot the key, and the
// tool runs again. Here the gate's clock runs two hours behind the bridge's (the
// body's own work between claim and call, compressed): the gate sees the retry
// inside the one-hour window, the call leaves two hours after the first claim.
func TestBridgeChecksTheWindowWhenTheCallLeaves(t *testing.T) {
	// The server runs Dedup (DedupWindow must rest on its announcement); the bridge
	// must not even send a retry past the window.
	s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "refund_payment"})
	transports(t, s, func(t *testing.T, tr mcp.Transport) {
		_, before := s.seen()
		b, err := mcptools.Dial(context.Background(), "billing", tr, mcptools.Options{DedupWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Session().Close()
		const name = "mcp.billing.refund_payment"
		register := func(r mcptools.Registry) {
			r.RegisterActivityWithOptions(func(ctx context.Context, args map[string]any) (*mcptools.Result, error) {
				res, err := b.Call(ctx, name, args)
				if err == nil && activityAttempt(ctx) == 1 {
					return nil, errors.New("worker stopped: the answer was lost")
				}
				return res, err
			}, activityRegisterOptions(name))
		}
		opts := interceptor.Options{Store: memory.New(), Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }}
		b.Apply(&opts)
		_, err = runCall(t, opts, register, name, map[string]any{"payment": "py_1", "amount": 500})
		_, after := s.seen()
		if n := after["refund_payment"] - before["refund_payment"]; n != 1 {
			t.Fatalf("refund ran %d times, want 1: the retry left after the server's window (err %v)", n, err)
		}
		if err == nil || !strings.Contains(err.Error(), "remembers keys for 1h0m0s") {
			t.Errorf("the retry past the window: %v; want it refused, saying why", err)
		}
	})
}
