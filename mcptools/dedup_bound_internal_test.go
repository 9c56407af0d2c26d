package mcptools

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDedupMemoryIsBounded: one client that sends a fresh key with every call made
// Dedup keep every answer for the whole window (24 h by default): 2000 calls with 64
// KiB answers held 2000 entries and 141 MiB. Within the default bounds, calls past
// them are refused (not run: -32600, which the bridge reads as not performed) and
// the heap stays near DefaultDedupMaxBytes.
func TestDedupMemoryIsBounded(t *testing.T) {
	d := NewDedup(0)
	big := strings.Repeat("x", 64<<10) // a 64 KiB answer
	runs := 0
	h := d.Middleware(func(_ context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		runs++
		key := req.GetParams().(*mcp.CallToolParamsRaw).Meta[MetaKey].(string)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: key + big}}}, nil // its own answer
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	refused := 0
	for i := range 2000 {
		_, err := h(context.Background(), "tools/call", callReq(fmt.Sprint("key-", i), `{}`))
		var werr *jsonrpc.Error
		switch {
		case err == nil:
		case errors.As(err, &werr) && notRun(werr) && strings.Contains(werr.Message, "Next step"):
			refused++
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	d.mu.Lock()
	n, b := len(d.entries), d.bytes
	d.mu.Unlock()
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > DefaultDedupMaxBytes+DefaultDedupMaxBytes/2 {
		t.Errorf("2000 calls with fresh keys hold %d entries (%d bytes counted) and %d MiB of heap; want a bound", n, b, grown>>20)
	}
	if refused == 0 || runs+refused != 2000 || n != runs {
		t.Errorf("%d ran, %d refused, %d kept: want the calls past the bound refused, not run, and every one that ran kept", runs, refused, n)
	}
	// A stored answer is never forgotten to make room: its repeat is answered, not run.
	res, err := h(context.Background(), "tools/call", callReq("key-0", `{}`))
	if r, _ := res.(*mcp.CallToolResult); err != nil || r == nil || r.Meta[MetaReplayed] != true || runs+refused != 2000 {
		t.Errorf("the first key's repeat: %v, %v (runs %d)", res, err, runs)
	}
}

// TestDedupBoundRefusesNewKeysOnly: past MaxEntries (running and finished calls
// count) or MaxBytes, a call with a new key is refused before its tool runs; stored
// answers are still replayed, an unknown outcome still answered as unknown, a
// running call is never dropped, and once the window passes, new keys run again.
func TestDedupBoundRefusesNewKeysOnly(t *testing.T) {
	clock := &dedupClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	d := NewDedupWith(DedupOptions{Window: time.Hour, MaxEntries: 3})
	d.now = clock.now
	runs := map[string]int{}
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := d.Middleware(func(_ context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		key := req.GetParams().(*mcp.CallToolParamsRaw).Meta[MetaKey].(string)
		d.mu.Lock()
		runs[key]++
		d.mu.Unlock()
		switch key {
		case "slow":
			started <- struct{}{}
			<-release
		case "broken":
			return nil, errors.New("failed after acting")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok " + key}}}, nil
	})
	call := func(key string) (mcp.Result, error) {
		return h(context.Background(), "tools/call", callReq(key, `{"amount":5}`))
	}
	ran := func(key string) int { d.mu.Lock(); defer d.mu.Unlock(); return runs[key] }
	full := func(key string) {
		t.Helper()
		_, err := call(key)
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidRequest || !notRun(werr) ||
			!strings.Contains(werr.Message, "Dedup is full") || ran(key) != 0 {
			t.Fatalf("%s past the bound: %v (ran %d); want a refusal that proves it did not run", key, err, ran(key))
		}
	}
	if _, err := call("done"); err != nil {
		t.Fatal(err)
	}
	if _, err := call("broken"); err == nil {
		t.Fatal("broken succeeded")
	}
	slowDone := make(chan error, 1)
	go func() { _, err := call("slow"); slowDone <- err }()
	<-started
	full("new-1")
	if res, err := call("done"); err != nil || res.(*mcp.CallToolResult).Meta[MetaReplayed] != true || ran("done") != 1 {
		t.Fatalf("a stored answer past the bound: %v, %v (ran %d)", res, err, ran("done"))
	}
	var werr *jsonrpc.Error
	if _, err := call("broken"); !errors.As(err, &werr) || werr.Code != CodeOutcomeUnknown || ran("broken") != 1 {
		t.Fatalf("an unknown outcome past the bound: %v (ran %d)", err, ran("broken"))
	}
	if _, err := call("slow"); !errors.As(err, &werr) || werr.Code != CodeInFlight || ran("slow") != 1 {
		t.Fatalf("a running call past the bound: %v (ran %d)", err, ran("slow"))
	}
	clock.advance(2 * time.Hour) // done and broken expire; slow runs on, however long
	if _, err := call("new-2"); err != nil || ran("new-2") != 1 {
		t.Fatalf("a new key after the window freed room: %v (ran %d)", err, ran("new-2"))
	}
	close(release)
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	if res, err := call("slow"); err != nil || res.(*mcp.CallToolResult).Meta[MetaReplayed] != true || ran("slow") != 1 {
		t.Fatalf("the long call, kept through the window: %v, %v (ran %d)", res, err, ran("slow"))
	}

	// MaxBytes: an answer over the bound is still kept (never forgotten); new keys
	// wait until it leaves.
	d2 := NewDedupWith(DedupOptions{MaxBytes: 1000})
	n2 := 0
	h2 := d2.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		n2++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("y", 1500)}}}, nil
	})
	if _, err := h2(context.Background(), "tools/call", callReq("a", `{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := h2(context.Background(), "tools/call", callReq("b", `{}`)); !errors.As(err, &werr) || !notRun(werr) || n2 != 1 {
		t.Fatalf("a new key past MaxBytes: %v (runs %d)", err, n2)
	}
	if res, err := h2(context.Background(), "tools/call", callReq("a", `{}`)); err != nil ||
		res.(*mcp.CallToolResult).Meta[MetaReplayed] != true || n2 != 1 {
		t.Fatalf("the stored answer past MaxBytes: %v, %v (runs %d)", res, err, n2)
	}
}
