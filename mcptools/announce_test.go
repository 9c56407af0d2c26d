package mcptools_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store/memory"
)

// TestDedupWindowNeedsADedupServer: Options.DedupWindow (worker --mcp-dedup) was the
// operator's word that the server runs Dedup; nothing checked it. Against a server
// without Dedup, a destructive tool that acted and then failed (an unknown outcome)
// was sent again inside the window on each of Temporal's attempts: it acted three
// times. Dial now refuses a DedupWindow the server does not announce.
func TestDedupWindowNeedsADedupServer(t *testing.T) {
	s := newTestServer(t, nil, toolSpec{name: "send_payment", handle: failAfterActing(errors.New("ledger write failed after the transfer"))})
	transports(t, s, func(t *testing.T, tr mcp.Transport) {
		b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{DedupWindow: time.Hour})
		if err == nil {
			defer b.Session().Close()
			_ = sendThroughGate(t, s.inMemory(t), mcptools.Options{DedupWindow: time.Hour})
			_, n := s.seen()
			t.Fatalf("Dial accepted DedupWindow for a server that does not run Dedup (the tool acted %d times)", n["send_payment"])
		}
		for _, want := range []string{"server pay", "1h0m0s", "does not announce", "Next step", "Nothing was registered"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
	if _, n := s.seen(); n["send_payment"] != 0 {
		t.Errorf("the tool acted %d times; want 0 (nothing registered)", n["send_payment"])
	}
}

// TestDedupWindowWithADedupServer: the positive path. A server that runs Dedup
// announces it and its window (in its answer to initialize, or to server/discover
// under the 2026-07-28 protocol); DedupWindow up to that window is accepted, and an
// unknown outcome re-sent with its key is answered by Dedup: the tool acted once. A
// DedupWindow longer than the server's is refused, naming both windows.
func TestDedupWindowWithADedupServer(t *testing.T) {
	s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "send_payment",
		handle: failAfterActing(errors.New("ledger write failed after the transfer"))})
	transports(t, s, func(t *testing.T, tr mcp.Transport) {
		_, before := s.seen()
		err := sendThroughGate(t, tr, mcptools.Options{DedupWindow: time.Hour})
		if _, after := s.seen(); after["send_payment"]-before["send_payment"] != 1 {
			t.Errorf("the tool acted %d times; want 1 (Dedup answers the re-send)", after["send_payment"]-before["send_payment"])
		}
		if err == nil || !strings.Contains(err.Error(), "an earlier call with this key failed after the tool may have acted") {
			t.Errorf("want the re-send answered by Dedup as an unknown outcome, got %v", err)
		}
	})
	for _, tr := range []mcp.Transport{s.inMemory(t), s.streamable(t)} {
		b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.DedupOffered(); got != time.Hour {
			t.Errorf("DedupOffered %v, want 1h (protocol %s)", got, b.Session().InitializeResult().ProtocolVersion)
		}
		b.Session().Close()
	}
	_, err := mcptools.Dial(context.Background(), "pay", s.inMemory(t), mcptools.Options{DedupWindow: 2 * time.Hour})
	if err == nil || !strings.Contains(err.Error(), "2h0m0s") || !strings.Contains(err.Error(), "1h0m0s") ||
		!strings.Contains(err.Error(), "Next step") {
		t.Errorf("a DedupWindow longer than the server's: want a refusal naming both windows, got %v", err)
	}
}

// TestDedupWindowWithAPeerServer: a server built with mark3labs/mcp-go cannot run
// Dedup: DedupWindow against it is refused, over stdio and streamable HTTP, and
// nothing runs.
func TestDedupWindowWithAPeerServer(t *testing.T) {
	p := newPeerServer(peerTool{tool: mgo.NewTool("send_payment")})
	peerTransports(t, p, func(t *testing.T, tr mcp.Transport) {
		b, err := mcptools.Dial(context.Background(), "peer", tr, mcptools.Options{DedupWindow: time.Hour})
		if err == nil {
			b.Session().Close()
			t.Fatal("Dial accepted DedupWindow for an mcp-go server")
		}
		if !strings.Contains(err.Error(), "does not announce Dedup") || !strings.Contains(err.Error(), "server peer") {
			t.Errorf("error %v", err)
		}
	})
	if n := p.runs("send_payment"); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
}

// TestDedupAnnouncementLeavesTheServerAlone: Dedup announces itself in the answer
// to server/discover (the 2026-07-28 protocol) and to initialize (older ones, which
// New then reads); the announcement is added to a copy: the server's own
// capabilities (given in its options) keep theirs.
func TestDedupAnnouncementLeavesTheServerAlone(t *testing.T) {
	own := map[string]any{"acme/feature": map[string]any{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "own", Version: "v1"},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Experimental: own}})
	srv.AddReceivingMiddleware(mcptools.NewDedup(30 * time.Minute).Middleware)
	for _, version := range []string{"", "2025-11-25"} {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v1"}, nil).Connect(context.Background(), ct,
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		x := cs.InitializeResult().Capabilities.Experimental
		if _, ok := x["acme/feature"]; !ok || x[mcptools.CapabilityDedup] == nil {
			t.Errorf("protocol %q: experimental capabilities %v: want the server's own and Dedup's", version, x)
		}
		if version != "" && cs.InitializeResult().ProtocolVersion != version {
			t.Errorf("negotiated %s, want %s", cs.InitializeResult().ProtocolVersion, version)
		}
		b, err := mcptools.New(context.Background(), "own", cs, mcptools.Options{DedupWindow: 30 * time.Minute})
		if err != nil || b.DedupOffered() != 30*time.Minute {
			t.Errorf("protocol %q: New: %v", version, err)
		}
		cs.Close()
		ss.Close()
	}
	if len(own) != 1 {
		t.Errorf("the server's own map was changed: %v", own)
	}
}

// TestDedupServerPassesHandlerCodesOn: a handler on a server that runs Dedup may
// return one of Dedup's codes itself after it acted (-32041 is any server's to use).
// The bridge, told the server runs Dedup, read it as Dedup's "key used with other
// arguments", a definite outcome, and released the key; Dedup now passes such an
// error on as -32603: an unknown outcome.
func TestDedupServerPassesHandlerCodesOn(t *testing.T) {
	for _, code := range []int64{mcptools.CodeConflict, mcptools.CodeInFlight, mcptools.CodeOutcomeUnknown} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			s := newTestServer(t, mcptools.NewDedup(time.Hour), toolSpec{name: "send_payment",
				handle: failAfterActing(&jsonrpc.Error{Code: code, Message: "ledger replica lagging"})})
			b, err := mcptools.Dial(context.Background(), "pay", s.inMemory(t), mcptools.Options{DedupWindow: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			if got, err := observed(t, b, "mcp.pay.send_payment"); got != attempt.Unknown {
				t.Errorf("outcome %s, want unknown (the handler's own error after it acted): %v", got, err)
			}
		})
	}
}

// TestFullDedupIsNotPerformed: a server whose Dedup is full refuses a new key before
// the tool runs; the bridge reads that as not performed (the gate may retry).
func TestFullDedupIsNotPerformed(t *testing.T) {
	s := newTestServer(t, mcptools.NewDedupWith(mcptools.DedupOptions{Window: time.Hour, MaxEntries: 1}),
		toolSpec{name: "send_payment"})
	b, err := mcptools.Dial(context.Background(), "pay", s.inMemory(t), mcptools.Options{DedupWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Session().Close()
	t.Run("first", func(t *testing.T) {
		if got, err := observed(t, b, "mcp.pay.send_payment"); got != attempt.Committed {
			t.Fatalf("outcome %s: %v", got, err)
		}
	})
	t.Run("second", func(t *testing.T) {
		got, err := observed(t, b, "mcp.pay.send_payment")
		if got != attempt.Rejected || !got.Definite() || err == nil || !strings.Contains(err.Error(), "Dedup is full") {
			t.Fatalf("outcome %s (%v); want a definite refusal: the tool did not run", got, err)
		}
	})
	if _, n := s.seen(); n["send_payment"] != 1 {
		t.Errorf("the tool ran %d times, want 1", n["send_payment"])
	}
}

// TestDedupRestartedSinceTheKeyLeft: Dedup keeps its keys in memory. The tool acted
// and the worker lost the answer; the server then restarted (a new Dedup, empty,
// announcing the same window) and the gate re-sent the call inside the window: the
// new Dedup ran it again. The re-send now carries MetaSentSince, and a Dedup that
// started after the key may first have left, holding nothing for it, answers
// CodeOutcomeUnknown without running it.
func TestDedupRestartedSinceTheKeyLeft(t *testing.T) {
	const name = "mcp.billing.refund_payment"
	var mu sync.Mutex
	effects := 0
	serve := func() (*mcptools.Bridge, error) { // a fresh server process: its own Dedup
		srv := mcp.NewServer(&mcp.Implementation{Name: "billing", Version: "v1"}, nil)
		srv.AddReceivingMiddleware(mcptools.NewDedup(time.Hour).Middleware)
		srv.AddTool(&mcp.Tool{Name: "refund_payment", InputSchema: &jsonschema.Schema{Type: "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mu.Lock()
				effects++
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil
			})
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), st, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { ss.Close() })
		return mcptools.Dial(context.Background(), "billing", ct, mcptools.Options{DedupWindow: time.Hour})
	}
	b1, err := serve()
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Session().Close()
	restartedAfterActing := func(r mcptools.Registry) {
		r.RegisterActivityWithOptions(func(ctx context.Context, args map[string]any) (*mcptools.Result, error) {
			if activityAttempt(ctx) == 1 {
				if _, err := b1.Call(ctx, name, args); err != nil {
					return nil, err
				}
				return nil, errors.New("worker stopped: the answer was lost")
			}
			b2, err := serve() // the server restarted since
			if err != nil {
				return nil, err
			}
			defer b2.Session().Close()
			return b2.Call(ctx, name, args)
		}, activityRegisterOptions(name))
	}
	// The tightest clock bound, so that the restart (a moment after the first call)
	// counts as after it.
	opts := interceptor.Options{Store: memory.New(), ClockSkew: time.Nanosecond}
	b1.Apply(&opts)
	_, err = runCall(t, opts, restartedAfterActing, name, map[string]any{"payment": "py_1", "amount": 500})
	mu.Lock()
	defer mu.Unlock()
	if effects != 1 {
		t.Errorf("the refund ran %d times; want 1 (the restarted server's Dedup did not see the first call)", effects)
	}
	if err == nil || !strings.Contains(err.Error(), "before this server's Dedup started") {
		t.Errorf("want the re-send refused as an unknown outcome, got %v", err)
	}
}
